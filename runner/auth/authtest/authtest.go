// Package authtest is a test JWT issuer for the tests of runner/auth and of the servers that
// accept its tokens: an RSA and an EC key published as a JWKS on 127.0.0.1, and signed claims.
package authtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

const (
	// Issuer is the iss claim of ValidClaims.
	Issuer = "https://auth.test.invalid/"
	// Audience is the aud claim of ValidClaims.
	Audience = "pgtools-test"
	// TenantSecret is a claim value of ValidClaims that must never reach a log line or an error.
	TenantSecret = "tenant-value-7f3a9c-never-logged"
)

// JWKSIssuer publishes an RSA key ("rsa-1", RS256) and an EC key ("ec-1", ES256) as a JWKS
// from an httptest server; Publish adds keys later (rotation).
type JWKSIssuer struct {
	RSA *rsa.PrivateKey
	EC  *ecdsa.PrivateKey

	srv   *httptest.Server
	mu    sync.Mutex
	extra []jwkset.JWK
	hits  int
}

// NewIssuer starts an issuer, closed when the test ends.
func NewIssuer(t testing.TB) *JWKSIssuer {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	iss := &JWKSIssuer{RSA: rk, EC: ek}
	iss.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		iss.mu.Lock()
		defer iss.mu.Unlock()
		iss.hits++
		keys := []jwkset.JWK{PublicJWK(t, &rk.PublicKey, "rsa-1", jwkset.AlgRS256), PublicJWK(t, &ek.PublicKey, "ec-1", jwkset.AlgES256)}
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

// URL is the JWKS URL.
func (iss *JWKSIssuer) URL() string { return iss.srv.URL + "/jwks.json" }

// Publish adds k to the published set from the next fetch on.
func (iss *JWKSIssuer) Publish(k jwkset.JWK) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.extra = append(iss.extra, k)
}

// Handler serves the JWKS, for a test server that wraps it (a flaky or oversized issuer).
func (iss *JWKSIssuer) Handler() http.Handler { return iss.srv.Config.Handler }

// Hits counts the fetches of the JWKS so far.
func (iss *JWKSIssuer) Hits() int {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return iss.hits
}

// PublicJWK is key's public JWK with kid and alg, for signatures.
func PublicJWK(t testing.TB, key any, kid string, alg jwkset.ALG) jwkset.JWK {
	t.Helper()
	j, err := jwkset.NewJWKFromKey(key, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: alg, USE: jwkset.UseSig}})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// ValidClaims are valid claims for subject sub with role, the read and write scopes and the
// secret tenant claim.
func ValidClaims(sub, role string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"iss": Issuer, "aud": Audience, "sub": sub, "role": role, "tenant": TenantSecret,
		"scope": "read write openid", "exp": now.Add(5 * time.Minute).Unix(), "nbf": now.Add(-time.Minute).Unix()}
}

// Sign signs claims with key by method, naming kid in the header unless it is "".
func Sign(t testing.TB, method jwt.SigningMethod, kid string, key any, claims jwt.MapClaims) string {
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

// With is a copy of c with claim k set to v, or removed when v is nil.
func With(c jwt.MapClaims, k string, v any) jwt.MapClaims {
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

// SubjectCases are subjects a principal name may or may not be built from, for the act-as
// header and a JWT's sub alike (validSubject).
var SubjectCases = []struct {
	Name, Subject string
	OK            bool
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
