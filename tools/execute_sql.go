package tools

import (
	"context"
	"errors"

	"github.com/pgtools/pgtools/tools/internal/wire"
)

// executeSQL runs one agent-written statement. In read mode it runs in a READ ONLY transaction
// with its rows capped on the server; in write mode it runs guarded like every write.
func executeSQL(ctx context.Context, req *request, a *executeArgs) (Result, *Error) {
	write := a.Mode == "write"
	if e := checkFreeSQL(a.SQL, !write, req.session != nil); e != nil {
		return nil, e
	}
	if write {
		return executeWrite(ctx, req, a)
	}
	return executeRead(ctx, req, a)
}

func executeRead(ctx context.Context, req *request, a *executeArgs) (Result, *Error) {
	params, perr := paramList(a.Params)
	if perr != nil {
		return nil, perr
	}
	if e := req.explainGuard(ctx, req.session, a.SQL, params); e != nil {
		return nil, e
	}
	limit := req.db.Policy.DefaultLimit
	rs, err := req.readOn(ctx, req.session, wire.Stmt{SQL: a.SQL, Params: params, MaxRows: limit + 1, MaxBytes: req.maxBytes, Format: req.format(a.Format)})
	if err != nil {
		if errors.Is(err, wire.ErrTxEscaped) {
			return nil, &Error{Type: ErrReadOnlyViolation, Message: "Transaction control statements (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, …) are not allowed in execute_sql; the read ran in its own READ ONLY transaction and was rolled back",
				Suggestion: "Send one query without BEGIN, COMMIT or ROLLBACK; use pg_tx to manage transactions."}
		}
		return nil, req.statementError(ctx, err, stmtInfo{sql: a.SQL, readOnly: true})
	}
	res := rowsResult("execute", "", rs, limit, 0, req.maxBytes)
	res.Command = rs.Tag
	return res, nil
}

// executeWrite runs one agent statement that may change data. Transaction control is refused
// before anything runs; DDL is recognised after it ran (command tag, catalog rows written by the
// transaction) and rolled back unless the policy and the token allow it.
func executeWrite(ctx context.Context, req *request, a *executeArgs) (Result, *Error) {
	const op = "execute"
	sql := a.SQL
	params, perr := paramList(a.Params)
	if perr != nil {
		return nil, perr
	}
	if e := req.explainGuard(ctx, req.session, sql, params); e != nil {
		return nil, e
	}
	st := writeStmt{approval: req.approval, budget: req.budget, op: op, sql: sql, params: params, keepRows: req.db.Policy.DefaultLimit, maxBytes: req.maxBytes,
		free: true, confirm: a.ConfirmDestructive, allowDDL: req.allowDDL, ddlFix: req.ddlFix,
		maxAffected: req.db.Policy.MaxAffectedRows, who: req.who(), format: req.format(a.Format)}
	out, err := runWriteOn(ctx, req.db, req.session, st)
	if err != nil {
		return nil, req.statementError(ctx, err, stmtInfo{sql: sql})
	}
	if out.ddl && req.session == nil {
		req.db.cat.Invalidate() // committed: describe_schema and suggestions must see the change at once
	}
	res := writeResult(op, "", out, false, req.maxBytes)
	res.Command = out.tag
	return res, nil
}
