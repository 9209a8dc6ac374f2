package tools

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgtools/pgtools/tools/session"
	"github.com/pgtools/pgtools/tools/wire"
)

// Session is a pg_tx session (session.Session): the tools run statements on its connection.
type Session = session.Session

// SessionInfo is a session as pg_tx list and active_session show it (session.Info).
type SessionInfo = session.Info

// TxOptions are the options of pg_tx begin (session.Options).
type TxOptions = session.Options

// sessionTarget is what a session of p on db is opened with: the database's connection
// configuration and p's identity, asserted at begin (and, by readIn and writeIn, before every
// statement).
func sessionTarget(p Principal, db *Database) session.Target {
	who := identityOf(p)
	return session.Target{Database: db.Name, Config: db.Pool.Config().ConnConfig, Who: session.Identity{Role: who.role, Claims: who.claims},
		Assert: who.sql(false), MaskValues: !db.Policy.ShowErrorValues}
}

// sessionIdentity is the identity s acts as, fixed at begin.
func sessionIdentity(s *Session) identity { return identity{role: s.Who.Role, claims: s.Who.Claims} }

// SessionStore is the session manager as the tools use it, by principal name. session.Manager
// implements it.
type SessionStore interface {
	// Begin opens a session for principal on t, or answers session_limit_reached.
	Begin(ctx context.Context, principal string, t session.Target, opts TxOptions) (*Session, *Error)
	// Acquire finds principal's session id, waits for it to be free, locks it and slides its TTL.
	// The caller must Release it. Another principal's session is session_not_found; an expired
	// one, session_expired.
	Acquire(ctx context.Context, principal, id string) (*Session, *Error)
	// Release unlocks a session taken with Acquire.
	Release(s *Session)
	// Finish removes an ended session (committed, rolled back or lost) and closes it. The caller
	// holds its lock.
	Finish(s *Session)
	// List returns principal's open sessions.
	List(principal string) []*Session
}

var _ SessionStore = (*session.Manager)(nil)

// SetSessions gives the registry its session manager (nil: session_id answers session_not_found).
func (r *Registry) SetSessions(s SessionStore) { r.sessions = s }

// errSessionLost marks a session whose transaction the database ended.
var errSessionLost = errors.New("session lost")

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
	ctx, cancel := withCallDeadline(ctx, &db.Policy)
	defer cancel()
	pc := s.Conn().PgConn()
	st.Unnamed = db.Policy.DescribeExec
	rs, destroy, err := wire.Read(ctx, pc, st, db.sessionFrame)
	if errors.Is(err, wire.ErrRetry) && !destroy {
		rs, destroy, err = wire.Read(ctx, pc, st, db.sessionFrame)
	}
	if destroy && pc.TxStatus() != 'T' {
		return nil, errSessionLost
	}
	return rs, err
}

// writeIn runs a write inside the session's transaction under a savepoint: kept when every check
// passes, rolled back to the savepoint otherwise, so one failed statement does not abort the session.
// The policy of db (the session's database) has its timeouts asserted again before the statement,
// with the session's identity, and session-level advisory locks are released after it, so nothing
// an earlier statement set outlives it.
func writeIn(ctx context.Context, db *Database, s *Session, st writeStmt) (*writeOutcome, error) {
	defer phase(ctx, "statement", time.Now())
	ctx, cancel := withCallDeadline(ctx, &db.Policy)
	defer cancel()
	pc := s.Conn().PgConn()
	pre := wire.SQLSavepoint + "; " + sessionIdentity(s).prefix(true) + timeoutsSQL(&db.Policy)
	var before effects
	var err error
	if st.free {
		before, err = execReading(ctx, pc, pre+"; "+effectsSQL)
	} else {
		err = simpleExec(ctx, pc, pre)
	}
	if err != nil {
		return nil, err
	}
	out, keep, err := execChecked(ctx, pc, st, before)
	end := "RELEASE SAVEPOINT pgtools_stmt; " + wire.SQLUnlockAll
	if err != nil || !keep {
		end = "ROLLBACK TO SAVEPOINT pgtools_stmt; RELEASE SAVEPOINT pgtools_stmt; " + wire.SQLUnlockAll
	}
	if endErr := simpleExec(context.WithoutCancel(ctx), pc, end); endErr != nil && err == nil {
		err = endErr
	}
	return out, err
}

