package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/pgtools/pgtools/tools/internal/pgerr"
)

// Budget is the planner estimate a call's statements may reach: the smallest of the database's
// policy, the principal's and the call's own (BudgetOf). Zero fields set no bound; with both
// zero no plan is asked for, and a statement costs no extra round trip.
type Budget struct {
	Cost float64 // max_estimated_cost: the top plan node's Total Cost; 0: no bound
	Rows int64   // max_estimated_rows: rows returned, or for a write the rows it touches; 0: no bound
	// Estimates gives a refusal's summary the catalog's table sizes (its warnings); nil: none.
	Estimates func(ctx context.Context) func(schema, name string) (int64, bool)
	// Hidden says which relations row-level security applies to for the caller: a plan that
	// reads one is not judged by its estimates (Check). nil: every relation is hidden, the
	// fail-closed reading.
	Hidden func(ctx context.Context) func(schema, name string) bool
}

// Set reports whether b bounds anything.
func (b Budget) Set() bool { return b.Cost > 0 || b.Rows > 0 }

type budgetKey struct{}

type callBudget struct {
	cost float64
	rows int64
}

// WithBudget returns a context whose tool calls refuse, before running it, a statement whose
// plan is estimated above cost or above rows (too_expensive), where that is below the database's
// and the principal's max_estimated_cost and max_estimated_rows. Transports set it from what the
// caller's host asks for (the n8n nodes' options): it can lower a budget, or set one where none
// is configured, never raise or lift one. A value <= 0 leaves that bound as configured.
func WithBudget(ctx context.Context, cost float64, rows int64) context.Context {
	if cost <= 0 && rows <= 0 {
		return ctx
	}
	return context.WithValue(ctx, budgetKey{}, callBudget{cost: max(cost, 0), rows: max(rows, 0)})
}

// BudgetOf is the budget of one call: each bound the smallest set among configured (the
// database's policy and the principal's, their Estimates ignored) and the call's own from ctx
// (WithBudget). Its Estimates is nil.
func BudgetOf(ctx context.Context, configured ...Budget) Budget {
	c, _ := ctx.Value(budgetKey{}).(callBudget)
	b := Budget{Cost: c.cost, Rows: c.rows}
	for _, o := range configured {
		b.Cost, b.Rows = lowest(b.Cost, o.Cost), lowest(b.Rows, o.Rows)
	}
	return b
}

// lowest is the smallest of the positive values among vs, or 0 when none is.
func lowest[T int64 | float64](vs ...T) T {
	var n T
	for _, v := range vs {
		if v > 0 && (n == 0 || v < n) {
			n = v
		}
	}
	return n
}

// Check refuses plan when it is estimated over b: too_expensive, carrying the plan's summary and
// naming the fix. It returns nil when the plan fits.
//
// A plan that reads a relation under row-level security for the caller (b.Hidden) is not judged
// by its estimates at all: they count rows the caller cannot see, and a refusal that depends on
// them, at a bound the caller may lower per call, answers questions about those rows. Check then
// returns nil and seen = b.Rows: the caller bounds the rows the statement actually returns or
// changes, which row-level security has already cut to the caller's (RowsOver). Its cost bound
// does not apply; statement_timeout bounds the work.
func (b Budget) Check(ctx context.Context, plan *Node) (seen int64, e *pgerr.Error) {
	hidden := func(string, string) bool { return true }
	if b.Hidden != nil {
		hidden = b.Hidden(ctx)
	}
	if Reads(plan, hidden) {
		return b.Rows, nil
	}
	return 0, b.check(ctx, plan)
}

// RowsOver is Check's refusal of a statement under row-level security that returned (write
// false) or changed n rows, more than bound, max_estimated_rows. Nothing is answered; a write is
// rolled back.
func RowsOver(n, bound int64, write bool) *pgerr.Error {
	what, done, fix := "returned", "nothing was answered", "Add a narrower where or a smaller limit"
	if write {
		what, done, fix = "changed", "it was rolled back and nothing changed", "Narrow the where to the rows you mean to change, or change them in smaller batches"
	}
	return &pgerr.Error{Type: pgerr.ErrTooExpensive,
		Message:    fmt.Sprintf("The statement %s %d rows, over max_estimated_rows %d; %s. Row-level security applies to a table it reads, so the budget counts the rows you can see instead of the planner's estimate (which counts rows you cannot)", what, n, bound, done),
		Suggestion: fix + ". Only the operator can raise policy.max_estimated_rows."}
}

