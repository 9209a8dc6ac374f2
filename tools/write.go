package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/internal/pgerr"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/plan"
)

// writeStmt is one write to run in a transaction, with the checks that decide whether it commits.
type writeStmt struct {
	op          string // insert, update, delete, execute
	table       string // display name, for messages
	sql         string
	params      []any
	colOIDs     []uint32      // known parameter types (insert/update values), 0 = let PostgreSQL infer
	keepRows    int           // returned rows to keep (the rest are counted, not sent)
	format      wire.Format   // how the returned rows are written
	maxBytes    int           // byte cap of the kept rows
	maxAffected int           // more affected rows → rolled back with too_many_rows (0 = no cap); for free SQL, the rows it updated or deleted in any table
	dryRun      bool          // execute, report, roll back
	free        bool          // agent-written SQL: classify by command tag and catalog changes
	confirm     bool          // confirm_destructive
	allowDDL    bool          // policy allows DDL and the principal has the ddl scope
	ddlFix      string        // without allowDDL: the suggestion naming what would allow DDL
	who         identity      // the role and claims the statement runs with (outside a session)
	budget      plan.Budget   // plan estimate bound, checked in the transaction before the statement
	seenRows    int64         // set by the budget check: > 0 bounds the rows the statement returns or changes (its plan reads a table under row-level security)
	approval    *approvalGate // approval rules, decided from the measured effect before COMMIT (nil: none)
}

// errCommitUnknown marks a COMMIT whose answer never arrived.
var errCommitUnknown = errors.New("commit outcome unknown")

// errConnClosedBeforeCommit marks a transaction whose connection was gone before its COMMIT could
// be sent: PostgreSQL rolled it back.
// It wraps net.ErrClosed, so it is classified as the connection_error it is.
var errConnClosedBeforeCommit = fmt.Errorf("the connection closed before COMMIT was sent: %w", net.ErrClosed)

// dmlTags are the command tags of statements that change rows but not the schema.
var dmlTags = map[string]bool{"INSERT": true, "UPDATE": true, "DELETE": true, "MERGE": true, "SELECT": true}

// runWrite runs st in its own transaction on a pooled connection and commits it when every check
// passes (autocommit: true).
func (db *Database) runWrite(ctx context.Context, st writeStmt) (*writeOutcome, error) {
	conn, err := db.acquire(ctx)
	if err != nil {
		return nil, err
	}
	pc := conn.Conn().PgConn()
	destroy := true
	defer func() { release(conn, destroy || pc.IsClosed()) }()
	defer phase(ctx, "statement", time.Now())
	ctx, cancel := withCallDeadline(ctx, &db.Policy)
	defer cancel()

	var before effects
	begin := "BEGIN"
	if s := st.who.sql(false); s != "" {
		begin += "; " + s
	}
	var tw string                         // how to read the table writes, when approval rules apply
	var tablesBefore []approval.TableRows // the backend's counters as the transaction began
	if st.approval != nil {
		tw = approval.TableWritesText(ctx, pc, db.Policy.PreparesStatements())
	}
	if st.free || tw != "" {
		before, tablesBefore, err = execReadings(ctx, pc, begin, tw, st.free)
	} else {
		err = simpleExec(ctx, pc, begin)
	}
	if err != nil {
		if tw != "" && pc.TxStatus() != 'I' {
			_ = wire.RollbackClean(context.WithoutCancel(ctx), pc)
		}
		return nil, err
	}
	out, keep, err := execChecked(ctx, pc, st, before)
	if err == nil && keep && st.approval != nil {
		err = settleApproval(ctx, pc, st.approval, tw, tablesBefore, out)
		keep = err == nil
	}
	if err != nil || !keep {
		if out != nil {
			// What the rollback will not undo, read while the transaction still holds it.
			out.sequences = sequencesUsed(ctx, pc)
			noteSequences(err, out.sequences)
		}
		// Rolled back and reset in one round trip, so whatever session state the statement set
		// (advisory locks and sequence state survive a rollback) never reaches the next call.
		if rbErr := wire.RollbackClean(context.WithoutCancel(ctx), pc); rbErr == nil && ctx.Err() == nil && wire.SafeTags[tagOf(out)] {
			destroy = false
		}
		return out, err
	}
	// commit clears the session state the statement set inside the transaction, before COMMIT:
	// a transaction pooler hands the server connection on at COMMIT.
	if err := commit(ctx, pc); err != nil {
		if errors.Is(err, errCommitUnknown) {
			return nil, commitUnknown("the change")
		}
		return nil, err
	}
	st.approval.committed()
	destroy = unsafeWriteTag(tagOf(out))
	return out, nil
}