// pgTx is the session factory: begin, commit, rollback, savepoints, list.
func pgTx(ctx context.Context, req *request) (Result, *Error) {
	const op = "pg_tx"
	if req.sessions == nil {
		return nil, sessionsUnavailable(op)
	}
	a := req.in.(*txArgs)
	action, id := a.Action, a.SessionID
	// These rules live here rather than in the schema: a schema that combines alternatives at its
	// top level (if/then, oneOf) is flattened or refused by several agent frameworks.
	switch action {
	case "commit", "rollback", "savepoint", "release", "rollback_to":
		if id == "" {
			return nil, errorf(ErrInvalidArguments, fmt.Sprintf(`Pass the session_id that pg_tx begin returned, e.g. {"action":"%s","session_id":"…"}; pg_tx {"action":"list"} shows your sessions.`, action),
				"Invalid arguments: session_id is required for action %q", action)
		}
	}
	switch action {
	case "savepoint", "release", "rollback_to":
		if a.Name == "" {
			return nil, errorf(ErrInvalidArguments, fmt.Sprintf(`Name the savepoint, e.g. {"action":"%s","session_id":"%s","name":"before_update"}.`, action, id),
				"Invalid arguments: name is required for action %q", action)
		}
	}
	switch action {
	case "begin":
		opts := TxOptions{Isolation: a.IsolationLevel, ReadOnly: a.ReadOnly}
		s, e := req.sessions.Begin(ctx, req.principal.Name, sessionTarget(req.principal, req.db), opts)
		if e != nil {
			return nil, e
		}
		info := s.Info()
		hint := fmt.Sprintf("Pass session_id: '%s' to select_query, insert_data, update_data, delete_data and execute_sql; end it with pg_tx commit or rollback. It expires after %s without use.", s.ID, info.ExpiresIn)
		return &TxResult{Operation: op, Action: action, SessionID: s.ID, ExpiresIn: info.ExpiresIn, Status: "open", Hint: hint}, nil
	case "list":
		list := []SessionInfo{}
		for _, s := range req.sessions.List(req.principal.Name) {
			list = append(list, s.Info())
		}
		data, _ := wire.Marshal(list)
		n := len(list)
		return &TxResult{Operation: op, Action: action, RowCount: &n, Sessions: data}, nil
	}
	s := req.session
	if s == nil {
		return nil, sessionsUnavailable(op) // Call resolves the session for these actions whenever sessions are enabled
	}
	pc := s.Conn().PgConn()
	cc := callContext{Database: req.db.Name}
	switch action {
	case "commit", "rollback":
		var err error
		if action == "commit" {
			err = commit(ctx, pc)
		} else {
			err = simpleExec(context.WithoutCancel(ctx), pc, "ROLLBACK")
		}
		req.sessions.Finish(s)
		if errors.Is(err, errCommitUnknown) {
			return nil, &Error{Type: ErrCommitOutcomeUnknown, Message: fmt.Sprintf("The COMMIT of session %s was sent, but its answer never arrived: the transaction may or may not have committed", s.ID),
				Suggestion: "Check with select_query whether the session's changes are in the database before redoing them."}
		}
		if err != nil && (pc.IsClosed() || connectionEnded(err)) {
			// The backend was gone (terminated, crashed, restarted) before it could commit:
			// PostgreSQL rolled the transaction back. Retrying the commit cannot help.
			return nil, sessionLost(s)
		}
		if err != nil {
			e := classify(ctx, err, cc, !req.db.Policy.ShowErrorValues)
			e.Message += "; the session has ended and nothing of it was committed"
			return nil, e
		}
		status := map[string]string{"commit": "committed", "rollback": "rolled_back"}[action]
		return &TxResult{Operation: op, Action: action, SessionID: s.ID, Status: status,
			Hint: fmt.Sprintf("Session %s is %s and closed.", s.ID, strings.ReplaceAll(status, "_", " "))}, nil
	default: // savepoint, release, rollback_to
		name := a.Name
		if strings.HasPrefix(strings.ToLower(name), "pgtools_") {
			return nil, errorf(ErrInvalidArguments, "Choose a savepoint name that does not start with pgtools_.", "Invalid arguments: savepoint names starting with pgtools_ are reserved")
		}
		if action != "savepoint" && !slices.Contains(s.Savepoints(), name) {
			// PostgreSQL would abort the whole transaction over an unknown savepoint: refuse first.
			return nil, &Error{Type: ErrInvalidArguments, SQLState: "3B001", Message: fmt.Sprintf("Savepoint %q does not exist in session %s", name, s.ID),
				Suggestion: fmt.Sprintf(`Create it first with pg_tx {"action":"savepoint","session_id":"%s","name":"%s"}. Open savepoints: %s.`, s.ID, name, describeList(s.Savepoints()))}
		}
		var err error
		switch action {
		case "savepoint":
			err = s.Savepoint(ctx, name)
		case "release":
			err = s.ReleaseSavepoint(ctx, name) // releasing a savepoint releases those made after it
		case "rollback_to":
			err = s.RollbackToSavepoint(ctx, name) // it stays; later ones are gone
		}
		if err != nil {
			return nil, classify(ctx, err, cc, true)
		}
		return &TxResult{Operation: op, Action: action, SessionID: s.ID, Status: "ok"}, nil
	}
}

// runReadOn reads in the session when there is one, else on the stateless pool.
// It acts as who (the session's identity, asserted again, inside a session).
func runReadOn(ctx context.Context, db *Database, s *Session, who identity, st wire.Stmt) (*wire.RowSet, error) {
	if s != nil {
		st.Setup = sessionIdentity(s).pipeline(true)
		return readIn(ctx, db, s, st)
	}
	st.Setup = who.pipeline(false)
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
