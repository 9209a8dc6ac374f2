package session_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/localpg"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/session"
)

// spareFixture is a manager over one database (as the runner's login role would connect), with
// the superuser handle to look at its backends.
type spareFixture struct {
	db     *pgtest.DB
	mgr    *session.Manager
	target session.Target
}

func newSpareFixture(t *testing.T, cfg session.Config) *spareFixture {
	t.Helper()
	db := pgtest.New(t)
	conf, err := pgx.ParseConfig(db.RoleDSN(t, "sess"))
	if err != nil {
		t.Fatal(err)
	}
	mgr := session.New(cfg)
	t.Cleanup(func() { mgr.Close(context.Background()) })
	return &spareFixture{db: db, mgr: mgr, target: session.Target{Database: "default", Config: conf}}
}

// pids lists the backends of application app in the fixture's database.
func (f *spareFixture) pids(t *testing.T, app string) []int64 {
	t.Helper()
	return backendPIDs(t, f.db.DSN, app)
}

func backendPIDs(t *testing.T, dsn, app string) []int64 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT pid::int8 FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1 ORDER BY pid", app)
	if err != nil {
		t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// waitPIDs waits up to five seconds for app's backends to number want (PostgreSQL ends a closed
// or terminated backend asynchronously) and returns them.
func (f *spareFixture) waitPIDs(t *testing.T, app string, want int) []int64 {
	t.Helper()
	for i := 0; ; i++ {
		pids := f.pids(t, app)
		if len(pids) == want {
			return pids
		}
		if i == 250 {
			t.Fatalf("%d backends of %s (%v), want %d", len(pids), app, pids, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sessionPID(t *testing.T, s *session.Session) int64 {
	t.Helper()
	var pid int64
	if err := s.Conn().QueryRow(context.Background(), "SELECT pg_backend_pid()::int8").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestBeginTakesASpare: once warm, a database holds two fresh connections; a begin takes one
// (no connection set up on its path), the next tick replaces it, and the session's backend is never
// handed out again: not to a spare, not to a later session, and it is gone after the commit.
func TestBeginTakesASpare(t *testing.T) {
	t.Parallel()
	f := newSpareFixture(t, session.Config{MaxSessions: 10})
	ctx := context.Background()
	f.mgr.Warm(f.target.Database, f.target.Config)
	f.mgr.WaitSpares()
	spares := f.waitPIDs(t, "pgtools-spare", session.DefaultSpares)
	if n := f.mgr.SpareCount("default"); n != session.DefaultSpares {
		t.Fatalf("%d spares held, want %d", n, session.DefaultSpares)
	}
	s, e := f.mgr.Begin(ctx, "alice", f.target, session.Options{})
	if e != nil {
		t.Fatalf("begin: %s: %s", e.Type, e.Message)
	}
	pid := sessionPID(t, s)
	if s.Connect != 0 || !slices.Contains(spares, pid) {
		t.Fatalf("the session (backend %d, %s spent connecting) did not take one of the spares %v", pid, s.Connect, spares)
	}
	if n := f.mgr.SpareCount("default"); n != session.DefaultSpares-1 {
		t.Fatalf("%d spares right after a begin, want %d", n, session.DefaultSpares-1)
	}
	f.mgr.TidySpares(ctx) // the next tick refills while a spare is left
	if n := f.mgr.SpareCount("default"); n != session.DefaultSpares {
		t.Fatalf("%d spares after a tick, want the set filled again to %d", n, session.DefaultSpares)
	}
	if got := f.waitPIDs(t, "pgtools-session", 1); got[0] != pid {
		t.Fatalf("session backends %v, want %d", got, pid)
	}
	if slices.Contains(f.pids(t, "pgtools-spare"), pid) {
		t.Fatalf("the session's backend %d is also a spare", pid)
	}
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	f.mgr.Finish(s) // the commit's end: the connection is destroyed
	f.waitPIDs(t, "pgtools-session", 0)
	for i := 0; i < 4; i++ {
		next, e := f.mgr.Begin(ctx, "alice", f.target, session.Options{})
		if e != nil {
			t.Fatalf("begin %d: %s: %s", i, e.Type, e.Message)
		}
		if got := sessionPID(t, next); got == pid {
			t.Fatalf("a later session got the ended session's backend %d", pid)
		}
		if err := next.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		f.mgr.Finish(next)
	}
	if n := f.db.QueryInt(t, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid); n != 0 {
		t.Fatalf("the ended session's backend %d still exists", pid)
	}
}

// TestSparesReplacedAfterTheirBackendsAreKilled: spares whose backends were terminated (as a
// restart or an administrator would) are not handed to a begin as if alive: the begin finds
// them dead, discards them and still succeeds, and the next tidy opens a full set of new ones.
func TestSparesReplacedAfterTheirBackendsAreKilled(t *testing.T) {
	t.Parallel()
	f := newSpareFixture(t, session.Config{MaxSessions: 10})
	ctx := context.Background()
	f.mgr.Warm(f.target.Database, f.target.Config)
	f.mgr.WaitSpares()
	old := f.waitPIDs(t, "pgtools-spare", session.DefaultSpares)
	kill := func() {
		t.Helper()
		f.db.Exec(t, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'pgtools-spare'")
		f.waitPIDs(t, "pgtools-spare", 0)
	}
	kill()
	s, e := f.mgr.Begin(ctx, "alice", f.target, session.Options{})
	if e != nil {
		t.Fatalf("begin after the spares were killed: %s: %s", e.Type, e.Message)
	}
	if pid := sessionPID(t, s); slices.Contains(old, pid) {
		t.Fatalf("the session runs on killed backend %d", pid)
	}
	f.mgr.TidySpares(ctx)
	fresh := f.waitPIDs(t, "pgtools-spare", session.DefaultSpares)
	// Without a begin: killed while idle, replaced by the next tidy.
	kill()
	f.mgr.TidySpares(ctx)
	again := f.waitPIDs(t, "pgtools-spare", session.DefaultSpares)
	for _, pid := range again {
		if slices.Contains(fresh, pid) || slices.Contains(old, pid) {
			t.Fatalf("spare backend %d survived its termination", pid)
		}
	}
	if n := f.mgr.SpareCount("default"); n != session.DefaultSpares {
		t.Fatalf("%d spares held after the tidy, want %d", n, session.DefaultSpares)
	}
}

// TestSparesStayWithinTheSessionLimit: spares never outnumber the sessions that could still
// begin, and Close closes them.
func TestSparesStayWithinTheSessionLimit(t *testing.T) {
	t.Parallel()
	f := newSpareFixture(t, session.Config{MaxSessions: 1})
	ctx := context.Background()
	f.mgr.Warm(f.target.Database, f.target.Config)
	f.mgr.WaitSpares()
	f.waitPIDs(t, "pgtools-spare", 1) // min(2, max_sessions)
	s, e := f.mgr.Begin(ctx, "alice", f.target, session.Options{})
	if e != nil {
		t.Fatalf("begin: %s: %s", e.Type, e.Message)
	}
	f.mgr.TidySpares(ctx)
	if n := f.mgr.SpareCount("default"); n != 0 {
		t.Fatalf("%d spares while the only session slot is taken", n)
	}
	if err := s.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	f.mgr.Finish(s)
	f.mgr.WaitSpares()
	f.waitPIDs(t, "pgtools-spare", 1)
	f.mgr.Close(ctx)
	f.waitPIDs(t, "pgtools-spare", 0)
}

// TestSparesRefillAfterARestart restarts the server under a warm manager: a throwaway cluster is
// stopped and another started on the same port. The dead spares are dropped and a full set
// opened on the new server; a begin then takes one.
func TestSparesRefillAfterARestart(t *testing.T) {
	t.Parallel()
	bin, err := localpg.FindBinDir()
	if err != nil {
		t.Skipf("no PostgreSQL server binaries for a cluster of this test's own: %v", err)
	}
	ctx := context.Background()
	first, err := localpg.Start(ctx, localpg.Options{BinDir: bin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Stop() })
	dsn := first.DSN("postgres")
	conf, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	mgr := session.New(session.Config{})
	t.Cleanup(func() { mgr.Close(context.Background()) })
	target := session.Target{Database: "default", Config: conf}
	mgr.Warm(target.Database, target.Config)
	mgr.WaitSpares()
	before := backendPIDs(t, dsn, "pgtools-spare")
	if len(before) != session.DefaultSpares {
		t.Fatalf("%d spares on the first server, want %d", len(before), session.DefaultSpares)
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	second, err := localpg.Start(ctx, localpg.Options{BinDir: bin, Port: first.Port()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = second.Stop() })
	mgr.TidySpares(ctx)
	if after := backendPIDs(t, dsn, "pgtools-spare"); len(after) != session.DefaultSpares {
		t.Fatalf("%d spares on the restarted server (%v), want %d", len(after), after, session.DefaultSpares)
	}
	s, e := mgr.Begin(ctx, "alice", target, session.Options{})
	if e != nil {
		t.Fatalf("begin after the restart: %s: %s", e.Type, e.Message)
	}
	if s.Connect != 0 {
		t.Fatalf("the begin after the restart spent %s connecting: it found no live spare", s.Connect)
	}
}

// TestPgTxBeginSkipsConnectOnceWarm: through the tools, the first begin on a database the
// manager has not warmed opens a connection on its path (a "connect" phase); once the spares
// are open, begins report none.
func TestPgTxBeginSkipsConnectOnceWarm(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{MaxSessions: 10}, tools.Policy{})
	begin := func() (phases []string) {
		t.Helper()
		ctx := tools.WithPhases(context.Background(), func(name string, _ time.Time, _ time.Duration) { phases = append(phases, name) })
		res, _, e := f.reg.Call(ctx, alice, "pg_tx", []byte(`{"action":"begin"}`))
		if e != nil {
			t.Fatalf("begin: %s: %s", e.Type, e.Message)
		}
		raw, _ := res.MarshalJSON()
		var out struct {
			ID string `json:"session_id"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		f.must(t, alice, "pg_tx", `{"action":"rollback","session_id":"`+out.ID+`"}`)
		return phases
	}
	if got := begin(); !slices.Contains(got, "connect") {
		t.Fatalf("the first begin reported phases %v, want a connect", got)
	}
	for i := 0; i < 3; i++ {
		f.mgr.WaitSpares()
		if got := begin(); slices.Contains(got, "connect") {
			t.Fatalf("begin %d with spares open still connected (phases %v)", i+2, got)
		}
	}
}
