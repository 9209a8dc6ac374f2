package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/rs/zerolog"
)

// BenchmarkJWTVerifyJWKSURL is the cost of verifying an RS256 bearer token whose key comes from a
// JWKS URL, on every core at once: the key lookup is on the path of every such request.
func BenchmarkJWTVerifyJWKSURL(b *testing.B) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	jwk, err := jwkset.NewJWKFromKey(&key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k1", ALG: jwkset.AlgRS256, USE: jwkset.UseSig}})
	if err != nil {
		b.Fatal(err)
	}
	set, _ := json.Marshal(jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(set) }))
	b.Cleanup(srv.Close)
	v, err := newJWTVerifier(JWTConfig{Issuer: "https://auth.bench.invalid/", Audience: "bench", JWKSURL: srv.URL, Roles: []string{"agent"}}, "", nil, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": "https://auth.bench.invalid/", "aud": "bench", "sub": "alice",
		"role": "agent", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = "k1"
	raw, err := tok.SignedString(key)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, terr := v.verify(b.Context(), raw, false); terr != nil {
				b.Error(terr)
				return
			}
		}
	})
}
