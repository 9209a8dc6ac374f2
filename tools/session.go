package tools

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/session"
)

// sessionTarget is what a session of p on db is opened with: the database's connection
// configuration and who, p's identity, asserted at begin (and, by readIn and writeIn, before
// every statement, each time named for that statement's tool).
func sessionTarget(p Principal, who identity, db *Database) session.Target {
	return session.Target{Database: db.Name, Config: db.Pool.Config().ConnConfig, Who: session.Identity{Role: who.role, Claims: who.claims},
		Assert: who.sql(false), MaskValues: db.Policy.MasksErrorValues(), Quota: p.QuotaOwner(), Warm: db.sessionWarm.warmUp()}
}

// sessionLost is the error for a session whose connection or transaction is gone.
func sessionLost(s *Session) *Error {
	return &Error{Type: ErrConnection, Message: fmt.Sprintf("Session %s was lost: its database connection failed, and the transaction was rolled back by the database", s.ID),
		Suggestion: `Nothing of this session was committed. Begin a new one with pg_tx {"action":"begin"} and redo its changes.`}
}

// sessionEcho attaches active_session to a result: always for writes in a session, and for any
// call that found the session within five minutes of expiring (the call itself slid it again).
func sessionEcho(res Result, s *Session, write bool) {
	r, ok := res.(interface{ setActiveSession(*SessionInfo) })
	if !ok {
		return // nil, or an answer of a tool that never runs in a session
	}
	if !write && s.LeftAtUse() >= 5*time.Minute {
		return
	}
	info := s.Info()
	info.Hint = fmt.Sprintf("Use session_id: '%s' for subsequent queries; pg_tx commit or rollback ends it.", s.ID)
	r.setActiveSession(&info)
}

// readIn runs a read inside the session's transaction under a read-only savepoint, with the
// policy of db, the session's database. Agent SQL was checked by checkFreeSQL before it got here.
func readIn(ctx context.Context, db *Database, s *Session, st wire.Stmt) (*wire.RowSet, error) {
	defer phase(ctx, "statement", time.Now())
	callCtx, cancel := withCallDeadline(ctx, db.Policy.sessionCall()) // the frame's statement_timeout is cut alike
	defer cancel()
	pc := s.Conn().PgConn()
	st.Unnamed = !db.Policy.PreparesStatements()
	rs, destroy, err := wire.Read(callCtx, pc, st, db.sessionFrame)
	if destroy && pc.TxStatus() != 'T' {
		if err != nil {
			// Keep the cause: settleSession names the operator's fix when there is one.
			return nil, fmt.Errorf("%w: %w", errSessionLost, err)
		}
		return nil, errSessionLost
	}
	return rs, sessionCallTimeout(ctx, &db.Policy, s, err)
}

// writeIn runs a write inside the session's transaction under a savepoint: kept when every check
// passes, rolled back to the savepoint otherwise, so one failed statement does not abort the session.
// The policy of db (the session's database) has its timeouts asserted again before the statement,
// with the session's identity, and session-level advisory locks are released after it, so nothing
// an earlier statement set outlives it.
func writeIn(ctx context.Context, db *Database, s *Session, st writeStmt) (out *writeOutcome, err error) {
	defer phase(ctx, "statement", time.Now())
	defer func(caller context.Context) { err = sessionCallTimeout(caller, &db.Policy, s, err) }(ctx)
	pol := db.Policy.sessionCall()
	ctx, cancel := withCallDeadline(ctx, pol)
	defer cancel()
	pc := s.Conn().PgConn()
	st.who = sessionIdentity(s).named(st.who.app) // checked after the statement (execStmt), as asserted before it
	pre := wire.SQLSavepoint + "; " + st.who.prefix(true) + timeoutsSQL(pol)
	var before effects
	var tw string                         // how to read the table writes, when approval rules apply
	var tablesBefore []approval.TableRows // what the session wrote before
	if st.approval != nil {
		// The plain text, never prepared here: inside the session's open transaction a failed
		// PREPARE would abort it.
		tw = approval.TableWritesSQL
	}
	if st.free || tw != "" {
		before, tablesBefore, err = execReadings(ctx, pc, pre, tw, st.free)
	} else {
		err = simpleExec(ctx, pc, pre)
	}
	if err != nil {
		if tw != "" {
			_ = simpleExec(context.WithoutCancel(ctx), pc, "ROLLBACK TO SAVEPOINT pgtools_stmt; RELEASE SAVEPOINT pgtools_stmt; "+wire.SQLUnlockAll)
		}
		return nil, err
	}
	out, keep, err := execChecked(ctx, pc, st, before)
	var written []approval.TableRows // the session's writes with this statement's, when kept
	if err == nil && keep && st.approval != nil {
		written, err = settleInSession(ctx, pc, s, st.approval, tw, tablesBefore, out)
		keep = err == nil
	}
	end := "RELEASE SAVEPOINT pgtools_stmt; " + wire.SQLUnlockAll
	if err != nil || !keep {
		end = "ROLLBACK TO SAVEPOINT pgtools_stmt; RELEASE SAVEPOINT pgtools_stmt; " + wire.SQLUnlockAll
	}
	if endErr := simpleExec(context.WithoutCancel(ctx), pc, end); endErr != nil && err == nil {
		err = endErr
	}
	if err == nil && keep {
		if st.approval != nil {
			s.Written = written
		}
		st.approval.committed() // kept in the session: the approval is used up whatever the session does next
		if out.ddl {
			s.ChangedSchema.Store(true)
		}
	}
	return out, err
}

