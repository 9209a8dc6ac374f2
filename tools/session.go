package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/wire"
)

// TxOptions are the options of pg_tx begin.
type TxOptions struct {
	// Isolation is "read committed" (default), "repeatable read" or "serializable".
	Isolation string
	// ReadOnly opens a READ ONLY transaction.
	ReadOnly bool
}

// Session is one open transaction on a dedicated connection, owned by one principal. The session
// manager (runner/session) creates, finds, expires and closes sessions; the tools run statements
// on them. A session serves one call at a time.
type Session struct {
	// ID is the random UUIDv4 agents pass as session_id.
	ID string
	// Principal is the name of the principal that opened it; nobody else can use it.
	Principal string
	// DB is the database the session's connection belongs to.
	DB *Database
	// Opts are the options it was opened with.
	Opts TxOptions
	// Started is when it was opened.
	Started time.Time

	conn      *pgx.Conn
	sem       chan struct{}
	expires   atomic.Int64 // unix nanoseconds
	lastUsed  atomic.Int64 // unix nanoseconds
	leftAtUse atomic.Int64 // time it had left when last touched, in nanoseconds
	closed    atomic.Bool
	clock     func() time.Time
	// savepoints is the stack of the agent's savepoint names, so pg_tx can refuse an unknown name
	// before PostgreSQL would abort the whole transaction over it. Guarded by the session lock.
	savepoints []string
	// who is the identity the session acts as, fixed at begin and asserted before every statement.
	who identity
}

// OpenSession connects a dedicated connection to db (counted apart from db's pool, so sessions
// never starve stateless calls) and begins the transaction. idleTimeout becomes the
// connection's idle_in_transaction_session_timeout, a backstop should the runner vanish.
func OpenSession(ctx context.Context, id string, p Principal, db *Database, opts TxOptions, idleTimeout time.Duration, clock func() time.Time) (*Session, error) {
	cfg := db.Pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(idleTimeout.Milliseconds())
	cfg.RuntimeParams["application_name"] = "pgtools-session"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening a session connection: %w", err)
	}
	begin := "BEGIN ISOLATION LEVEL " + strings.ToUpper(isolationOrDefault(opts.Isolation))
	if opts.ReadOnly {
		begin += " READ ONLY"
	}
	who := identityOf(p)
	if s := who.sql(false); s != "" {
		begin += "; " + s
	}
	if err := simpleExec(ctx, conn.PgConn(), begin); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	now := clock()
	s := &Session{ID: id, Principal: p.Name, DB: db, Opts: opts, Started: now, conn: conn, sem: make(chan struct{}, 1), clock: clock, who: who}
	s.lastUsed.Store(now.UnixNano())
	return s, nil
}

func isolationOrDefault(s string) string {
	switch s {
	case "repeatable read", "serializable":
		return s
	}
	return "read committed"
}