func (b Budget) check(ctx context.Context, plan *Node) *pgerr.Error {
	noEstimates := func(string, string) (int64, bool) { return 0, false }
	quick := Summarize(plan, noEstimates)
	overCost := b.Cost > 0 && plan.TotalCost > b.Cost
	overRows := b.Rows > 0 && quick.touched() > b.Rows
	if !overCost && !overRows {
		return nil
	}
	est := noEstimates
	if b.Estimates != nil {
		est = b.Estimates(ctx)
	}
	s := Summarize(plan, est)
	var over []string
	if overCost {
		over = append(over, fmt.Sprintf("cost %s, over max_estimated_cost %s", fmtCost(plan.TotalCost), fmtCost(b.Cost)))
	}
	if overRows {
		what := "rows"
		if len(s.Writes) > 0 {
			what = "rows touched"
		}
		over = append(over, fmt.Sprintf("%d %s, over max_estimated_rows %d", s.touched(), what, b.Rows))
	}
	e := &pgerr.Error{Type: pgerr.ErrTooExpensive,
		Message:    "The planner estimates this statement at " + strings.Join(over, ", and ") + "; nothing was run",
		Suggestion: budgetFix(s, overRows)}
	e.Plan, _ = json.Marshal(s)
	return e
}

// budgetFix is the narrower call that fits a budget, read from the plan.
func budgetFix(s *Summary, overRows bool) string {
	var fix []string
	for _, sc := range s.Scans {
		if sc.Method == "Seq Scan" && sc.Filter != "" {
			fix = append(fix, fmt.Sprintf("filter %s on an indexed column (describe_schema lists its indexes), or ask the operator for an index on the columns of its filter %s", sc.Table, sc.Filter))
			break
		}
	}
	if len(fix) == 0 && len(s.Scans) > 1 {
		fix = append(fix, "join on key columns and add a where to each table (a join without one multiplies rows)")
	}
	if len(s.Writes) > 0 {
		fix = append(fix, "narrow the where to the rows you mean to change, or change them in smaller batches")
	} else {
		fix = append(fix, "add a narrower where")
		if overRows {
			fix = append(fix, "a smaller limit")
		}
	}
	return "Make the statement cheaper: " + strings.Join(fix, "; ") + ". explain_query shows the estimate of a rewrite without running it. " +
		"Only the operator can raise policy.max_estimated_cost or max_estimated_rows."
}

func fmtCost(c float64) string { return strconv.FormatFloat(c, 'f', -1, 64) }

// plannableWords lead the statements pgtools plans: those PostgreSQL's EXPLAIN accepts that do
// their work only when executed. (EXPLAIN also takes CREATE TABLE AS, DECLARE, EXECUTE and
// REFRESH, which a model has no reason to plan here.)
var plannableWords = map[string]bool{"SELECT": true, "WITH": true, "INSERT": true, "UPDATE": true, "DELETE": true,
	"MERGE": true, "VALUES": true, "TABLE": true}

// Plannable reports whether a statement whose leading keyword (upper case) is keyword is one
// pgtools plans: SELECT, INSERT, UPDATE, DELETE, MERGE, WITH, VALUES or TABLE.
func Plannable(keyword string) bool { return plannableWords[keyword] }

// unplannedWords lead the statements a budget lets through without a plan: they only read or
// set a setting, at no cost to speak of. Every other statement PostgreSQL cannot EXPLAIN (DDL,
// DO, CALL, EXPLAIN ANALYZE, which runs its statement unplanned by pgtools, …) is refused while
// a budget applies: the budget could not see what it costs.
var unplannedWords = map[string]bool{"SHOW": true, "SET": true, "RESET": true}

// Gate says whether a statement whose leading keyword (upper case, "" when it has none) is
// keyword is planned against a budget (Plannable), let through as costless (SHOW, SET, RESET:
// planned false, nil error), or refused (not_allowed): a budget could not see what it costs.
func Gate(keyword string) (planned bool, e *pgerr.Error) {
	switch {
	case plannableWords[keyword]:
		return true, nil
	case unplannedWords[keyword]:
		return false, nil
	}
	what := keyword
	if what == "" {
		what = "this statement"
	}
	return false, &pgerr.Error{Type: pgerr.ErrNotAllowed,
		Message: fmt.Sprintf("A plan budget (max_estimated_cost or max_estimated_rows) applies to this call, and PostgreSQL cannot estimate %s before it runs; nothing was run", what),
		Suggestion: "Send a SELECT, INSERT, UPDATE, DELETE or MERGE, whose plan the budget can check (explain_query shows the plan of one instead of EXPLAIN). " +
			"Statements without a plan (DDL, DO, CALL, EXPLAIN ANALYZE) need a database or token without a budget; ask the operator."}
}
