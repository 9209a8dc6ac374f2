package tools

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/tools/internal/wire"
)

// opResult is one operation's answer in pg_transaction's results.
type opResult struct {
	Command  string    `json:"command"`
	RowCount int64     `json:"rowCount"`
	Rows     wire.Rows `json:"rows,omitempty"` // "rows", or "columns" then "rows" (format columns)
}

// opEncoder writes one operation's outcome; its rows are copied as the row encoder made them.
var opEncoder = wire.NewObjectEncoder[opResult]("")

// pgTransaction runs 1–100 statements atomically on a fresh connection of their own: all commit
// or none. It never uses a session slot, and the connection is destroyed afterwards; the session
// state the batch set is cleared before its COMMIT or ROLLBACK all the same, since behind a
// transaction pooler the server connection goes on to the next client.
func pgTransaction(ctx context.Context, req *request, batch *batchArgs) (Result, *Error) {
	const op = "transaction"
	release, lerr := req.txLimit.acquire(ctx, req.principal, req.db)
	if lerr != nil {
		return nil, lerr
	}
	defer release()
	ops, format := batch.Operations, req.format(batch.Format)
	stmts := make([]writeStmt, len(ops))
	for i, o := range ops {
		sql := o.SQL
		if e := checkFreeSQL(sql, false, false); e != nil {
			return nil, failedAt(i, e)
		}
		params, perr := paramList(o.Params.v)
		if perr != nil {
			return nil, failedAt(i, perr)
		}
		stmts[i] = writeStmt{op: op, sql: sql, params: params, free: true, keepRows: req.db.Policy.DefaultLimit,
			maxBytes: req.maxBytes, allowDDL: req.allowDDL, ddlFix: req.ddlFix,
			maxAffected: req.db.Policy.MaxAffectedRows, format: format}
	}

	cfg := req.db.Pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "pgtools-transaction"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, ClassifyError(ctx, err, req.db)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	pc := conn.PgConn()
	who := req.who()
	bound := newTxBound(&req.db.Policy)
	if err := simpleExec(ctx, pc, "BEGIN; "+who.sql(false)+bound.serverSQL(pc)); err != nil {
		return nil, ClassifyError(ctx, err, req.db)
	}
	results := make([]opResult, 0, len(stmts))
	for i, st := range stmts {
		out, keep, err := execBatched(ctx, pc, bound.next(), who, st)
		if err == nil && !keep {
			err = errors.New("operation refused")
		}
		if err != nil {
			// Rolled back and reset before the connection closes: behind a transaction pooler,
			// closing ours leaves the server connection to the next client.
			_ = wire.RollbackClean(context.WithoutCancel(ctx), pc)
			if e := bound.exceeded(ctx, err, req.db); e != nil {
				return nil, failedAt(i, e)
			}
			return nil, failedAt(i, req.statementError(ctx, err, stmtInfo{sql: st.sql}))
		}
		r := opResult{Command: out.tag, RowCount: out.affected}
		if out.rows.RowCount > 0 {
			r.Rows = wire.Rows{Columns: out.rows.Columns, Data: out.rows.Data}
		}
		results = append(results, r)
	}
	if !time.Now().Before(bound.deadline) {
		_ = wire.RollbackClean(context.WithoutCancel(ctx), pc)
		return nil, txTimeoutError(req.db, "every operation ran, but the transaction was rolled back and its locks released: nothing was committed")
	}
	if err := commit(ctx, pc); err != nil { // clears the batch's session state before COMMIT
		if errors.Is(err, errCommitUnknown) {
			return nil, commitUnknown("the operations")
		}
		e := ClassifyError(ctx, err, req.db)
		e.Message += "; the COMMIT failed and nothing was committed"
		return nil, e
	}
	data := []byte{'['}
	for i := range results {
		if i > 0 {
			data = append(data, ',')
		}
		var err error
		if data, err = opEncoder.Append(data, &results[i]); err != nil {
			return nil, errorf(ErrInternal, "Do not run the operations again: check their effect with select_query.",
				"The operations were committed, but their answer could not be encoded: %v", err)
		}
	}
	data = append(data, ']')
	return &BatchResult{Operation: op, Status: "committed", RowCount: len(results), Results: data}, nil
}

// execBatched runs one operation of a batch with the identity and pol's timeouts asserted
// again before it (an earlier operation may have tried to change them) and its own deadline.
func execBatched(ctx context.Context, pc *pgconn.PgConn, pol *Policy, who identity, st writeStmt) (*writeOutcome, bool, error) {
	defer phase(ctx, "statement", time.Now())
	ctx, cancel := withCallDeadline(ctx, pol)
	defer cancel()
	before, err := execReading(ctx, pc, who.prefix(true)+timeoutsSQL(pol)+"; "+effectsSQL)
	if err != nil {
		return nil, false, err
	}
	return execChecked(ctx, pc, st, before)
}

// failedAt names the failing operation in an error: everything was rolled back.
func failedAt(i int, e *Error) *Error {
	idx := i
	e.FailedOperation = &idx
	e.Message = fmt.Sprintf("Operation %d failed: %s. All operations were rolled back; nothing was committed", i, e.Message)
	return e
}