// Lock waits for the session to be free (one call at a time).
func (s *Session) Lock(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TryLock takes the session if it is free.
func (s *Session) TryLock() bool {
	select {
	case s.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

// Unlock frees the session for the next call.
func (s *Session) Unlock() { <-s.sem }

// Touch records a use and slides the expiry to now+ttl.
func (s *Session) Touch(ttl time.Duration) {
	now := s.clock()
	if exp := s.expires.Load(); exp != 0 {
		s.leftAtUse.Store(exp - now.UnixNano())
	} else {
		s.leftAtUse.Store(int64(ttl))
	}
	s.lastUsed.Store(now.UnixNano())
	s.expires.Store(now.Add(ttl).UnixNano())
}

// ExpiresAt is when the session expires unless used again.
func (s *Session) ExpiresAt() time.Time { return time.Unix(0, s.expires.Load()) }

// Idle is the time since the session's last use.
func (s *Session) Idle() time.Duration { return s.clock().Sub(time.Unix(0, s.lastUsed.Load())) }

// Closed reports whether the session has ended.
func (s *Session) Closed() bool { return s.closed.Load() }

// Close ends the session: PostgreSQL rolls back whatever is uncommitted when the connection goes.
// The connection is always destroyed, never returned to a pool.
func (s *Session) Close(ctx context.Context) {
	if s.closed.Swap(true) {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = s.conn.Close(cctx)
}

// Rollback rolls back and closes the session.
func (s *Session) Rollback(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := simpleExec(cctx, s.conn.PgConn(), "ROLLBACK")
	s.Close(ctx)
	return err
}

// SessionInfo is a session as pg_tx list and active_session show it.
type SessionInfo struct {
	ID        string `json:"id"`
	Database  string `json:"database"`
	StartedAt string `json:"started_at"`
	Age       string `json:"age"`
	Idle      string `json:"idle"`
	ExpiresIn string `json:"expires_in"`
	ReadOnly  bool   `json:"read_only,omitempty"`
	Isolation string `json:"isolation"`
	Hint      string `json:"hint,omitempty"`
}

// Info describes the session now.
func (s *Session) Info() SessionInfo {
	now := s.clock()
	return SessionInfo{ID: s.ID, Database: s.DB.Name, StartedAt: s.Started.UTC().Format(time.RFC3339),
		Age: humanDuration(now.Sub(s.Started)), Idle: humanDuration(s.Idle()), ExpiresIn: humanDuration(s.ExpiresAt().Sub(now)),
		ReadOnly: s.Opts.ReadOnly, Isolation: isolationOrDefault(s.Opts.Isolation)}
}

// humanDuration renders "2m 30s", "45s", "1h 5m".
func humanDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	d = d.Round(time.Second)
	h, m, sec := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	switch {
	case h > 0:
		return fmt.Sprintf("%dh %dm", h, m)
	case m > 0:
		return fmt.Sprintf("%dm %ds", m, sec)
	}
	return fmt.Sprintf("%ds", sec)
}

// SessionStore is the session manager as the tools use it. runner/session implements it.
type SessionStore interface {
	// Begin opens a session for p on db, or answers session_limit_reached.
	Begin(ctx context.Context, p Principal, db *Database, opts TxOptions) (*Session, *Error)
	// Acquire finds p's session id, waits for it to be free, locks it and slides its TTL. The
	// caller must Release it. Another principal's session is session_not_found; an expired
	// one, session_expired.
	Acquire(ctx context.Context, p Principal, id string) (*Session, *Error)
	// Release unlocks a session taken with Acquire.
	Release(s *Session)
	// Finish removes an ended session (committed, rolled back or lost) and closes it. The caller
	// holds its lock.
	Finish(s *Session)
	// List returns p's open sessions.
	List(p Principal) []*Session
}

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
	if !write && time.Duration(s.leftAtUse.Load()) >= 5*time.Minute {
		return
	}
	info := s.Info()
	info.Hint = fmt.Sprintf("Use session_id: '%s' for subsequent queries; pg_tx commit or rollback ends it.", s.ID)
	r.setActiveSession(&info)
}

// readIn runs a read inside the session's transaction under a read-only savepoint. Agent SQL was
// checked by checkFreeSQL before it got here.
func readIn(ctx context.Context, s *Session, st wire.Stmt) (*wire.RowSet, error) {
	defer phase(ctx, "statement", time.Now())
	ctx, cancel := withCallDeadline(ctx, &s.DB.Policy)
	defer cancel()
	pc := s.conn.PgConn()
	st.Unnamed = s.DB.Policy.DescribeExec
	rs, destroy, err := wire.Read(ctx, pc, st, s.DB.sessionFrame)
	if errors.Is(err, wire.ErrRetry) && !destroy {
		rs, destroy, err = wire.Read(ctx, pc, st, s.DB.sessionFrame)
	}
	if destroy && pc.TxStatus() != 'T' {
		return nil, errSessionLost
	}
	return rs, err
}

// writeIn runs a write inside the session's transaction under a savepoint: kept when every check
// passes, rolled back to the savepoint otherwise, so one failed statement does not abort the session.
// The policy's timeouts are asserted again before the statement, and session-level advisory locks
// are released after it, so nothing an earlier statement set outlives it.
func writeIn(ctx context.Context, s *Session, st writeStmt) (*writeOutcome, error) {
	defer phase(ctx, "statement", time.Now())
	ctx, cancel := withCallDeadline(ctx, &s.DB.Policy)
	defer cancel()
	pc := s.conn.PgConn()
	pre := wire.SQLSavepoint + "; " + s.who.prefix(true) + timeoutsSQL(&s.DB.Policy)
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
		s, e := req.sessions.Begin(ctx, req.principal, req.db, opts)
		if e != nil {
			return nil, e
		}
		info := s.Info()
		hint := fmt.Sprintf("Pass session_id: '%s' to select_query, insert_data, update_data, delete_data and execute_sql; end it with pg_tx commit or rollback. It expires after %s without use.", s.ID, info.ExpiresIn)
		return &TxResult{Operation: op, Action: action, SessionID: s.ID, ExpiresIn: info.ExpiresIn, Status: "open", Hint: hint}, nil
	case "list":
		list := []SessionInfo{}
		for _, s := range req.sessions.List(req.principal) {
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
	pc := s.conn.PgConn()
	cc := callContext{Database: s.DB.Name}
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
			e := classify(ctx, err, cc, !s.DB.Policy.ShowErrorValues)
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
		at := lastIndex(s.savepoints, name)
		if action != "savepoint" && at < 0 {
			// PostgreSQL would abort the whole transaction over an unknown savepoint: refuse first.
			return nil, &Error{Type: ErrInvalidArguments, SQLState: "3B001", Message: fmt.Sprintf("Savepoint %q does not exist in session %s", name, s.ID),
				Suggestion: fmt.Sprintf(`Create it first with pg_tx {"action":"savepoint","session_id":"%s","name":"%s"}. Open savepoints: %s.`, s.ID, name, describeList(s.savepoints))}
		}
		ident := pgx.Identifier{name}.Sanitize()
		sql := map[string]string{"savepoint": "SAVEPOINT " + ident, "release": "RELEASE SAVEPOINT " + ident, "rollback_to": "ROLLBACK TO SAVEPOINT " + ident}[action]
		if err := simpleExec(ctx, pc, sql); err != nil {
			return nil, classify(ctx, err, cc, true)
		}
		switch action {
		case "savepoint":
			s.savepoints = append(s.savepoints, name)
		case "release":
			s.savepoints = s.savepoints[:at] // releasing a savepoint releases those made after it
		case "rollback_to":
			s.savepoints = s.savepoints[:at+1] // it stays; later ones are gone
		}
		return &TxResult{Operation: op, Action: action, SessionID: s.ID, Status: "ok"}, nil
	}
}

func lastIndex(list []string, v string) int {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i] == v {
			return i
		}
	}
	return -1
}

