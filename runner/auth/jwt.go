package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/tools"
)

// Defaults of JWTConfig.
const (
	// DefaultJWTName is JWTConfig.Name when unset: principals are named "jwt:<sub>".
	DefaultJWTName = "jwt"
	// DefaultJWTLeeway is JWTConfig.Leeway when unset: the clock skew allowed on exp and nbf.
	DefaultJWTLeeway = 30 * time.Second
	// DefaultJWTRoleClaim is JWTConfig.RoleClaim when unset, the claim PostgREST reads too.
	DefaultJWTRoleClaim = "role"
	// DefaultJWKSRefresh is how long a JWKS fetched from a URL is used before it is fetched again.
	DefaultJWKSRefresh = time.Hour
	// jwksMinRefetch spaces the fetches an unknown kid triggers, so tokens with made-up key ids
	// cannot make the runner hammer the issuer.
	jwksMinRefetch = 10 * time.Second
	// maxJWKSBytes caps a JWKS document.
	maxJWKSBytes = 1 << 20
	// MaxJWTBytes caps a bearer JWT, checked before it is decoded: a token is a few hundred
	// bytes to a few KiB, and every byte past that is base64 and JSON work an unauthenticated
	// caller would make the runner do.
	MaxJWTBytes = 16 << 10
)

// DefaultJWTScopes is JWTConfig.DefaultScopes when unset: a token without scope or scp may read.
var DefaultJWTScopes = []string{"read"}

// JWTConfig accepts JSON Web Tokens from one issuer as bearer tokens (docs/design.md §11). Exactly one key
// source is set: Secret (HS256), JWKSFile or JWKSURL (RS256 and ES256). A token's claims must
// name the issuer, the audience, a subject and an expiry; its role claim must be in Roles.
type JWTConfig struct {
	// Name prefixes the principal names of the issuer's subjects: "<name>:<sub>" (default "jwt").
	// It must differ from every API token's name.
	Name string
	// Issuer is the required "iss" claim, e.g. "https://auth.example.com/".
	Issuer string
	// Audience is the required "aud" of tokens on the HTTP API (default: MCPOAuth's resource).
	Audience string
	// Secret is the HS256 key, read from SecretFile. A secret: never logged.
	Secret []byte
	// SecretFile is where Secret came from (for messages and check-config).
	SecretFile string
	// JWKSFile is a JSON Web Key Set file with the issuer's public keys, read once at start
	// into JWKS.
	JWKSFile string
	// JWKS is the key set read from JWKSFile.
	JWKS []byte
	// JWKSURL is an http(s) URL of the issuer's JSON Web Key Set, fetched on first use, again
	// after DefaultJWKSRefresh, and when a token names a key id it does not hold (at most every
	// 10 s).
	JWKSURL string
	// Leeway is the clock skew allowed on exp and nbf (default 30 s).
	Leeway time.Duration
	// RoleClaim names the claim holding the PostgreSQL role (default "role").
	RoleClaim string
	// Roles is the allow-list of roles a token may name; a token naming another is refused.
	Roles []string
	// DefaultRole is the role of a token without the role claim ("" refuses such tokens). It
	// must be in Roles.
	DefaultRole string
	// DefaultScopes are the scopes of a token with neither "scope" nor "scp" (default ["read"]).
	DefaultScopes []string
	// Databases limits the issuer's principals to these databases; empty means all.
	Databases []string
}

// WithDefaults fills the unset fields of j.
func (j JWTConfig) WithDefaults() JWTConfig {
	if j.Name == "" {
		j.Name = DefaultJWTName
	}
	if j.Leeway <= 0 {
		j.Leeway = DefaultJWTLeeway
	}
	if j.RoleClaim == "" {
		j.RoleClaim = DefaultJWTRoleClaim
	}
	if len(j.DefaultScopes) == 0 {
		j.DefaultScopes = DefaultJWTScopes
	}
	return j
}

// jwtVerifier verifies JWT bearer tokens and turns their claims into principals. It is safe for
// concurrent use.
type jwtVerifier struct {
	cfg      JWTConfig
	methods  []string
	keys     keySource
	resource string // MCP OAuth resource: the audience of tokens on /mcp ("" without mcp_oauth)
}

