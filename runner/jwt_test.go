package runner

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

const (
	testIssuer   = "https://auth.test.invalid/"
	testAudience = "pgtools-test"
	// tenantSecret is a claim value that must never reach a log line or an error.
	tenantSecret = "tenant-value-7f3a9c-never-logged"
)

// issuer is a test JWT issuer: an RSA and an EC key, published as a JWKS by an httptest server
// on 127.0.0.1. extra keys can be published later (rotation).
type issuer struct {
	rsa   *rsa.PrivateKey
	ec    *ecdsa.PrivateKey
	srv   *httptest.Server
	mu    sync.Mutex
	extra []jwkset.JWK
	hits  int
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	iss := &issuer{rsa: rk, ec: ek}
	iss.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		iss.mu.Lock()
		defer iss.mu.Unlock()
		iss.hits++
		keys := []jwkset.JWK{publicJWK(t, &rk.PublicKey, "rsa-1", jwkset.AlgRS256), publicJWK(t, &ek.PublicKey, "ec-1", jwkset.AlgES256)}
		keys = append(keys, iss.extra...)
		var set jwkset.JWKSMarshal
		for _, k := range keys {
			set.Keys = append(set.Keys, k.Marshal())
		}
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(iss.srv.Close)
	return iss
}

func publicJWK(t *testing.T, key any, kid string, alg jwkset.ALG) jwkset.JWK {
	t.Helper()
	j, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: alg, USE: jwkset.UseSig}})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func (iss *issuer) url() string { return iss.srv.URL + "/jwks.json" }

// fetches is how many times the JWKS was served.
func (iss *issuer) fetches() int {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return iss.hits
}

// claims are valid claims for subject sub with role and the secret tenant claim.
func validClaims(sub, role string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"iss": testIssuer, "aud": testAudience, "sub": sub, "role": role, "tenant": tenantSecret,
		"scope": "read write openid", "exp": now.Add(5 * time.Minute).Unix(), "nbf": now.Add(-time.Minute).Unix()}
}

