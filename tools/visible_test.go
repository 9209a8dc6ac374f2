package tools

import (
	"context"
	"slices"
	"testing"
)

// TestToolsFor checks what each caller is shown (docs/design.md §12): scopes, databases, the databases'
// disabled_tools and read-only policy, and the token's allow-list.
func TestToolsFor(t *testing.T) {
	t.Parallel()
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{
		NewDatabase("default", nil, Policy{DisabledTools: []string{"execute_sql"}}),
		NewDatabase("reports", nil, Policy{ReadOnly: true, DisabledTools: []string{"execute_sql", "pg_tx"}}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"select_query", "insert_data", "update_data", "delete_data", "execute_sql", "describe_schema", "explain_query", "pg_tx", "pg_transaction"}
	cases := []struct {
		name string
		p    Principal
		want []string
	}{
		{"read and write, every database", Principal{Scopes: []string{"read", "write"}},
			[]string{"select_query", "insert_data", "update_data", "delete_data", "describe_schema", "explain_query", "pg_tx", "pg_transaction"}},
		{"read only: no write tool", Principal{Scopes: []string{"read"}},
			[]string{"select_query", "describe_schema", "explain_query", "pg_tx"}},
		{"write only", Principal{Scopes: []string{"write"}},
			[]string{"insert_data", "update_data", "delete_data", "pg_transaction"}},
		{"a read-only database takes no write tool", Principal{Scopes: []string{"read", "write"}, Databases: []string{"reports"}},
			[]string{"select_query", "describe_schema", "explain_query"}},
		{"allow-list", Principal{Scopes: []string{"read", "write"}, Tools: []string{"select_query"}},
			[]string{"select_query"}},
		{"allow-list within scopes", Principal{Scopes: []string{"read"}, Tools: []string{"select_query", "delete_data"}},
			[]string{"select_query"}},
		{"no database", Principal{Scopes: []string{"read"}, Databases: []string{"elsewhere"}}, []string{}},
	}
	for _, c := range cases {
		var got []string
		for _, info := range reg.ToolsFor(c.p) {
			got = append(got, info.Name)
		}
		if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// Without a policy that hides anything, a principal with every scope sees every tool.
	open, err := NewRegistry(context.Background(), Options{Databases: []*Database{NewDatabase("default", nil, Policy{})}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, info := range open.ToolsFor(Principal{Scopes: []string{"read", "write"}}) {
		got = append(got, info.Name)
	}
	if !slices.Equal(got, all) {
		t.Errorf("every tool: %v", got)
	}
}

// TestToolAllowList checks that a tool left out of the token's allow-list is refused when called
// anyway, and the tools it names still run.
func TestToolAllowList(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	p := Principal{Name: "narrow", Scopes: []string{"read"}, Tools: []string{"select_query"}}
	if _, e := b.callAs(t, p, "select_query", `{"table":"orders","limit":1}`); e != nil {
		t.Fatalf("select_query: %v", e)
	}
	_, e := b.callAs(t, p, "execute_sql", `{"sql":"select 1"}`)
	if e == nil || e.Type != ErrNotAllowed || e.Suggestion != "Use one of the tools available to you: select_query." {
		t.Fatalf("execute_sql outside the allow-list: %+v", e)
	}
}