// keySource gives the verification keys: a fixed set, or a JWKS fetched from a URL.
type keySource interface {
	// keyfunc returns the key lookup for one verification.
	keyfunc(ctx context.Context) (jwt.Keyfunc, error)
	// refresh fetches the keys again after a token named an unknown key id; it reports whether
	// new keys were fetched (false when the last fetch was too recent).
	refresh(ctx context.Context) bool
}

type staticKeys struct{ kf jwt.Keyfunc }

func (s staticKeys) keyfunc(context.Context) (jwt.Keyfunc, error) { return s.kf, nil }
func (s staticKeys) refresh(context.Context) bool                 { return false }

// newJWTVerifier builds the verifier of cfg (validated). A JWKS URL is fetched on first use, through client (nil: a client with a 10 s timeout).
func newJWTVerifier(cfg JWTConfig, resource string, client *http.Client, log zerolog.Logger) (*jwtVerifier, error) {
	cfg = cfg.WithDefaults()
	v := &jwtVerifier{cfg: cfg, resource: resource}
	switch {
	case len(cfg.Secret) > 0:
		// HS256 only: a token naming any other alg (RS256 with this secret, none) is refused.
		v.methods = []string{jwt.SigningMethodHS256.Alg()}
		secret := cfg.Secret
		v.keys = staticKeys{kf: func(*jwt.Token) (any, error) { return secret, nil }}
	case len(cfg.JWKS) > 0:
		v.methods = asymmetricMethods
		kf, err := keyfunc.NewJWKSetJSON(cfg.JWKS)
		if err != nil {
			return nil, fmt.Errorf("jwt.jwks_file: not a JSON Web Key Set: %w", err)
		}
		v.keys = staticKeys{kf: kf.Keyfunc}
	case cfg.JWKSURL != "":
		v.methods = asymmetricMethods
		if client == nil {
			client = &http.Client{Timeout: 10 * time.Second}
		}
		v.keys = &remoteKeys{url: cfg.JWKSURL, client: client, log: log, ttl: DefaultJWKSRefresh}
	default:
		return nil, errors.New("jwt: no key source: give secret_file, jwks_file or jwks_url")
	}
	return v, nil
}

// asymmetricMethods are the algorithms accepted with keys from a JWKS: never HS256, so a token
// "signed" with a public key as an HMAC secret is refused.
var asymmetricMethods = []string{jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg()}

// remoteKeys is a JWKS fetched from a URL and cached: fetched on first use, again when older
// than ttl, and when a token names an unknown kid (at most every jwksMinRefetch). A failed fetch
// keeps the previous keys.
type remoteKeys struct {
	url    string
	client *http.Client
	log    zerolog.Logger
	ttl    time.Duration

	mu      sync.Mutex
	kf      keyfunc.Keyfunc
	fetched time.Time // last successful fetch
	tried   time.Time // last attempt
}

func (r *remoteKeys) keyfunc(ctx context.Context) (jwt.Keyfunc, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kf == nil || time.Since(r.fetched) > r.ttl {
		if err := r.fetchLocked(ctx); err != nil && r.kf == nil {
			return nil, err
		}
	}
	return r.kf.KeyfuncCtx(ctx), nil
}

func (r *remoteKeys) refresh(ctx context.Context) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.tried) < jwksMinRefetch {
		return false
	}
	return r.fetchLocked(ctx) == nil
}

// fetchLocked fetches the JWKS; r.mu is held, so concurrent verifications wait for one fetch.
func (r *remoteKeys) fetchLocked(ctx context.Context) error {
	r.tried = time.Now()
	kf, err := r.fetch(ctx)
	if err != nil {
		r.log.Warn().Str("jwks_url", r.url).Err(err).Msg("fetching the JWT issuer's keys failed")
		return err
	}
	r.kf, r.fetched = kf, time.Now()
	return nil
}

