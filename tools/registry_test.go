package tools

import (
	"context"
	"strings"
	"testing"
)

// TestScopesAndDatabases: a token's scopes and database list are enforced before anything
// runs, and a refusal never names a database the caller may not use.
func TestScopesAndDatabases(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	secret := NewDatabase("payroll_secret", b.tdb.Pool, Policy{})
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{b.tdb, secret}})
	if err != nil {
		t.Fatal(err)
	}
	writeOnly := Principal{Name: "w", Scopes: []string{"write"}}
	defaultOnly := Principal{Name: "d", Scopes: []string{"read", "write"}, Databases: []string{"default"}}
	noScopes := Principal{Name: "n"}
	cases := []struct {
		name  string
		p     Principal
		tool  string
		args  string
		check func(t *testing.T, e *Error)
	}{
		{"read tool without read scope", writeOnly, "select_query", `{"table":"orders"}`, func(t *testing.T, e *Error) {
			if !strings.Contains(e.Message, `"read"`) || !strings.Contains(e.Suggestion, "read scope") {
				t.Fatalf("does not name the missing scope: %s", errorJSON(t, e))
			}
		}},
		{"describe without read scope", writeOnly, "describe_schema", `{}`, nil},
		{"execute_sql without read scope", writeOnly, "execute_sql", `{"sql":"select 1"}`, nil},
		{"no scopes at all", noScopes, "select_query", `{"table":"orders"}`, nil},
		{"unknown database", defaultOnly, "select_query", `{"table":"orders","database":"other"}`, nil},
		{"database not granted", defaultOnly, "select_query", `{"table":"orders","database":"payroll_secret"}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, _, e := reg.Call(context.Background(), c.p, c.tool, []byte(c.args))
			if e == nil {
				t.Fatalf("succeeded: %+v", res)
			}
			if e.Type != ErrNotAllowed || e.Suggestion == "" {
				t.Fatalf("got %s", errorJSON(t, e))
			}
			if c.p.Name == defaultOnly.Name {
				if !strings.Contains(e.Suggestion, "default") {
					t.Fatalf("suggestion does not list the allowed database: %s", errorJSON(t, e))
				}
				// The caller named payroll_secret itself in one case; the suggestion must not
				// confirm or list it.
				if strings.Contains(e.Suggestion, "payroll_secret") || (!strings.Contains(c.args, "payroll_secret") && strings.Contains(errorJSON(t, e), "payroll_secret")) {
					t.Fatalf("error reveals a database the caller may not use: %s", errorJSON(t, e))
				}
			}
			if c.check != nil {
				c.check(t, e)
			}
		})
	}
	t.Run("the same caller reaches its own database", func(t *testing.T) {
		t.Parallel()
		if _, _, e := reg.Call(context.Background(), defaultOnly, "select_query", []byte(`{"table":"orders","limit":1}`)); e != nil {
			t.Fatal(errorJSON(t, e))
		}
	})
	t.Run("unknown and not granted look alike", func(t *testing.T) {
		t.Parallel()
		_, _, e1 := reg.Call(context.Background(), defaultOnly, "select_query", []byte(`{"table":"orders","database":"zzz_other"}`))
		_, _, e2 := reg.Call(context.Background(), defaultOnly, "select_query", []byte(`{"table":"orders","database":"payroll_secret"}`))
		m1 := strings.ReplaceAll(errorJSON(t, e1), "zzz_other", "X")
		m2 := strings.ReplaceAll(errorJSON(t, e2), "payroll_secret", "X")
		if m1 != m2 {
			t.Fatalf("an existing database can be told from a missing one:\n%s\n%s", m1, m2)
		}
	})
}

// TestUnknownTool: an unknown tool name is its own category and lists the tools.
func TestUnknownTool(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	for _, name := range []string{"drop_database", "", "SELECT_QUERY"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, _, e := b.reg.Call(context.Background(), testPrincipal, name, []byte(`{}`))
			if e == nil || e.Type != ErrUnknownTool {
				t.Fatalf("got %v", e)
			}
			for _, tool := range []string{"select_query", "describe_schema", "execute_sql"} {
				if !strings.Contains(e.Suggestion, tool) {
					t.Fatalf("suggestion does not list %s: %s", tool, e.Suggestion)
				}
			}
		})
	}
}

// TestInvalidArgumentsListEveryPath: schema validation names every failing argument at once, and
// an unknown property is named with the allowed ones.
func TestInvalidArgumentsListEveryPath(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	cases := []struct {
		name, tool, args string
		inMessage        []string
		inSuggestion     []string
	}{
		{"unknown property", "select_query", `{"table":"orders","colums":"id"}`,
			[]string{"colums"}, []string{`"colums"`, "columns, database, format, limit, offset, order_by, page_token, params, session_id, table, where"}},
		{"missing table and bad limit", "select_query", `{"limit":0}`,
			[]string{"'table'", "limit"}, nil},
		{"three failures", "select_query", `{"table":"","limit":"ten","offset":-1}`,
			[]string{"table", "limit", "offset"}, nil},
		{"wrong type", "execute_sql", `{"sql":42}`,
			[]string{"sql"}, nil},
		{"bad mode", "execute_sql", `{"sql":"select 1","mode":"admin"}`,
			[]string{"mode"}, nil},
		{"not an object", "select_query", `["orders"]`,
			nil, nil},
		{"not JSON", "select_query", `{"table":`,
			[]string{"not valid JSON"}, []string{"JSON object"}},
		{"bad session id", "select_query", `{"table":"orders","session_id":"abc"}`,
			[]string{"session_id"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := b.mustFail(t, ErrInvalidArguments, c.tool, c.args)
			assertErrorSays(t, e, c.inMessage, c.inSuggestion)
		})
	}
}
