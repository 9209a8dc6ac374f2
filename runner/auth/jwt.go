package auth

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/pgtools/pgtools/tools"
)

// Defaults of JWTConfig.
const (
	// DefaultJWTName is JWTConfig.Name when unset: principals are named "jwt:<sub>".
	DefaultJWTName = "jwt"
	// DefaultJWTLeeway is JWTConfig.LeewaySeconds when unset: the clock skew allowed on exp and nbf.
	DefaultJWTLeeway = 30 * time.Second
	// DefaultJWTRoleClaim is JWTConfig.RoleClaim when unset, the claim PostgREST reads too.
	DefaultJWTRoleClaim = "role"
	// DefaultJWKSRefresh is how often a JWKS URL is fetched again in the background.
	DefaultJWKSRefresh = time.Hour
	// jwksMinRefetch spaces the fetches an unknown kid triggers, so tokens with made-up key ids
	// cannot make the runner hammer the issuer.
	jwksMinRefetch = 10 * time.Second
	// maxJWKSBytes caps a JWKS document; a larger one is refused and the previous keys stay.
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
	Name string `json:"name"`
	// Issuer is the required "iss" claim, e.g. "https://auth.example.com/".
	Issuer string `json:"issuer"`
	// Audience is the required "aud" of tokens on the HTTP API (default: MCPOAuth's resource).
	Audience string `json:"audience"`
	// Secret is the HS256 key, read from SecretFile. A secret: never logged.
	Secret []byte `json:"-"`
	// SecretFile is where Secret came from (for messages and check-config).
	SecretFile string `json:"secret_file,omitempty"`
	// JWKSFile is a JSON Web Key Set file with the issuer's public keys, read once at start
	// into JWKS.
	JWKSFile string `json:"jwks_file,omitempty"`
	// JWKS is the key set read from JWKSFile.
	JWKS []byte `json:"-"`
	// JWKSURL is an http(s) URL of the issuer's JSON Web Key Set, fetched when the runner
	// starts (a failure is logged and tokens are refused until a fetch succeeds), again every
	// DefaultJWKSRefresh in the background, and when a token names a key id it does not hold
	// (at most every 10 s). A fetch is bounded by 10 s and 1 MiB.
	JWKSURL string `json:"jwks_url,omitempty"`
	// LeewaySeconds is the clock skew allowed on exp and nbf, in seconds (default 30).
	LeewaySeconds float64 `json:"leeway_seconds"`
	// RoleClaim names the claim holding the PostgreSQL role (default "role").
	RoleClaim string `json:"role_claim"`
	// Roles is the allow-list of roles a token may name; a token naming another is refused.
	Roles []string `json:"roles"`
	// DefaultRole is the role of a token without the role claim ("" refuses such tokens). It
	// must be in Roles.
	DefaultRole string `json:"default_role"`
	// DefaultScopes are the scopes of a token with neither "scope" nor "scp" (default ["read"]).
	DefaultScopes []string `json:"default_scopes"`
	// Databases limits the issuer's principals to these databases; empty means all.
	Databases []string `json:"databases"`

	// jwksRefresh is the background refresh interval of JWKSURL (0: DefaultJWKSRefresh); tests
	// shorten it to watch the refresh run and stop.
	jwksRefresh time.Duration
}

// WithDefaults fills the unset fields of j.
func (j JWTConfig) WithDefaults() JWTConfig {
	if j.Name == "" {
		j.Name = DefaultJWTName
	}
	if j.LeewaySeconds <= 0 {
		j.LeewaySeconds = DefaultJWTLeeway.Seconds()
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
	// keyfunc returns the key lookup of one verification.
	keyfunc(ctx context.Context) jwt.Keyfunc
	// empty reports whether the source holds no key at all: a JWKS URL not fetched yet.
	empty(ctx context.Context) bool
}

type staticKeys struct{ kf jwt.Keyfunc }

func (s staticKeys) keyfunc(context.Context) jwt.Keyfunc { return s.kf }
func (s staticKeys) empty(context.Context) bool          { return false }

// newJWTVerifier builds the verifier of cfg (validated). A JWKS URL is fetched at once, through
// client (nil: http.DefaultTransport), and refreshed in the background for as long as the
// verifier is in use.
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
		// The handler that holds v has no Close, and a reload drops it with its generation, so
		// the background refresh ends when v is garbage: the cleanup cancels its context.
		ctx, cancel := context.WithCancel(context.Background())
		rk, err := newRemoteKeys(ctx, cfg.JWKSURL, client, cmp.Or(cfg.jwksRefresh, DefaultJWKSRefresh), log)
		if err != nil {
			cancel()
			return nil, err
		}
		runtime.AddCleanup(rk, func(cancel context.CancelFunc) { cancel() }, cancel)
		v.keys = rk
	default:
		return nil, errors.New("jwt: no key source: give secret_file, jwks_file or jwks_url")
	}
	return v, nil
}

// asymmetricMethods are the algorithms accepted with keys from a JWKS: never HS256, so a token
// "signed" with a public key as an HMAC secret is refused.
var asymmetricMethods = []string{jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg()}

// jwksHTTPTimeout bounds one fetch of a JWKS URL.
const jwksHTTPTimeout = 10 * time.Second

