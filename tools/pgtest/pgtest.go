// Package pgtest gives tests a real PostgreSQL database of their own.
//
// A test binary finds one server, once, on first use: the superuser DSN in
// PG_TEST_DSN if set; else a container (testcontainers) when a Docker
// engine answers; else a throwaway local cluster (package localpg; in
// /dev/shm when that is a tmpfs with 4 GiB free, which makes CREATE
// DATABASE about ten times faster than on a slow disk). With
// none, tests skip with the reason, except when CI is set: then they fail,
// so a CI run never passes without having run them.
//
// Each call to New creates a fresh database on that server, dropped when the
// test ends, so tests are isolated and can run in parallel. Packages using
// pgtest route TestMain through Main, which stops the server afterwards:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		db := pgtest.New(t)
//		db.Exec(t, `create table t (id int); insert into t values (1)`)
//		pool := db.Pool(t)
//		...
//	}
//
// Everything here is safe for concurrent use by parallel tests. This package
// is for tests only: it links testcontainers.
package pgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// dbPrefix starts the name of every database New creates, so leftovers
	// of killed runs on a shared PG_TEST_DSN server are easy to find.
	dbPrefix = "pgtools_test_"
	// suffixLen random characters make names unique across parallel tests
	// and test binaries sharing a server.
	suffixLen = 10
	// opTimeout bounds each administrative statement pgtest runs.
	opTimeout = time.Minute
	// createAttempts bounds retries of CREATE DATABASE while another
	// session (maybe another test binary) holds the template.
	createAttempts = 20
	// maxIdentLen is PostgreSQL's NAMEDATALEN-1.
	maxIdentLen = 63
)

