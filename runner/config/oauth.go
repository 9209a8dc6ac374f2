package config

import (
	"net/url"

	"github.com/pgtools/pgtools/runner/auth"
)

// validateMCPOAuth reports the problems of the mcp_oauth settings m, one line each.
func validateMCPOAuth(m *auth.MCPOAuthConfig, c *Config) []string {
	var problems []string
	if c.JWT == nil {
		problems = append(problems, "mcp_oauth: needs jwt settings to verify access tokens: add a jwt object naming the authorization server's issuer and keys")
	}
	u, err := url.Parse(m.Resource)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		problems = append(problems, "mcp_oauth.resource: must be the MCP endpoint's public http(s) URL without query or fragment, e.g. https://pgtools.example.com/mcp")
	}
	return problems
}
