package session

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/tools/internal/pgerr"
)

// Defaults of Config, also the defaults of the runner's configuration (runner.Config).
const (
	// DefaultMaxSessions is Config.MaxSessions when unset.
	DefaultMaxSessions = 10
	// DefaultTTL is Config.TTL when unset.
	DefaultTTL = 30 * time.Minute
)

// Config is the manager's configuration. Zero fields take their defaults.
type Config struct {
	// MaxSessions caps open sessions across all principals (default 10).
	MaxSessions int
	// MaxPerPrincipal caps the sessions one quota owner may hold, read-only ones included, so one
	// caller cannot take every slot from the others (default, and at most, MaxSessions). The
	// owner is Target.Quota: an API token with all the end users it acts for, or a JWT issuer
	// with all its subjects; a principal without one is its own owner.
	MaxPerPrincipal int
	// MaxPerSubject caps the sessions one subject may hold within its owner's share, so one end
	// user of an act-as token or JWT issuer cannot take the whole share from the others
	// (default, and at most, MaxPerPrincipal). It does not apply to a principal that is its own
	// owner.
	MaxPerSubject int
	// TTL is the idle time after which a session is rolled back and closed; every use restarts
	// it (default 30 minutes).
	TTL time.Duration
	// Clock is the time source (default time.Now); tests inject a fake one.
	Clock func() time.Time
	// Log receives session lifecycle lines (never values).
	Log zerolog.Logger
	// ReplicaID names this runner among the replicas of a deployment (runner.Config.ReplicaID,
	// default there: the host name). Every session id starts with its tag (ReplicaTag), so a
	// replica can tell a session opened elsewhere and a proxy can route by prefix. "" picks a
	// random tag per Manager.
	ReplicaID string
	// Spares is how many fresh connections per database the manager keeps open ahead of need,
	// so a begin does not wait for a connection to be set up (default DefaultSpares; at most
	// MaxSessions, and never more than the sessions that could still begin; negative: none).
	Spares int
}

// ReplicaTag is the 8 lowercase hex digits that open every session id of replica id: id itself
// when it is already 8 hex digits (so an operator can choose the prefixes a proxy's map routes
// on), else the first 8 hex digits of its SHA-256. The id's second group is random per Manager
// (per process start), so a replica that restarted tells an id it minted before the restart
// (the session was rolled back when it stopped) from one it never minted. The other 74 random
// bits keep it unguessable; the result is still a UUIDv4, which the tool schemas require.
func ReplicaTag(id string) string {
	if len(id) == 8 {
		if _, err := hex.DecodeString(id); err == nil {
			return strings.ToLower(id)
		}
	}
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:4])
}

// TagOf is the replica tag a session id starts with, "" when id is not shaped like one.
func TagOf(id string) string {
	if len(id) != 36 || id[8] != '-' {
		return ""
	}
	if _, err := hex.DecodeString(id[:8]); err != nil {
		return ""
	}
	return strings.ToLower(id[:8])
}

// rememberExpired bounds how many expired ids are remembered for session_expired answers.
const rememberExpired = 10000

// Manager is the session manager: it opens pg_tx sessions on dedicated connections, binds them to
// their principal, caps how many are open (in all, and per principal so one caller cannot take
// every slot), expires idle ones (rolling them back), remembers expired ids, and rolls everything
// back on shutdown. Package tools uses it as its SessionStore. It is safe for concurrent use.
type Manager struct {
	cfg      Config
	tag      string // ReplicaTag of cfg.ReplicaID, the first group of every id
	boot     string // 4 random hex digits per Manager (per process start), the second group
	mu       sync.Mutex
	sessions map[string]*Session
	pending  int                  // begins in progress, counted against MaxSessions
	held     map[string]int       // open sessions and begins in progress per quota owner
	subjects map[string]int       // the same per subject principal (one that is not its own owner)
	expired  map[string]expiredID // id → who owned it and when it expired
	order    []string             // expired ids, oldest first, to bound the map
	closed   bool
	expiries atomic.Uint64 // sessions expired by Sweep since New, for metrics
	spares   *spares
	base     [2]int // MaxPerPrincipal and MaxPerSubject as configured, before SetFleetShare
}

type expiredID struct {
	principal string
	at        time.Time
}

