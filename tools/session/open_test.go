package session_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/session"
)

// TestSessionLifecycle drives a Session without package tools: Open begins the transaction with
// the options and the caller's assert SQL in it, the savepoint stack follows PostgreSQL's rules
// and refuses an unknown name before sending it, Touch and Info keep the TTL bookkeeping, and
// Rollback leaves nothing behind.
func TestSessionLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE t (v int)`)
	cfg, err := pgx.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	target := session.Target{Database: "main", Config: cfg, Who: session.Identity{Role: "r"},
		Assert: "SELECT pg_catalog.set_config('pgtools.test', 'asserted', true)"}
	s, err := session.Open(ctx, "id-1", "alice", target, session.Options{Isolation: "repeatable read", ReadOnly: false}, time.Minute, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(ctx) })
	if s.Principal != "alice" || s.Database != "main" || s.Who.Role != "r" || cfg.RuntimeParams["application_name"] != "" {
		t.Fatalf("session %+v (the caller's config must stay untouched: %v)", s, cfg.RuntimeParams)
	}
	var iso, asserted, app string
	if err := s.Conn().QueryRow(ctx, "SELECT current_setting('transaction_isolation'), current_setting('pgtools.test'), current_setting('application_name')").Scan(&iso, &asserted, &app); err != nil {
		t.Fatal(err)
	}
	if iso != "repeatable read" || asserted != "asserted" || app != "pgtools-session" || s.Conn().PgConn().TxStatus() != 'T' {
		t.Fatalf("isolation %q, assert %q, application_name %q, status %c", iso, asserted, app, s.Conn().PgConn().TxStatus())
	}

	insert := func(v int) {
		t.Helper()
		if _, err := s.Conn().Exec(ctx, "INSERT INTO t VALUES ($1)", v); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() int64 {
		t.Helper()
		var n int64
		if err := s.Conn().QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	insert(1)
	for i, name := range []string{"a", "b", "a"} {
		if err := s.Savepoint(ctx, name); err != nil {
			t.Fatal(err)
		}
		insert(i + 2)
	}
	if err := s.RollbackToSavepoint(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if got := s.Savepoints(); !slices.Equal(got, []string{"a", "b"}) || rows() != 2 {
		t.Fatalf("after rollback_to b: savepoints %v, %d rows; want [a b] and 2", got, rows())
	}
	for _, f := range []func(context.Context, string) error{s.ReleaseSavepoint, s.RollbackToSavepoint} {
		if err := f(ctx, "nope"); !errors.Is(err, session.ErrNoSavepoint) || s.Conn().PgConn().TxStatus() != 'T' {
			t.Fatalf("unknown savepoint: %v, status %c", err, s.Conn().PgConn().TxStatus())
		}
	}
	if err := s.ReleaseSavepoint(ctx, "a"); err != nil || len(s.Savepoints()) != 0 || rows() != 2 {
		t.Fatalf("release a: %v, savepoints %v, %d rows", err, s.Savepoints(), rows())
	}

	s.Touch(10 * time.Minute)
	clock.Add(90 * time.Second)
	s.Touch(10 * time.Minute)
	clock.Add(30 * time.Second)
	info := s.Info()
	want := session.Info{ID: "id-1", Database: "main", StartedAt: "2026-01-01T00:00:00Z", Age: "2m 0s", Idle: "30s", ExpiresIn: "9m 30s", Isolation: "repeatable read"}
	if info != want || s.LeftAtUse() != 8*time.Minute+30*time.Second {
		t.Fatalf("info %+v, left at use %s; want %+v, 8m30s", info, s.LeftAtUse(), want)
	}

	if err := s.Rollback(ctx); err != nil || !s.Closed() {
		t.Fatalf("rollback: %v, closed %v", err, s.Closed())
	}
	if n := db.QueryInt(t, "SELECT count(*) FROM t"); n != 0 {
		t.Fatalf("%d rows after the rollback", n)
	}
}

// TestOpenFailureLeavesNoConnection: a begin that PostgreSQL refuses (here the assert SQL) is an
// error, and the dedicated connection is closed, not left idle.
func TestOpenFailureLeavesNoConnection(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	cfg, err := pgx.ParseConfig(db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	target := session.Target{Database: "main", Config: cfg, Assert: "SET LOCAL ROLE no_such_role_pgtools"}
	if _, err := session.Open(context.Background(), "id-2", "alice", target, session.Options{}, time.Minute, time.Now); err == nil {
		t.Fatal("a begin whose assert fails opened a session")
	}
	for i := 0; ; i++ {
		n := db.QueryInt(t, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'pgtools-session'")
		if n == 0 {
			break
		}
		if i == 50 {
			t.Fatalf("%d session backends left after a failed begin", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
