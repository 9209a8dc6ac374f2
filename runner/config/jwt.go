package config

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/MicahParks/keyfunc/v3"
	"github.com/pgtools/pgtools/runner/auth"
)

// readJWTFiles reads the secret and key set files j names into j.Secret and j.JWKS.
func readJWTFiles(j *auth.JWTConfig) []string {
	if j.SecretFile != "" {
		s, err := readSecretFile(j.SecretFile)
		if err != nil {
			return []string{"jwt.secret_file: " + err.Error()}
		}
		if len(s) < 32 {
			return []string{fmt.Sprintf("jwt.secret_file: the HS256 secret in %s is %d bytes long; use at least 32 (openssl rand -hex 32)", j.SecretFile, len(s))}
		}
		j.Secret = []byte(s)
	}
	if j.JWKSFile != "" {
		raw, err := os.ReadFile(j.JWKSFile)
		if err != nil {
			return []string{fmt.Sprintf("jwt.jwks_file: cannot read %s: %v", j.JWKSFile, unwrapPathError(err))}
		}
		j.JWKS = raw
	}
	return nil
}

// validateJWT reports the problems of the jwt settings j that span fields, one line each.
func validateJWT(j *auth.JWTConfig, c *Config) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	sources := 0
	for _, set := range []bool{len(j.Secret) > 0, len(j.JWKS) > 0, j.JWKSURL != ""} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		add("jwt: give exactly one key source: secret_file (HS256), jwks_file or jwks_url (RS256, ES256)")
	}
	if len(j.JWKS) > 0 {
		if _, err := keyfunc.NewJWKSetJSON(j.JWKS); err != nil {
			add("jwt.jwks_file: %s is not a JSON Web Key Set ({\"keys\": [...]}): %v", cmp.Or(j.JWKSFile, "the key set"), err)
		}
	}
	if j.Issuer == "" {
		add("jwt.issuer: missing; give the issuer every token's iss claim names, e.g. https://auth.example.com/")
	}
	if j.Audience == "" && c.MCPOAuth == nil {
		add("jwt.audience: missing; give the aud claim tokens for this runner carry, e.g. pgtools (or configure mcp_oauth, whose resource is then the audience)")
	}
	if j.JWKSURL != "" && !strings.HasPrefix(j.JWKSURL, "https://") && !strings.HasPrefix(j.JWKSURL, "http://") {
		add("jwt.jwks_url: must be an http(s) URL, e.g. https://auth.example.com/.well-known/jwks.json")
	}
	if len(j.Roles) == 0 {
		add("jwt.roles: list the PostgreSQL roles tokens may name in their %q claim", j.RoleClaim)
	}
	if j.DefaultRole != "" && !slices.Contains(j.Roles, j.DefaultRole) {
		add("jwt.default_role: %q is not in jwt.roles; add it there or pick one of: %s", j.DefaultRole, describeNames(j.Roles))
	}
	for _, db := range j.Databases {
		if _, ok := c.Databases[db]; !ok {
			add("jwt.databases: names database %q, which is not configured (configured: %s)", db, strings.Join(slices.Sorted(maps.Keys(c.Databases)), ", "))
		}
	}
	for _, t := range c.Tokens {
		if t.Name == j.Name {
			add("jwt.name: %q is also %s's name; principals of the two would share sessions: set jwt.name to another prefix", j.Name, tokenWhere(t))
		}
	}
	return problems
}

func describeNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