// settleApproval measures what the open transaction wrote since the reading before and lets g
// decide whether it may commit: nil, or the error that rolls it back. The counters it reads
// are the backend's, not the transaction's: they still hold earlier transactions' rows until
// the backend reports them (a pooled connection's last call, a rolled-back measuring run), so
// only a difference within the transaction is its effect.
func settleApproval(ctx context.Context, pc *pgconn.PgConn, g *approvalGate, tw string, before []approval.TableRows, outs ...*writeOutcome) error {
	tables, err := approval.ReadTableWrites(ctx, pc, tw)
	if err != nil {
		return err
	}
	tables = approval.SubtractTableWrites(tables, before)
	if e := g.settle(effectOf(tables, outs...)); e != nil {
		return e
	}
	return nil
}

func tagOf(out *writeOutcome) string {
	if out == nil {
		return ""
	}
	return out.tag
}

// unsafeWriteTag reports tags after which a connection is destroyed rather than reset.
func unsafeWriteTag(tag string) bool {
	return !dmlTags[tag] && tag != ""
}

// execChecked runs st inside the caller's transaction and applies the checks. keep reports
// whether the caller may commit; when false, err says why (nil for a dry run). For agent-written
// SQL (st.free), before is the transaction's effects read just before the statement: DDL and the
// rows the statement changed are judged by the difference, not by the command tag.
func execChecked(ctx context.Context, pc *pgconn.PgConn, st writeStmt, before effects) (out *writeOutcome, keep bool, err error) {
	if st.budget.Set() {
		var err error
		if _, st.seenRows, err = writeWithinBudget(ctx, pc, st, nil); err != nil {
			return nil, false, err
		}
	}
	out, err = execStmt(ctx, pc, st)
	if err != nil {
		return out, false, err
	}
	var after effects
	if st.free {
		if after, err = execReading(ctx, pc, effectsSQL); err != nil {
			return out, false, err
		}
	}
	return judge(st, out, before, after)
}

// judge applies the checks to what st did (out) and, for agent-written SQL, to the effects
// readings taken before and after it. keep and err are as execChecked's.
func judge(st writeStmt, out *writeOutcome, before, after effects) (*writeOutcome, bool, error) {
	affected := out.affected
	if st.free {
		if !after.sameIdentity(before) {
			return out, false, pgerr.IdentityChanged()
		}
		out.after = after
		did := after.sub(before)
		if !(out.tag == "UPDATE" || out.tag == "DELETE" || out.tag == "MERGE") {
			affected = 0 // rows inserted are not capped; rows the statement updated or deleted are, below
		}
		affected = max(affected, did.changed)
		if ddl := !dmlTags[out.tag] || did.catalog > 0; ddl {
			out.ddl = true
			if !st.allowDDL {
				what := "changes the schema"
				if did.catalog == 0 && !schemaVerb(out.tag) {
					what = "is not a data change (a utility statement such as SET)"
				}
				return out, false, &Error{Type: ErrNotAllowed, Message: fmt.Sprintf("The statement (%s) %s, and DDL is not allowed here; it was rolled back", describeTag(out.tag), what),
					Suggestion: st.ddlFix}
			}
			if isDestructive(out.tag) && !st.confirm {
				return out, false, &Error{Type: ErrConfirmationRequired, Message: fmt.Sprintf("%s removes data or objects irreversibly; it was rolled back", out.tag),
					Suggestion: "If this is really intended, call again with confirm_destructive: true."}
			}
		}
	}
	if st.maxAffected > 0 && affected > int64(st.maxAffected) {
		what := st.op
		if st.free {
			what = "statement would update or delete"
			if out.tag == "UPDATE" || out.tag == "DELETE" || out.tag == "MERGE" {
				what = "statement would affect"
			}
		} else {
			what += " would affect"
		}
		return out, false, &Error{Type: ErrTooManyRows, Table: st.table,
			Message:    fmt.Sprintf("The %s %d rows, more than the limit of %d; it was rolled back and nothing changed", what, affected, st.maxAffected),
			Suggestion: fmt.Sprintf("Narrow where so it matches at most %d rows (dry_run: true reports the count without changing anything), or split the change into several calls.", st.maxAffected)}
	}
	if touched := max(out.affected, affected); st.seenRows > 0 && touched > st.seenRows {
		return out, false, plan.RowsOver(touched, st.seenRows, true)
	}
	if st.dryRun {
		return out, false, nil
	}
	return out, true, nil
}

