package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"strings"
	"testing"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/pgtools/pgtools/runner/auth/authtest"
	"github.com/pgtools/pgtools/tools"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
)

// TestJWTHS256Secret: with a secret only HS256 verifies; an RS256 token is refused.
func TestJWTHS256Secret(t *testing.T) {
	t.Parallel()
	secret := []byte("hs256-secret-0123456789abcdef-0123456789")
	v, err := newJWTVerifier(JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, Secret: secret, Roles: []string{"agent"}}, "", nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	p, terr := v.verify(ctx, authtest.Sign(t, jwt.SigningMethodHS256, "", secret, authtest.ValidClaims("dave", "agent")), false)
	if terr != nil {
		t.Fatal(terr)
	}
	if p.Name != "jwt:dave" || p.Role != "agent" || strings.Join(p.Scopes, ",") != "read,write" || !strings.Contains(string(p.Claims), authtest.TenantSecret) {
		t.Errorf("principal %+v", p)
	}
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	if _, terr := v.verify(ctx, authtest.Sign(t, jwt.SigningMethodRS256, "", rk, authtest.ValidClaims("dave", "agent")), false); terr == nil || terr.Type != tools.ErrAuthentication {
		t.Errorf("RS256 token against an HS256 secret: %v", terr)
	}
	if _, terr := v.verify(ctx, authtest.Sign(t, jwt.SigningMethodHS256, "", []byte("another-secret-0123456789abcdef0123"), authtest.ValidClaims("dave", "agent")), false); terr == nil {
		t.Error("a token signed with another secret was accepted")
	}
}

// TestJWKSRefreshOnUnknownKid: a key the issuer publishes after the last fetch is found by
// fetching the JWKS again when a token names its kid, at most once per jwksMinRefetch however
// many unknown kids arrive.
func TestJWKSRefreshOnUnknownKid(t *testing.T) {
	t.Parallel()
	iss := authtest.NewIssuer(t)
	v, err := newJWTVerifier(JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, JWKSURL: iss.URL(), Roles: []string{"agent"}}, "", nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	rk := v.keys.(*remoteKeys)
	ctx := t.Context()
	if n := iss.Hits(); n != 1 {
		t.Fatalf("the JWKS was fetched %d times at start, want 1", n)
	}
	if _, terr := v.verify(ctx, authtest.Sign(t, jwt.SigningMethodRS256, "rsa-1", iss.RSA, authtest.ValidClaims("erin", "agent")), false); terr != nil {
		t.Fatal(terr)
	}
	rotated, _ := rsa.GenerateKey(rand.Reader, 2048)
	iss.Publish(authtest.PublicJWK(t, &rotated.PublicKey, "rsa-2", jwkset.AlgRS256))
	token := authtest.Sign(t, jwt.SigningMethodRS256, "rsa-2", rotated, authtest.ValidClaims("erin", "agent"))
	// Within the refetch interval of the start's fetch the unknown kid is refused without another.
	if _, terr := v.verify(ctx, token, false); terr == nil || !strings.Contains(terr.Message, "unknown kid") {
		t.Fatalf("unknown kid within the refetch interval: %v", terr)
	}
	if n := iss.Hits(); n != 1 {
		t.Fatalf("the JWKS was fetched %d times within the refetch interval, want 1", n)
	}
	rk.gate = rate.NewLimiter(rate.Every(jwksMinRefetch), 1) // the interval has passed
	if _, terr := v.verify(ctx, token, false); terr != nil {
		t.Fatalf("after rotation: %v", terr)
	}
	// Made-up kids right after that fetch cause no other.
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	for i := range 20 {
		forged := authtest.Sign(t, jwt.SigningMethodRS256, fmt.Sprintf("made-up-%d", i), other, authtest.ValidClaims("erin", "agent"))
		if _, terr := v.verify(ctx, forged, false); terr == nil || !strings.Contains(terr.Message, "unknown kid") {
			t.Fatalf("made-up kid %d: %v", i, terr)
		}
	}
	if n := iss.Hits(); n != 2 {
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
		{jwt.MapClaims{"scope": "approve openid approve"}, "approve"},
	} {
		if got := strings.Join(scopesOf(c.claims, def), ","); got != c.want {
			t.Errorf("%v: scopes %q, want %q", c.claims, got, c.want)
		}
	}
}

// TestSubjectRuleIsShared: the act-as subject and a JWT's sub are held to one rule
// (validSubject): the same subjects are accepted and refused by both, and a refusal never
// repeats the subject.
func TestSubjectRuleIsShared(t *testing.T) {
	t.Parallel()
	v, err := newJWTVerifier(JWTConfig{Issuer: authtest.Issuer, Audience: authtest.Audience, Secret: hsSecret, Roles: []string{"agent"}}, "", nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	act := &ActAs{}
	base := tools.Principal{Name: "hub", Scopes: []string{"read"}}
	for _, c := range authtest.SubjectCases {
		t.Run(c.Name, func(t *testing.T) {
			p, actErr := act.Principal(base, c.Subject)
			if (actErr == nil) != c.OK {
				t.Errorf("act-as %q: accepted %v, want %v (%v)", c.Subject, actErr == nil, c.OK, actErr)
			}
			if actErr == nil && p.Name != "hub:"+c.Subject {
				t.Errorf("act-as principal %q", p.Name)
			}
			claims := authtest.ValidClaims(c.Subject, "agent")
			if c.Subject == "" {
				claims = authtest.With(claims, "sub", nil)
			}
			jp, jwtErr := v.verify(t.Context(), authtest.Sign(t, jwt.SigningMethodHS256, "", hsSecret, claims), false)
			if (jwtErr == nil) != c.OK {
				t.Errorf("JWT sub %q: accepted %v, want %v (%v)", c.Subject, jwtErr == nil, c.OK, jwtErr)
			}
			if jwtErr == nil && jp.Name != "jwt:"+c.Subject {
				t.Errorf("JWT principal %q", jp.Name)
			}
			for _, e := range []*tools.Error{actErr, jwtErr} {
				if e == nil {
					continue
				}
				if raw, _ := e.MarshalJSON(); c.Subject != "" && strings.Contains(string(raw), c.Subject) {
					t.Errorf("the refusal repeats the subject: %s", raw)
				}
			}
			if jwtErr != nil && jwtErr.Type != tools.ErrAuthentication {
				t.Errorf("JWT refusal type %s, want authentication_error", jwtErr.Type)
			}
		})
	}
}

// hsSecret signs the HS256 tokens of these tests.
var hsSecret = []byte("hs256-secret-0123456789abcdef-0123456789")
