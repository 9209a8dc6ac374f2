package tools

import (
	"slices"
	"strings"
)

// grantWords is how the refusals of each Grant read. Every Grant has an entry (TestGrantWords
// walks them); a value without one reads as GrantToken, the wording that promises least.
var grantWords = map[Grant]struct {
	holder string                                 // whose scopes fall short, opening a message
	scope  func(p Principal, scope string) string // how p gets scope: a clause, lower case
	ddl    func(p Principal, policy bool) string  // how p gets DDL on a database whose policy allows it or not
}{
	GrantToken: {
		holder: "Your token",
		scope: func(_ Principal, scope string) string {
			return "ask the operator for a token with the " + scope + " scope"
		},
		ddl: func(p Principal, policy bool) string {
			switch {
			case policy:
				return "ask the operator for a token with the ddl scope"
			case p.Can("ddl"):
				return "ask the operator to enable allow_ddl for this database"
			}
			return "ask the operator to enable allow_ddl for this database and give your token the ddl scope"
		},
	},
	GrantMCPFlags: {
		holder: "This pgtools mcp server",
		scope:  mcpScopesFlag,
		ddl: func(p Principal, policy bool) string {
			var steps []string
			if !policy {
				steps = append(steps, "allow DDL on this database (--allow-ddl for the default one, or allow_ddl in the config file)")
			}
			if !p.Can("ddl") {
				steps = append(steps, mcpScopesFlag(p, "ddl"))
			}
			return strings.Join(steps, " and ")
		},
	},
}

// mcpScopesFlag is the pgtools mcp command line that adds scope to p's: the flag replaces the
// list, so it names the scopes p holds too.
func mcpScopesFlag(p Principal, scope string) string {
	scopes := slices.Clone(p.Scopes)
	if !slices.Contains(scopes, scope) {
		scopes = append(scopes, scope)
	}
	return "restart pgtools mcp with --scopes " + strings.Join(scopes, ",") + " (the args in the MCP client's configuration)"
}

func (p Principal) words() (holder string, scope func(Principal, string) string, ddl func(Principal, bool) string) {
	w, ok := grantWords[p.Grant]
	if !ok {
		w = grantWords[GrantToken]
	}
	return w.holder, w.scope, w.ddl
}

// lacksScope is the refusal of a call that needs scope, which p does not hold: what names the
// call, and alt, when not empty, is the way to do without the scope ("Use mode \"read\"").
func (p Principal) lacksScope(scope, what, alt string) *Error {
	holder, get, _ := p.words()
	fix := get(p, scope)
	if alt != "" {
		fix = alt + ", or " + fix
	} else {
		fix = strings.ToUpper(fix[:1]) + fix[1:]
	}
	return errorf(ErrNotAllowed, fix+".", "%s lacks the %q scope that %s needs", holder, scope, what)
}

// ddlFix is the suggestion for a statement refused as DDL on a database whose policy allows DDL
// or not: what p lacks, said the way p can get it.
func (p Principal) ddlFix(policy bool) string {
	_, _, ddl := p.words()
	return "Use INSERT, UPDATE, DELETE or MERGE, or " + ddl(p, policy) + "."
}
