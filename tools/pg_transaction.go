package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/tools/approval"
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

// pgTransaction runs 1–100 statements atomically in one transaction on a pooled connection: all
// commit or none. It never uses a session slot. Like every write it leaves the connection as it
// found it: the session-level state the batch set is cleared inside the transaction, before its
// COMMIT or ROLLBACK (behind a transaction pooler the server connection goes on to the next
// client at that point), and a connection whose reset is not confirmed, or whose transaction
// ended in a state pgtools cannot vouch for, is destroyed instead of returned (docs/sessions.md:
// What a batch leaves behind).
func pgTransaction(ctx context.Context, req *request, batch *batchArgs) (Result, *Error) {
	const op = "transaction"
	leave, lerr := req.txLimit.acquire(ctx, req.principal, req.db)
	if lerr != nil {
		return nil, lerr
	}
	defer leave()
	ops, format := batch.Operations, req.format(batch.Format)
	stmts := make([]writeStmt, len(ops))
	for i, o := range ops {
		sql := o.SQL
		if e := checkFreeSQL(sql, false, false); e != nil {
			return nil, failedAt(i, e)
		}
		params, perr := paramList(o.Params)
		if perr != nil {
			return nil, failedAt(i, perr)
		}
		if e := req.explainGuard(ctx, nil, sql, params); e != nil {
			return nil, failedAt(i, e)
		}
		stmts[i] = writeStmt{op: op, sql: sql, params: params, free: true, keepRows: req.db.Policy.DefaultLimit,
			maxBytes: req.maxBytes, allowDDL: req.allowDDL, ddlFix: req.ddlFix,
			maxAffected: req.db.Policy.MaxAffectedRows, format: format, budget: req.budget}
	}

	conn, err := req.db.acquire(ctx)
	if err != nil {
		return nil, ClassifyError(ctx, err, req.db)
	}
	pc := conn.Conn().PgConn()
	reusable := false // set once the transaction ended cleanly and its reset was confirmed
	defer func() { release(conn, !reusable || pc.IsClosed()) }()
	who := req.who()
	bound := newTxBound(&req.db.Policy)
	pol := bound.next()
	// One round trip opens the transaction as the caller (its application_name included, local
	// to the transaction, so pg_stat_activity names the batch's principal while the pooled
	// connection keeps its own name), arms its bounds and takes the first operation's
	// before-reading.
	begin := "BEGIN" + bound.serverSQL(pc) + "; " + who.prefix(false) + timeoutsSQL(pol)
	var tw string // how to read the table writes, when approval rules apply: prepared before BEGIN
	if req.approval != nil {
		tw = approval.TableWritesText(ctx, pc, req.db.Policy.PreparesStatements())
	}
	began := time.Now()
	// tablesBefore: the backend's counters as the batch began (approval rules only)
	before, tablesBefore, err := execReadings(ctx, pc, begin, tw, true)
	if err != nil {
		_ = wire.RollbackClean(context.WithoutCancel(ctx), pc)
		var te *Error
		if errors.As(err, &te) {
			return nil, te // track_counts is off
		}
		return nil, ClassifyError(ctx, err, req.db)
	}
	phase(ctx, "begin", began)
	results := make([]opResult, 0, len(stmts))
	outs := make([]*writeOutcome, 0, len(stmts))
	for i, st := range stmts {
		var pre []wire.Exec
		if i > 0 {
			// Identity and timeouts asserted again (an earlier operation may have tried to change
			// them), the timeouts cut to what is left of the bound, in the operation's round trip.
			pol = bound.next()
			pre = append(who.pipeline(true), wire.Exec{SQL: "SET LOCAL statement_timeout = " + strconv.FormatInt(pol.StatementTimeout.Milliseconds(), 10)},
				wire.Exec{SQL: "SET LOCAL lock_timeout = " + strconv.FormatInt(pol.LockTimeout.Milliseconds(), 10)})
		}
		out, keep, err := execBatched(ctx, pc, pol, st, pre, before, req.db.Policy.PreparesStatements())
		if err == nil && !keep {
			err = errors.New("operation refused")
		}
		if err != nil {
			// What the rollback will not undo, read while the transaction still holds it (an
			// aborted transaction cannot be asked, and says nothing).
			seqs := sequencesUsed(ctx, pc)
			// Rolled back and reset before the connection goes back: advisory locks and sequence
			// state survive a rollback, and a transaction pooler hands the server connection on
			// at the ROLLBACK.
			rbErr := wire.RollbackClean(context.WithoutCancel(ctx), pc)
			// A cancelled call or a timeout may leave a cancel request in flight that would hit
			// the connection's next statement: such a connection is not reused.
			reusable = rbErr == nil && ctx.Err() == nil && !cancelledByTimeout(err)
			e := bound.exceeded(ctx, err, req.db)
			if e == nil {
				e = req.statementError(ctx, err, stmtInfo{sql: st.sql})
			}
			noteSequences(e, seqs)
			return nil, failedAt(i, e)
		}
		r := opResult{Command: out.tag, RowCount: out.affected}
		if out.rows.RowCount > 0 {
			r.Rows = wire.Rows{Columns: out.rows.Columns, Data: out.rows.Data}
		}
		results = append(results, r)
		outs = append(outs, out)
		before = out.after // nothing but the next assertions runs before the next operation
	}
	if req.approval != nil {
		// The whole batch's effect decides, measured before its COMMIT.
		if err := settleApproval(ctx, pc, req.approval, tw, tablesBefore, outs...); err != nil {
			noteSequences(err, sequencesUsed(ctx, pc)) // measured and rolled back: what that cannot undo
			rbErr := wire.RollbackClean(context.WithoutCancel(ctx), pc)
			reusable = rbErr == nil && ctx.Err() == nil
			var te *Error
			if errors.As(err, &te) {
				return nil, te
			}
			return nil, ClassifyError(ctx, err, req.db)
		}
	}
	if !time.Now().Before(bound.deadline) {
		rbErr := wire.RollbackClean(context.WithoutCancel(ctx), pc)
		reusable = rbErr == nil && ctx.Err() == nil
		return nil, txTimeoutError(req.db, "every operation ran, but the transaction was rolled back and its locks released: nothing was committed")
	}
	committing := time.Now()
	err = commit(ctx, pc) // clears the batch's session state before COMMIT
	phase(ctx, "commit", committing)
	if slices.ContainsFunc(outs, func(o *writeOutcome) bool { return o.ddl }) && (err == nil || errors.Is(err, errCommitUnknown)) {
		req.db.cat.Invalidate() // describe_schema and suggestions must see the schema change at once
	}
	if err != nil {
		// commit rolled back what PostgreSQL refused, but whether that reset held is not
		// confirmed here: the connection is destroyed.
		if errors.Is(err, errCommitUnknown) {
			return nil, commitUnknown("the operations")
		}
		e := ClassifyError(ctx, err, req.db)
		e.Message += "; the COMMIT failed and nothing was committed"
		return nil, e
	}
	reusable = ctx.Err() == nil && pc.TxStatus() == 'I'
	req.approval.committed()
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

// execBatched runs one operation of a batch under pol's timeouts, with its own deadline, in one
// round trip: pre (pgtools' own assertions), the statement, and the effects reading after it,
// pipelined through the extended protocol. before is the reading taken after the identity and
// timeouts were last asserted: the previous operation's after-reading, or the BEGIN's.
func execBatched(ctx context.Context, pc *pgconn.PgConn, pol *Policy, st writeStmt, pre []wire.Exec, before effects, named bool) (*writeOutcome, bool, error) {
	defer phase(ctx, "statement", time.Now())
	ctx, cancel := withCallDeadline(ctx, pol)
	defer cancel()
	if st.budget.Set() {
		// Planned after the assertions, which then need not run again with the statement.
		ran, seen, err := writeWithinBudget(ctx, pc, st, pre)
		st.seenRows = seen
		if err != nil {
			return nil, false, err
		}
		if ran {
			pre = nil
		}
	}
	oids := st.colOIDs
	if wire.NeedsTypes(st.params) {
		sd, err := pc.Prepare(ctx, "", st.sql, nil)
		if err != nil {
			return nil, false, err
		}
		oids = wire.MergeOIDs(sd.ParamOIDs, st.colOIDs)
	}
	values, err := wire.EncodeParams(st.params, oids)
	if err != nil {
		return nil, false, err // a *wire.ParamError, which classify answers as invalid_arguments
	}
	var b pgconn.Batch
	for _, e := range pre {
		b.ExecParams(e.SQL, e.Params, nil, nil, nil)
	}
	b.ExecParams(st.sql, values, nil, nil, nil)
	if named && effectsPrepared(ctx, pc) {
		b.ExecPrepared(effectsStmtName, nil, nil, nil)
	} else {
		b.ExecParams(effectsSQL, nil, nil, nil, nil)
	}
	mrr := pc.ExecBatch(ctx, &b)
	for range pre {
		if !mrr.NextResult() {
			return nil, false, missingResult(mrr, "an assertion")
		}
		if _, err := mrr.ResultReader().Close(); err != nil {
			return nil, false, closeWithError(mrr, err)
		}
	}
	if !mrr.NextResult() {
		return nil, false, missingResult(mrr, "the statement")
	}
	rs, tag, err := wire.CollectRows(mrr.ResultReader(), st.format, st.keepRows, st.maxBytes)
	if err != nil {
		return nil, false, closeWithError(mrr, err)
	}
	out := &writeOutcome{rows: rs, tag: wire.CommandVerb([]byte(tag.String())), affected: tag.RowsAffected()}
	if !mrr.NextResult() {
		return out, false, missingResult(mrr, "the effects reading")
	}
	res := mrr.ResultReader().Read()
	if err := closeWithError(mrr, res.Err); err != nil {
		return out, false, err
	}
	after, err := effectsOf(res.Rows)
	if err != nil {
		return out, false, err
	}
	return judge(st, out, before, after)
}

// effectsStmtName names effectsSQL prepared on a pooled connection, so that the reading after
// each operation of a batch is not parsed and planned again every time (it costs about as much
// as a small statement). Like the read statement cache it is pgtools' own, kept across calls
// (the reset does not deallocate it, and agents cannot: DEALLOCATE is refused), and not used
// where Policy.DescribeExec says a transaction pooler may not keep named statements.
const effectsStmtName = "pgtools_effects"

// effectsPrepared prepares effectsSQL on pc once, and reports whether it is.
func effectsPrepared(ctx context.Context, pc *pgconn.PgConn) bool {
	data := pc.CustomData()
	if data[effectsStmtName] == true {
		return true
	}
	if _, err := pc.Prepare(ctx, effectsStmtName, effectsSQL, nil); err != nil {
		return false
	}
	data[effectsStmtName] = true
	return true
}

// missingResult is the error of a pipeline that ended before what's result: PostgreSQL's error
// that ended it (a statement that failed at Parse or Bind reports it there), else a plain one.
func missingResult(mrr *pgconn.MultiResultReader, what string) error {
	if err := mrr.Close(); err != nil {
		return err
	}
	return fmt.Errorf("no result for %s", what)
}

// failedAt names the failing operation in an error: everything was rolled back.
func failedAt(i int, e *Error) *Error {
	idx := i
	e.FailedOperation = &idx
	e.Message = fmt.Sprintf("Operation %d failed: %s. All operations were rolled back; nothing was committed", i, e.Message)
	return e
}