func (r *remoteKeys) fetch(ctx context.Context) (keyfunc.Keyfunc, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return nil, fmt.Errorf("building the JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching the JWKS: HTTP status %d", resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes))
	if err != nil {
		return nil, fmt.Errorf("reading the JWKS: %w", err)
	}
	kf, err := keyfunc.NewJWKSetJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("the JWKS is not a JSON Web Key Set: %w", err)
	}
	return kf, nil
}

// looksLikeJWT tells a compact JWS (three base64url parts, a JSON header) from an opaque token.
func looksLikeJWT(s string) bool {
	return strings.HasPrefix(s, "eyJ") && strings.Count(s, ".") == 2
}

// verify checks raw (signature, alg, iss, aud, exp, nbf, sub, role) and returns the principal it
// stands for: Name "<name>:<sub>", the role from the role claim, scopes from scope or scp, and
// the whole verified claim set as Claims. mcp selects the MCP OAuth resource as the audience.
// Errors are authentication errors that name the failed check, never a claim value.
func (v *jwtVerifier) verify(ctx context.Context, raw string, mcp bool) (tools.Principal, *tools.Error) {
	if len(raw) > MaxJWTBytes {
		return tools.Principal{}, jwtError(fmt.Sprintf("The bearer token (a JWT) is larger than %d KiB", MaxJWTBytes>>10),
			"Send the token exactly as the issuer gave it; if it is that large, have the issuer put fewer claims in it.")
	}
	kf, err := v.keys.keyfunc(ctx)
	if err != nil {
		return tools.Principal{}, jwtError("The runner cannot fetch the keys of the token issuer",
			"Retry in a minute; if it persists, the operator should check jwt.jwks_url.")
	}
	parser := jwt.NewParser(jwt.WithValidMethods(v.methods), jwt.WithIssuer(v.cfg.Issuer), jwt.WithLeeway(v.cfg.Leeway),
		jwt.WithExpirationRequired(), jwt.WithJSONNumber())
	claims := jwt.MapClaims{}
	_, err = parser.ParseWithClaims(raw, claims, kf)
	if err != nil && errors.Is(err, jwkset.ErrKeyNotFound) && v.keys.refresh(ctx) {
		// The issuer may have rotated its keys since the last fetch.
		if kf, err = v.keys.keyfunc(ctx); err == nil {
			claims = jwt.MapClaims{}
			_, err = parser.ParseWithClaims(raw, claims, kf)
		}
	}
	if err != nil {
		return tools.Principal{}, v.describe(err)
	}
	aud, _ := claims.GetAudience()
	if !v.audienceOK(aud, mcp) {
		return tools.Principal{}, jwtError("The bearer token (a JWT) is for another audience",
			fmt.Sprintf("Get a token whose aud claim is %q.", v.audience(mcp)))
	}
	sub, _ := claims.GetSubject()
	if !validSubject(sub) {
		// The principal name is built from sub, so sub obeys the act-as subject's rule.
		return tools.Principal{}, jwtError("The bearer token (a JWT) has no usable sub claim",
			fmt.Sprintf("Get a token whose sub claim names the user in %s.", subjectRule))
	}
	role, terr := v.role(claims)
	if terr != nil {
		return tools.Principal{}, terr
	}
	body, err := payload(raw)
	if err != nil {
		return tools.Principal{}, jwtError("The bearer token (a JWT) is malformed", "Send the token exactly as the issuer gave it.")
	}
	// Quota: all subjects of the issuer share its shares, as an act_as token's end users do.
	return tools.Principal{Name: v.cfg.Name + ":" + sub, Quota: v.cfg.Name, Scopes: scopesOf(claims, v.cfg.DefaultScopes),
		Databases: v.cfg.Databases, Role: role, Claims: body}, nil
}

// audience is the aud a token must carry: the MCP resource on /mcp, else the configured one.
func (v *jwtVerifier) audience(mcp bool) string {
	if (mcp || v.cfg.Audience == "") && v.resource != "" {
		return v.resource
	}
	return v.cfg.Audience
}

func (v *jwtVerifier) audienceOK(aud []string, mcp bool) bool {
	want := v.audience(mcp)
	if want == v.resource {
		// RFC 9728 resource identifiers differ in a trailing slash between issuers.
		return oauthex.MatchesResource(aud, want)
	}
	return slices.Contains(aud, want)
}

