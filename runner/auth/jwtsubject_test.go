package auth_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/auth/authtest"
	"github.com/pgtools/pgtools/runner/runnertest"
)

// hsSecret signs the HS256 tokens of these tests.
var hsSecret = []byte("hs256-secret-0123456789abcdef-0123456789")

// TestJWTSubjectOverHTTP: a JWT whose sub cannot name a principal is a 401 authentication_error
// on the HTTP API, runs nothing, and reaches neither the answer nor the log; a 256-byte sub runs.
func TestJWTSubjectOverHTTP(t *testing.T) {
	t.Parallel()
	f := runnertest.NewJWTFixture(t, auth.JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, Secret: hsSecret})
	for _, c := range authtest.SubjectCases {
		if c.OK || c.Subject == "" {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			status, body, hdr := f.Post(t, "/v1/tools/execute_sql", authtest.Sign(t, jwt.SigningMethodHS256, "", hsSecret, authtest.ValidClaims(c.Subject, f.Role)), runnertest.InsertProbe)
			if status != http.StatusUnauthorized || body["errorType"] != "authentication_error" || hdr.Get("WWW-Authenticate") == "" {
				t.Fatalf("status %d body %v, want 401 authentication_error with a challenge", status, body)
			}
			if msg, _ := body["error"].(string); !strings.Contains(msg, "sub claim") {
				t.Errorf("message %q does not name the sub claim", msg)
			}
			if raw, _ := json.Marshal(body); strings.Contains(string(raw), c.Subject) {
				t.Errorf("the answer repeats the subject: %s", raw)
			}
		})
	}
	if n := f.DB.QueryInt(t, `SELECT count(*) FROM probe`); n != 0 {
		t.Fatalf("%d rows landed through refused subjects", n)
	}
	for _, c := range authtest.SubjectCases {
		quoted, _ := json.Marshal(c.Subject) // as a JSON log line would carry it
		if !c.OK && c.Subject != "" && strings.Contains(f.Log.String(), strings.Trim(string(quoted), `"`)) {
			t.Errorf("the refused subject %q reached the log:\n%s", c.Subject, f.Log.String())
		}
	}
	long := strings.Repeat("a", auth.MaxSubjectLen)
	if status, body, _ := f.Post(t, "/v1/tools/execute_sql", authtest.Sign(t, jwt.SigningMethodHS256, "", hsSecret, authtest.ValidClaims(long, f.Role)), runnertest.InsertProbe); status != http.StatusOK {
		t.Fatalf("a %d-byte sub: %d %v", auth.MaxSubjectLen, status, body)
	}
	if !strings.Contains(f.Log.String(), `"principal":"jwt:`+long+`"`) {
		t.Errorf("the access log does not name the %d-byte subject", auth.MaxSubjectLen)
	}
}

// TestJWTSizeLimit: a bearer JWT over 16 KiB is refused with authentication_error before it is
// decoded (a well-formed one as much as garbage), and one just under the limit is verified.
func TestJWTSizeLimit(t *testing.T) {
	t.Parallel()
	f := runnertest.NewJWTFixture(t, auth.JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, Secret: hsSecret})
	// padded returns a valid token of about n bytes (the pad claim is base64url-encoded: 4/3).
	padded := func(n int) string {
		c := authtest.ValidClaims("alice", f.Role)
		tok := authtest.Sign(t, jwt.SigningMethodHS256, "", hsSecret, c)
		return authtest.Sign(t, jwt.SigningMethodHS256, "", hsSecret, authtest.With(c, "pad", strings.Repeat("x", (n-len(tok))*3/4)))
	}
	under := padded(auth.MaxJWTBytes - 64)
	if len(under) > auth.MaxJWTBytes {
		t.Fatalf("the token under the limit is %d bytes", len(under))
	}
	if status, body, _ := f.Post(t, "/v1/tools/execute_sql", under, `{"sql": "SELECT 1 AS one"}`); status != http.StatusOK {
		t.Fatalf("a %d-byte JWT: %d %v", len(under), status, body)
	}
	for name, token := range map[string]string{
		"valid, 17 KiB":  padded(17 << 10),
		"valid, 933 KiB": padded(933 << 10),
		// Garbage that would be answered "malformed" if it were decoded at all.
		"garbage, 933 KiB": "eyJ" + strings.Repeat("!", 933<<10) + ".x.y",
	} {
		if len(token) <= auth.MaxJWTBytes {
			t.Fatalf("%s: only %d bytes", name, len(token))
		}
		status, body, hdr := f.Post(t, "/v1/tools/execute_sql", token, runnertest.InsertProbe)
		if status != http.StatusUnauthorized || body["errorType"] != "authentication_error" || hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %v, want 401 authentication_error", name, status, body)
		}
		if msg, _ := body["error"].(string); !strings.Contains(msg, "16 KiB") {
			t.Errorf("%s: message %q does not name the limit", name, msg)
		}
	}
	if n := f.DB.QueryInt(t, `SELECT count(*) FROM probe`); n != 0 {
		t.Fatalf("%d rows landed through oversized tokens", n)
	}
}

// TestMetadataWithJWTOnly: a runner that accepts JWTs and no static token is not open: the
// listings need a token, and a JWT gets the tools its scopes allow.
func TestMetadataWithJWTOnly(t *testing.T) {
	t.Parallel()
	f := runnertest.NewJWTFixture(t, auth.JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, Secret: hsSecret})
	token := authtest.Sign(t, jwt.SigningMethodHS256, "", hsSecret, authtest.With(authtest.ValidClaims("alice", f.Role), "scope", "read"))
	for _, path := range []string{"/openapi.json", "/v1/tools"} {
		if status, body, _ := apitest.Call(t, http.MethodGet, f.Srv.URL+path, "", ""); status != http.StatusUnauthorized || body["errorType"] != "authentication_error" {
			t.Errorf("GET %s without a token: %d %v", path, status, body)
		}
	}
	want := slices.Sorted(slices.Values(runnertest.BuiltinTools("read")))
	status, body, _ := apitest.Call(t, http.MethodGet, f.Srv.URL+"/v1/tools", token, "")
	if got := runnertest.ListedTools(t, body); status != http.StatusOK || !slices.Equal(got, want) {
		t.Errorf("/v1/tools with a read JWT: %d %v, want %v", status, got, want)
	}
	status, body, _ = apitest.Call(t, http.MethodGet, f.Srv.URL+"/openapi.json", token, "")
	if got := runnertest.OpenAPITools(t, body); status != http.StatusOK || !slices.Equal(got, want) {
		t.Errorf("/openapi.json with a read JWT: %d %v, want %v", status, got, want)
	}
}
