package auth

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/rs/zerolog"
)

// MCPOAuthConfig makes /mcp an OAuth 2.1 resource server (MCP authorization, RFC 9728): the
// runner publishes its protected-resource metadata, a 401 from /mcp points clients at it, and
// access tokens are JWTs verified with the jwt settings and Resource as their audience.
type MCPOAuthConfig struct {
	// Resource is the MCP endpoint's public URL, e.g. https://pgtools.example.com/mcp: the
	// audience of access tokens on /mcp.
	Resource string `json:"resource"`
	// AuthorizationServers are the issuers clients get tokens from (default: jwt.issuer).
	AuthorizationServers []string `json:"authorization_servers"`
	// ScopesSupported are the scopes published in the metadata (default: read, write).
	ScopesSupported []string `json:"scopes_supported"`
}

// WithDefaults fills the unset fields of m from the JWT issuer.
func (m MCPOAuthConfig) WithDefaults(j *JWTConfig) MCPOAuthConfig {
	if len(m.AuthorizationServers) == 0 && j != nil && j.Issuer != "" {
		m.AuthorizationServers = []string{j.Issuer}
	}
	if len(m.ScopesSupported) == 0 {
		m.ScopesSupported = []string{"read", "write"}
	}
	return m
}

// oauthResource serves the protected-resource metadata and builds the 401 challenge of /mcp.
type oauthResource struct {
	meta        *oauthex.ProtectedResourceMetadata
	metadataURL string // where clients fetch meta, named in the challenge
	paths       []string
}

// newOAuthResource returns nil when cfg is nil.
func newOAuthResource(cfg *MCPOAuthConfig) *oauthResource {
	if cfg == nil {
		return nil
	}
	u, err := url.Parse(cfg.Resource)
	if err != nil {
		return nil // Validate refused it
	}
	// RFC 9728 §3.1: the well-known path, with the resource's path appended when it has one.
	const wellKnown = "/.well-known/oauth-protected-resource"
	suffix := strings.TrimSuffix(u.Path, "/")
	o := &oauthResource{paths: []string{wellKnown}, meta: &oauthex.ProtectedResourceMetadata{
		Resource: cfg.Resource, AuthorizationServers: cfg.AuthorizationServers, ScopesSupported: cfg.ScopesSupported,
		BearerMethodsSupported: []string{"header"}, ResourceName: "pgtools"}}
	if suffix != "" {
		o.paths = append(o.paths, wellKnown+suffix)
	}
	o.metadataURL = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: wellKnown + suffix}).String()
	return o
}

// register adds the metadata endpoints to mux (the go-sdk's handler: GET, CORS for browser
// clients).
func (o *oauthResource) register(mux *http.ServeMux) {
	if o == nil {
		return
	}
	h := auth.ProtectedResourceMetadataHandler(o.meta)
	for _, p := range o.paths {
		mux.Handle(p, h)
	}
}

// challenge is the WWW-Authenticate value of a 401 for r: on /mcp with OAuth configured it names
// the resource metadata (RFC 9728 §5.1), so MCP clients can find the authorization server.
func (a *Authenticator) Challenge(r *http.Request) string {
	if a.oauth != nil && r.URL.Path == "/mcp" {
		return fmt.Sprintf(`Bearer resource_metadata=%q`, a.oauth.metadataURL)
	}
	return `Bearer realm="pgtools"`
}

// withIdentity adds JWT verification and the MCP OAuth resource to a. A verifier that cannot be
// built (Validate checks what could fail) leaves JWTs refused, logged once.
func (a *Authenticator) WithIdentity(j *JWTConfig, m *MCPOAuthConfig, log zerolog.Logger) {
	if j == nil {
		return
	}
	a.open = false
	var resource string
	if m != nil {
		resource = m.Resource
		a.oauth = newOAuthResource(m)
	}
	v, err := newJWTVerifier(*j, resource, nil, log)
	if err != nil {
		log.Error().Err(err).Msg("JWT bearer tokens are refused: the jwt settings are unusable")
		return
	}
	a.jwt = v
}
