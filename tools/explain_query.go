package tools

import (
	"context"
	"fmt"

	"github.com/pgtools/pgtools/tools/plan"
)

type explainArgs struct {
	databaseArg
	readOnlyArgs
	SQL    string   `json:"sql"`
	Params rawValue `json:"params"`
}

// explainQuery answers the planner's estimate of one statement without running it: plain EXPLAIN
// in a READ ONLY transaction acting as the caller, rolled back (planRead). The READ ONLY
// transaction is what makes "nothing runs" hold even where planning evaluates a function (a
// mislabelled IMMUTABLE one folded at plan time): PostgreSQL refuses its writes and nextval.
func explainQuery(ctx context.Context, req *request, a *explainArgs) (Result, *Error) {
	kw := leadingKeyword(a.SQL)
	if !plan.Plannable(kw) {
		what := kw
		if what == "" {
			what = "this statement"
		}
		fix := "Send one SELECT, INSERT, UPDATE, DELETE or MERGE (WITH, VALUES and TABLE too); other statements have no plan to show."
		if kw == "EXPLAIN" || kw == "ANALYZE" {
			fix = "Send the statement itself, without EXPLAIN or ANALYZE: explain_query plans it and never runs it."
		}
		return nil, &Error{Type: ErrNotAllowed, Message: fmt.Sprintf("explain_query plans one SELECT, INSERT, UPDATE, DELETE or MERGE, not %s; nothing was run", what),
			Suggestion: fix}
	}
	if e := checkFreeSQL(a.SQL, true, false); e != nil {
		return nil, e
	}
	params, perr := paramList(a.Params)
	if perr != nil {
		return nil, perr
	}
	top, err := req.planRead(ctx, nil, a.SQL, params)
	if err != nil {
		return nil, req.statementError(ctx, err, stmtInfo{sql: a.SQL, readOnly: true})
	}
	return &PlanResult{Operation: "explain", PlanSummary: *req.summarize(ctx, top)}, nil
}
