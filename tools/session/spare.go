package session

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
)

// Spare connections: a session keeps its connection to itself and destroys it at the end, so
// every begin needs a new one, and opening one (TCP, TLS, SCRAM, the backend's start) costs tens
// of milliseconds where the begin itself costs well under one. The manager keeps a few fresh,
// never-used connections per database open ahead of need and hands one to each begin; a
// background fill replaces it (see take for when). A spare has run nothing but pgtools' own warm-up in a
// rolled-back transaction (below): it carries no state of any caller, so it needs no reset,
// only proof that it is still alive.
//
// The warm-up is there because a new backend's first transaction is slow: it fills the
// backend's catalog caches as it goes (measured here: 15–30 ms for a first BEGIN, INSERT and
// COMMIT through the tools, about 4 ms once warmed). A spare runs the statements every session
// runs (the savepoints, SET LOCALs and the reset before COMMIT) and the caller's Target.Warm
// once, off the critical path, so the session it serves pays less of that. (Opening the user
// tables too, with pg_relation_size, warmed more but slowed the first pooled calls at start-up
// on a busy machine past a 200 ms pool_wait, so it is not done.)

// DefaultSpares is Config.Spares when unset: spare connections kept per database, at most
// MaxSessions.
const DefaultSpares = 2

// spareAppName is the application_name of a spare connection until a begin takes it (the
// session's transaction then shows sessionAppName), so pg_stat_activity tells idle spares from
// sessions.
const spareAppName = "pgtools-spare"

// sessionAppName is the application_name a session's backend shows while its transaction runs.
const sessionAppName = "pgtools-session"

// warmSQL is the part of the warm-up every session shares: what begin, each statement's
// framing and the commit run. It ends in ROLLBACK, and runs in one simple-protocol message,
// so an error skips the rest and leaves the transaction aborted: warm then rolls it back.
const warmSQL = "BEGIN; SET LOCAL application_name = '" + spareAppName + "'; SAVEPOINT pgtools_warm; " +
	"SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0; RELEASE SAVEPOINT pgtools_warm; SAVEPOINT pgtools_warm; ROLLBACK TO SAVEPOINT pgtools_warm; " +
	"SET CONSTRAINTS ALL IMMEDIATE; CLOSE ALL; UNLISTEN *; SELECT pg_catalog.pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES; RESET ALL; ROLLBACK"

// spareRetryMax bounds the pause between attempts to open spares while the database refuses.
const spareRetryMax = 30 * time.Second

// spares holds the spare connections of every database a session was (or may be) begun on. A
// fill tops a database's set up to its target in the background; tidy (run by Manager.Run)
// drops the ones that died idle (a restart, pg_terminate_backend, a network cut) and fills
// again. It is safe for concurrent use.
type spares struct {
	size int        // most spares per database; 0 keeps none
	room func() int // how many more sessions could begin now; spares beyond it would only wait
	idle time.Duration
	log  zerolog.Logger

	mu     sync.Mutex
	sets   map[string]*spareSet // by Target.Database
	closed bool
	fills  sync.WaitGroup
}

// spareSet is one database's spares.
type spareSet struct {
	src     *pgx.ConnConfig // the Target.Config the set was made for (callers pass copies)
	warm    []string        // the latest Target.Warm for this database
	cfg     *pgx.ConnConfig // src with the session connections' runtime parameters
	conns   []*pgx.Conn
	filling bool
	retryAt time.Time     // no fill before then: the last attempt to connect failed
	backoff time.Duration // pause after the next failure
}

// sessionConfig is src with what every session connection carries: idleTimeout as its
// idle_in_transaction_session_timeout (a backstop should the runner vanish) and the spare's
// application_name.
func sessionConfig(src *pgx.ConnConfig, idleTimeout time.Duration) *pgx.ConnConfig {
	cfg := src.Copy()
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(idleTimeout.Milliseconds())
	cfg.RuntimeParams["application_name"] = spareAppName
	return cfg
}

// set returns the set of database, made (or remade, for a new configuration) on first use.
// Caller holds mu.
func (sp *spares) set(database string, src *pgx.ConnConfig) *spareSet {
	s := sp.sets[database]
	if s != nil && sameServer(s.src, src) {
		return s
	}
	if s != nil {
		closeAll(s.conns) // made for a configuration that is gone
	}
	s = &spareSet{src: src, cfg: sessionConfig(src, sp.idle)}
	sp.sets[database] = s
	return s
}