// New returns a manager. Run its Run method to expire idle sessions.
func New(cfg Config) *Manager {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxPerPrincipal <= 0 || cfg.MaxPerPrincipal > cfg.MaxSessions {
		cfg.MaxPerPrincipal = cfg.MaxSessions
	}
	if cfg.MaxPerSubject <= 0 || cfg.MaxPerSubject > cfg.MaxPerPrincipal {
		cfg.MaxPerSubject = cfg.MaxPerPrincipal
	}
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	switch {
	case cfg.Spares == 0:
		cfg.Spares = min(DefaultSpares, cfg.MaxSessions)
	case cfg.Spares < 0:
		cfg.Spares = 0
	}
	cfg.Spares = min(cfg.Spares, cfg.MaxSessions)
	tag := ReplicaTag(cfg.ReplicaID)
	if cfg.ReplicaID == "" {
		tag = newID()[:8]
	}
	m := &Manager{cfg: cfg, tag: tag, boot: newID()[9:13], sessions: map[string]*Session{}, held: map[string]int{}, subjects: map[string]int{}, expired: map[string]expiredID{},
		base: [2]int{cfg.MaxPerPrincipal, cfg.MaxPerSubject}}
	m.spares = &spares{size: cfg.Spares, room: m.room, idle: m.idleTimeout(), log: cfg.Log, sets: map[string]*spareSet{}}
	return m
}

// idleTimeout is the idle_in_transaction_session_timeout of session connections: a backstop a
// little beyond the manager's own TTL.
func (m *Manager) idleTimeout() time.Duration { return m.cfg.TTL + time.Minute }

// room is how many more sessions could begin now.
func (m *Manager) room() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0
	}
	return m.cfg.MaxSessions - len(m.sessions) - m.pending
}

// Warm opens the spare connections of database (connection configuration cfg) in the
// background, so that even its first begin finds one. Begin does the same for a database it
// has not seen.
func (m *Manager) Warm(database string, cfg *pgx.ConnConfig) { m.spares.warm(database, cfg) }

// open begins the session's transaction on a spare connection, or on one opened now when none
// is left. A spare that died idle (the database restarted, or its backend was terminated)
// fails at the BEGIN, before anything ran: it is closed and the next one taken.
func (m *Manager) open(ctx context.Context, id, principal string, t Target, opts Options) (*Session, error) {
	for {
		began := time.Now()
		conn, spare, err := m.spares.take(ctx, t.Database, t.Config, t.Warm)
		if err != nil {
			return nil, err
		}
		setup := time.Duration(0)
		if !spare {
			setup = time.Since(began)
		}
		s, err := start(ctx, conn, id, principal, t, opts, m.cfg.Clock)
		var gone *connGoneError
		if err != nil && spare && errors.As(err, &gone) && ctx.Err() == nil {
			continue
		}
		if s != nil {
			s.Connect = setup
		}
		return s, err
	}
}

// newID returns a random UUIDv4.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// SetFleetShare makes a quota owner's and a subject's session shares hold for a fleet of n
// live replicas together: each replica takes 1/n of the configured share, at least 1 (so with
// more replicas than the share, a token may hold up to n sessions). n <= 1 restores the
// configured shares. Open sessions stay open.
func (m *Manager) SetFleetShare(n int) {
	n = max(n, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg.MaxPerPrincipal, m.cfg.MaxPerSubject = max(1, m.base[0]/n), max(1, m.base[1]/n)
}

// Tag is the replica tag every session id of this manager starts with.
func (m *Manager) Tag() string { return m.tag }

// ReplicaID is the replica name the manager was configured with ("" when none).
func (m *Manager) ReplicaID() string { return m.cfg.ReplicaID }

// Begin opens a session for principal on t, or answers session_limit_reached (or, when opening
// fails, the classified error). The session counts against t.Quota's share (principal's own when
// t.Quota is "" or principal) and, for a subject of another owner, against its subject share.
func (m *Manager) Begin(ctx context.Context, principal string, t Target, opts Options) (*Session, *pgerr.Error) {
	owner := cmp.Or(t.Quota, principal)
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, &pgerr.Error{Type: pgerr.ErrConnection, Message: "The runner is shutting down and opens no new sessions", Suggestion: "Retry in a moment, against a running instance."}
	}
	if e := m.admit(principal, owner); e != nil {
		m.mu.Unlock()
		return nil, e
	}
	m.pending++
	m.mu.Unlock()

	id := m.tag + "-" + m.boot + newID()[13:]
	s, err := m.open(ctx, id, principal, t, opts)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending--
	if err != nil {
		m.drop(principal, owner)
		return nil, pgerr.Classify(ctx, err, pgerr.Context{Database: t.Database}, t.MaskValues)
	}
	s.Quota = owner
	if m.closed {
		m.drop(principal, owner)
		go s.Close(context.Background())
		return nil, &pgerr.Error{Type: pgerr.ErrConnection, Message: "The runner is shutting down and opens no new sessions", Suggestion: "Retry in a moment, against a running instance."}
	}
	s.Touch(m.cfg.TTL)
	m.sessions[id] = s
	m.cfg.Log.Info().Str("session", id).Str("principal", principal).Str("database", t.Database).Bool("read_only", opts.ReadOnly).Msg("session opened")
	return s, nil
}

