package tools

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/plan"
)

// planBudgetOf is the budget of one call of p on db.
func planBudgetOf(ctx context.Context, p Principal, db *Database) plan.Budget {
	return plan.BudgetOf(ctx, plan.Budget{Cost: db.Policy.MaxEstimatedCost, Rows: db.Policy.MaxEstimatedRows},
		plan.Budget{Cost: p.MaxEstimatedCost, Rows: p.MaxEstimatedRows})
}

// catalogEstimate answers plan.Summarize's question from db's catalog snapshot, for the relations the
// role may read; a table under row-level security has no estimate to show (its rows count those
// the role may not see).
func (req *request) catalogEstimate(ctx context.Context) func(schema, name string) (int64, bool) {
	snap, err := req.db.cat.Snapshot(ctx, false)
	if err != nil {
		return func(string, string) (int64, bool) { return 0, false }
	}
	view, verr := req.db.cat.ViewFor(ctx, snap, req.who().role)
	return func(schema, name string) (int64, bool) {
		r := snap.Rels[catalog.RelKey(schema, name)]
		if r == nil || verr != nil {
			return 0, false
		}
		if view != nil {
			if !view.Readable(r) {
				return 0, false
			}
			r = view.Rel(r)
		}
		if r == nil || r.RowSecurity || r.Estimate < 0 {
			return 0, false
		}
		return r.Estimate, true
	}
}

// planRead plans sql as a read does: in a READ ONLY transaction (or the session's read-only
// savepoint) acting as the caller, with its identity checked, then rolled back. Nothing of the
// statement runs.
func (req *request) planRead(ctx context.Context, sess *Session, sql string, params []any) (*plan.Node, error) {
	rs, err := runReadOn(ctx, req.db, sess, req.who(), wire.Stmt{SQL: plan.ExplainPrefix + sql, Params: params, MaxRows: 2, Format: wire.Objects})
	if err != nil {
		return nil, plan.ShiftPosition(err)
	}
	var rows []map[string]json.RawMessage
	if err := json.Unmarshal(rs.Data, &rows); err != nil || len(rows) != 1 || len(rows[0]) != 1 {
		return nil, fmt.Errorf("reading the plan: unexpected EXPLAIN output")
	}
	for _, v := range rows[0] {
		return plan.Parse(v)
	}
	return nil, nil // unreachable: one column
}

// withinBudget plans a read the way it will run (planRead) and refuses it when over the call's
// budget: one round trip before the statement, only when a budget is set.
func (req *request) withinBudget(ctx context.Context, sess *Session, st wire.Stmt) error {
	if !req.budget.Set() {
		return nil
	}
	if planned, e := plan.Gate(leadingKeyword(st.SQL)); !planned {
		if e != nil {
			return e
		}
		return nil
	}
	top, err := req.planRead(ctx, sess, st.SQL, st.Params)
	if err != nil {
		return err
	}
	if req.lookAhead && st.MaxRows > 0 && top.PlanRows >= float64(st.MaxRows) {
		// select_query asks for one row past its limit, to tell that more exist; the caller is
		// answered at most limit rows, and that is what the row budget bounds.
		top.PlanRows = float64(st.MaxRows - 1)
	}
	if e := req.budget.Check(ctx, top); e != nil {
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
