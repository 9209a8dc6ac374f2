// Package session owns pg_tx sessions: transactions that stay open across tool calls, each on a
// dedicated connection and bound to the principal that began it.
//
// A Session is one such transaction: it is opened with the caller's begin options and identity,
// serves one call at a time (Lock, TryLock, Unlock), slides its expiry on every use, keeps the
// agent's savepoint stack, and rolls back when closed. The Manager creates, finds, expires and
// closes sessions: it mints ids tagged with the replica, caps how many are open in all and per
// principal, sweeps idle ones (rolling them back), remembers expired ids, and rolls everything
// back on shutdown.
//
// The package knows nothing of tools, databases' policies or agent SQL: package tools runs
// statements on a session's connection under its database's policy, and passes in what a session
// needs (Target) when it begins one.
package session

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/internal/wire"
)

// Options are the options of pg_tx begin.
type Options struct {
	// Isolation is "read committed" (default), "repeatable read" or "serializable".
	Isolation string
	// ReadOnly opens a READ ONLY transaction.
	ReadOnly bool
}

// Identity is who a session's transaction acts as: a PostgreSQL role ("" for the login role) and
// the claims row-level security policies read (nil for none). It is fixed at begin.
type Identity struct {
	Role   string
	Claims []byte
}

// Target is what a session is opened on and as, given by its caller at Begin.
type Target struct {
	// Database is the configured name of the database; the caller finds its database by it.
	Database string
	// Config is the database's connection configuration. Open copies it and sets the session's
	// runtime parameters on the copy.
	Config *pgx.ConnConfig
	// Who is the identity the session acts as, kept for the caller to assert before each statement.
	Who Identity
	// Assert is the simple-protocol SQL that puts the new transaction in Who, run right after
	// BEGIN in the same round trip ("" for none).
	Assert string
	// MaskValues masks the values PostgreSQL echoes in the error of a failed begin (the database's
	// policy).
	MaskValues bool
	// Warm is read-only SQL (pgtools' own, several statements allowed in each part) a spare
	// connection of this database runs once after it connects and before any begin takes it,
	// each part in a transaction of its own that it rolls back: what the first statements of a
	// session would otherwise pay to fill the new backend's caches. A part that fails skips the
	// rest of that part only.
	Warm []string
	// Quota names the owner whose session share the session counts against (an API token, or a
	// JWT issuer; tools.Principal.QuotaOwner); "" means the principal itself.
	Quota string
}

// Session is one open transaction on a dedicated connection, owned by one principal. The Manager
// creates, finds, expires and closes sessions; package tools runs statements on them. A session
// serves one call at a time: methods marked so need the session's lock.
type Session struct {
	// ID is the random UUIDv4 agents pass as session_id.
	ID string
	// Principal is the name of the principal that opened it; nobody else can use it.
	Principal string
	// Quota is the owner whose share the session counts against (Target.Quota, else Principal).
	Quota string
	// Database is the configured name of the database the session's connection belongs to.
	Database string
	// Opts are the options it was opened with.
	Opts Options
	// Started is when it was opened.
	Started time.Time
	// Who is the identity the session acts as, fixed at begin; the caller asserts it again before
	// every statement.
	Who Identity
	// Connect is how long its begin spent opening a connection: 0 when it took a spare.
	Connect time.Duration
	// ChangedSchema records that a statement of the session changed the catalog (DDL), so that
	// its commit refreshes what the runner knows of the database's tables.
	ChangedSchema atomic.Bool
	// Written is what the session's kept statements wrote, per table, measured statement by
	// statement while approval rules apply: rows_over judges it, the session's whole effect,
	// so that splitting a change into statements does not split it under the bound. Guarded by
	// the session lock.
	Written []approval.TableRows

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
}

// Open connects a dedicated connection to t (counted apart from the database's pool, so sessions
// never starve stateless calls) and begins the transaction as t.Who. idleTimeout becomes the
// connection's idle_in_transaction_session_timeout, a backstop should the runner vanish. The
// Manager begins its sessions on spare connections instead, opened ahead of need.
func Open(ctx context.Context, id, principal string, t Target, opts Options, idleTimeout time.Duration, clock func() time.Time) (*Session, error) {
	conn, err := pgx.ConnectConfig(ctx, sessionConfig(t.Config, idleTimeout))
	if err != nil {
		return nil, fmt.Errorf("opening a session connection: %w", err)
	}
	return start(ctx, conn, id, principal, t, opts, clock)
}