// describe lists principal's open sessions with their idle times, for session_limit_reached. Caller holds mu.
func (m *Manager) describe(principal string) string {
	var parts []string
	for _, s := range m.sessions {
		if s.Principal == principal {
			parts = append(parts, fmt.Sprintf("%s (idle %s)", s.ID, s.Info().Idle))
		}
	}
	if len(parts) == 0 {
		return "" // saying nothing: others' sessions are not the caller's business
	}
	sort.Strings(parts)
	return " Your open sessions: " + strings.Join(parts, ", ") + "."
}

// Acquire finds principal's session id, waits for it to be free, locks it and slides its TTL. The
// caller must Release it. Another principal's session is session_not_found; an expired one,
// session_expired.
func (m *Manager) Acquire(ctx context.Context, principal, id string) (*Session, *pgerr.Error) {
	id = strings.ToLower(id)
	m.mu.Lock()
	s := m.sessions[id]
	if s == nil || s.Principal != principal {
		e := m.missing(principal, id)
		m.mu.Unlock()
		return nil, e
	}
	m.mu.Unlock()
	if err := s.Lock(ctx); err != nil {
		return nil, &pgerr.Error{Type: pgerr.ErrTimeout, Message: fmt.Sprintf("Session %s is busy with another call", id),
			Suggestion: "Calls in one session run one at a time; wait for the previous call to finish."}
	}
	if s.Closed() {
		s.Unlock()
		m.mu.Lock()
		e := m.missing(principal, id)
		m.mu.Unlock()
		return nil, e
	}
	s.Touch(m.cfg.TTL)
	return s, nil
}

// missing answers for an id with no live session of principal's. Caller holds mu.
func (m *Manager) missing(principal, id string) *pgerr.Error {
	if ex, ok := m.expired[id]; ok && ex.principal == principal {
		return &pgerr.Error{Type: pgerr.ErrSessionExpired,
			Message:    fmt.Sprintf("Session %s expired after %s without use and was rolled back", id, humanTTL(m.cfg.TTL)),
			Suggestion: `Nothing of it was committed. Begin a new session with pg_tx {"action":"begin"} and redo its changes.`}
	}
	if tag := TagOf(id); tag == m.tag && id[9:13] != m.boot {
		// Minted by this replica before it restarted: its connection, and with it the
		// transaction, ended when the process did.
		return &pgerr.Error{Type: pgerr.ErrConnection,
			Message:    fmt.Sprintf("Session %s was lost: replica %s (tag %s) restarted since the session began, and its transaction was rolled back when the replica stopped", id, m.replicaName(), m.tag),
			Suggestion: `Nothing of this session was committed. Begin a new one with pg_tx {"action":"begin"} and redo its changes.` + m.describe(principal)}
	}
	if tag := TagOf(id); tag != "" && tag != m.tag {
		// Minted by another replica: whether it is still open there (and whose it is) is that
		// replica's business, so this says only where the id came from and how to get there.
		return &pgerr.Error{Type: pgerr.ErrSessionNotFound,
			Message:    fmt.Sprintf("Session %s was opened by another replica (tag %s); this request reached replica %s (tag %s), which does not hold it", id, tag, m.replicaName(), m.tag),
			Suggestion: fmt.Sprintf(`Send the id also as HTTP header X-PgTools-Session: %s with every call of the session, so the load balancer routes it to the replica holding it. If that replica has stopped, the session was rolled back: begin a new one with pg_tx {"action":"begin"} and redo its changes.`, id) + m.describe(principal)}
	}
	// Another principal's session is reported exactly like an unknown one.
	return &pgerr.Error{Type: pgerr.ErrSessionNotFound, Message: fmt.Sprintf("No open session has id %s", id),
		Suggestion: `Check the session_id (pg_tx {"action":"list"} shows your sessions), begin one with pg_tx {"action":"begin"}, or drop session_id (a write then needs autocommit: true). On a multi-replica deployment, send the id also as header X-PgTools-Session so the request reaches the replica holding it.` + m.describe(principal)}
}

