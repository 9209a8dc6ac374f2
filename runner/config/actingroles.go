package config

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// RoleUse is a PostgreSQL role callers may act as on one database.
type RoleUse struct {
	// Role is the role's name; "" is the runner's login role (a caller without a role of its own).
	Role string
	// Shared is true when many subjects act as the role (an act_as token, JWTs), so that what
	// one of them runs must stay hidden from the others.
	Shared bool
	// By names who acts as it, for messages: token names, "jwt", "the MCP client".
	By []string
}

// ActingRoles lists, per configured database, every role a caller may act as: each token's
// role (the login role for a token without one), an act_as token's subjects' role, the roles
// JWTs may pick, the n8n broker principal's role when brokers are joined, and the login role for
// open access (no tokens and no JWT). extra adds callers the configuration does not name.
// Sorted by role.
func (c *Config) ActingRoles(extra ...ExtraCaller) map[string][]RoleUse {
	out := map[string][]RoleUse{}
	add := func(role string, dbs []string, shared bool, by string) {
		if len(dbs) == 0 {
			dbs = slices.Sorted(maps.Keys(c.Databases))
		}
		for _, db := range dbs {
			uses := out[db]
			i := slices.IndexFunc(uses, func(u RoleUse) bool { return u.Role == role })
			if i < 0 {
				uses = append(uses, RoleUse{Role: role})
				i = len(uses) - 1
			}
			uses[i].Shared = uses[i].Shared || shared
			if !slices.Contains(uses[i].By, by) {
				uses[i].By = append(uses[i].By, by)
			}
			out[db] = uses
		}
	}
	for _, t := range c.Tokens {
		add(t.Role, t.Databases, false, "token "+t.Name)
		if t.ActAs {
			add(cmp.Or(t.ActAsRole, t.Role), t.Databases, true, "token "+t.Name+" (act_as)")
		}
	}
	if c.JWT != nil {
		for _, r := range c.JWT.Roles {
			add(r, c.JWT.Databases, true, "jwt")
		}
		if r := c.JWT.DefaultRole; r != "" {
			add(r, c.JWT.Databases, true, "jwt")
		}
	}
	if len(c.Tokens) == 0 && c.JWT == nil {
		add("", nil, false, "open access without tokens")
	}
	for _, e := range append(c.N8N.callers(), extra...) {
		add(e.Role, nil, e.Shared, e.Name)
	}
	return sortUses(out)
}

// LoginRoleUses is the one caller of pgtools mcp, who runs as the login role on every database.
func (c *Config) LoginRoleUses(by string) map[string][]RoleUse {
	out := map[string][]RoleUse{}
	for _, db := range slices.Sorted(maps.Keys(c.Databases)) {
		out[db] = []RoleUse{{By: []string{by}}}
	}
	return out
}

func sortUses(out map[string][]RoleUse) map[string][]RoleUse {
	for _, uses := range out {
		slices.SortFunc(uses, func(a, b RoleUse) int { return strings.Compare(a.Role, b.Role) })
	}
	return out
}

// ExtraCaller is a caller outside the config's tokens and JWTs that uses every database, such
// as the n8n broker principal.
type ExtraCaller struct {
	// Name names it in messages.
	Name string
	// Role is its role, "" for the login role.
	Role string
	// Shared is true when it acts for many subjects (the broker with n8n.act_as).
	Shared bool
}
