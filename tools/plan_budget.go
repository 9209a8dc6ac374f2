package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/tools/internal/wire"
)

// planBudget is the planner estimate a call's statements may reach: the smallest of the
// database's policy, the principal's and the call's own (WithPlanBudget). Zero fields set no
// bound; with both zero no plan is asked for, and a statement costs no extra round trip.
type planBudget struct {
	cost float64 // max_estimated_cost: the top plan node's Total Cost
	rows int64   // max_estimated_rows: rows returned, or for a write the rows it touches
	// estimates gives a refusal's summary the catalog's table sizes (its warnings); nil: none.
	estimates func(ctx context.Context) func(schema, name string) (int64, bool)
}

func (b planBudget) set() bool { return b.cost > 0 || b.rows > 0 }

type planBudgetKey struct{}

type callBudget struct {
	cost float64
	rows int64
}

// WithPlanBudget returns a context whose tool calls refuse, before running it, a statement whose
// plan is estimated above cost or above rows (too_expensive), where that is below the database's
// and the principal's max_estimated_cost and max_estimated_rows. Transports set it from what the
// caller's host asks for (the n8n nodes' options): it can lower a budget, or set one where none
// is configured, never raise or lift one. A value <= 0 leaves that bound as configured.
func WithPlanBudget(ctx context.Context, cost float64, rows int64) context.Context {
	if cost <= 0 && rows <= 0 {
		return ctx
	}
	return context.WithValue(ctx, planBudgetKey{}, callBudget{cost: max(cost, 0), rows: max(rows, 0)})
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

// planBudgetOf is the budget of one call of p on db.
func planBudgetOf(ctx context.Context, p Principal, db *Database) planBudget {
	c, _ := ctx.Value(planBudgetKey{}).(callBudget)
	return planBudget{cost: lowest(db.Policy.MaxEstimatedCost, p.MaxEstimatedCost, c.cost),
		rows: lowest(db.Policy.MaxEstimatedRows, p.MaxEstimatedRows, c.rows)}
}

// check refuses plan when it is estimated over b. The refusal carries the plan's summary and
// names the fix; nil when the plan fits.
func (b planBudget) check(ctx context.Context, plan *planNode) *Error {
	noEstimates := func(string, string) (int64, bool) { return 0, false }
	quick := summarize(plan, noEstimates)
	overCost := b.cost > 0 && plan.TotalCost > b.cost
	overRows := b.rows > 0 && quick.touched() > b.rows
	if !overCost && !overRows {
		return nil
	}
	est := noEstimates
	if b.estimates != nil {
		est = b.estimates(ctx)
	}
	s := summarize(plan, est)
	var over []string
	if overCost {
		over = append(over, fmt.Sprintf("cost %s, over max_estimated_cost %s", fmtCost(plan.TotalCost), fmtCost(b.cost)))
	}
	if overRows {
		what := "rows"
		if len(s.Writes) > 0 {
			what = "rows touched"
		}
		over = append(over, fmt.Sprintf("%d %s, over max_estimated_rows %d", s.touched(), what, b.rows))
	}
	e := &Error{Type: ErrTooExpensive,
		Message:    "The planner estimates this statement at " + strings.Join(over, ", and ") + "; nothing was run",
		Suggestion: budgetFix(s, overRows)}
	e.Plan, _ = json.Marshal(s)
	return e
}

// budgetFix is the narrower call that fits a budget, read from the plan.
func budgetFix(s *PlanSummary, overRows bool) string {
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

// unplannedWords lead the statements a budget lets through without a plan: they only read or
// set a setting, at no cost to speak of. Every other statement PostgreSQL cannot EXPLAIN (DDL,
// DO, CALL, EXPLAIN ANALYZE, which runs its statement unplanned by pgtools, …) is refused while
// a budget applies: the budget could not see what it costs.
var unplannedWords = map[string]bool{"SHOW": true, "SET": true, "RESET": true}

// budgetGate says whether sql is planned against a budget (plannable), lets it through as
// costless, or refuses it: nil error and plan false for the costless ones.
func budgetGate(sql string) (plan bool, e *Error) {
	kw := leadingKeyword(sql)
	switch {
	case plannableWords[kw]:
		return true, nil
	case unplannedWords[kw]:
		return false, nil
	}
	what := kw
	if what == "" {
		what = "this statement"
	}
	return false, &Error{Type: ErrNotAllowed,
		Message: fmt.Sprintf("A plan budget (max_estimated_cost or max_estimated_rows) applies to this call, and PostgreSQL cannot estimate %s before it runs; nothing was run", what),
		Suggestion: "Send a SELECT, INSERT, UPDATE, DELETE or MERGE, whose plan the budget can check (explain_query shows the plan of one instead of EXPLAIN). " +
			"Statements without a plan (DDL, DO, CALL, EXPLAIN ANALYZE) need a database or token without a budget; ask the operator."}
}

// withinBudget plans a read the way it will run (planRead) and refuses it when over the call's
// budget: one round trip before the statement, only when a budget is set.
func (req *request) withinBudget(ctx context.Context, sess *Session, st wire.Stmt) error {
	if !req.budget.set() {
		return nil
	}
	if planned, e := budgetGate(st.SQL); !planned {
		if e != nil {
			return e
		}
		return nil
	}
	plan, err := req.planRead(ctx, sess, st.SQL, st.Params)
	if err != nil {
		return err
	}
	if req.lookAhead && st.MaxRows > 0 && plan.PlanRows >= float64(st.MaxRows) {
		// select_query asks for one row past its limit, to tell that more exist; the caller is
		// answered at most limit rows, and that is what the row budget bounds.
		plan.PlanRows = float64(st.MaxRows - 1)
	}
	if e := req.budget.check(ctx, plan); e != nil {
		return e
	}
	return nil
}

// readOn is runReadOn for the agent's statement of a call: refused before it runs when its plan
// is over the call's budget.
func (req *request) readOn(ctx context.Context, sess *Session, st wire.Stmt) (*wire.RowSet, error) {
	if err := req.withinBudget(ctx, sess, st); err != nil {
		return nil, err
	}
	return runReadOn(ctx, req.db, sess, req.who(), st)
}

// writeWithinBudget plans st inside its transaction on pc, after pre (the identity and timeouts
// asserted again, in the same round trip), and refuses it when over st.budget. ran reports
// whether pre ran: a statement the budget lets through unplanned (SET, SHOW) sends nothing.
func writeWithinBudget(ctx context.Context, pc *pgconn.PgConn, st writeStmt, pre []wire.Exec) (ran bool, err error) {
	if planned, e := budgetGate(st.sql); !planned {
		if e != nil {
			return false, e
		}
		return false, nil
	}
	plan, err := planIn(ctx, pc, st, pre)
	if err != nil {
		return true, err
	}
	if e := st.budget.check(ctx, plan); e != nil {
		return true, e
	}
	return true, nil
}