// warmUp runs the warm-up on a new spare: warmSQL, then each part of extra (the caller's,
// read-only) in a transaction of its own that is rolled back. A failure of a part (say, a
// privilege the login role lacks, or a table dropped since) only costs its warming; the spare
// is kept as long as it ends out of any transaction.
func warmUp(ctx context.Context, conn *pgx.Conn, extra []string) error {
	pc := conn.PgConn()
	_, err := pc.Exec(ctx, warmSQL).ReadAll()
	for _, part := range extra {
		if err != nil || pc.IsClosed() {
			break
		}
		if pc.TxStatus() != 'I' {
			_, err = pc.Exec(ctx, "ROLLBACK").ReadAll() // the part before failed inside its transaction
		}
		if err == nil {
			_, _ = pc.Exec(ctx, "BEGIN READ ONLY; "+part+"; ROLLBACK").ReadAll()
		}
	}
	if pc.IsClosed() {
		return fmt.Errorf("the connection closed during its warm-up: %w", err)
	}
	if pc.TxStatus() != 'I' {
		if _, rerr := pc.Exec(ctx, "ROLLBACK").ReadAll(); rerr != nil || pc.TxStatus() != 'I' {
			return fmt.Errorf("the warm-up left the connection in a transaction")
		}
	}
	return nil
}

// sameServer reports whether a and b open the same kind of connection: callers pass a copy of
// a database's configuration on every begin (pgxpool.Pool.Config copies), so a set is kept
// while its database's address and login stay the same.
func sameServer(a, b *pgx.ConnConfig) bool {
	return a == b || a.ConnString() == b.ConnString() && a.Host == b.Host && a.Port == b.Port &&
		a.Database == b.Database && a.User == b.User && a.Password == b.Password
}

// warm makes sure database has a set and starts filling it.
func (sp *spares) warm(database string, src *pgx.ConnConfig) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed || sp.size == 0 {
		return
	}
	sp.fillLocked(database, sp.set(database, src))
}

// poke starts a fill of database's set, if it has one: a session ended, so there may be room.
func (sp *spares) poke(database string) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if s := sp.sets[database]; s != nil {
		sp.fillLocked(database, s)
	}
}

// take returns a connection for a begin on database: a spare when one is left (spare true),
// else a new one opened now. When it took the last spare it starts a fill at once. A spare that
// turns out dead when used is the caller's to close; it then takes again.
func (sp *spares) take(ctx context.Context, database string, src *pgx.ConnConfig, warm []string) (conn *pgx.Conn, spare bool, err error) {
	sp.mu.Lock()
	if sp.closed || sp.size == 0 {
		sp.mu.Unlock()
		return sp.connect(ctx, sessionConfig(src, sp.idle))
	}
	s := sp.set(database, src)
	if len(warm) > 0 {
		s.warm = warm
	}
	for len(s.conns) > 0 && conn == nil {
		c := s.conns[len(s.conns)-1]
		s.conns = s.conns[:len(s.conns)-1]
		if c.IsClosed() {
			continue
		}
		conn = c
	}
	cfg := s.cfg
	if len(s.conns) == 0 {
		// While a spare is left, the refill waits for the session to end (Finish pokes) or the
		// next tidy: opening a backend costs the server CPU the new session's first
		// statements are about to need.
		sp.fillLocked(database, s)
	}
	sp.mu.Unlock()
	if conn != nil {
		return conn, true, nil
	}
	return sp.connect(ctx, cfg)
}

func (sp *spares) connect(ctx context.Context, cfg *pgx.ConnConfig) (*pgx.Conn, bool, error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, false, fmt.Errorf("opening a session connection: %w", err)
	}
	return conn, false, nil
}

// fillLocked starts a background fill of s unless one runs or the last failure asks to wait.
// Caller holds mu.
func (sp *spares) fillLocked(database string, s *spareSet) {
	if s.filling || sp.closed || time.Now().Before(s.retryAt) {
		return
	}
	s.filling = true
	sp.fills.Add(1)
	go func() {
		defer sp.fills.Done()
		sp.fill(database, s)
	}()
}