// schemaVerb reports command tags of statements that define or change objects.
func schemaVerb(tag string) bool {
	for _, v := range []string{"CREATE", "ALTER", "DROP", "TRUNCATE", "COMMENT", "GRANT", "REVOKE", "SECURITY LABEL", "IMPORT", "REFRESH", "REINDEX", "CLUSTER", "SELECT"} {
		if strings.HasPrefix(tag, v) {
			return true
		}
	}
	return false
}

func describeTag(tag string) string {
	if tag == "" {
		return "no command tag"
	}
	return tag
}

// execStmt runs one statement through the extended protocol (so PostgreSQL refuses a second
// statement) and encodes the first keepRows returned rows. A statement built by a tool runs
// with its identity checked right after it, in the same round trip: its where is the agent's,
// and may call a function that switches the role or the claims. (Agent-written SQL, st.free,
// is checked by its effects reading instead.)
func execStmt(ctx context.Context, pc *pgconn.PgConn, st writeStmt) (*writeOutcome, error) {
	oids := st.colOIDs
	if wire.NeedsTypes(st.params) {
		sd, err := pc.Prepare(ctx, "", st.sql, nil)
		if err != nil {
			return nil, err
		}
		oids = wire.MergeOIDs(sd.ParamOIDs, st.colOIDs)
	}
	values, err := wire.EncodeParams(st.params, oids)
	if err != nil {
		return nil, err // a *wire.ParamError, which classify answers as invalid_arguments
	}
	check := st.who.check()
	if st.free || check == nil {
		rs, tag, err := wire.CollectRows(pc.ExecParams(ctx, st.sql, values, nil, nil, nil), st.format, st.keepRows, st.maxBytes)
		if err != nil {
			return nil, err
		}
		return &writeOutcome{rows: rs, tag: wire.CommandVerb([]byte(tag.String())), affected: tag.RowsAffected()}, nil
	}
	var b pgconn.Batch
	b.ExecParams(st.sql, values, nil, nil, nil)
	b.ExecParams(check.SQL, check.Params, nil, nil, nil)
	mrr := pc.ExecBatch(ctx, &b)
	if !mrr.NextResult() {
		return nil, closeWithError(mrr, errors.New("no result for the statement"))
	}
	rs, tag, err := wire.CollectRows(mrr.ResultReader(), st.format, st.keepRows, st.maxBytes)
	if err != nil {
		return nil, closeWithError(mrr, err)
	}
	same := false
	if mrr.NextResult() {
		res := mrr.ResultReader().Read()
		same = res.Err == nil && len(res.Rows) == 1 && len(res.Rows[0]) == 1 && string(res.Rows[0][0]) == "t"
	}
	if err := mrr.Close(); err != nil || !same {
		return nil, wire.ErrIdentityChanged
	}
	return &writeOutcome{rows: rs, tag: wire.CommandVerb([]byte(tag.String())), affected: tag.RowsAffected()}, nil
}