func sign(t *testing.T, method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func with(c jwt.MapClaims, k string, v any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for kk, vv := range c {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// jwtFixture is the HTTP API over a fresh database, accepting JWTs of iss (JWKS URL) as role.
type jwtFixture struct {
	srv  *httptest.Server
	log  *syncBuffer
	db   *pgtest.DB
	role string
}

func newJWTFixture(t *testing.T, jc JWTConfig) *jwtFixture {
	t.Helper()
	db := pgtest.New(t)
	role := db.RoleName("agent")
	db.Exec(t, `CREATE ROLE `+role+` NOLOGIN`)
	db.Exec(t, `CREATE TABLE probe (id int PRIMARY KEY, tenant text); GRANT SELECT, INSERT ON probe TO `+role)
	jc.Roles = append(jc.Roles, role)
	cfg := &Config{Databases: map[string]DatabaseConfig{"default": {URL: db.DSN}}, JWT: &jc}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	reg := toolstest.Registry(t, db.DSN, tools.Policy{}, 4)
	logs := &syncBuffer{}
	srv := httptest.NewServer(NewHandlerWith(reg, HandlerOptions{Log: zerolog.New(logs), JWT: cfg.JWT, MCPOAuth: cfg.MCPOAuth}))
	t.Cleanup(srv.Close)
	return &jwtFixture{srv: srv, log: logs, db: db, role: role}
}

func (f *jwtFixture) post(t *testing.T, path, token, body string, header ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req := apitest.Request(http.MethodPost, f.srv.URL+path, token, body)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Add(header[i], header[i+1])
	}
	return apitest.Do(t, req)
}

const insertProbe = `{"sql": "INSERT INTO probe VALUES (1, 'x')", "mode": "write", "autocommit": true}`

// TestJWTBadTokensAreRefused: every forged, stale or misaddressed JWT is a 401
// authentication_error with the pgtools error shape, and its call never runs.
func TestJWTBadTokensAreRefused(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t)
	f := newJWTFixture(t, JWTConfig{Issuer: testIssuer, Audience: testAudience, JWKSURL: iss.url()})
	good := validClaims("alice", f.role)
	pubDER, err := x509.MarshalPKIXPublicKey(&iss.rsa.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	valid := sign(t, jwt.SigningMethodRS256, "rsa-1", iss.rsa, good)
	parts := strings.Split(valid, ".")
	tamperedClaims, _ := json.Marshal(with(good, "tenant", "someone-else"))
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(tamperedClaims) + "." + parts[2]

	cases := []struct{ name, token, want string }{
		{"expired", sign(t, jwt.SigningMethodRS256, "rsa-1", iss.rsa, with(good, "exp", time.Now().Add(-2*time.Minute).Unix())), "expired"},
		{"not yet valid", sign(t, jwt.SigningMethodRS256, "rsa-1", iss.rsa, with(good, "nbf", time.Now().Add(2*time.Minute).Unix())), "not valid yet"},
		{"no exp", sign(t, jwt.SigningMethodRS256, "rsa-1", iss.rsa, with(good, "exp", nil)), "lacks a required claim"},
		{"wrong audience", sign(t, jwt.SigningMethodRS256, "rsa-1", iss.rsa, with(good, "aud", "another-service")), "another audience"},
		{"wrong issuer", sign(t, jwt.SigningMethodRS256, "rsa-1", iss.rsa, with(good, "iss", "https://evil.test.invalid/")), "another issuer"},
		{"alg none", sign(t, jwt.SigningMethodNone, "rsa-1", jwt.UnsafeAllowNoneSignatureType, good), "invalid signature or a disallowed algorithm"},
		{"HS256 signed with the RSA public key", sign(t, jwt.SigningMethodHS256, "rsa-1", pubPEM, good), "invalid signature or a disallowed algorithm"},
		{"HS256 signed with the DER public key", sign(t, jwt.SigningMethodHS256, "rsa-1", pubDER, good), "invalid signature or a disallowed algorithm"},
		{"unknown kid", sign(t, jwt.SigningMethodRS256, "rsa-unknown", other, good), "unknown kid"},
		{"signed by another key with a known kid", sign(t, jwt.SigningMethodRS256, "rsa-1", other, good), "invalid signature"},
		{"role not in the allow-list", sign(t, jwt.SigningMethodRS256, "rsa-1", iss.rsa, with(good, "role", "postgres")), "does not allow"},
		{"no role claim", sign(t, jwt.SigningMethodRS256, "rsa-1", iss.rsa, with(good, "role", nil)), `no "role" claim`},
		{"no sub", sign(t, jwt.SigningMethodRS256, "rsa-1", iss.rsa, with(good, "sub", nil)), "no usable sub"},
		{"tampered payload", tampered, "invalid signature"},
		{"malformed", "eyJhbGciOiJSUzI1NiJ9.not-base64!.x", "malformed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body, hdr := f.post(t, "/v1/tools/execute_sql", c.token, insertProbe)
			if status != http.StatusUnauthorized || body["errorType"] != "authentication_error" {
				t.Fatalf("status %d body %v, want 401 authentication_error", status, body)
			}
			if msg, _ := body["error"].(string); !strings.Contains(msg, c.want) {
				t.Errorf("message %q does not say %q", msg, c.want)
			}
			if body["suggestion"] == "" || hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("no suggestion or challenge: %v %v", body, hdr)
			}
			if raw, _ := json.Marshal(body); strings.Contains(string(raw), tenantSecret) || strings.Contains(string(raw), "postgres\"") {
				t.Errorf("the error repeats a claim value: %s", raw)
			}
		})
	}
	if n := f.db.QueryInt(t, `SELECT count(*) FROM probe`); n != 0 {
		t.Fatalf("%d rows landed through refused tokens", n)
	}
	// The same call with the valid token runs, as the token's role and subject.
	status, body, _ := f.post(t, "/v1/tools/execute_sql", valid, insertProbe)
	if status != http.StatusOK {
		t.Fatalf("valid token: %d %v", status, body)
	}
	if strings.Contains(f.log.String(), tenantSecret) {
		t.Errorf("a claim value reached the log:\n%s", f.log.String())
	}
	if !strings.Contains(f.log.String(), `"principal":"jwt:alice"`) || !strings.Contains(f.log.String(), `"role":"`+f.role+`"`) {
		t.Errorf("the access log does not name the principal and the role:\n%s", f.log.String())
	}
}

// TestJWTValidTokensRunAsTheirRole: RS256 and ES256 tokens from the JWKS URL and an HS256 token
// from a secret run as the role their claim names, with the claims in request.jwt.claims and the
// scopes of scope/scp.
func TestJWTValidTokensRunAsTheirRole(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t)
	f := newJWTFixture(t, JWTConfig{Issuer: testIssuer, Audience: testAudience, JWKSURL: iss.url()})
	for _, tc := range []struct {
		name  string
		token string
	}{
		{"RS256", sign(t, jwt.SigningMethodRS256, "rsa-1", iss.rsa, validClaims("alice", f.role))},
		{"ES256", sign(t, jwt.SigningMethodES256, "ec-1", iss.ec, validClaims("bob", f.role))},
	} {
		status, body, _ := f.post(t, "/v1/tools/execute_sql", tc.token,
			`{"sql": "SELECT current_user AS u, current_setting('request.jwt.claims', true)::jsonb ->> 'tenant' AS tenant"}`)
		if status != http.StatusOK {
			t.Fatalf("%s: %d %v", tc.name, status, body)
		}
		rows, _ := body["data"].([]any)
		if len(rows) != 1 {
			t.Fatalf("%s: rows %v", tc.name, body)
		}
		row, _ := rows[0].(map[string]any)
		if row["u"] != f.role || row["tenant"] != tenantSecret {
			t.Errorf("%s: ran as %v with tenant %v, want %s and the token's claim", tc.name, row["u"], row["tenant"], f.role)
		}
	}
	// scp as an array, read only: a write is refused by scope.
	ro := sign(t, jwt.SigningMethodRS256, "rsa-1", iss.rsa, with(with(validClaims("carol", f.role), "scope", nil), "scp", []string{"read"}))
	if status, body, _ := f.post(t, "/v1/tools/execute_sql", ro, insertProbe); status == http.StatusOK {
		t.Fatalf("a read-only token wrote: %v", body)
	} else if fix, _ := body["suggestion"].(string); !strings.Contains(fix, "token with the write scope") || strings.Contains(fix, "--scopes") {
		t.Errorf("the refusal over HTTP does not name a token as the fix: %v", body)
	}
}

