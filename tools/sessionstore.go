package tools

import (
	"context"
	"errors"

	"github.com/pgtools/pgtools/tools/session"
)

// Session is a pg_tx session (session.Session): the tools run statements on its connection.
type Session = session.Session

// SessionInfo is a session as pg_tx list and active_session show it (session.Info).
type SessionInfo = session.Info

// TxOptions are the options of pg_tx begin (session.Options).
type TxOptions = session.Options

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

// errSessionLost marks a session whose transaction the database ended.
var errSessionLost = errors.New("session lost")

var _ SessionStore = (*session.Manager)(nil)

// sessionIdentity is the identity s acts as, fixed at begin.
func sessionIdentity(s *Session) identity { return identity{role: s.Who.Role, claims: s.Who.Claims} }