// Main runs the tests of a package and then stops the server pgtest started
// for them (a local cluster or a container), and exits with the tests' exit
// code. Call it from TestMain; New fails the test when it was not.
func Main(m *testing.M) {
	harness.mainCalled.Store(true)
	code := m.Run()
	if harness.err != nil && harness.skippable && os.Getenv("CI") == "" {
		// go test prints a bare "ok" for skipped tests: leave a trace.
		fmt.Fprintf(os.Stderr, "pgtest: tests that need PostgreSQL were SKIPPED: %v\n", harness.err)
	}
	if harness.srv != nil {
		if err := harness.srv.shutdown(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stopping %s: %v\n", harness.srv.source, err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// DB is a database of its own for one test, created by New and dropped
// (with its roles from RoleName and RoleDSN) when the test ends. Its
// methods are safe for concurrent use.
type DB struct {
	// DSN is a superuser connection string to this database.
	DSN string
	// Name is the database name: pgtools_test_ and a random suffix.
	Name string

	srv    *server
	suffix string

	mu    sync.Mutex
	admin *pgxpool.Pool     // superuser pool for Exec and QueryInt, made on first use
	roles map[string]string // RoleDSN results by role name
}

// New creates a fresh, empty database (from template1) for the test and
// drops it when the test and its subtests end, forcibly disconnecting any
// sessions left. It skips or fails the test when there is no server (see
// the package doc).
func New(t testing.TB) *DB {
	t.Helper()
	s := getServer(t)
	suffix := randomString(suffixLen)
	name := dbPrefix + suffix
	dsn, err := withDatabase(s.dsn, name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if err := s.createDatabase(ctx, name); err != nil {
		t.Fatalf("pgtest: creating database %s on %s: %v", name, s.source, err)
	}
	d := &DB{DSN: dsn, Name: name, srv: s, suffix: suffix, roles: map[string]string{}}
	t.Cleanup(func() {
		if err := d.drop(); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return d
}

// createDatabase runs CREATE DATABASE. It copies template1, which fails
// with 55006 ("source database is being accessed by other users") while
// any other session is connected to template1, including another CREATE
// DATABASE on some PostgreSQL versions: serialize within this binary and
// retry for other binaries sharing the server.
func (s *server) createDatabase(ctx context.Context, name string) error {
	s.createMu.Lock()
	defer s.createMu.Unlock()
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	for attempt := 1; ; attempt++ {
		_, err := s.admin.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || attempt == createAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		}
	}
}

// drop closes the admin pool, drops the database and the test's roles.
func (d *DB) drop() error {
	d.mu.Lock()
	if d.admin != nil {
		d.admin.Close()
		d.admin = nil
	}
	d.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := d.srv.admin.Exec(ctx,
		"DROP DATABASE IF EXISTS "+pgx.Identifier{d.Name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return err
	}
	// Privileges in the dropped database went with it, so the roles have
	// no dependencies left.
	rows, err := d.srv.admin.Query(ctx,
		"SELECT rolname FROM pg_roles WHERE right(rolname, $1) = $2", len(d.suffix)+1, "_"+d.suffix)
	if err != nil {
		return err
	}
	roles, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	var errs []error
	for _, role := range roles {
		if _, err := d.srv.admin.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize()); err != nil {
			errs = append(errs, fmt.Errorf("dropping role %s: %w", role, err))
		}
	}
	return errors.Join(errs...)
}

// adminPool returns the superuser pool to this database, made on first use
// and closed when the database is dropped.
func (d *DB) adminPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.adminPoolLocked(t)
}

// adminPoolLocked is adminPool for callers holding d.mu.
func (d *DB) adminPoolLocked(t testing.TB) *pgxpool.Pool {
	t.Helper()
	if d.admin == nil {
		cfg, err := pgxpool.ParseConfig(d.DSN)
		if err != nil {
			t.Fatalf("pgtest: %v", err)
		}
		cfg.MaxConns = 2
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatalf("pgtest: connecting to %s: %v", d.Name, err)
		}
		d.admin = pool
	}
	return d.admin
}

// Exec runs sql as superuser in this database and fails the test on error.
// Without args it uses the simple protocol, so sql may hold several
// statements separated by semicolons (a setup script); with args it must be
// one statement with $1, $2, … placeholders.
func (d *DB) Exec(t testing.TB, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	if _, err := d.adminPool(t).Exec(ctx, sql, args...); err != nil {
		t.Fatalf("pgtest: exec %s: %v", abbreviate(sql), err)
	}
}

// QueryInt runs a query returning one row with one integer column (for
// example count(*)) as superuser and returns the value. It fails the test
// on error, on no row and on NULL.
func (d *DB) QueryInt(t testing.TB, sql string, args ...any) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var n int64
	if err := d.adminPool(t).QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("pgtest: query %s: %v", abbreviate(sql), err)
	}
	return n
}

// Pool returns a new superuser connection pool to this database, closed
// when the test ends.
func (d *DB) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), d.DSN)
	if err != nil {
		t.Fatalf("pgtest: connecting to %s: %v", d.Name, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// OpenPool opens a pool with cfg, for example the one tools.PoolConfig builds (which pgtest
// cannot import), and closes it when the test ends.
func OpenPool(t testing.TB, cfg *pgxpool.Config) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: opening a pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// RoleName returns the cluster-wide name pgtest uses for role in this
// database: role, an underscore and the database's random suffix. Roles are
// shared by all databases of a server, so the suffix keeps parallel tests
// apart. Roles so named are dropped with the database, whoever created
// them: use RoleName to name roles a test creates itself.
func (d *DB) RoleName(role string) string {
	return role + "_" + d.suffix
}

// DSNFor returns a connection string to this database that logs in as
// user, with password unless it is empty.
func (d *DB) DSNFor(user, password string) string {
	dsn, err := withUser(d.DSN, user, password)
	if err != nil {
		panic(err) // d.DSN was already rewritten once by New
	}
	return dsn
}

// RoleDSN creates, if missing, the LOGIN role RoleName(role) with read-only
// access to this database and returns a DSN that logs in as it. The role
// gets CONNECT on the database, USAGE on schema public, SELECT on all
// tables now in schema public and, through default privileges, on tables
// the superuser creates there later; nothing else. On the local cluster
// (trust authentication) it has no password; on other servers it gets a
// random one, which the DSN carries. Calling it again with the same role
// returns the same DSN.
func (d *DB) RoleDSN(t testing.TB, role string) string {
	t.Helper()
	name := d.RoleName(role)
	if len(name) > maxIdentLen {
		t.Fatalf("pgtest: role name %q is longer than %d bytes; use a shorter role", name, maxIdentLen)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if dsn, ok := d.roles[name]; ok {
		return dsn
	}

	password := ""
	if !d.srv.trust {
		password = randomString(24)
	}
	ident := pgx.Identifier{name}.Sanitize()
	login := "LOGIN"
	if password != "" {
		// The password is [a-z0-9]: a literal needs no escaping.
		login += " PASSWORD '" + password + "'"
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	err := pgx.BeginFunc(ctx, d.srv.admin, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", name).Scan(&exists); err != nil {
			return err
		}
		verb := "CREATE"
		if exists {
			verb = "ALTER"
		}
		_, err := tx.Exec(ctx, verb+" ROLE "+ident+" "+login)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "GRANT CONNECT ON DATABASE "+pgx.Identifier{d.Name}.Sanitize()+" TO "+ident)
		return err
	})
	if err != nil {
		t.Fatalf("pgtest: creating role %s: %v", name, err)
	}
	// Schema privileges live in this database, not in the maintenance one.
	if _, err := d.adminPoolLocked(t).Exec(ctx, strings.Join([]string{
		"GRANT USAGE ON SCHEMA public TO " + ident,
		"GRANT SELECT ON ALL TABLES IN SCHEMA public TO " + ident,
		"ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO " + ident,
	}, ";\n")); err != nil {
		t.Fatalf("pgtest: granting to role %s: %v", name, err)
	}

	dsn := d.DSNFor(name, password)
	d.roles[name] = dsn
	return dsn
}

// randomString returns n random characters from [a-z0-9], fit for
// identifiers and passwords without quoting.
func randomString(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// abbreviate shortens sql for error messages.
func abbreviate(sql string) string {
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 80 {
		sql = sql[:77] + "..."
	}
	return fmt.Sprintf("%q", sql)
}
