package config

import (
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/auth"
)

func TestParseTokensWithRole(t *testing.T) {
	t.Parallel()
	toks, err := ParseTokens([]string{"s3cret:with:colons-0123456789:read,write:tenant_agent;plain-secret-0123456789:read"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 2 || toks[0].Secret != "s3cret:with:colons-0123456789" || toks[0].Role != "tenant_agent" ||
		strings.Join(toks[0].Scopes, ",") != "read,write" || toks[1].Role != "" || toks[1].Secret != "plain-secret-0123456789" {
		t.Fatalf("parsed %+v", toks)
	}
	if _, err := ParseTokens([]string{"secret-0123456789abc:read:bad role"}, 0); err == nil || !strings.Contains(err.Error(), "role") {
		t.Errorf("a bad role name: %v", err)
	}
}

func TestIdentityConfigProblems(t *testing.T) {
	t.Parallel()
	dbs := map[string]DatabaseConfig{"default": {URL: "postgres://u@127.0.0.1/db"}}
	cfg := &Config{Databases: dbs,
		Tokens: []auth.Token{{Secret: "token-0123456789abcdef", Name: "jwt", Scopes: []string{"read"}, ActAsRole: "x",
			ActAsClaims: map[string]any{"sub": "forged"}}},
		JWT:      &auth.JWTConfig{Issuer: "https://auth.test/", Roles: []string{"agent"}, DefaultRole: "admin", Databases: []string{"nope"}},
		MCPOAuth: &auth.MCPOAuthConfig{Resource: "not a url"}}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("no problems found")
	}
	for _, want := range []string{"give exactly one key source", "jwt.default_role", "jwt.databases", "jwt.name",
		"act_as_role and act_as_claims apply only with act_as", "act_as_claims.sub", "mcp_oauth.resource"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q:\n%v", want, err)
		}
	}
	noJWT := &Config{Databases: dbs, MCPOAuth: &auth.MCPOAuthConfig{Resource: "https://x.test/mcp"}}
	if err := noJWT.Validate(); err == nil || !strings.Contains(err.Error(), "mcp_oauth: needs jwt") {
		t.Errorf("mcp_oauth without jwt: %v", err)
	}
	// JWT alone is enough to listen beyond loopback.
	ok := &Config{Databases: dbs, Listen: "0.0.0.0:8080",
		JWT: &auth.JWTConfig{Issuer: "https://auth.test/", Audience: "pgtools", JWKSURL: "https://auth.test/jwks", Roles: []string{"agent"}}}
	if err := ok.Validate(); err != nil {
		t.Errorf("a JWT-only config: %v", err)
	}
	if got := ok.MappedRoles()["default"]; strings.Join(got, ",") != "agent" {
		t.Errorf("mapped roles %v", got)
	}
}