// closeWithError closes mrr (reading what is left of it) and returns err, or the error that
// closing reported when err is nil.
func closeWithError(mrr *pgconn.MultiResultReader, err error) error {
	if cerr := mrr.Close(); err == nil {
		return cerr
	}
	return err
}

// simpleExec runs pgtools' own fixed SQL (never an agent's) and returns the first error.
func simpleExec(ctx context.Context, pc *pgconn.PgConn, sql string) error {
	_, err := pc.Exec(ctx, sql).ReadAll()
	return err
}

// commitUnknown is the answer when a COMMIT's answer never arrived: what may or may not have
// committed must be checked, never blindly redone (a retried insert would write its rows twice).
func commitUnknown(what string) *Error {
	return &Error{Type: ErrCommitOutcomeUnknown, Message: fmt.Sprintf("The COMMIT was sent, but its answer never arrived: %s may or may not have been committed", what),
		Suggestion: "Check with select_query whether the change is in the database before running it again; do not simply retry."}
}

// commit clears the session-level state of the open transaction and commits it, in one round
// trip (wire.SQLCommitClean), so the connection is clean when COMMIT hands it on. When its
// answer is lost, the transaction may or may not have committed, and the caller must be told so
// rather than guess.
func commit(ctx context.Context, pc *pgconn.PgConn) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if pc.IsClosed() {
		return errConnClosedBeforeCommit
	}
	_, err := pc.Exec(cctx, wire.SQLCommitClean).ReadAll()
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// PostgreSQL answered: nothing was committed (a deferred constraint, a serialization
		// failure …). A failure before COMMIT left the transaction aborted: end it, clean, so
		// what the caller does with the connection next hands on nothing. A caller that cannot
		// tell whether this worked destroys the connection.
		_ = wire.RollbackClean(cctx, pc)
		return err
	}
	// Any other failure came after the COMMIT was sent (pgconn reports a connection that broke
	// while its answer was awaited as "conn closed", which it also marks safe to retry: it is not).
	return errCommitUnknown
}

// connectionEnded reports an error that ended the connection's backend: a FATAL or PANIC answer
// (terminated, shut down, crashed) or a connection-class SQLSTATE. Whatever transaction was open
// on it was rolled back by PostgreSQL.
func connectionEnded(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	sev := pgErr.SeverityUnlocalized
	if sev == "" {
		sev = pgErr.Severity
	}
	return sev == "FATAL" || sev == "PANIC" || strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
}

// CommitCleanSQL is what a write on a pooled connection sends to end its transaction: the reset
// of session state, then COMMIT, in one simple-protocol query ("; "-separated). Exported for the
// benchmark's raw-pgx floor, which must pay for the same statements.
const CommitCleanSQL = wire.SQLCommitClean

// writeWithinBudget plans st inside its transaction on pc, after pre (the identity and timeouts
// asserted again, in the same round trip), and refuses it when over st.budget. ran reports
// whether pre ran: a statement the budget lets through unplanned (SET, SHOW) sends nothing.
// seen > 0 bounds the rows the statement may return or change instead of its plan (the plan
// reads a table under row-level security: plan.Budget.Check); judge applies it.
func writeWithinBudget(ctx context.Context, pc *pgconn.PgConn, st writeStmt, pre []wire.Exec) (ran bool, seen int64, err error) {
	if planned, e := plan.Gate(leadingKeyword(st.sql)); !planned {
		if e != nil {
			return false, 0, e
		}
		return false, 0, nil
	}
	top, err := plan.In(ctx, pc, st.sql, st.params, st.colOIDs, pre)
	if err != nil {
		return true, 0, err
	}
	seen, e := st.budget.Check(ctx, top)
	if e != nil {
		return true, 0, e
	}
	return true, seen, nil
}