// runReadOn reads in the session when there is one, else on the stateless pool.
// It acts as who (the session's identity, asserted again, inside a session).
func runReadOn(ctx context.Context, db *Database, s *Session, who identity, st wire.Stmt) (*wire.RowSet, error) {
	if s != nil {
		st.Setup = s.who.pipeline(true)
		return readIn(ctx, s, st)
	}
	st.Setup = who.pipeline(false)
	return db.runRead(ctx, st)
}

// runWriteOn writes in the session when there is one, else in its own transaction.
func runWriteOn(ctx context.Context, db *Database, s *Session, st writeStmt) (*writeOutcome, error) {
	if s != nil {
		return writeIn(ctx, s, st)
	}
	return db.runWrite(ctx, st)
}

// openSessionsHint lists the caller's open sessions for a refusal's suggestion.
func openSessionsHint(req *request) string {
	if req.sessions == nil {
		return ""
	}
	list := req.sessions.List(req.principal)
	if len(list) == 0 {
		return ""
	}
	parts := make([]string, 0, len(list))
	for _, s := range list {
		parts = append(parts, fmt.Sprintf("%s (idle %s, expires in %s)", s.ID, humanDuration(s.Idle()), humanDuration(s.ExpiresAt().Sub(s.clock()))))
	}
	return " Your open sessions: " + strings.Join(parts, ", ") + "."
}