// TestJWTHS256Secret: with a secret only HS256 verifies; an RS256 token is refused.
func TestJWTHS256Secret(t *testing.T) {
	t.Parallel()
	secret := []byte("hs256-secret-0123456789abcdef-0123456789")
	v, err := newJWTVerifier(JWTConfig{Issuer: testIssuer, Audience: testAudience, Secret: secret, Roles: []string{"agent"}}, "", nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	p, terr := v.verify(ctx, sign(t, jwt.SigningMethodHS256, "", secret, validClaims("dave", "agent")), false)
	if terr != nil {
		t.Fatal(terr)
	}
	if p.Name != "jwt:dave" || p.Role != "agent" || strings.Join(p.Scopes, ",") != "read,write" || !strings.Contains(string(p.Claims), tenantSecret) {
		t.Errorf("principal %+v", p)
	}
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	if _, terr := v.verify(ctx, sign(t, jwt.SigningMethodRS256, "", rk, validClaims("dave", "agent")), false); terr == nil || terr.Type != tools.ErrAuthentication {
		t.Errorf("RS256 token against an HS256 secret: %v", terr)
	}
	if _, terr := v.verify(ctx, sign(t, jwt.SigningMethodHS256, "", []byte("another-secret-0123456789abcdef0123"), validClaims("dave", "agent")), false); terr == nil {
		t.Error("a token signed with another secret was accepted")
	}
}

// TestJWKSRefreshOnUnknownKid: a key the issuer publishes after the last fetch is found by
// fetching the JWKS again when a token names its kid, at most once per jwksMinRefetch however
// many unknown kids arrive.
func TestJWKSRefreshOnUnknownKid(t *testing.T) {
	t.Parallel()
	iss := newIssuer(t)
	v, err := newJWTVerifier(JWTConfig{Issuer: testIssuer, Audience: testAudience, JWKSURL: iss.url(), Roles: []string{"agent"}}, "", nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	rk := v.keys.(*remoteKeys)
	ctx := t.Context()
	if n := iss.fetches(); n != 1 {
		t.Fatalf("the JWKS was fetched %d times at start, want 1", n)
	}
	if _, terr := v.verify(ctx, sign(t, jwt.SigningMethodRS256, "rsa-1", iss.rsa, validClaims("erin", "agent")), false); terr != nil {
		t.Fatal(terr)
	}
	rotated, _ := rsa.GenerateKey(rand.Reader, 2048)
	iss.mu.Lock()
	iss.extra = append(iss.extra, publicJWK(t, &rotated.PublicKey, "rsa-2", jwkset.AlgRS256))
	iss.mu.Unlock()
	token := sign(t, jwt.SigningMethodRS256, "rsa-2", rotated, validClaims("erin", "agent"))
	// Within the refetch interval of the start's fetch the unknown kid is refused without another.
	if _, terr := v.verify(ctx, token, false); terr == nil || !strings.Contains(terr.Message, "unknown kid") {
		t.Fatalf("unknown kid within the refetch interval: %v", terr)
	}
	if n := iss.fetches(); n != 1 {
		t.Fatalf("the JWKS was fetched %d times within the refetch interval, want 1", n)
	}
	rk.gate = rate.NewLimiter(rate.Every(jwksMinRefetch), 1) // the interval has passed
	if _, terr := v.verify(ctx, token, false); terr != nil {
		t.Fatalf("after rotation: %v", terr)
	}
	// Made-up kids right after that fetch cause no other.
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	for i := range 20 {
		forged := sign(t, jwt.SigningMethodRS256, fmt.Sprintf("made-up-%d", i), other, validClaims("erin", "agent"))
		if _, terr := v.verify(ctx, forged, false); terr == nil || !strings.Contains(terr.Message, "unknown kid") {
			t.Fatalf("made-up kid %d: %v", i, terr)
		}
	}
	if n := iss.fetches(); n != 2 {
		t.Errorf("the JWKS was fetched %d times, want 2 (start, one refresh)", n)
	}
}

func TestScopesOf(t *testing.T) {
	t.Parallel()
	def := []string{"read"}
	for _, c := range []struct {
		claims jwt.MapClaims
		want   string
	}{
		{jwt.MapClaims{}, "read"},
		{jwt.MapClaims{"scope": "openid write read"}, "write,read"},
		{jwt.MapClaims{"scp": []any{"read", "ddl", "email"}}, "read,ddl"},
		{jwt.MapClaims{"scp": "write"}, "write"},
		{jwt.MapClaims{"scope": "openid"}, ""},
	} {
		if got := strings.Join(scopesOf(c.claims, def), ","); got != c.want {
			t.Errorf("%v: scopes %q, want %q", c.claims, got, c.want)
		}
	}
}
