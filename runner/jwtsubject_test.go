package runner

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/tools"
)

// hsSecret signs the HS256 tokens of these tests.
var hsSecret = []byte("hs256-secret-0123456789abcdef-0123456789")

// subjectCases are subjects a principal name may or may not be built from, for the act-as
// header and a JWT's sub alike (validSubject).
var subjectCases = []struct {
	name, subject string
	ok            bool
}{
	{"plain", "alice", true},
	{"email", "alice@example.com", true},
	{"non-ASCII letters", "ålice-名前", true},
	{"256 bytes", strings.Repeat("a", 256), true},
	{"empty", "", false},
	{"newline", "ali\nce", false},
	{"carriage return", "ali\rce", false},
	{"tab", "ali\tce", false},
	{"NUL", "ali\x00ce", false},
	{"DEL", "ali\x7fce", false},
	{"NEL (C1 control)", "ali\u0085ce", false},
	{"line separator", "ali\u2028ce", false},
	{"paragraph separator", "ali\u2029ce", false},
	{"right-to-left override", "\u202eecila", false},
	{"257 bytes", strings.Repeat("a", 257), false},
	{"129 two-byte letters (258 bytes)", strings.Repeat("é", 129), false},
}

// TestSubjectRuleIsShared: the act-as subject and a JWT's sub are held to one rule
// (validSubject): the same subjects are accepted and refused by both, and a refusal never
// repeats the subject.
func TestSubjectRuleIsShared(t *testing.T) {
	t.Parallel()
	v, err := newJWTVerifier(JWTConfig{Issuer: testIssuer, Audience: testAudience, Secret: hsSecret, Roles: []string{"agent"}}, "", nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	act := &ActAs{}
	base := tools.Principal{Name: "hub", Scopes: []string{"read"}}
	for _, c := range subjectCases {
		t.Run(c.name, func(t *testing.T) {
			p, actErr := act.Principal(base, c.subject)
			if (actErr == nil) != c.ok {
				t.Errorf("act-as %q: accepted %v, want %v (%v)", c.subject, actErr == nil, c.ok, actErr)
			}
			if actErr == nil && p.Name != "hub:"+c.subject {
				t.Errorf("act-as principal %q", p.Name)
			}
			claims := validClaims(c.subject, "agent")
			if c.subject == "" {
				claims = with(claims, "sub", nil)
			}
			jp, jwtErr := v.verify(t.Context(), sign(t, jwt.SigningMethodHS256, "", hsSecret, claims), false)
			if (jwtErr == nil) != c.ok {
				t.Errorf("JWT sub %q: accepted %v, want %v (%v)", c.subject, jwtErr == nil, c.ok, jwtErr)
			}
			if jwtErr == nil && jp.Name != "jwt:"+c.subject {
				t.Errorf("JWT principal %q", jp.Name)
			}
			for _, e := range []*tools.Error{actErr, jwtErr} {
				if e == nil {
					continue
				}
				if raw, _ := e.MarshalJSON(); c.subject != "" && strings.Contains(string(raw), c.subject) {
					t.Errorf("the refusal repeats the subject: %s", raw)
				}
			}
			if jwtErr != nil && jwtErr.Type != tools.ErrAuthentication {
				t.Errorf("JWT refusal type %s, want authentication_error", jwtErr.Type)
			}
		})
	}
}

// TestJWTSubjectOverHTTP: a JWT whose sub cannot name a principal is a 401 authentication_error
// on the HTTP API, runs nothing, and reaches neither the answer nor the log; a 256-byte sub runs.
func TestJWTSubjectOverHTTP(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t, JWTConfig{Issuer: testIssuer, Audience: testAudience, Secret: hsSecret})
	for _, c := range subjectCases {
		if c.ok || c.subject == "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			status, body, hdr := f.post(t, "/v1/tools/execute_sql", sign(t, jwt.SigningMethodHS256, "", hsSecret, validClaims(c.subject, f.role)), insertProbe)
			if status != http.StatusUnauthorized || body["errorType"] != "authentication_error" || hdr.Get("WWW-Authenticate") == "" {
				t.Fatalf("status %d body %v, want 401 authentication_error with a challenge", status, body)
			}
			if msg, _ := body["error"].(string); !strings.Contains(msg, "sub claim") {
				t.Errorf("message %q does not name the sub claim", msg)
			}
			if raw, _ := json.Marshal(body); strings.Contains(string(raw), c.subject) {
				t.Errorf("the answer repeats the subject: %s", raw)
			}
		})
	}
	if n := f.db.QueryInt(t, `SELECT count(*) FROM probe`); n != 0 {
		t.Fatalf("%d rows landed through refused subjects", n)
	}
	for _, c := range subjectCases {
		quoted, _ := json.Marshal(c.subject) // as a JSON log line would carry it
		if !c.ok && c.subject != "" && strings.Contains(f.log.String(), strings.Trim(string(quoted), `"`)) {
			t.Errorf("the refused subject %q reached the log:\n%s", c.subject, f.log.String())
		}
	}
	long := strings.Repeat("a", maxSubjectLen)
	if status, body, _ := f.post(t, "/v1/tools/execute_sql", sign(t, jwt.SigningMethodHS256, "", hsSecret, validClaims(long, f.role)), insertProbe); status != http.StatusOK {
		t.Fatalf("a %d-byte sub: %d %v", maxSubjectLen, status, body)
	}
	if !strings.Contains(f.log.String(), `"principal":"jwt:`+long+`"`) {
		t.Errorf("the access log does not name the %d-byte subject", maxSubjectLen)
	}
}