// replicaName quotes the replica id for messages, or says it has none.
func (m *Manager) replicaName() string {
	if m.cfg.ReplicaID == "" {
		return "(unnamed)"
	}
	return fmt.Sprintf("%q", m.cfg.ReplicaID)
}

func humanTTL(d time.Duration) string {
	return strings.TrimSuffix(strings.TrimSuffix(d.String(), "0s"), "0m")
}

// Release unlocks a session taken with Acquire.
func (m *Manager) Release(s *Session) { s.Unlock() }

// Finish removes an ended session (committed, rolled back or lost) and closes it. The caller
// holds its lock.
func (m *Manager) Finish(s *Session) {
	m.mu.Lock()
	if _, ok := m.sessions[s.ID]; ok {
		delete(m.sessions, s.ID)
		m.drop(s.Principal, s.Quota)
	}
	m.mu.Unlock()
	s.Close(context.Background())
	m.spares.poke(s.Database) // its slot is free again: so is room for a spare
	m.cfg.Log.Info().Str("session", s.ID).Str("principal", s.Principal).Msg("session ended")
}

// List returns principal's open sessions, oldest first.
func (m *Manager) List(principal string) []*Session {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Session
	for _, s := range m.sessions {
		if s.Principal == principal {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

// Open returns how many sessions are open.
func (m *Manager) Open() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}

// Expiries returns how many sessions expired (idle past their TTL) since New.
func (m *Manager) Expiries() uint64 { return m.expiries.Load() }

// Sweep rolls back and closes every idle session past its expiry and remembers its id. A session
// busy with a call is left alone (the call slides its expiry).
func (m *Manager) Sweep() {
	now := m.cfg.Clock()
	m.mu.Lock()
	var due []*Session
	for id, s := range m.sessions {
		if now.After(s.ExpiresAt()) && s.TryLock() {
			delete(m.sessions, id)
			m.drop(s.Principal, s.Quota)
			m.remember(id, s.Principal, now)
			due = append(due, s)
		}
	}
	m.mu.Unlock()
	m.expiries.Add(uint64(len(due)))
	for _, s := range due {
		_ = s.Rollback(context.Background())
		s.Unlock()
		m.cfg.Log.Info().Str("session", s.ID).Str("principal", s.Principal).Msg("session expired and rolled back")
	}
}

// remember records an expired id, forgetting the oldest beyond rememberExpired. Caller holds mu.
func (m *Manager) remember(id, principal string, at time.Time) {
	m.expired[id] = expiredID{principal: principal, at: at}
	m.order = append(m.order, id)
	if len(m.order) > rememberExpired {
		delete(m.expired, m.order[0])
		m.order = m.order[1:]
	}
}

// Run sweeps expired sessions until ctx ends, every tick (default: a tenth of the TTL, at most
// one second).
func (m *Manager) Run(ctx context.Context, tick time.Duration) {
	if tick <= 0 {
		tick = min(m.cfg.TTL/10, time.Second)
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.Sweep()
			m.spares.tidy(ctx)
		}
	}
}

// Close refuses new sessions, closes the spare connections, and rolls back every open session,
// waiting up to ctx for calls in progress; a session still busy then has its connection closed,
// which rolls it back too.
func (m *Manager) Close(ctx context.Context) {
	m.mu.Lock()
	m.closed = true
	all := make([]*Session, 0, len(m.sessions))
	for id, s := range m.sessions {
		all = append(all, s)
		delete(m.sessions, id)
	}
	clear(m.held)
	clear(m.subjects)
	m.mu.Unlock()
	m.spares.close()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func(s *Session) {
			defer wg.Done()
			if s.Lock(ctx) == nil {
				_ = s.Rollback(ctx)
				s.Unlock()
			} else {
				s.Close(ctx)
			}
			m.cfg.Log.Info().Str("session", s.ID).Msg("session rolled back at shutdown")
		}(s)
	}
	wg.Wait()
}
