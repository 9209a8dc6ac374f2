package tools

import (
	"strings"
	"testing"
)

// TestGrantWords: for every Grant, each refusal for a missing scope or a missing DDL grant names
// the fix that principal can act on (a token, or pgtools mcp's --scopes with the scopes it
// already holds) and never the other one.
func TestGrantWords(t *testing.T) {
	t.Parallel()
	type refusal struct {
		name    string
		policy  Policy
		scopes  []string
		tool    string
		args    string
		message string           // in the error
		fix     map[Grant]string // in the suggestion, per grant
		not     map[Grant]string // never in the whole error, per grant
	}
	other := map[Grant]string{GrantMCPFlags: "token", GrantToken: "--scopes"} // the other grant's fix
	ddl := `{"sql":"create table scratch (i int)","mode":"write","autocommit":true}`
	cases := []refusal{
		{name: "tool scope", scopes: []string{"read"}, tool: "insert_data", args: `{"table":"items","row":{"sku":"x"},"autocommit":true}`,
			message: `lacks the "write" scope that insert_data needs`,
			fix:     map[Grant]string{GrantToken: "Ask the operator for a token with the write scope.", GrantMCPFlags: "Restart pgtools mcp with --scopes read,write "}},
		{name: "write mode", scopes: []string{"read"}, tool: "execute_sql", args: `{"sql":"delete from items","mode":"write","autocommit":true}`,
			message: `lacks the "write" scope that execute_sql with mode "write" needs`,
			fix:     map[Grant]string{GrantToken: `Use mode "read", or ask the operator for a token with the write scope.`, GrantMCPFlags: `Use mode "read", or restart pgtools mcp with --scopes read,write `}},
		{name: "read-write session", scopes: []string{"read"}, tool: "pg_tx", args: `{"action":"begin"}`,
			message: `lacks the "write" scope that a read-write session needs`,
			fix:     map[Grant]string{GrantToken: `Begin with "read_only": true, or ask the operator for a token`, GrantMCPFlags: `Begin with "read_only": true, or restart pgtools mcp with --scopes read,write `}},
		{name: "read scope", scopes: []string{"write"}, tool: "select_query", args: `{"table":"orders"}`,
			message: `lacks the "read" scope that select_query needs`,
			fix:     map[Grant]string{GrantToken: "a token with the read scope", GrantMCPFlags: "--scopes write,read "}},
		{name: "ddl, neither", scopes: []string{"read", "write"}, tool: "execute_sql", args: ddl, message: "DDL is not allowed here",
			fix: map[Grant]string{GrantToken: "enable allow_ddl for this database and give your token the ddl scope",
				GrantMCPFlags: "allow DDL on this database (--allow-ddl for the default one, or allow_ddl in the config file) and restart pgtools mcp with --scopes read,write,ddl "}},
		{name: "ddl, policy only", policy: Policy{AllowDDL: true}, scopes: []string{"read", "write"}, tool: "execute_sql", args: ddl, message: "DDL is not allowed here",
			fix: map[Grant]string{GrantToken: "or ask the operator for a token with the ddl scope.", GrantMCPFlags: "or restart pgtools mcp with --scopes read,write,ddl "},
			not: map[Grant]string{GrantToken: "allow_ddl", GrantMCPFlags: "allow_ddl"}},
		{name: "ddl, scope only", scopes: []string{"read", "write", "ddl"}, tool: "execute_sql", args: ddl, message: "DDL is not allowed here",
			fix: map[Grant]string{GrantToken: "or ask the operator to enable allow_ddl for this database.", GrantMCPFlags: "or allow DDL on this database (--allow-ddl for the default one, or allow_ddl in the config file)."},
			not: map[Grant]string{GrantToken: "ddl scope", GrantMCPFlags: "--scopes"}},
		{name: "ddl in pg_transaction", scopes: []string{"read", "write"}, tool: "pg_transaction", args: `{"operations":[{"sql":"create table scratch (i int)"}]}`,
			message: "DDL is not allowed here", fix: map[Grant]string{GrantToken: "give your token the ddl scope", GrantMCPFlags: "--scopes read,write,ddl "}},
	}
	for grant := range grantWords {
		for _, c := range cases {
			t.Run(string(grant)+"/"+c.name, func(t *testing.T) {
				t.Parallel()
				b, _ := newWriteBundle(t, c.policy)
				b.db.Exec(t, "GRANT CREATE ON SCHEMA public TO "+quoteIdent(b.db.RoleName("agent")))
				_, e := b.callAs(t, Principal{Name: "grantee", Scopes: c.scopes, Grant: grant}, c.tool, c.args)
				if e == nil || e.Type != ErrNotAllowed {
					t.Fatalf("got %v, want not_allowed", e)
				}
				if !strings.Contains(e.Message, c.message) || !strings.Contains(e.Suggestion, c.fix[grant]) {
					t.Errorf("error %q, suggestion %q; want %q and %q", e.Message, e.Suggestion, c.message, c.fix[grant])
				}
				whole := e.Message + " " + e.Suggestion
				for _, bad := range []string{other[grant], c.not[grant]} {
					if bad != "" && strings.Contains(whole, bad) {
						t.Errorf("the error names %q: %s", bad, whole)
					}
				}
			})
		}
	}
	// Every Grant constant has words; a value without any reads as a token's.
	for _, g := range []Grant{GrantToken, GrantMCPFlags} {
		if _, ok := grantWords[g]; !ok {
			t.Errorf("grant %q has no words", g)
		}
	}
	if e := (Principal{Scopes: []string{"read"}, Grant: "unheard-of"}).lacksScope("write", "insert_data", ""); !strings.Contains(e.Suggestion, "token") {
		t.Errorf("an unknown grant: %s", e.Suggestion)
	}
}