// TestJWTSizeLimit: a bearer JWT over 16 KiB is refused with authentication_error before it is
// decoded (a well-formed one as much as garbage), and one just under the limit is verified.
func TestJWTSizeLimit(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t, JWTConfig{Issuer: testIssuer, Audience: testAudience, Secret: hsSecret})
	// padded returns a valid token of about n bytes (the pad claim is base64url-encoded: 4/3).
	padded := func(n int) string {
		c := validClaims("alice", f.role)
		tok := sign(t, jwt.SigningMethodHS256, "", hsSecret, c)
		return sign(t, jwt.SigningMethodHS256, "", hsSecret, with(c, "pad", strings.Repeat("x", (n-len(tok))*3/4)))
	}
	under := padded(maxJWTBytes - 64)
	if len(under) > maxJWTBytes {
		t.Fatalf("the token under the limit is %d bytes", len(under))
	}
	if status, body, _ := f.post(t, "/v1/tools/execute_sql", under, `{"sql": "SELECT 1 AS one"}`); status != http.StatusOK {
		t.Fatalf("a %d-byte JWT: %d %v", len(under), status, body)
	}
	for name, token := range map[string]string{
		"valid, 17 KiB":  padded(17 << 10),
		"valid, 933 KiB": padded(933 << 10),
		// Garbage that would be answered "malformed" if it were decoded at all.
		"garbage, 933 KiB": "eyJ" + strings.Repeat("!", 933<<10) + ".x.y",
	} {
		if len(token) <= maxJWTBytes {
			t.Fatalf("%s: only %d bytes", name, len(token))
		}
		status, body, hdr := f.post(t, "/v1/tools/execute_sql", token, insertProbe)
		if status != http.StatusUnauthorized || body["errorType"] != "authentication_error" || hdr.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: %d %v, want 401 authentication_error", name, status, body)
		}
		if msg, _ := body["error"].(string); !strings.Contains(msg, "16 KiB") {
			t.Errorf("%s: message %q does not name the limit", name, msg)
		}
	}
	if n := f.db.QueryInt(t, `SELECT count(*) FROM probe`); n != 0 {
		t.Fatalf("%d rows landed through oversized tokens", n)
	}
}

// TestMetadataWithJWTOnly: a runner that accepts JWTs and no static token is not open: the
// listings need a token, and a JWT gets the tools its scopes allow.
func TestMetadataWithJWTOnly(t *testing.T) {
	t.Parallel()
	f := newJWTFixture(t, JWTConfig{Issuer: testIssuer, Audience: testAudience, Secret: hsSecret})
	token := sign(t, jwt.SigningMethodHS256, "", hsSecret, with(validClaims("alice", f.role), "scope", "read"))
	for _, path := range []string{"/openapi.json", "/v1/tools"} {
		if status, body, _ := apitest.Call(t, http.MethodGet, f.srv.URL+path, "", ""); status != http.StatusUnauthorized || body["errorType"] != "authentication_error" {
			t.Errorf("GET %s without a token: %d %v", path, status, body)
		}
	}
	want := []string{"describe_schema", "execute_sql", "pg_tx", "select_query"}
	status, body, _ := apitest.Call(t, http.MethodGet, f.srv.URL+"/v1/tools", token, "")
	if got := listedTools(t, body); status != http.StatusOK || !slices.Equal(got, want) {
		t.Errorf("/v1/tools with a read JWT: %d %v, want %v", status, got, want)
	}
	status, body, _ = apitest.Call(t, http.MethodGet, f.srv.URL+"/openapi.json", token, "")
	if got := openAPITools(t, body); status != http.StatusOK || !slices.Equal(got, want) {
		t.Errorf("/openapi.json with a read JWT: %d %v, want %v", status, got, want)
	}
}
