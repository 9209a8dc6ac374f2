package tools

import (
	"slices"
	"strings"
	"testing"
)

// TestReadPathRefusesWrites tries the known ways around a READ ONLY transaction on the read
// path. PostgreSQL must refuse each one, the error must say so in a category the model can act
// on, and the data must be exactly as before.
func TestReadPathRefusesWrites(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	before := takeFixtureState(t, b)
	refused := []ErrorType{ErrReadOnlyViolation, ErrSyntax, ErrNotAllowed}
	cases := []struct {
		name string
		tool string
		args map[string]any
		want []ErrorType // any of these
	}{
		// A data-modifying WITH is only allowed at the top level: PostgreSQL refuses it inside
		// the IN (…) of a where with 0A000 (feature_not_supported) before the read-only check.
		{"writable CTE in select_query where", "select_query",
			map[string]any{"table": "orders", "where": "id IN (WITH d AS (DELETE FROM orders RETURNING id) SELECT id FROM d)"}, refused},
		{"writable CTE in select_query where, update", "select_query",
			map[string]any{"table": "customers", "where": "id IN (WITH u AS (UPDATE customers SET name = 'x' RETURNING id) SELECT id FROM u)"}, refused},
		{"writable CTE in execute_sql", "execute_sql",
			map[string]any{"sql": "WITH d AS (DELETE FROM orders RETURNING 1) SELECT count(*) FROM d"}, []ErrorType{ErrReadOnlyViolation}},
		{"two statements", "execute_sql", map[string]any{"sql": "select 1; delete from orders"}, []ErrorType{ErrSyntax}},
		{"commit then delete", "execute_sql", map[string]any{"sql": "commit; delete from orders"}, []ErrorType{ErrSyntax, ErrReadOnlyViolation}},
		{"set transaction read write", "execute_sql", map[string]any{"sql": "SET TRANSACTION READ WRITE"}, []ErrorType{ErrReadOnlyViolation}},
		// An EXPLAIN's statement is planned as the caller first (explainGuard), and this role may
		// not delete: PostgreSQL's privilege check may come before the read-only one.
		{"explain analyze delete", "execute_sql", map[string]any{"sql": "EXPLAIN ANALYZE DELETE FROM orders"}, []ErrorType{ErrReadOnlyViolation, ErrPermissionDenied}},
		{"nextval", "execute_sql", map[string]any{"sql": "SELECT nextval('counter')"}, []ErrorType{ErrReadOnlyViolation}},
		// The role may read the sequence but not update it, so which refusal comes first is
		// PostgreSQL's choice.
		{"setval", "execute_sql", map[string]any{"sql": "SELECT setval('counter', 99)"}, []ErrorType{ErrReadOnlyViolation, ErrPermissionDenied}},
		{"delete", "execute_sql", map[string]any{"sql": "DELETE FROM orders"}, []ErrorType{ErrReadOnlyViolation}},
		{"insert", "execute_sql", map[string]any{"sql": "INSERT INTO customers (name) VALUES ('mallory')"}, []ErrorType{ErrReadOnlyViolation}},
		{"update", "execute_sql", map[string]any{"sql": "UPDATE orders SET status = 'stolen'"}, []ErrorType{ErrReadOnlyViolation}},
		{"select for update", "execute_sql", map[string]any{"sql": "SELECT * FROM orders FOR UPDATE"}, []ErrorType{ErrReadOnlyViolation}},
		{"create table", "execute_sql", map[string]any{"sql": "CREATE TABLE x(i int)"}, []ErrorType{ErrReadOnlyViolation}},
		{"create table as", "execute_sql", map[string]any{"sql": "CREATE TABLE x AS SELECT * FROM orders"}, []ErrorType{ErrReadOnlyViolation}},
		{"select into", "execute_sql", map[string]any{"sql": "SELECT * INTO x FROM orders"}, []ErrorType{ErrReadOnlyViolation}},
		{"create temp table", "execute_sql", map[string]any{"sql": "CREATE TEMP TABLE tt(i int)"}, []ErrorType{ErrReadOnlyViolation}},
		{"drop table", "execute_sql", map[string]any{"sql": "DROP TABLE orders"}, []ErrorType{ErrReadOnlyViolation}},
		{"truncate", "execute_sql", map[string]any{"sql": "TRUNCATE orders"}, []ErrorType{ErrReadOnlyViolation}},
		{"do block", "execute_sql", map[string]any{"sql": "DO $$BEGIN DELETE FROM orders; END$$"}, []ErrorType{ErrNotAllowed}},
		{"vacuum", "execute_sql", map[string]any{"sql": "VACUUM orders"}, []ErrorType{ErrReadOnlyViolation}},
		{"commit", "execute_sql", map[string]any{"sql": "COMMIT"}, []ErrorType{ErrReadOnlyViolation}},
		{"rollback", "execute_sql", map[string]any{"sql": "ROLLBACK"}, []ErrorType{ErrReadOnlyViolation}},
		{"end", "execute_sql", map[string]any{"sql": "END"}, []ErrorType{ErrReadOnlyViolation}},
		// PostgreSQL runs these inside the read transaction without an error; they must still
		// be refused, not reported as a successful BEGIN or COMMIT.
		{"begin", "execute_sql", map[string]any{"sql": "BEGIN"}, []ErrorType{ErrReadOnlyViolation}},
		{"start transaction", "execute_sql", map[string]any{"sql": "START TRANSACTION READ WRITE"}, []ErrorType{ErrReadOnlyViolation}},
		{"savepoint", "execute_sql", map[string]any{"sql": "SAVEPOINT s"}, []ErrorType{ErrReadOnlyViolation}},
		{"release the runner's savepoint", "execute_sql", map[string]any{"sql": "RELEASE SAVEPOINT pgtools_stmt"}, []ErrorType{ErrReadOnlyViolation}},
		{"rollback to the runner's savepoint", "execute_sql", map[string]any{"sql": "ROLLBACK TO SAVEPOINT pgtools_stmt"}, []ErrorType{ErrReadOnlyViolation}},
		{"commit and chain", "execute_sql", map[string]any{"sql": "COMMIT AND CHAIN"}, []ErrorType{ErrReadOnlyViolation}},
		{"rollback and chain", "execute_sql", map[string]any{"sql": "ROLLBACK AND CHAIN"}, []ErrorType{ErrReadOnlyViolation}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			terr := b.refused(t, c.tool, argsJSON(t, c.args))
			if !slices.Contains(c.want, terr.Type) {
				t.Fatalf("got %s (%s: %s), want one of %v", terr.Type, terr.SQLState, terr.Message, c.want)
			}
			if terr.Suggestion == "" {
				t.Fatalf("no suggestion: %s", errorJSON(t, terr))
			}
			if sql, _ := c.args["sql"].(string); len(sql) > 12 && strings.Contains(terr.Message+terr.Suggestion, sql) {
				t.Fatalf("message repeats the SQL: %s", errorJSON(t, terr))
			}
		})
	}
	t.Cleanup(func() { assertFixtureUnchanged(t, b, before) })
}

