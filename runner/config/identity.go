package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
)

// roleName is a role name pgtools accepts in config: a plain identifier, so messages and
// check-config can show it as is (the SQL quotes it anyway).
var roleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]{0,62}$`)

func validRoleName(s string) bool { return roleName.MatchString(s) }

// identityProblems checks the identity settings (docs/design.md §11): token roles, act_as, jwt and
// mcp_oauth. One line per problem.
func (c *Config) identityProblems() []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for _, t := range c.Tokens {
		where := tokenWhere(t)
		if t.Role != "" && !validRoleName(t.Role) {
			add("%s: role %q is not a plain PostgreSQL role name (letters, digits, _ and $, at most 63 bytes)", where, t.Role)
		}
		if t.ActAsRole != "" && !validRoleName(t.ActAsRole) {
			add("%s: act_as_role %q is not a plain PostgreSQL role name (letters, digits, _ and $, at most 63 bytes)", where, t.ActAsRole)
		}
		if !t.ActAs && (t.ActAsRole != "" || len(t.ActAsClaims) > 0) {
			add("%s: act_as_role and act_as_claims apply only with act_as: true; set it or remove them", where)
		}
		for _, k := range []string{"sub", "via"} {
			if _, ok := t.ActAsClaims[k]; ok {
				add("%s: act_as_claims.%s is set by the runner (the subject and the token name); remove it", where, k)
			}
		}
	}
	if c.JWT != nil {
		for _, r := range c.JWT.Roles {
			if !validRoleName(r) {
				add("jwt.roles: %q is not a plain PostgreSQL role name (letters, digits, _ and $, at most 63 bytes)", r)
			}
		}
		problems = append(problems, validateJWT(c.JWT, c)...)
	}
	if c.MCPOAuth != nil {
		problems = append(problems, validateMCPOAuth(c.MCPOAuth, c)...)
	}
	return problems
}

// MappedRoles lists, per database, the PostgreSQL roles the configured principals may act as:
// token roles, act_as roles, the JWT allow-list, each on the databases its principal may use,
// and the n8n broker's role on every database when brokers are joined. Roles and databases are
// sorted.
func (c *Config) MappedRoles() map[string][]string {
	out := map[string][]string{}
	addRole := func(role string, dbs []string) {
		if role == "" {
			return
		}
		if len(dbs) == 0 {
			dbs = slices.Sorted(maps.Keys(c.Databases))
		}
		for _, db := range dbs {
			if !slices.Contains(out[db], role) {
				out[db] = append(out[db], role)
			}
		}
	}
	for _, t := range c.Tokens {
		addRole(t.Role, t.Databases)
		if t.ActAs {
			addRole(t.ActAsRole, t.Databases)
		}
	}
	if c.JWT != nil {
		for _, r := range c.JWT.Roles {
			addRole(r, c.JWT.Databases)
		}
	}
	if c.N8N.Joins() {
		addRole(c.N8N.Role, nil)
	}
	for _, roles := range out {
		sort.Strings(roles)
	}
	return out
}
