package runner

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/pgtools/pgtools/tools"
)

// Token is one API token and what it may do.
type Token struct {
	// Secret is the bearer token. It never appears in logs.
	Secret string
	// Name is the principal name used in logs and for session ownership (default "token-N").
	Name string
	// Scopes granted: "read", "write", "ddl".
	Scopes []string
	// Databases limits the token to these databases; empty means all.
	Databases []string
	// MaxResponseBytes lowers every database's response byte cap for this token (0: the
	// databases' caps apply).
	MaxResponseBytes int
	// Origin says where the token was configured ("config file tokens[0]", "env PGTOOLS_TOKENS",
	// "--token"), for check-config and messages.
	Origin string
}

// authenticator checks bearer tokens in constant time.
type authenticator struct {
	tokens []hashedToken
	open   bool // no tokens configured: every caller is the local principal
}

type hashedToken struct {
	sum       [32]byte
	principal tools.Principal
}

// localPrincipal is the caller when no tokens are configured, which is allowed on loopback only.
var localPrincipal = tools.Principal{Name: "local", Scopes: []string{"read", "write"}}

func newAuthenticator(tokens []Token) *authenticator {
	a := &authenticator{open: len(tokens) == 0}
	for _, t := range tokens {
		a.tokens = append(a.tokens, hashedToken{sum: sha256.Sum256([]byte(t.Secret)),
			principal: tools.Principal{Name: t.Name, Scopes: t.Scopes, Databases: t.Databases, MaxResponseBytes: t.MaxResponseBytes}})
	}
	return a
}

// principalNames lists the principals requests can run as.
func (a *authenticator) principalNames() []string {
	if a.open {
		return []string{localPrincipal.Name}
	}
	names := make([]string, 0, len(a.tokens))
	for _, t := range a.tokens {
		names = append(names, t.principal.Name)
	}
	return names
}

// authenticate returns the principal of the request's bearer token. Every configured token is
// compared (on equal-length digests), so timing reveals neither which token nor how much matched.
func (a *authenticator) authenticate(r *http.Request) (tools.Principal, bool) {
	if a.open {
		return localPrincipal, true
	}
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return tools.Principal{}, false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(h[len(prefix):])))
	found := -1
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], a.tokens[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return tools.Principal{}, false
	}
	return a.tokens[found].principal, true
}
