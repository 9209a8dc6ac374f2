package auth

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/approval"
)

// Token is one API token and what it may do.
type Token struct {
	// Secret is the bearer token. It never appears in logs.
	Secret string `json:"token"`
	// TokenFile is a file holding Secret (the config file's token_file), read at load.
	TokenFile string `json:"token_file,omitempty"`
	// Name is the principal name used in logs and for session ownership (default "token-N").
	Name string `json:"name"`
	// Scopes granted: "read", "write", "ddl", "approve" (decides approval requests of other
	// credentials; docs/approvals.md).
	Scopes []string `json:"scopes"`
	// Databases limits the token to these databases; empty means all.
	Databases []string `json:"databases"`
	// MaxResponseBytes lowers every database's response byte cap for this token (0: the
	// databases' caps apply).
	MaxResponseBytes int `json:"max_response_bytes"`
	// MaxEstimatedCost and MaxEstimatedRows lower every database's plan budget for this token
	// (0: the database's applies; docs/configuration.md).
	MaxEstimatedCost float64 `json:"max_estimated_cost"`
	MaxEstimatedRows int64   `json:"max_estimated_rows"`
	// DefaultFormat is the row format of this token's calls that give none ("objects", "columns"
	// or "csv"; "" for the database's).
	DefaultFormat string `json:"default_format"`
	// Tools, when set, is the only tools (wire names) the token may list and call; empty allows
	// every tool its scopes and databases permit (docs/design.md §12).
	Tools []string `json:"tools,omitempty"`
	// RequireApproval adds approval rules to every database's for this token's calls
	// (docs/approvals.md); it cannot lift the database's.
	RequireApproval []approval.Rule `json:"require_approval,omitempty"`
	// Role is the PostgreSQL role the token's calls run as (SET LOCAL ROLE; docs/design.md §11); "" runs
	// them as the runner's login role.
	Role string `json:"role"`
	// ActAs lets the token act for end users: a request with the header X-PgTools-Act-As:
	// <subject> runs as principal "<name>:<subject>" with ActAsRole and the claims
	// {"sub": subject, "via": name} plus ActAsClaims. Without it the header is refused.
	ActAs bool `json:"act_as"`
	// ActAsRole is the role of the calls made for a subject (default: Role).
	ActAsRole string `json:"act_as_role,omitempty"`
	// ActAsClaims are fixed claims added to every subject's claim set, e.g. {"app": "crm"};
	// "sub" and "via" are always the runner's.
	ActAsClaims map[string]any `json:"act_as_claims,omitempty"`
	// Origin says where the token was configured ("config file tokens[0]", "env PGTOOLS_TOKENS",
	// "--token"), for check-config and messages.
	Origin string `json:"source,omitempty"`
}

// ActAsHeader is the HTTP header naming the end user a token with act_as acts for.
const ActAsHeader = "X-PgTools-Act-As"

// ActAs is what a principal allowed to act for end users becomes for one subject. The zero
// value acts with the base principal's role and no fixed claims.
type ActAs struct {
	// Role is the subject's role ("" keeps the base principal's).
	Role string
	// Claims are fixed claims added to {"sub": subject, "via": base name}.
	Claims map[string]any
}