// start begins the session's transaction as t.Who on conn, a connection that has run nothing
// yet (opened now, or a spare). On error conn is closed.
func start(ctx context.Context, conn *pgx.Conn, id, principal string, t Target, opts Options, clock func() time.Time) (*Session, error) {
	begin := "BEGIN ISOLATION LEVEL " + strings.ToUpper(isolationOrDefault(opts.Isolation))
	if opts.ReadOnly {
		begin += " READ ONLY"
	}
	// Local to the session's one transaction, like everything it sets: pg_stat_activity shows
	// the backend as a session's while the transaction runs.
	begin += "; SET LOCAL application_name = '" + sessionAppName + "'"
	if t.Assert != "" {
		begin += "; " + t.Assert
	}
	if err := exec(ctx, conn.PgConn(), begin); err != nil {
		gone := conn.PgConn().IsClosed()
		conn.Close(context.WithoutCancel(ctx))
		if gone {
			return nil, &connGoneError{err}
		}
		return nil, err
	}
	now := clock()
	s := &Session{ID: id, Principal: principal, Database: t.Database, Opts: opts, Started: now, Who: t.Who,
		conn: conn, sem: make(chan struct{}, 1), clock: clock}
	s.lastUsed.Store(now.UnixNano())
	return s, nil
}

// connGoneError is a begin whose connection was found closed: it had died before (a spare
// whose backend was terminated or whose server restarted), so nothing ran on it.
type connGoneError struct{ err error }

func (e *connGoneError) Error() string { return e.err.Error() }
func (e *connGoneError) Unwrap() error { return e.err }

// exec runs pgtools' own fixed SQL (never an agent's) and returns the first error.
func exec(ctx context.Context, pc *pgconn.PgConn, sql string) error {
	_, err := pc.Exec(ctx, sql).ReadAll()
	return err
}

func isolationOrDefault(s string) string {
	switch s {
	case "repeatable read", "serializable":
		return s
	}
	return "read committed"
}

// Conn is the session's connection, for the holder of the session's lock to run statements on.
// It is never returned to a pool.
func (s *Session) Conn() *pgx.Conn { return s.conn }

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

// LeftAtUse is the time the session had left when it was last touched: how close to expiring
// the call that holds it found it.
func (s *Session) LeftAtUse() time.Duration { return time.Duration(s.leftAtUse.Load()) }

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

// Rollback rolls back and closes the session (expiry, shutdown). The session-level state its
// statements set is cleared before the ROLLBACK (wire.RollbackClean): behind a transaction pooler
// the server connection goes on to the next client at ROLLBACK, and closing the session's
// connection afterwards closes nothing on the server.
func (s *Session) Rollback(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := wire.RollbackClean(cctx, s.conn.PgConn())
	s.Close(ctx)
	return err
}

// ErrNoSavepoint is the error of a savepoint action naming a savepoint the session does not hold:
// nothing was sent, since PostgreSQL would abort the whole transaction over it.
var ErrNoSavepoint = errors.New("no such savepoint")

// Savepoints returns the agent's open savepoints, oldest first. The caller holds the lock.
func (s *Session) Savepoints() []string { return slices.Clone(s.savepoints) }

// Savepoint creates the savepoint name. The caller holds the lock.
func (s *Session) Savepoint(ctx context.Context, name string) error {
	if err := exec(ctx, s.conn.PgConn(), "SAVEPOINT "+pgx.Identifier{name}.Sanitize()); err != nil {
		return err
	}
	s.savepoints = append(s.savepoints, name)
	return nil
}

// ReleaseSavepoint releases the latest savepoint called name and those made after it. The caller
// holds the lock.
func (s *Session) ReleaseSavepoint(ctx context.Context, name string) error {
	at := lastIndex(s.savepoints, name)
	if at < 0 {
		return ErrNoSavepoint
	}
	if err := exec(ctx, s.conn.PgConn(), "RELEASE SAVEPOINT "+pgx.Identifier{name}.Sanitize()); err != nil {
		return err
	}
	s.savepoints = s.savepoints[:at]
	return nil
}

// RollbackToSavepoint rolls back to the latest savepoint called name, which stays; those made
// after it are gone. The caller holds the lock.
func (s *Session) RollbackToSavepoint(ctx context.Context, name string) error {
	at := lastIndex(s.savepoints, name)
	if at < 0 {
		return ErrNoSavepoint
	}
	if err := exec(ctx, s.conn.PgConn(), "ROLLBACK TO SAVEPOINT "+pgx.Identifier{name}.Sanitize()); err != nil {
		return err
	}
	s.savepoints = s.savepoints[:at+1]
	return nil
}

func lastIndex(list []string, v string) int {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i] == v {
			return i
		}
	}
	return -1
}

// Info is a session as pg_tx list and active_session show it.
type Info struct {
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
func (s *Session) Info() Info {
	now := s.clock()
	return Info{ID: s.ID, Database: s.Database, StartedAt: s.Started.UTC().Format(time.RFC3339),
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
