package auth_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/auth/authtest"
	"github.com/pgtools/pgtools/runner/runnertest"
)

// TestJWTBadTokensAreRefused: every forged, stale or misaddressed JWT is a 401
// authentication_error with the pgtools error shape, and its call never runs.
func TestJWTBadTokensAreRefused(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t)
	f := runnertest.NewJWTFixture(t, auth.JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, JWKSURL: iss.URL()})
	good := authtest.ValidClaims("alice", f.Role)
	pubDER, err := x509.MarshalPKIXPublicKey(&iss.RSA.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	valid := authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, good)
	parts := strings.Split(valid, ".")
	tamperedClaims, _ := json.Marshal(authtest.With(good, "tenant", "someone-else"))
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(tamperedClaims) + "." + parts[2]

	cases := []struct{ name, token, want string }{
		{"expired", authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.With(good, "exp", time.Now().Add(-2*time.Minute).Unix())), "expired"},
		{"not yet valid", authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.With(good, "nbf", time.Now().Add(2*time.Minute).Unix())), "not valid yet"},
		{"no exp", authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.With(good, "exp", nil)), "lacks a required claim"},
		{"wrong audience", authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.With(good, "aud", "another-service")), "another audience"},
		{"wrong issuer", authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.With(good, "iss", "https://evil.test.invalid/")), "another issuer"},
		{"alg none", authtest.Sign(t, jwt.SigningMethodNone, "rsa-1", jwt.UnsafeAllowNoneSignatureType, good), "invalid signature or a disallowed algorithm"},
		{"HS256 signed with the RSA public key", authtest.Sign(t, jwt.SigningMethodHS256, "rsa-1", pubPEM, good), "invalid signature or a disallowed algorithm"},
		{"HS256 signed with the DER public key", authtest.Sign(t, jwt.SigningMethodHS256, "rsa-1", pubDER, good), "invalid signature or a disallowed algorithm"},
		{"unknown kid", authtest.Sign(t, jwt.SigningMethodRS256, "rsa-unknown", other, good), "unknown kid"},
		{"signed by another key with a known kid", authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", other, good), "invalid signature"},
		{"role not in the allow-list", authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.With(good, "role", "postgres")), "does not allow"},
		{"no role claim", authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.With(good, "role", nil)), `no "role" claim`},
		{"no sub", authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.With(good, "sub", nil)), "no usable sub"},
		{"tampered payload", tampered, "invalid signature"},
		{"malformed", "eyJhbGciOiJSUzI1NiJ9.not-base64!.x", "malformed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body, hdr := f.Post(t, "/v1/tools/execute_sql", c.token, runnertest.InsertProbe)
			if status != http.StatusUnauthorized || body["errorType"] != "authentication_error" {
				t.Fatalf("status %d body %v, want 401 authentication_error", status, body)
			}
			if msg, _ := body["error"].(string); !strings.Contains(msg, c.want) {
				t.Errorf("message %q does not say %q", msg, c.want)
			}
			if body["suggestion"] == "" || hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("no suggestion or challenge: %v %v", body, hdr)
			}
			if raw, _ := json.Marshal(body); strings.Contains(string(raw), authtest.TenantSecret) || strings.Contains(string(raw), "postgres\"") {
				t.Errorf("the error repeats a claim value: %s", raw)
			}
		})
	}
	if n := f.DB.QueryInt(t, `SELECT count(*) FROM probe`); n != 0 {
		t.Fatalf("%d rows landed through refused tokens", n)
	}
	// The same call with the valid token runs, as the token's role and subject.
	status, body, _ := f.Post(t, "/v1/tools/execute_sql", valid, runnertest.InsertProbe)
	if status != http.StatusOK {
		t.Fatalf("valid token: %d %v", status, body)
	}
	if strings.Contains(f.Log.String(), authtest.TenantSecret) {
		t.Errorf("a claim value reached the log:\n%s", f.Log.String())
	}
	if !strings.Contains(f.Log.String(), `"principal":"jwt:alice"`) || !strings.Contains(f.Log.String(), `"role":"`+f.Role+`"`) {
		t.Errorf("the access log does not name the principal and the role:\n%s", f.Log.String())
	}
}

// TestJWTValidTokensRunAsTheirRole: RS256 and ES256 tokens from the JWKS URL and an HS256 token
// from a secret run as the role their claim names, with the claims in request.jwt.claims and the
// scopes of scope/scp.
func TestJWTValidTokensRunAsTheirRole(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t)
	f := runnertest.NewJWTFixture(t, auth.JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, JWKSURL: iss.URL()})
	for _, tc := range []struct {
		name  string
		token string
	}{
		{"RS256", authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.ValidClaims("alice", f.Role))},
		{"ES256", authtest.Sign(t, jwt.SigningMethodES256, "ec-1", iss.EC, authtest.ValidClaims("bob", f.Role))},
	} {
		status, body, _ := f.Post(t, "/v1/tools/execute_sql", tc.token,
			`{"sql": "SELECT current_user AS u, current_setting('request.jwt.claims', true)::jsonb ->> 'tenant' AS tenant"}`)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %v", tc.name, status, body)
		}
		rows, _ := body["data"].([]any)
		if len(rows) != 1 {
			t.Fatalf("%s: rows %v", tc.name, body)
		}
		row, _ := rows[0].(map[string]any)
		if row["u"] != f.Role || row["tenant"] != authtest.TenantSecret {
			t.Errorf("%s: ran as %v with tenant %v, want %s and the token's claim", tc.name, row["u"], row["tenant"], f.Role)
		}
	}
	// scp as an array, read only: a write is refused by scope.
	ro := authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.With(authtest.With(authtest.ValidClaims("carol", f.Role), "scope", nil), "scp", []string{"read"}))
	if status, body, _ := f.Post(t, "/v1/tools/execute_sql", ro, runnertest.InsertProbe); status == http.StatusOK {
		t.Fatalf("a read-only token wrote: %v", body)
	} else if fix, _ := body["suggestion"].(string); !strings.Contains(fix, "token with the write scope") || strings.Contains(fix, "--scopes") {
		t.Errorf("the refusal over HTTP does not name a token as the fix: %v", body)
	}
}
