package tools

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools/plan"
)

// TestPlanBudgetRefusesBeforeRunning: with a budget set, a statement whose plan is over it is
// refused with too_expensive on every path that runs agent-influenced SQL, and nothing changes;
// a primary-key read fits and runs.
func TestPlanBudgetRefusesBeforeRunning(t *testing.T) {
	t.Parallel()
	b := newPlanBundle(t, Policy{MaxEstimatedCost: 500, MaxEstimatedRows: 1000})
	b.reg.addCustomTools(context.Background(), []CustomTool{ //nolint:errcheck // checked below by calling them
		{Name: "bump_all", Description: "Bump every n.", Mode: "write", SQL: "UPDATE big SET n = n + $1",
			Parameters: []CustomParam{{Name: "by", Type: "integer", Required: true}}},
		{Name: "kinds", Description: "Pairs of rows of a kind.", SQL: "SELECT a.id, b.id FROM big a JOIN big b USING (kind) WHERE kind = $1",
			Parameters: []CustomParam{{Name: "kind", Type: "string", Required: true}}},
	})
	state := func() int64 {
		return b.db.QueryInt(t, "select (select count(*) * 1000000 + sum(n) from big) + (select count(*) from items) + (select last_value from counter)")
	}
	before := state()
	refused := []struct{ name, tool, args string }{
		{"cross join", "execute_sql", `{"sql":"select * from big a cross join big b"}`},
		{"select_query over the row budget", "select_query", `{"table":"big","limit":5000}`},
		{"full scan over the cost budget", "execute_sql", `{"sql":"select count(*) from big a join big b using (kind)"}`},
		{"update", "update_data", `{"table":"big","set":{"n":0},"where":"kind <> $1","params":["x"],"autocommit":true,"max_affected_rows":100000}`},
		{"update dry run", "update_data", `{"table":"big","set":{"n":0},"where":"n > 0","dry_run":true}`},
		{"delete", "delete_data", `{"table":"big","where":"n > 0","autocommit":true}`},
		{"insert … select", "execute_sql", `{"sql":"insert into big select id + 100000, kind, n from big","mode":"write","autocommit":true}`},
		{"insert_data with a volatile value", "execute_sql", `{"sql":"insert into items (sku, qty) select 's' || nextval('counter'), 1 from big","mode":"write","autocommit":true}`},
		{"pg_transaction's second operation", "pg_transaction", `{"operations":[{"sql":"insert into items (sku) values ('first')"},{"sql":"delete from big where n > $1","params":[0]}]}`},
		{"operator-defined write", "bump_all", `{"by":1,"autocommit":true}`},
		{"operator-defined read", "kinds", `{"kind":"k1"}`},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			e := b.mustFail(t, ErrTooExpensive, c.tool, c.args)
			if !strings.Contains(e.Message, "over max_estimated_") || !strings.Contains(e.Message, "nothing was run") || len(e.Plan) == 0 {
				t.Errorf("refusal without the estimate or the plan: %s", errorJSON(t, e))
			}
			var s PlanSummary
			if err := json.Unmarshal(e.Plan, &s); err != nil || len(s.Scans) == 0 {
				t.Errorf("plan %s: %v", e.Plan, err)
			}
		})
	}
	if got := state(); got != before {
		t.Fatalf("a refused statement changed something: %d → %d", before, got)
	}
	// What fits runs: a read of the budget's 1000 rows (select_query's look-ahead row is its own).
	if out := b.mustCall(t, "select_query", `{"table":"big","limit":1000}`); out["rowCount"] != float64(1000) {
		t.Errorf("read of 1000 rows: %v rows", out["rowCount"])
	}
	out := b.mustCall(t, "select_query", `{"table":"big","where":"id = $1","params":[7]}`)
	if out["rowCount"] != float64(1) {
		t.Errorf("primary-key read: %v", out)
	}
	b.mustCall(t, "update_data", `{"table":"big","set":{"n":0},"where":"id = $1","params":[7],"autocommit":true}`)
	b.mustCall(t, "pg_transaction", `{"operations":[{"sql":"update big set n = 1 where id = 7"},{"sql":"select * from big where id = 7"}]}`)
	if got := b.db.QueryInt(t, "select n from big where id = 7"); got != 1 {
		t.Errorf("the statements within budget did not run: n = %d", got)
	}
}

// TestPlanBudgetWithoutPlan: under a budget, statements PostgreSQL cannot plan are refused
// (fail closed: the budget could not see their cost), except those that only read or set a
// setting; EXPLAIN ANALYZE, which would run its statement unplanned, is among the refused.
func TestPlanBudgetWithoutPlan(t *testing.T) {
	t.Parallel()
	b := newPlanBundle(t, Policy{MaxEstimatedRows: 1000})
	b.mustCall(t, "execute_sql", `{"sql":"show work_mem"}`)
	b.mustCall(t, "pg_transaction", `{"operations":[{"sql":"select * from big where id = 1"},{"sql":"update big set n = n where id = 2"}]}`)
	for _, c := range []struct{ tool, args string }{
		{"execute_sql", `{"sql":"explain analyze select * from big a cross join big b"}`},
		{"execute_sql", `{"sql":"do $$ begin perform count(*) from big a cross join big b; end $$","mode":"write","autocommit":true}`},
		{"pg_transaction", `{"operations":[{"sql":"select 1"},{"sql":"do $$ begin perform 1; end $$"}]}`},
	} {
		e := b.mustFail(t, ErrNotAllowed, c.tool, c.args)
		if !strings.Contains(e.Message, "plan budget") || !strings.Contains(e.Suggestion, "explain_query") {
			t.Errorf("%s: %s", c.args, errorJSON(t, e))
		}
	}
}

