package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools/plan"
	"github.com/pgtools/pgtools/tools/session"
)

// rlsOracleBundle is the identity bundle with table notes under a tenant policy: tenant 2 holds 40
// rows whose secret is 'hidden', tenant 1 only rows whose secrets are unique, all analyzed, so the
// planner's statistics (computed over every row) know 'hidden' is frequent. Table open_notes has
// the same rows and no row-level security.
func rlsOracleBundle(t *testing.T) *identityBundle {
	t.Helper()
	ib := newIdentityBundle(t)
	ib.db.Exec(t, fmt.Sprintf(`
		CREATE TABLE notes (id int PRIMARY KEY, tenant int NOT NULL, secret text NOT NULL);
		INSERT INTO notes SELECT i, 1, 'own-' || i FROM generate_series(1, 400) i;
		INSERT INTO notes SELECT i, 2, 'hidden' FROM generate_series(401, 440) i;
		CREATE INDEX ON notes (secret);
		ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
		CREATE POLICY notes_tenant ON notes USING (tenant = (current_setting('request.jwt.claims', true)::jsonb ->> 'tenant')::int);
		GRANT SELECT, INSERT, UPDATE, DELETE ON notes TO %[1]s;
		CREATE TABLE open_notes AS SELECT * FROM notes; CREATE INDEX ON open_notes (secret);
		GRANT SELECT ON open_notes TO %[1]s;
		ANALYZE notes; ANALYZE open_notes;`, quoteIdent(ib.role)))
	mgr := session.New(session.Config{})
	t.Cleanup(func() { mgr.Close(context.Background()) })
	ib.reg.setSessions(mgr)
	return ib
}

// answerOf is a call's answer as a transport would send it, the timing left out: a result's
// JSON, or the error's category, message, suggestion and plan.
func answerOf(t *testing.T, ib *identityBundle, ctx context.Context, p Principal, tool, args string) string {
	t.Helper()
	res, _, e := ib.reg.Call(ctx, p, tool, []byte(args))
	if e != nil {
		return fmt.Sprintf("error %s: %s | %s | %s", e.Type, e.Message, e.Suggestion, e.Plan)
	}
	out := decodeResult(t, res)
	delete(out, "executionTime")
	delete(out, "session_id")
	raw, _ := json.Marshal(out)
	return string(raw)
}