// settleInSession decides a statement of session s under approval rules, once it ran and passed
// every other check. rows_over judges the session's whole effect: what its kept statements wrote
// (s.Written) with what this one wrote, so a change split into statements meets the bound when
// its parts together cross it. The other rules judge the statement's own effect (a part of a
// table, tool, DDL or destructive change matches them on its own). A request and its approval
// carry the session's whole effect, and the approved statement, sent again, is kept only when
// the whole effect is still the approved one. It returns the session's writes with this
// statement's, for s.Written once the statement is kept.
func settleInSession(ctx context.Context, pc *pgconn.PgConn, s *Session, g *approvalGate, tw string, before []approval.TableRows, out *writeOutcome) ([]approval.TableRows, error) {
	after, err := approval.ReadTableWrites(ctx, pc, tw)
	if err != nil {
		return nil, err
	}
	// The reading counts the rows of statements rolled back to their savepoints too: what this
	// statement wrote is after minus before, and the session's kept writes are summed here.
	mine := effectOf(approval.SubtractTableWrites(after, before), out)
	written := approval.AddTableWrites(s.Written, mine.Tables)
	whole := effectOf(written, out)
	if e := g.settleSession(mine, whole); e != nil {
		return nil, e
	}
	return written, nil
}

// runReadOn reads in the session when there is one, else on the stateless pool.
// It acts as who (the session's identity, asserted again, inside a session).
func runReadOn(ctx context.Context, db *Database, s *Session, who identity, st wire.Stmt) (*wire.RowSet, error) {
	if s != nil {
		who = sessionIdentity(s).named(who.app)
		st.Setup, st.Check = who.pipeline(true), who.check()
		return readIn(ctx, db, s, st)
	}
	st.Setup, st.Check = who.pipeline(false), who.check()
	return db.runRead(ctx, st)
}

// runWriteOn writes in the session when there is one, else in its own transaction.
func runWriteOn(ctx context.Context, db *Database, s *Session, st writeStmt) (*writeOutcome, error) {
	if s != nil {
		return writeIn(ctx, db, s, st)
	}
	return db.runWrite(ctx, st)
}

// openSessionsHint lists the caller's open sessions for a refusal's suggestion.
func openSessionsHint(req *request) string {
	if req.sessions == nil {
		return ""
	}
	list := req.sessions.List(req.principal.Name)
	if len(list) == 0 {
		return ""
	}
	parts := make([]string, 0, len(list))
	for _, s := range list {
		info := s.Info()
		parts = append(parts, fmt.Sprintf("%s (idle %s, expires in %s)", s.ID, info.Idle, info.ExpiresIn))
	}
	return " Your open sessions: " + strings.Join(parts, ", ") + "."
}

// sessionsUnavailable answers calls naming a session on a registry without a session manager.
func sessionsUnavailable(op string) *Error {
	return &Error{Operation: op, Type: ErrSessionNotFound, Message: "No open session has this session_id",
		Suggestion: "Omit session_id: transaction sessions are not enabled on this runner. A write then needs autocommit: true instead."}
}
