package plan

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools/internal/pgerr"
)

// TestGateWalksItsTables: every plannable leading keyword is planned, every costless one passes
// unplanned, and anything in neither table is refused (fail closed).
func TestGateWalksItsTables(t *testing.T) {
	t.Parallel()
	for kw := range plannableWords {
		if planned, e := Gate(kw); !planned || e != nil || !Plannable(kw) {
			t.Errorf("%s: plan %v, %v; want planned", kw, planned, e)
		}
	}
	for kw := range unplannedWords {
		if planned, e := Gate(kw); planned || e != nil {
			t.Errorf("%s: plan %v, %v; want through unplanned", kw, planned, e)
		}
	}
	for _, kw := range []string{"EXPLAIN", "CREATE", "DO", "CALL", "VACUUM", "COPY", ""} {
		if planned, e := Gate(kw); planned || e == nil || e.Type != pgerr.ErrNotAllowed {
			t.Errorf("%q: plan %v, %v; want refused", kw, planned, e)
		}
	}
}

// TestBudgetOf: each bound is the smallest set among the configured ones and the call's own; a
// call's budget lowers a bound or sets one where none is configured, never raises one.
func TestBudgetOf(t *testing.T) {
	t.Parallel()
	bg := context.Background()
	for _, c := range []struct {
		name       string
		ctx        context.Context
		configured []Budget
		want       Budget
	}{
		{"none", bg, []Budget{{}, {}}, Budget{}},
		{"the lowest of each", bg, []Budget{{Cost: 500, Rows: 10}, {Cost: 100, Rows: 1000}}, Budget{Cost: 100, Rows: 10}},
		{"the call's lowers", WithBudget(bg, 50, 0), []Budget{{Cost: 500, Rows: 10}}, Budget{Cost: 50, Rows: 10}},
		{"the call's sets", WithBudget(bg, 0, 7), []Budget{{}, {}}, Budget{Rows: 7}},
		{"the call's cannot raise", WithBudget(bg, 1e9, 1e6), []Budget{{Cost: 500, Rows: 10}}, Budget{Cost: 500, Rows: 10}},
	} {
		if got := BudgetOf(c.ctx, c.configured...); got.Cost != c.want.Cost || got.Rows != c.want.Rows {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestCheck: a plan over the budget is refused with its summary, the catalog's sizes in its
// warnings and a fix for a write; a plan within it passes.
func TestCheck(t *testing.T) {
	t.Parallel()
	top, err := Parse([]byte(updateWithBitmap))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	visible := func(context.Context) func(string, string) bool { return func(string, string) bool { return false } }
	if _, e := (Budget{Cost: 2000, Rows: 42, Hidden: visible}).Check(ctx, top); e != nil {
		t.Errorf("within budget: %v", e)
	}
	b := Budget{Cost: 1000.5, Rows: 41, Hidden: visible, Estimates: func(context.Context) func(string, string) (int64, bool) {
		return func(string, string) (int64, bool) { return 50000, true }
	}}
	seen, e := b.Check(ctx, top)
	if seen != 0 || e == nil || e.Type != pgerr.ErrTooExpensive {
		t.Fatalf("over budget: %v, want too_expensive", e)
	}
	const msg = "The planner estimates this statement at cost 1234.567, over max_estimated_cost 1000.5, and 42 rows touched, over max_estimated_rows 41; nothing was run"
	if e.Message != msg || !strings.Contains(e.Suggestion, "filter big on an indexed column") || !strings.Contains(e.Suggestion, "smaller batches") {
		t.Errorf("refusal %q / %q", e.Message, e.Suggestion)
	}
	var s Summary
	if err := json.Unmarshal(e.Plan, &s); err != nil || len(s.Scans) != 2 || len(s.Warnings) != 1 {
		t.Errorf("plan %s: %v", e.Plan, err)
	}
	// Under row-level security (and, failing closed, without a Hidden) the estimates judge
	// nothing: the rows bound moves to the rows the caller sees.
	for _, h := range []func(context.Context) func(string, string) bool{nil, func(context.Context) func(string, string) bool {
		return func(s, n string) bool { return n == "big" }
	}} {
		b.Hidden = h
		if seen, e := b.Check(ctx, top); seen != 41 || e != nil {
			t.Errorf("plan reading a hidden table judged by its estimates: %d %v", seen, e)
		}
	}
}
