package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pgtools/pgtools/tools/words"
)

// route resolves the call's target, as its arguments give it (toolArgs.route): the session it
// runs in (locked for the call; the caller must release it) and that session's database, or the
// database it names. A database argument that disagrees with the session's is refused.
func (r *Registry) route(ctx context.Context, p Principal, t *toolEntry, in toolArgs) (*Database, *Session, *Error) {
	to := in.route()
	dbName := to.Database
	if t.database != "" {
		dbName = t.database
	}
	if id := to.SessionID; id != "" {
		if e := checkRouteHint(ctx, id); e != nil {
			return nil, nil, e
		}
		if r.sessions == nil {
			return nil, nil, sessionsUnavailable("")
		}
		s, e := r.sessions.Acquire(ctx, p.Name, id)
		if e != nil {
			return nil, nil, e
		}
		if dbName != "" && dbName != s.Database {
			r.sessions.Release(s)
			return nil, nil, errorf(ErrInvalidArguments, "Omit database, or give the session's database.",
				"Invalid arguments: session %s belongs to database %s, not %s", s.ID, words.Quote(s.Database), words.Quote(dbName))
		}
		db, ok := r.dbs[s.Database]
		if !ok { // a session begun through another registry sharing the manager
			r.sessions.Release(s)
			return nil, nil, r.databaseUnavailable(p, s.Database)
		}
		return db, s, nil
	}
	if dbName == "" {
		dbName = "default"
	}
	db, ok := r.dbs[dbName]
	if !ok || !p.mayUse(dbName) {
		return nil, nil, r.databaseUnavailable(p, dbName)
	}
	return db, nil, nil
}

type routeHintKey struct{}

// RouteHint is the session a load balancer routed a call by: the runner's X-PgTools-Session
// header (Header names it in the refusal; ID is its value).
type RouteHint struct{ Header, ID string }

// WithRouteHint returns ctx carrying h. A call in a session other than h.ID is then refused
// before its session is looked up: the proxy routed it by h, so it may have reached a replica
// that does not hold the session it names. An empty ID checks nothing.
func WithRouteHint(ctx context.Context, h RouteHint) context.Context {
	return context.WithValue(ctx, routeHintKey{}, h)
}

func checkRouteHint(ctx context.Context, sessionID string) *Error {
	h, _ := ctx.Value(routeHintKey{}).(RouteHint)
	if id := strings.TrimSpace(h.ID); id == "" || strings.EqualFold(sessionID, id) {
		return nil
	}
	return errorf(ErrInvalidArguments, "Send the same session id in both: the header routes the request to the replica holding the session, and session_id selects it there. "+
		"Set the header from the session_id of each call, or leave the header out.",
		"Invalid arguments: session_id and the header %s name different sessions", h.Header)
}

func (r *Registry) databaseUnavailable(p Principal, name string) *Error {
	var allowed []string
	for _, n := range r.Databases() {
		if p.mayUse(n) {
			allowed = append(allowed, n)
		}
	}
	return errorf(ErrNotAllowed, "Use one of the databases available to you: "+words.List(allowed)+" (omit database for \"default\").",
		"Database %s is not available", words.Quote(name))
}

// authorize applies every gate of tool to a call on db (already resolved by route): database
// access, the database's disabled tools, the write scope and read-only policy for calls that
// write, and stated intent.
func (r *Registry) authorize(req *request, t *toolEntry) *Error {
	db, p, g, tool := req.db, req.principal, t.gate, t.info.Name
	if !p.allows(tool) {
		return errorf(ErrNotAllowed, "Use one of the tools available to you: "+words.List(p.Tools)+".",
			"Tool %s is not available to your token", tool)
	}
	if !p.mayUse(db.Name) {
		return r.databaseUnavailable(p, db.Name)
	}
	if slices.Contains(db.Policy.DisabledTools, tool) {
		return errorf(ErrNotAllowed, "Use another tool; the operator disabled this one for this database.",
			"Tool %s is disabled on database %q", tool, db.Name)
	}
	if req.allowDDL = db.Policy.AllowDDL && p.Can("ddl"); !req.allowDDL {
		req.ddlFix = p.ddlFix(db.Policy.AllowDDL)
	}
	if !isWrite(req.in) {
		return nil
	}
	if !p.Can("write") {
		return p.lacksScope("write", g.scopeMsg, g.scopeFix)
	}
	if db.Policy.ReadOnly {
		return errorf(ErrNotAllowed, g.readOnlyFix, "Database %q is read-only under the operator's policy", db.Name)
	}
	if autocommit, dryRun := req.in.intent(); g.intent && req.session == nil && !autocommit && !dryRun {
		return &Error{Type: ErrWriteIntentRequired,
			Message: fmt.Sprintf("%s changes data, so it needs stated intent: autocommit: true or a session_id", tool),
			Suggestion: fmt.Sprintf(`Either add "autocommit": true to run this call in its own transaction, committed at once, e.g. %s; `+
				`or open a transaction with pg_tx {"action":"begin"} and pass the session_id it returns, then pg_tx {"action":"commit","session_id":"…"}.`, intentExample(tool, req.given)) + openSessionsHint(req)}
	}
	return nil
}

// settleSession finishes a call that ran in a session: a session whose transaction the database
// ended is removed and reported lost; a failed statement's suggestion says the session is still
// usable; a result carries active_session as sessionEcho says.
func settleSession(req *request, t *toolEntry, res Result, e *Error) (Result, *Error) {
	s := req.session
	if s.Closed() {
		return res, e // ended by the call itself: commit or rollback
	}
	pc := s.Conn().PgConn()
	if pc.IsClosed() || pc.TxStatus() != 'T' {
		req.sessions.Finish(s)
		lost := sessionLost(s)
		if e != nil && e.Type == ErrConnection && (e.SQLState == "42P05" || e.SQLState == "26000") {
			// pgtools' own prepared statement collided on a transaction pooler's server
			// connection (pgerr classifies only that case of these SQLSTATEs as a connection
			// error): the loss is the operator's to fix, and retrying will fail the same way.
			lost.SQLState = e.SQLState
			lost.Message = fmt.Sprintf("Session %s was lost and rolled back: %s", s.ID, e.Message)
			lost.Suggestion = e.Suggestion + " Nothing of this session was committed."
		}
		return nil, lost
	}
	if e != nil {
		if e.Type != ErrConnection && e.Type != ErrTimeout {
			e.Suggestion += fmt.Sprintf(" The session %s is still open and usable: only this statement was rolled back.", s.ID)
		}
		return nil, e
	}
	g := t.gate
	sessionEcho(res, s, g.echoesSession || isWrite(req.in))
	return res, nil
}

// intentExample shows the caller's own call, whose arguments are given, with autocommit added,
// values elided.
func intentExample(tool string, given []string) string {
	var b strings.Builder
	b.WriteString(tool + " {")
	for _, k := range given { // sorted
		if k != "autocommit" && k != "session_id" {
			fmt.Fprintf(&b, "%q: …, ", k)
		}
	}
	b.WriteString(`"autocommit": true}`)
	return b.String()
}