// Principal returns the principal that acts for subject on behalf of base: Name
// "<base>:<subject>" (so every subject owns its own sessions), base's scopes and databases, the
// role, and the claims {"sub": subject, "via": base name} merged over the fixed claims. A nil a
// means base may not act for others: not_allowed. An unusable subject is an invalid_arguments
// error that does not repeat it.
func (a *ActAs) Principal(base tools.Principal, subject string) (tools.Principal, *tools.Error) {
	if a == nil {
		return tools.Principal{}, actAsRefused(base.Name)
	}
	if !validSubject(subject) {
		return tools.Principal{}, &tools.Error{Type: tools.ErrInvalidArguments,
			Message:    "The act-as subject must be " + subjectRule,
			Suggestion: "Send the end user's id, e.g. " + ActAsHeader + ": user-42 (the task setting \"subject\" on the n8n broker)."}
	}
	claims := maps.Clone(a.Claims)
	if claims == nil {
		claims = map[string]any{}
	}
	claims["sub"], claims["via"] = subject, base.Name
	body, err := json.Marshal(claims)
	if err != nil {
		return tools.Principal{}, &tools.Error{Type: tools.ErrInternal, Message: "The act-as claims cannot be encoded",
			Suggestion: "Report it to the operator: act_as_claims must be JSON values."}
	}
	p := base
	p.Name = base.Name + ":" + subject
	p.Quota = base.QuotaOwner() // every subject counts against the token's shares first
	p.Credential = cmp.Or(base.Credential, base.Name)
	if a.Role != "" {
		p.Role = a.Role
	}
	p.Claims = body
	return p, nil
}

// MaxSubjectLen caps a subject, in bytes: the act-as subject and a JWT's sub become part of a
// principal name, which every log line, audit entry and session of the caller carries.
const MaxSubjectLen = 256

// subjectRule states validSubject's rule for messages.
var subjectRule = fmt.Sprintf("1 to %d bytes of UTF-8 without control characters, line separators or text-direction marks", MaxSubjectLen)

// validSubject reports whether s may become part of a principal name (act-as subjects and JWT
// subjects alike): 1 to MaxSubjectLen bytes of valid UTF-8 without control characters (C0, DEL,
// C1), line or paragraph separators (U+2028, U+2029) or bidirectional controls (U+202E…), all
// of which could break or disguise a log line, an audit entry or a message naming the principal.
func validSubject(s string) bool {
	if s == "" || len(s) > MaxSubjectLen || !utf8.ValidString(s) {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || unicode.Is(unicode.Bidi_Control, r)
	}) < 0
}

// actAsRefused answers an act-as request from a principal not allowed to act for others.
func actAsRefused(name string) *tools.Error {
	return &tools.Error{Type: tools.ErrNotAllowed,
		Message:    fmt.Sprintf("Principal %q may not act for other users", name),
		Suggestion: "Leave out " + ActAsHeader + " (or the subject setting), or have the operator set act_as: true on this token."}
}

// Authenticator checks bearer tokens in constant time, and JWTs when an issuer is configured.
type Authenticator struct {
	tokens []hashedToken
	open   bool         // no tokens and no JWT issuer: every caller is the local principal
	jwt    *jwtVerifier // nil: no JWTs accepted
	oauth  *oauthResource

	fingerprintOnce sync.Once
	fingerprint     string
}

type hashedToken struct {
	sum       [32]byte
	principal tools.Principal
	actAs     *ActAs // nil: may not act for others
}

// localPrincipal is the caller when no tokens are configured, which is allowed on loopback only.
var localPrincipal = tools.Principal{Name: "local", Scopes: []string{"read", "write"}}

// NewAuthenticator accepts tokens; none (and no JWT issuer, see WithIdentity) means open access
// as the local principal, which the configuration allows on loopback only.
func NewAuthenticator(tokens []Token) *Authenticator {
	a := &Authenticator{open: len(tokens) == 0}
	for _, t := range tokens {
		ht := hashedToken{sum: sha256.Sum256([]byte(t.Secret)),
			principal: tools.Principal{Name: t.Name, Scopes: t.Scopes, Databases: t.Databases, MaxResponseBytes: t.MaxResponseBytes, DefaultFormat: t.DefaultFormat, Role: t.Role,
				Tools: t.Tools, MaxEstimatedCost: t.MaxEstimatedCost, MaxEstimatedRows: t.MaxEstimatedRows, RequireApproval: t.RequireApproval}}
		if t.ActAs {
			ht.actAs = &ActAs{Role: t.ActAsRole, Claims: t.ActAsClaims}
		}
		a.tokens = append(a.tokens, ht)
	}
	return a
}