// TestPlanBudgetLowering: a principal's and a call's budget lower the database's (or set one
// where it has none) and never raise it.
func TestPlanBudgetLowering(t *testing.T) {
	t.Parallel()
	open := newPlanBundle(t, Policy{})
	capped := newPlanBundle(t, Policy{MaxEstimatedRows: 10})
	const read = `{"table":"big","where":"id <= 100"}`
	call := func(b *bundle, ctx context.Context, p Principal) *Error {
		_, _, e := b.reg.Call(ctx, p, "select_query", []byte(read))
		return e
	}
	bg := context.Background()
	cases := []struct {
		name   string
		b      *bundle
		ctx    context.Context
		p      Principal
		refuse bool
	}{
		{"no budget anywhere", open, bg, testPrincipal, false},
		{"the token's budget", open, bg, Principal{Name: "t", Scopes: []string{"read"}, MaxEstimatedRows: 10}, true},
		{"the token's cost budget", open, bg, Principal{Name: "t", Scopes: []string{"read"}, MaxEstimatedCost: 0.5}, true},
		{"the call's budget", open, plan.WithBudget(bg, 0, 10), testPrincipal, true},
		{"a call's budget above the need", open, plan.WithBudget(bg, 1e9, 1e6), testPrincipal, false},
		{"the database's budget", capped, bg, testPrincipal, true},
		{"a token cannot raise it", capped, bg, Principal{Name: "t", Scopes: []string{"read"}, MaxEstimatedRows: 1e6}, true},
		{"a call cannot raise it", capped, plan.WithBudget(bg, 1e9, 1e6), testPrincipal, true},
	}
	for _, c := range cases {
		e := call(c.b, c.ctx, c.p)
		switch {
		case c.refuse && (e == nil || e.Type != ErrTooExpensive):
			t.Errorf("%s: %+v, want too_expensive", c.name, e)
		case !c.refuse && e != nil:
			t.Errorf("%s: refused: %s", c.name, errorJSON(t, e))
		}
	}
}

// BenchmarkSelectByPKBudget is BenchmarkSelectByPK's prepared read without a plan budget and
// with one (the EXPLAIN before the read), and an autocommit update by primary key likewise, on
// one connection: what a budget costs a call.
func BenchmarkSelectByPKBudget(b *testing.B) {
	for _, c := range []struct {
		name string
		pol  Policy
	}{{"no budget", Policy{}}, {"budget", Policy{MaxEstimatedCost: 1e6, MaxEstimatedRows: 1e6}}} {
		bn := newBundleConns(b, c.pol, 1)
		bn.db.Exec(b, "GRANT UPDATE ON orders TO "+quoteIdent(bn.db.RoleName("agent")))
		reads, writes := make([][]byte, 50), make([][]byte, 50)
		for i := range reads {
			reads[i] = []byte(`{"table":"orders","where":"id = $1","params":[` + strconv.Itoa(i+1) + `]}`)
			writes[i] = []byte(`{"table":"orders","set":{"status":"paid"},"where":"id = $1","params":[` + strconv.Itoa(i+1) + `],"autocommit":true}`)
		}
		for _, call := range []struct {
			tool string
			args [][]byte
		}{{"select_query", reads}, {"update_data", writes}} {
			b.Run(call.tool+"/"+c.name, func(b *testing.B) {
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, _, e := bn.reg.Call(ctx, testPrincipal, call.tool, call.args[i%50]); e != nil {
						b.Fatal(e)
					}
				}
			})
		}
	}
}

// TestBudgetGateReadsTheLeadingKeyword: the gate judges a statement by its leading keyword as
// guard.go reads it, past comments and in any case; a statement that starts with anything else
// has no keyword and is refused (fail closed). plan's tests walk the gate's tables.
func TestBudgetGateReadsTheLeadingKeyword(t *testing.T) {
	t.Parallel()
	for _, sql := range []string{"/* c */ select x", "  Update t set a = 1", "-- c\nwith x as (select 1) select * from x"} {
		if planned, e := plan.Gate(leadingKeyword(sql)); !planned || e != nil {
			t.Errorf("%q: plan %v, %v; want planned", sql, planned, e)
		}
	}
	if planned, e := plan.Gate(leadingKeyword("/* c */ show work_mem")); planned || e != nil {
		t.Errorf("show: plan %v, %v; want through unplanned", planned, e)
	}
	for _, sql := range []string{"EXPLAIN ANALYZE SELECT 1", "CREATE TABLE t AS SELECT 1", "DO $$ $$", "(SELECT 1)", ""} {
		if planned, e := plan.Gate(leadingKeyword(sql)); planned || e == nil || e.Type != ErrNotAllowed {
			t.Errorf("%q: plan %v, %v; want refused", sql, planned, e)
		}
	}
}