// TestNoAnswerDependsOnHiddenRows: acting as tenant 1, whatever returns the planner's output
// answers the same for a value found only in tenant 2's rows and for a value found nowhere, and
// never shows the policy's expression.
func TestNoAnswerDependsOnHiddenRows(t *testing.T) {
	t.Parallel()
	ib := rlsOracleBundle(t)
	alice := ib.tenant(1)
	bg := context.Background()
	same := func(t *testing.T, ctx context.Context, tool, hidden, absent string) string {
		t.Helper()
		h, a := answerOf(t, ib, ctx, alice, tool, hidden), answerOf(t, ib, ctx, alice, tool, absent)
		if h != a {
			t.Errorf("%s answers differently for a hidden value and an absent one:\nhidden: %s\nabsent: %s", tool, h, a)
		}
		for _, s := range []string{"current_setting", "jwt", "tenant ="} {
			if strings.Contains(h, s) || strings.Contains(a, s) {
				t.Errorf("%s shows the policy's expression (%q): %s", tool, s, h)
			}
		}
		return h
	}
	q := func(v string) string {
		return fmt.Sprintf(`{"sql":"select id from notes where secret = $1","params":[%q]}`, v)
	}
	t.Run("explain_query", func(t *testing.T) {
		same(t, bg, "explain_query", q("hidden"), q("absent"))
	})
	t.Run("execute_sql EXPLAIN", func(t *testing.T) {
		for _, pre := range []string{"EXPLAIN", "explain (costs true, format json)", "EXPLAIN ANALYZE", "explain verbose"} {
			ex := func(v string) string {
				return fmt.Sprintf(`{"sql":"%s select id from notes where secret = '%s'"}`, pre, v)
			}
			same(t, bg, "execute_sql", ex("hidden"), ex("absent"))
		}
	})
	t.Run("pg_transaction EXPLAIN", func(t *testing.T) {
		ex := func(v string) string {
			return fmt.Sprintf(`{"operations":[{"sql":"EXPLAIN ANALYZE select id from notes where secret = '%s'"}]}`, v)
		}
		same(t, bg, "pg_transaction", ex("hidden"), ex("absent"))
	})
	t.Run("session", func(t *testing.T) {
		out := ib.mustCallAs(t, alice, "pg_tx", `{"action":"begin"}`)
		sid := out["session_id"].(string)
		defer ib.callAs(t, alice, "pg_tx", `{"action":"rollback","session_id":"`+sid+`"}`)
		for _, mode := range []string{"read", "write"} {
			ex := func(v string) string {
				return fmt.Sprintf(`{"sql":"EXPLAIN select id from notes where secret = '%s'","mode":%q,"session_id":%q}`, v, mode, sid)
			}
			same(t, bg, "execute_sql", ex("hidden"), ex("absent"))
		}
	})
	t.Run("budget lowered per call", func(t *testing.T) {
		ctx := plan.WithBudget(bg, 0, 10)
		ex := func(v string) string { return fmt.Sprintf(`{"sql":"select id from notes where secret = '%s'"}`, v) }
		same(t, ctx, "execute_sql", ex("hidden"), ex("absent"))
		same(t, ctx, "select_query", `{"table":"notes","where":"secret = 'hidden'"}`, `{"table":"notes","where":"secret = 'absent'"}`)
		del := func(v string) string {
			return fmt.Sprintf(`{"sql":"delete from notes where secret = '%s'","mode":"write","autocommit":true}`, v)
		}
		same(t, ctx, "execute_sql", del("hidden"), del("absent"))
		if n := ib.db.QueryInt(t, "select count(*) from notes where secret = 'hidden'"); n != 40 {
			t.Fatalf("tenant 1 deleted tenant 2's rows: %d left", n)
		}
	})
	t.Run("the budget still bounds the rows the caller sees", func(t *testing.T) {
		ctx := plan.WithBudget(bg, 0, 10)
		_, _, e := ib.reg.Call(ctx, alice, "execute_sql", []byte(`{"sql":"select id from notes where id < 100"}`))
		if e == nil || e.Type != ErrTooExpensive {
			t.Fatalf("99 visible rows under a budget of 10: %v", e)
		}
		if strings.Contains(string(e.Plan), "current_setting") {
			t.Fatalf("refusal shows the policy: %s", e.Plan)
		}
	})
	t.Run("tables without row-level security keep their estimates", func(t *testing.T) {
		out := ib.mustCallAs(t, alice, "explain_query", `{"sql":"select id from open_notes where secret = $1","params":["hidden"]}`)
		if rows, _ := out["estimatedRows"].(float64); rows < 20 {
			t.Fatalf("open_notes lost its estimate: %v", out)
		}
		scans, _ := out["scans"].([]any)
		if len(scans) != 1 || scans[0].(map[string]any)["method"] == nil {
			t.Fatalf("open_notes lost its scan: %v", out)
		}
		ex := ib.mustCallAs(t, alice, "execute_sql", `{"sql":"EXPLAIN select id from open_notes where secret = 'hidden'"}`)
		if raw, _ := json.Marshal(ex); !strings.Contains(string(raw), "rows=") {
			t.Fatalf("EXPLAIN of open_notes lost its estimates: %s", raw)
		}
		_, _, e := ib.reg.Call(plan.WithBudget(bg, 0, 10), alice, "execute_sql", []byte(`{"sql":"select id from open_notes where secret = 'hidden'"}`))
		if e == nil || e.Type != ErrTooExpensive || !strings.Contains(string(e.Plan), "estimatedRows") {
			t.Fatalf("a budget on open_notes no longer judges the plan: %v", e)
		}
	})
}