// role picks the role from the role claim against the allow-list.
func (v *jwtVerifier) role(claims jwt.MapClaims) (string, *tools.Error) {
	rc := v.cfg.RoleClaim
	val, ok := claims[rc]
	if !ok {
		if v.cfg.DefaultRole != "" {
			return v.cfg.DefaultRole, nil
		}
		return "", jwtError(fmt.Sprintf("The bearer token (a JWT) has no %q claim naming its role", rc),
			fmt.Sprintf("Get a token whose %q claim is one of: %s.", rc, strings.Join(v.cfg.Roles, ", ")))
	}
	role, _ := val.(string)
	if !slices.Contains(v.cfg.Roles, role) {
		// The value is not repeated: claims never appear in messages.
		return "", jwtError(fmt.Sprintf("The bearer token's %q claim names a role this runner does not allow", rc),
			fmt.Sprintf("Get a token whose %q claim is one of: %s.", rc, strings.Join(v.cfg.Roles, ", ")))
	}
	return role, nil
}

// describe turns a parse failure into the error the caller reads: which check failed.
func (v *jwtVerifier) describe(err error) *tools.Error {
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return jwtError("The bearer token (a JWT) has expired", "Get a fresh token from the issuer and retry.")
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return jwtError("The bearer token (a JWT) is not valid yet (nbf or iat is in the future)",
			"Check the issuer's clock, or wait until the token's nbf and retry.")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return jwtError("The bearer token (a JWT) is from another issuer",
			fmt.Sprintf("Get a token issued by %q.", v.cfg.Issuer))
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return jwtError("The bearer token (a JWT) lacks a required claim (exp or iss)",
			"Get a token with exp and iss from the configured issuer.")
	case errors.Is(err, jwkset.ErrKeyNotFound):
		return jwtError("The bearer token (a JWT) is signed with a key the issuer does not publish (unknown kid)",
			"Get a fresh token from the issuer; if it persists, the operator should check jwt.jwks_url or jwt.jwks_file.")
	case errors.Is(err, jwt.ErrTokenMalformed):
		return jwtError("The bearer token (a JWT) is malformed", "Send the token exactly as the issuer gave it.")
	}
	// Signature, algorithm (none, HS256 against public keys) and key errors alike: a forged or
	// altered token.
	return jwtError("The bearer token (a JWT) has an invalid signature or a disallowed algorithm",
		fmt.Sprintf("Send the token exactly as the issuer gave it; accepted algorithms: %s.", strings.Join(v.methods, ", ")))
}

func jwtError(msg, suggestion string) *tools.Error {
	return &tools.Error{Type: tools.ErrAuthentication, Message: msg, Suggestion: suggestion}
}

// payload is the verified claim set as sent: the JWT's middle part, decoded.
func payload(raw string) ([]byte, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil, errors.New("not three parts")
	}
	body, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, fmt.Errorf("decoding the payload: %w", err)
	}
	if !json.Valid(body) {
		return nil, errors.New("payload is not JSON")
	}
	return body, nil
}

// scopesOf reads the pgtools scopes from "scope" (space-separated, RFC 8693) or "scp" (an array,
// or a string as some issuers send it); scopes pgtools does not know (openid, email…) are
// ignored. A token with neither claim gets def.
func scopesOf(claims jwt.MapClaims, def []string) []string {
	var names []string
	switch s := claims["scope"].(type) {
	case string:
		names = strings.Fields(s)
	}
	if names == nil {
		switch s := claims["scp"].(type) {
		case []any:
			for _, x := range s {
				if str, ok := x.(string); ok {
					names = append(names, str)
				}
			}
		case string:
			names = strings.Fields(s)
		}
	}
	_, hasScope := claims["scope"]
	_, hasScp := claims["scp"]
	if !hasScope && !hasScp {
		return slices.Clone(def)
	}
	out := []string{}
	for _, n := range names {
		if (n == "read" || n == "write" || n == "ddl") && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
