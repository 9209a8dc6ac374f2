package pgtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/tools/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestDatabasesAreIsolated(t *testing.T) {
	t.Parallel()
	a, b := pgtest.New(t), pgtest.New(t)
	if a.Name == b.Name {
		t.Fatalf("two databases named %s", a.Name)
	}

	// A multi-statement setup script runs through Exec.
	a.Exec(t, `create table widgets (id int primary key, name text);
		insert into widgets values (1, 'a'), (2, 'b');`)
	if n := a.QueryInt(t, "select count(*) from widgets"); n != 2 {
		t.Errorf("widgets in a: %d, want 2", n)
	}
	if n := b.QueryInt(t, "select count(*) from pg_tables where tablename = $1", "widgets"); n != 0 {
		t.Errorf("widgets visible in b")
	}

	var db string
	if err := b.Pool(t).QueryRow(context.Background(), "select current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if db != b.Name {
		t.Errorf("b.Pool connects to %s, want %s", db, b.Name)
	}
}

func TestRoleDSNIsReadOnly(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `create table before (id int); insert into before values (1)`)
	dsn := db.RoleDSN(t, "reader")
	if again := db.RoleDSN(t, "reader"); again != dsn {
		t.Errorf("second RoleDSN = %q, want %q", again, dsn)
	}
	db.Exec(t, `create table after (id int); insert into after values (1)`)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect as role: %v", err)
	}
	defer conn.Close(ctx)

	var user string
	if err := conn.QueryRow(ctx, "select current_user").Scan(&user); err != nil {
		t.Fatal(err)
	}
	if user != db.RoleName("reader") {
		t.Errorf("current_user = %s, want %s", user, db.RoleName("reader"))
	}
	for _, table := range []string{"before", "after"} {
		var n int
		if err := conn.QueryRow(ctx, "select count(*) from "+table).Scan(&n); err != nil || n != 1 {
			t.Errorf("select from %s as role: %d, %v", table, n, err)
		}
	}

	for _, sql := range []string{
		"insert into before values (2)",
		"create table mine (id int)",
	} {
		_, err := conn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s as role: err = %v, want SQLSTATE 42501", sql, err)
		}
	}
}

// TestNewConcurrently creates databases from many goroutines at once: a
// CREATE DATABASE racing another must not fail the test.
func TestNewConcurrently(t *testing.T) {
	t.Parallel()
	const n = 8
	var wg sync.WaitGroup
	names := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				db := pgtest.New(t)
				db.Exec(t, "create table t (id int)")
				names <- db.Name
			})
		}()
	}
	wg.Wait()
	close(names)
	seen := map[string]bool{}
	for name := range names {
		if seen[name] {
			t.Errorf("database %s handed out twice", name)
		}
		seen[name] = true
	}
}

func TestCleanupDropsDatabaseAndRoles(t *testing.T) {
	t.Parallel()
	outer := pgtest.New(t)
	var name, role string
	t.Run("inner", func(t *testing.T) {
		db := pgtest.New(t)
		name, role = db.Name, db.RoleName("gone")
		db.RoleDSN(t, "gone")
	})
	if n := outer.QueryInt(t, "select count(*) from pg_database where datname = $1", name); n != 0 {
		t.Errorf("database %s still exists after its test ended", name)
	}
	if n := outer.QueryInt(t, "select count(*) from pg_roles where rolname = $1", role); n != 0 {
		t.Errorf("role %s still exists after its test ended", role)
	}
}