// remoteKeys is a JWKS fetched from a URL by jwkset: once when built, then every refresh
// interval in the background until the context given to newRemoteKeys ends, and when a token
// names a key id it does not hold (at most every jwksMinRefetch). A failed fetch keeps the
// previous keys.
type remoteKeys struct {
	held     jwkset.Storage  // the keys of the last successful fetch
	cached   keyfunc.Keyfunc // lookups in held, never fetching
	fetching keyfunc.Keyfunc // the same lookups, fetching the JWKS again for an unknown kid
	// gate spaces the fetches unknown kids trigger, so tokens with made-up key ids cannot make
	// the runner hammer the issuer. It refuses rather than waits: jwkset's own limiter makes a
	// lookup wait for its turn, and the bound of that wait also cuts the fetch short, so
	// jwkset's limiter is left unlimited and this one decides.
	gate *rate.Limiter
}

// newRemoteKeys fetches the JWKS at url and keeps it fresh until ctx ends. A failed first fetch
// is logged, not returned: the runner starts while the issuer is down, refuses tokens until a
// fetch succeeds, and tries again when a token names a key id (and every refresh interval).
func newRemoteKeys(ctx context.Context, url string, client *http.Client, refresh time.Duration, log zerolog.Logger) (*remoteKeys, error) {
	c := &http.Client{Transport: http.DefaultTransport}
	if client != nil {
		c = new(http.Client)
		*c = *client
		if c.Transport == nil {
			c.Transport = http.DefaultTransport
		}
	}
	// jwkset decodes the response as it arrives, without a bound.
	c.Transport = jwksTransport{base: c.Transport, max: maxJWKSBytes}
	held, err := jwkset.NewStorageFromHTTP(url, jwkset.HTTPClientStorageOptions{
		Client: c, Ctx: ctx, HTTPTimeout: jwksHTTPTimeout, RefreshInterval: refresh, NoErrorReturnFirstHTTPReq: true,
		// Only values are captured: a closure holding the remoteKeys would keep it reachable
		// from the refresh goroutine, and its cleanup would never run.
		RefreshErrorHandler: func(_ context.Context, err error) {
			log.Warn().Str("jwks_url", url).Err(err).Msg("fetching the JWT issuer's keys from jwt.jwks_url failed; " +
				"tokens signed with keys not fetched yet are refused until a fetch succeeds")
		},
	})
	if err != nil {
		return nil, fmt.Errorf("jwt.jwks_url: %w", err)
	}
	fetching, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{HTTPURLs: map[string]jwkset.Storage{url: held},
		RateLimitWaitMax: jwksHTTPTimeout, RefreshUnknownKID: rate.NewLimiter(rate.Inf, 0)})
	if err != nil {
		return nil, fmt.Errorf("jwt.jwks_url: %w", err)
	}
	r := &remoteKeys{held: held, gate: rate.NewLimiter(rate.Every(jwksMinRefetch), 1)}
	r.gate.Allow() // the fetch just made counts: the next one an unknown kid triggers waits its turn
	if r.cached, err = keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: held}); err != nil {
		return nil, fmt.Errorf("jwt.jwks_url: %w", err)
	}
	if r.fetching, err = keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: fetching}); err != nil {
		return nil, fmt.Errorf("jwt.jwks_url: %w", err)
	}
	return r, nil
}

func (r *remoteKeys) keyfunc(ctx context.Context) jwt.Keyfunc {
	cached, fetching := r.cached.KeyfuncCtx(ctx), r.fetching.KeyfuncCtx(ctx)
	return func(t *jwt.Token) (any, error) {
		key, err := cached(t)
		if !errors.Is(err, jwkset.ErrKeyNotFound) || !r.gate.Allow() {
			return key, err
		}
		// The issuer may have rotated its keys since the last fetch.
		return fetching(t)
	}
}

func (r *remoteKeys) empty(ctx context.Context) bool {
	keys, err := r.held.KeyReadAll(ctx)
	return err == nil && len(keys) == 0
}

// errJWKSTooLarge refuses a JWKS response over maxJWKSBytes.
var errJWKSTooLarge = fmt.Errorf("the JWKS is larger than %d KiB", maxJWKSBytes>>10)

// jwksTransport asks for JSON and cuts every response body at max bytes: reading past it fails
// with errJWKSTooLarge, so an oversized key set is refused, never half-read.
type jwksTransport struct {
	base http.RoundTripper
	max  int64
}

func (c jwksTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not change its caller's request
	req.Header.Set("Accept", "application/json")
	resp, err := c.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > c.max {
		resp.Body.Close()
		return nil, errJWKSTooLarge
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: c.max}
	return resp, nil
}

type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// A body of exactly max bytes ends here; one more byte is one too many.
		var one [1]byte
		n, err := b.ReadCloser.Read(one[:])
		if n > 0 {
			return 0, errJWKSTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
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
	parser := jwt.NewParser(jwt.WithValidMethods(v.methods), jwt.WithIssuer(v.cfg.Issuer), jwt.WithLeeway(time.Duration(v.cfg.LeewaySeconds*float64(time.Second))),
		jwt.WithExpirationRequired(), jwt.WithJSONNumber())
	claims := jwt.MapClaims{}
	_, err := parser.ParseWithClaims(raw, claims, v.keys.keyfunc(ctx))
	if err != nil && !errors.Is(err, jwt.ErrTokenMalformed) && v.keys.empty(ctx) {
		return tools.Principal{}, jwtError("The runner cannot fetch the keys of the token issuer",
			"Retry in a minute; if it persists, the operator should check jwt.jwks_url.")
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
		if (n == "read" || n == "write" || n == "ddl" || n == "approve") && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
