package tools

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestIdentifierInjectionRefused: identifiers in arguments are resolved against the catalog
// before any SQL is built, so text that is not exactly a table or column never reaches
// PostgreSQL, and the fixture tables survive every attempt.
func TestIdentifierInjectionRefused(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	before := takeFixtureState(t, b)
	badName := []ErrorType{ErrInvalidTable, ErrInvalidArguments}
	col := []ErrorType{ErrInvalidColumn}
	order := []ErrorType{ErrInvalidColumn, ErrInvalidArguments}
	cases := []struct {
		name string
		args map[string]any
		want []ErrorType
	}{
		{"table with statement", map[string]any{"table": "orders; drop table customers"}, badName},
		{"table with line comment", map[string]any{"table": "orders--"}, badName},
		{"table with block comment", map[string]any{"table": "orders/*x*/"}, badName},
		{"quoted table then statement", map[string]any{"table": `"orders"; select 1`}, badName},
		{"quoted table with quote inside", map[string]any{"table": `"orders""; drop table customers; --"`}, badName},
		{"homoglyph table", map[string]any{"table": "ordеrs"}, badName}, // Cyrillic е
		{"system catalog", map[string]any{"table": "pg_catalog.pg_authid"}, badName},
		{"information schema", map[string]any{"table": "information_schema.tables"}, badName},
		{"lone dot", map[string]any{"table": "."}, badName},
		{"three parts", map[string]any{"table": "a.b.c"}, badName},
		{"blank", map[string]any{"table": "   "}, badName},
		{"empty", map[string]any{"table": ""}, []ErrorType{ErrInvalidArguments}},
		{"subquery as table", map[string]any{"table": "(select * from customers)"}, badName},
		{"column with statement", map[string]any{"table": "orders", "columns": "id; drop table x"}, col},
		{"aggregate column", map[string]any{"table": "orders", "columns": "count(*)"}, col},
		{"column closing the list", map[string]any{"table": "orders", "columns": "id) from customers --"}, col},
		{"star plus subquery", map[string]any{"table": "orders", "columns": "*, (select 1)"}, col},
		{"column array with statement", map[string]any{"table": "orders", "columns": []any{"id", "status; drop table customers"}}, col},
		{"quoted column breaking out", map[string]any{"table": "orders", "columns": `"id"" from customers --"`}, col},
		{"order by statement", map[string]any{"table": "orders", "order_by": "id; drop"}, order},
		{"order by position", map[string]any{"table": "orders", "order_by": "1"}, order},
		{"order by double direction", map[string]any{"table": "orders", "order_by": "id desc desc"}, order},
		{"order by subquery", map[string]any{"table": "orders", "order_by": "(select 1)"}, order},
		{"order by bad nulls", map[string]any{"table": "orders", "order_by": "id nulls sideways"}, order},
		{"order by expression", map[string]any{"table": "orders", "order_by": "total * 2"}, order},
		{"order by comment", map[string]any{"table": "orders", "order_by": "id -- x"}, order},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := b.refused(t, "select_query", argsJSON(t, c.args))
			if !slices.Contains(c.want, e.Type) {
				t.Fatalf("got %s (%s), want one of %v", e.Type, e.Message, c.want)
			}
			if e.SQLState != "" && e.SQLState != "42P01" && e.SQLState != "42703" {
				// Any other SQLSTATE would mean the text reached PostgreSQL.
				t.Fatalf("the identifier reached PostgreSQL: %s", errorJSON(t, e))
			}
			if e.Suggestion == "" {
				t.Fatalf("no suggestion: %s", errorJSON(t, e))
			}
			assertNoGeneratedSQL(t, e)
		})
	}
	t.Cleanup(func() {
		assertFixtureUnchanged(t, b, before)
		if n := b.db.QueryInt(t, "SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename IN ('customers', 'orders')"); n != 2 {
			t.Errorf("fixture tables missing: %d of 2", n)
		}
	})
}

// TestWhereCannotEscapeItsParentheses: where is a boolean expression put in parentheses on
// lines of its own; closing them early or commenting out the rest is a syntax error, never a
// second query.
func TestWhereCannotEscapeItsParentheses(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	for _, where := range []string{
		"1=1) --",
		"true) UNION SELECT * FROM customers --",
		"true)) OR ((true",
		"true) ORDER BY 1 --",
		"true; delete from orders",
	} {
		t.Run(where, func(t *testing.T) {
			t.Parallel()
			e := b.mustFail(t, ErrSyntax, "select_query", argsJSON(t, map[string]any{"table": "orders", "where": where}))
			assertNoGeneratedSQL(t, e)
		})
	}
	// The other way round: a trailing comment in where does not swallow the closing parenthesis.
	out := b.mustCall(t, "select_query", `{"table":"orders","columns":"id","where":"id = 1 -- the first one","limit":5}`)
	if rs := rows(t, out); len(rs) != 1 || rs[0]["id"].(float64) != 1 {
		t.Fatalf("trailing comment in where: %v", out)
	}
}