// TestReadPathReadsStillWork keeps TestReadPathRefusesWrites honest: the same shapes without a
// write succeed, so the refusals above come from the writes.
func TestReadPathReadsStillWork(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	for _, c := range []struct{ name, tool, args string }{
		{"CTE in where", "select_query", `{"table":"orders","columns":"id","where":"id IN (WITH d AS (SELECT id FROM orders WHERE id < 3) SELECT id FROM d)"}`},
		{"CTE in execute_sql", "execute_sql", `{"sql":"WITH d AS (SELECT 1 FROM orders) SELECT count(*) AS n FROM d"}`},
		{"explain", "execute_sql", `{"sql":"EXPLAIN SELECT * FROM orders"}`},
		{"currval-free sequence read", "execute_sql", `{"sql":"SELECT last_value FROM counter"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if out := b.mustCall(t, c.tool, c.args); len(rows(t, out)) == 0 {
				t.Fatalf("no rows: %v", out)
			}
		})
	}
}

// TestSuperuserOnlyFunctionsRefused: READ ONLY does not stop pg_read_file; the least-privilege
// role the pool connects as does.
func TestSuperuserOnlyFunctionsRefused(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	for _, sql := range []string{
		"select pg_read_file('postgresql.conf')",
		"select pg_ls_dir('.')",
		"select * from pg_authid",
	} {
		t.Run(sql, func(t *testing.T) {
			t.Parallel()
			e := b.mustFail(t, ErrPermissionDenied, "execute_sql", argsJSON(t, map[string]any{"sql": sql}))
			if e.SQLState != "42501" {
				t.Fatalf("sqlState %q, want 42501: %s", e.SQLState, errorJSON(t, e))
			}
		})
	}
}

// TestExecuteSQLWriteModeWritesNothingWithoutLeave: mode "write" is refused for a token without
// the write scope, and without a stated intent (session_id or autocommit) for one with it.
func TestExecuteSQLWriteModeWritesNothingWithoutLeave(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	before := takeFixtureState(t, b)
	readOnly := Principal{Name: "reader", Scopes: []string{"read"}}
	for _, sql := range []string{"DELETE FROM orders", "INSERT INTO customers (name) VALUES ('mallory')", "DROP TABLE orders", "SELECT nextval('counter')"} {
		t.Run(sql, func(t *testing.T) {
			t.Parallel()
			args := argsJSON(t, map[string]any{"sql": sql, "mode": "write"})
			if out, e := b.callAs(t, readOnly, "execute_sql", args); e == nil || e.Type != ErrNotAllowed {
				t.Fatalf("read-only token: got %v / %v, want not_allowed", out, e)
			}
			if out, e := b.call(t, "execute_sql", args); e == nil || e.Type != ErrWriteIntentRequired {
				t.Fatalf("write token without intent: got %v / %v, want write_intent_required", out, e)
			}
		})
	}
	t.Cleanup(func() { assertFixtureUnchanged(t, b, before) })
}

func TestCopyToStdoutIsRefused(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	e := b.mustFail(t, ErrNotAllowed, "execute_sql", `{"sql":"COPY orders TO STDOUT"}`)
	if !strings.Contains(e.Message, "COPY") {
		t.Fatalf("COPY refusal: %+v", e)
	}
	// The connection that ran it is not reused in a strange state: the next reads work.
	for i := 0; i < 6; i++ {
		b.mustCall(t, "execute_sql", `{"sql":"select count(*) from orders"}`)
	}
}

// TestStalePlanIsReadAgain: a read whose cached plan went stale (the table gained a column
// between two calls on the same connection) is run once more, freshly parsed, and answers with
// the table's new shape instead of PostgreSQL's "cached plan must not change result type".
func TestStalePlanIsReadAgain(t *testing.T) {
	t.Parallel()
	b := newBundleConns(t, Policy{}, 1)
	const sql = `{"sql":"SELECT * FROM orders WHERE id = 1"}`
	b.mustCall(t, "execute_sql", sql)
	b.db.Exec(t, "ALTER TABLE orders ADD COLUMN extra int DEFAULT 7")
	out := b.mustCall(t, "execute_sql", sql)
	if rs := rows(t, out); len(rs) != 1 || rs[0]["extra"] != float64(7) {
		t.Fatalf("after the table changed: %v", out)
	}
}