// TestExplained: the statement an EXPLAIN explains is read past its options; options pgtools
// cannot read with certainty refuse.
func TestExplained(t *testing.T) {
	t.Parallel()
	for sql, want := range map[string]string{
		"EXPLAIN select 1":                                   "select 1",
		"explain analyze verbose select 1":                   "select 1",
		"EXPLAIN /* c */ (FORMAT JSON, costs 'on') select 1": "select 1",
		"EXPLAIN (ANALYZE) -- x\n analyse select 1":          "select 1",
		"EXPLAIN analyzed":                                   "analyzed",
		"EXPLAIN (FORMAT \"json\") select 1":                 "",
		"EXPLAIN (costs E'on') select 1":                     "select 1",
		"EXPLAIN (costs 'o\\') select 1":                     "",
		"EXPLAIN (costs on select 1":                         "",
	} {
		got, ok := explained(sql)
		if ok != (want != "") || got != want {
			t.Errorf("explained(%q) = %q, %v; want %q", sql, got, ok, want)
		}
	}
}

// TestPartitionsKeepTheirEstimates: a plan over the partitions of a table without row-level
// security keeps its estimates (the catalog lets the root stand for its partitions, so a
// partition is judged by its root), while partitions of a root under row-level security, or with
// row security of their own, are withheld like their root.
func TestPartitionsKeepTheirEstimates(t *testing.T) {
	t.Parallel()
	ib := newIdentityBundle(t)
	ib.db.Exec(t, fmt.Sprintf(`
		CREATE TABLE events (id int, tenant int NOT NULL, kind text NOT NULL) PARTITION BY RANGE (id);
		CREATE TABLE events_a PARTITION OF events FOR VALUES FROM (0) TO (1000);
		CREATE TABLE events_b PARTITION OF events FOR VALUES FROM (1000) TO (2000);
		INSERT INTO events SELECT i, 1 + i %% 2, 'k' || (i %% 7) FROM generate_series(0, 1999) i;
		CREATE TABLE secured_events (LIKE events) PARTITION BY RANGE (id);
		CREATE TABLE secured_events_a PARTITION OF secured_events FOR VALUES FROM (0) TO (2000);
		INSERT INTO secured_events SELECT * FROM events;
		ALTER TABLE secured_events ENABLE ROW LEVEL SECURITY;
		CREATE POLICY tenant_only ON secured_events USING (tenant = (current_setting('request.jwt.claims', true)::jsonb ->> 'tenant')::int);
		CREATE TABLE own_events (LIKE events) PARTITION BY RANGE (id);
		CREATE TABLE own_events_a PARTITION OF own_events FOR VALUES FROM (0) TO (2000);
		INSERT INTO own_events SELECT * FROM events;
		ALTER TABLE own_events_a ENABLE ROW LEVEL SECURITY;
		CREATE POLICY tenant_only ON own_events_a USING (tenant = (current_setting('request.jwt.claims', true)::jsonb ->> 'tenant')::int);
		GRANT SELECT ON events, events_a, events_b, secured_events, secured_events_a, own_events, own_events_a TO %[1]s;
		ANALYZE events; ANALYZE secured_events; ANALYZE own_events;`, quoteIdent(ib.role)))
	alice := ib.tenant(1)
	for _, c := range []struct {
		table    string
		withheld bool
	}{{"events", false}, {"events_a", false}, {"secured_events", true}, {"secured_events_a", true}, {"own_events_a", true}} {
		out := ib.mustCallAs(t, alice, "explain_query", `{"sql":"select id from `+c.table+` where kind = 'k3'"}`)
		_, has := out["estimatedRows"]
		if has == c.withheld {
			t.Errorf("explain_query on %s: estimatedRows shown %v, want %v: %v", c.table, has, !c.withheld, out)
		}
		res, _, e := ib.reg.Call(context.Background(), alice, "execute_sql", []byte(`{"sql":"EXPLAIN select id from `+c.table+` where kind = 'k3'"}`))
		if (e != nil) != c.withheld {
			t.Errorf("EXPLAIN of %s through execute_sql: refused %v, want %v (%v, %v)", c.table, e != nil, c.withheld, e, res)
		}
	}
}