// TestValidIdentifierSpellings: the spellings PostgreSQL accepts resolve to the same relation.
func TestValidIdentifierSpellings(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	for _, args := range []string{
		`{"table":"orders","columns":"id","limit":1}`,
		`{"table":"public.orders","columns":"id","limit":1}`,
		`{"table":"ORDERS","columns":"ID","limit":1}`,
		`{"table":"\"orders\"","columns":"\"id\"","limit":1}`,
		`{"table":"\"public\".\"orders\"","columns":["id"],"limit":1,"order_by":"\"id\" desc nulls last"}`,
	} {
		t.Run(args, func(t *testing.T) {
			t.Parallel()
			out := b.mustCall(t, "select_query", args)
			if out["table"] != "orders" || len(rows(t, out)) != 1 {
				t.Fatalf("unexpected: %v", out)
			}
		})
	}
}

// TestSuggestions: a near miss names the intended table or column, and the column error lists
// the table's columns, so the model can fix its call in one step.
func TestSuggestions(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	t.Run("table", func(t *testing.T) {
		t.Parallel()
		for _, name := range []string{"order", "ordrs", "Orderz", "ordеrs"} {
			e := b.mustFail(t, ErrInvalidTable, "select_query", argsJSON(t, map[string]any{"table": name}))
			if !strings.Contains(e.Suggestion, `"orders"`) {
				t.Errorf("%s: suggestion does not name orders: %s", name, e.Suggestion)
			}
			if !strings.Contains(e.Message, name) {
				t.Errorf("%s: message does not name the table asked for: %s", name, e.Message)
			}
		}
	})
	t.Run("column", func(t *testing.T) {
		t.Parallel()
		for _, args := range []string{
			`{"table":"orders","columns":"id,totl"}`,
			`{"table":"orders","order_by":"totl desc"}`,
		} {
			e := b.mustFail(t, ErrInvalidColumn, "select_query", args)
			if !strings.Contains(e.Suggestion, `"total"`) {
				t.Errorf("%s: suggestion does not name total: %s", args, e.Suggestion)
			}
			if !strings.Contains(e.Suggestion, "id, customer_id, status, total, placed_at") {
				t.Errorf("%s: suggestion does not list the columns: %s", args, e.Suggestion)
			}
			if e.Table != "orders" || e.SQLState != "42703" {
				t.Errorf("%s: table %q, sqlState %q", args, e.Table, e.SQLState)
			}
		}
	})
	t.Run("no near miss lists all", func(t *testing.T) {
		t.Parallel()
		e := b.mustFail(t, ErrInvalidTable, "select_query", `{"table":"zzzzzzzz"}`)
		if strings.Contains(e.Suggestion, "Did you mean") || !strings.Contains(e.Suggestion, "customers, orders") {
			t.Errorf("suggestion: %s", e.Suggestion)
		}
	})
}

// TestCatalogCacheRefreshOnMiss: a table created after the registry loaded its catalog is found
// by the very next call, without waiting for the cache to expire.
func TestCatalogCacheRefreshOnMiss(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, warm string }{
		{"after a hit", `{"table":"orders","limit":1}`},
		// A miss just reloaded the catalog: the next miss must not be answered from it.
		{"after a miss", `{"table":"nonexistent_table"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBundle(t, Policy{})
			_, _ = b.call(t, "select_query", tc.warm)
			b.db.Exec(t, "CREATE TABLE late_arrival (i int); INSERT INTO late_arrival VALUES (7)")
			start := time.Now()
			out := b.mustCall(t, "select_query", `{"table":"late_arrival"}`)
			if rs := rows(t, out); len(rs) != 1 || rs[0]["i"].(float64) != 7 {
				t.Fatalf("unexpected rows: %v", out)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Fatalf("found only after %v", d)
			}
			list := b.mustCall(t, "describe_schema", `{}`)
			found := false
			for _, r := range rows(t, list) {
				found = found || r["name"] == "late_arrival"
			}
			if !found {
				t.Fatalf("describe_schema does not list the new table: %v", list)
			}
		})
	}
}
