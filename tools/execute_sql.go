package tools

import (
	"context"
	"errors"
)

// executeSQL runs one agent-written statement. In read mode it runs in a READ ONLY transaction
// with its rows capped on the server; write mode is not available yet and never writes.
func executeSQL(ctx context.Context, req *request) (*Result, *Error) {
	const op = "execute"
	if strArg(req.args, "mode") == "write" {
		if !req.principal.Can("write") {
			return nil, errorf(ErrNotAllowed, "Use mode \"read\", or ask the operator for a token with the write scope.",
				"Your token lacks the \"write\" scope that execute_sql with mode \"write\" needs")
		}
		return nil, &Error{Type: ErrNotAllowed, Message: "execute_sql with mode \"write\" is not yet available in this version of pgtools",
			Suggestion: "Use mode \"read\" for queries; writes are not available yet."}
	}
	if strArg(req.args, "session_id") != "" {
		return nil, sessionsUnavailable(op)
	}
	params, perr := paramList(req.args["params"])
	if perr != nil {
		return nil, perr
	}
	limit := req.db.Policy.DefaultLimit
	rs, err := req.db.runRead(ctx, readStmt{sql: strArg(req.args, "sql"), params: params, maxRows: limit + 1, maxBytes: req.db.Policy.MaxResponseBytes})
	if err != nil {
		if errors.Is(err, errTxEscaped) {
			return nil, &Error{Type: ErrReadOnlyViolation, Message: "The statement tried to end the read transaction; transaction control is not allowed in execute_sql",
				Suggestion: "Send one query without BEGIN, COMMIT or ROLLBACK; use pg_tx to manage transactions."}
		}
		return nil, classify(ctx, err, callContext{readOnly: true, database: req.db.Name}, !req.db.Policy.ShowErrorValues)
	}
	res := rowsResult(op, "", rs, limit, 0, req.db.Policy.MaxResponseBytes)
	res.Command = rs.tag
	return res, nil
}