// PrincipalNames lists the principals requests can run as.
func (a *Authenticator) PrincipalNames() []string {
	if a.open {
		return []string{localPrincipal.Name}
	}
	names := make([]string, 0, len(a.tokens))
	for _, t := range a.tokens {
		names = append(names, t.principal.Name)
	}
	return names
}

// authenticate returns the principal of the request: its bearer token's (every configured token
// is compared, on equal-length digests, so timing reveals neither which token nor how much
// matched), else the verified JWT's, then the act-as subject's when the request names one. The
// error says what failed without repeating the token or any claim.
func (a *Authenticator) Authenticate(r *http.Request) (tools.Principal, *tools.Error) {
	if a.open {
		return withActAs(r, localPrincipal, nil)
	}
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		msg := "Missing or invalid API token"
		if h == "" {
			msg = "Missing API token"
		}
		return tools.Principal{}, &tools.Error{Type: tools.ErrAuthentication, Message: msg, Suggestion: a.suggestion()}
	}
	raw := strings.TrimSpace(h[len(prefix):])
	sum := sha256.Sum256([]byte(raw))
	found := -1
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], a.tokens[i].sum[:]) == 1 {
			found = i
		}
	}
	if found >= 0 {
		return withActAs(r, a.tokens[found].principal, a.tokens[found].actAs)
	}
	if a.jwt != nil && looksLikeJWT(raw) {
		p, terr := a.jwt.verify(r.Context(), raw, r.URL.Path == "/mcp")
		if terr != nil {
			return tools.Principal{}, terr
		}
		return withActAs(r, p, nil)
	}
	return tools.Principal{}, &tools.Error{Type: tools.ErrAuthentication, Message: "Missing or invalid API token", Suggestion: a.suggestion()}
}

func (a *Authenticator) suggestion() string {
	if a.jwt != nil {
		return "Send the header Authorization: Bearer <token> with a token configured on the runner or a JWT from its issuer."
	}
	return "Send the header Authorization: Bearer <token> with a token configured on the runner."
}

// withActAs applies the request's act-as header to p: refused (not_allowed) when p may not act
// for others (act nil).
func withActAs(r *http.Request, p tools.Principal, act *ActAs) (tools.Principal, *tools.Error) {
	vals, ok := r.Header[http.CanonicalHeaderKey(ActAsHeader)]
	if !ok {
		return p, nil
	}
	if act == nil {
		return tools.Principal{}, actAsRefused(p.Name)
	}
	if len(vals) != 1 {
		return tools.Principal{}, &tools.Error{Type: tools.ErrInvalidArguments, Message: "The request names more than one act-as subject",
			Suggestion: "Send " + ActAsHeader + " once."}
	}
	return act.Principal(p, strings.TrimSpace(vals[0]))
}

// Open reports whether every caller is the local principal (no tokens, no JWT issuer).
func (a *Authenticator) Open() bool { return a.open }

// RegisterOAuth serves the OAuth protected-resource metadata on mux when mcp_oauth is set.
func (a *Authenticator) RegisterOAuth(mux *http.ServeMux) { a.oauth.register(mux) }

// Fingerprint identifies the credentials a accepts: the same tokens (their secrets' digests,
// principals and act-as grants) and the same JWT acceptance give the same fingerprint. A sign-in
// kept beyond one configuration (the approvals page's, shared by a fleet) holds only while its
// fingerprint is the current one, so a reload that changes the tokens signs everyone out.
// It is computed once, at its first use (after WithIdentity).
func (a *Authenticator) Fingerprint() string {
	a.fingerprintOnce.Do(func() { a.fingerprint = a.computeFingerprint() })
	return a.fingerprint
}

func (a *Authenticator) computeFingerprint() string {
	h := sha256.New()
	for _, t := range a.tokens {
		h.Write(t.sum[:])
		p, _ := json.Marshal(t.principal)
		h.Write(p)
		act, _ := json.Marshal(t.actAs)
		h.Write(act)
	}
	fmt.Fprintf(h, "open=%t jwt=%t", a.open, a.jwt != nil)
	return hex.EncodeToString(h.Sum(nil)[:16])
}