// fill opens spares for s until it holds its target: size, and no more than the sessions that
// could still begin. The missing ones are opened (and warmed) at once, in parallel: a new
// connection costs tens of milliseconds, mostly waiting for the server, and begins may come
// faster than that. A failure ends the fill and sets when the next may try (1 s, doubling up to
// spareRetryMax). s.filling is set by the caller and cleared here.
func (sp *spares) fill(database string, s *spareSet) {
	for {
		want := min(sp.size, sp.room())
		sp.mu.Lock()
		need := want - len(s.conns)
		if sp.closed || sp.sets[database] != s || need <= 0 {
			s.filling = false
			sp.mu.Unlock()
			return
		}
		sp.mu.Unlock()
		// Each spare warms for the warm-up the set has when it is ready, not when the fill
		// began: a begin that records a new table may come while the connections open.
		latest := func() []string {
			sp.mu.Lock()
			defer sp.mu.Unlock()
			return s.warm
		}
		conns := make([]*pgx.Conn, need)
		errs := make([]error, need)
		var wg sync.WaitGroup
		for i := range need {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conns[i], errs[i] = openSpare(s.cfg, latest)
			}()
		}
		wg.Wait()
		sp.mu.Lock()
		var failed error
		for i, c := range conns {
			switch {
			case errs[i] != nil:
				failed = errs[i]
			case sp.closed || sp.sets[database] != s:
				closeConn(c)
			default:
				s.conns = append(s.conns, c)
			}
		}
		if failed != nil {
			s.backoff = min(max(2*s.backoff, time.Second), spareRetryMax)
			s.retryAt = time.Now().Add(s.backoff)
			s.filling = false
			// Read under mu: once filling is cleared, the next fill may change it.
			backoff := s.backoff
			sp.mu.Unlock()
			// pgconn names host, user and database in its connect errors, never the password.
			sp.log.Warn().Err(failed).Str("database", database).Dur("retry_in", backoff).Msg("cannot open a spare session connection")
			return
		}
		s.backoff, s.retryAt = 0, time.Time{}
		sp.mu.Unlock()
	}
}

// openSpare connects with cfg and warms the connection up for the set's warm-up, read with warm
// once connected; if it changed while the warm-up ran, the spare warms for the new one too (a
// few times at most: each part is only planned).
func openSpare(cfg *pgx.ConnConfig, warm func() []string) (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	extra := warm()
	for range 3 {
		if err := warmUp(ctx, conn, extra); err != nil {
			closeConn(conn)
			return nil, err
		}
		now := warm()
		if slices.Equal(now, extra) {
			break
		}
		extra = now
	}
	return conn, nil
}

// tidy checks every idle spare with a round trip, closes the ones that died idle, and fills
// each set again. Manager.Run calls it on every tick; it returns once its checks are done (a
// fill it starts may still run: wait).
func (sp *spares) tidy(ctx context.Context) {
	sp.mu.Lock()
	type batch struct {
		database string
		s        *spareSet
		conns    []*pgx.Conn
	}
	var all []batch
	for db, s := range sp.sets {
		all = append(all, batch{db, s, s.conns})
		s.conns = nil // out of reach of take while checked
	}
	sp.mu.Unlock()
	for _, b := range all {
		alive := b.conns[:0]
		for _, c := range b.conns {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := c.PgConn().Ping(pctx)
			cancel()
			if err != nil {
				closeConn(c)
				continue
			}
			alive = append(alive, c)
		}
		sp.mu.Lock()
		if sp.closed || sp.sets[b.database] != b.s {
			closeAll(alive)
		} else {
			b.s.conns = append(b.s.conns, alive...)
			sp.fillLocked(b.database, b.s)
		}
		sp.mu.Unlock()
	}
}

// close closes every spare and stops the fills; spares opened after it are closed at once.
func (sp *spares) close() {
	sp.mu.Lock()
	sp.closed = true
	for _, s := range sp.sets {
		closeAll(s.conns)
		s.conns = nil
	}
	sp.mu.Unlock()
	sp.fills.Wait()
}

func closeAll(conns []*pgx.Conn) {
	for _, c := range conns {
		closeConn(c)
	}
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
