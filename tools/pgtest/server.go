package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"

	"github.com/pgtools/pgtools/tools/localpg"
)

const (
	// envDSN names a superuser DSN of a server to use instead of starting one.
	envDSN = "PG_TEST_DSN"
	// containerImage matches the major version of the local fallback.
	containerImage = "postgres:15-alpine"
	// dockerHealthTimeout bounds the "is a Docker engine there?" check.
	dockerHealthTimeout = 5 * time.Second
	// startTimeout bounds starting a container or a local cluster.
	startTimeout = 3 * time.Minute
)

// server is the PostgreSQL server a test binary uses, found once.
type server struct {
	source string // where it came from, for messages
	dsn    string // superuser DSN to its maintenance database
	// trust is set when any role logs in without a password (the local
	// cluster); roles then get no password.
	trust bool
	// versionNum is the server's server_version_num, e.g. 170004.
	versionNum int
	admin      *pgxpool.Pool // superuser pool, creates and drops databases
	stop       func() error  // stops what this binary started; nil for PG_TEST_DSN

	createMu sync.Mutex // serializes CREATE DATABASE within this binary
}

// harness is the per-test-binary state. Discovery runs once (sync.Once)
// because starting a server costs a second or more; tests then share the
// server and get their own databases.
var harness struct {
	mainCalled atomic.Bool
	once       sync.Once
	srv        *server
	err        error // why there is no server
	skippable  bool  // err only means "nothing available here", not a failure
}

// getServer returns the shared server, starting one on first use. Without
// one it skips the test, or fails it when CI is set or when the failure is
// not a plain absence (a broken PG_TEST_DSN, an initdb that fails).
func getServer(t testing.TB) *server {
	t.Helper()
	if !harness.mainCalled.Load() {
		t.Fatal("pgtest: this package's tests need `func TestMain(m *testing.M) { pgtest.Main(m) }` " +
			"so the server pgtest starts is stopped when the tests end")
	}
	harness.once.Do(func() {
		harness.srv, harness.skippable, harness.err = discover()
	})
	if harness.err != nil {
		if harness.skippable && os.Getenv("CI") == "" {
			t.Skipf("pgtest: SKIPPED, no PostgreSQL server: %v", harness.err)
		}
		t.Fatalf("pgtest: no PostgreSQL server: %v", harness.err)
	}
	return harness.srv
}

// discover finds a server: PG_TEST_DSN, else a testcontainers container
// when a Docker engine answers, else a local cluster. skippable reports
// that nothing was available (as opposed to something that broke).
func discover() (srv *server, skippable bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()

	if dsn := os.Getenv(envDSN); dsn != "" {
		s := &server{source: envDSN, dsn: dsn}
		if err := s.connect(ctx); err != nil {
			return nil, false, fmt.Errorf("%s is set but unusable: %w", envDSN, err)
		}
		return s, false, s.checkMajor(ctx)
	}

	// A version asked for by the environment runs from local binaries: the
	// container image is one fixed major.
	bin, err := chosenBinDir()
	if err != nil {
		return nil, false, err
	}
	if bin != "" {
		s, err := startLocal(ctx, bin)
		if err != nil {
			return nil, false, fmt.Errorf("starting PostgreSQL from %s: %w", bin, err)
		}
		if err := s.checkMajor(ctx); err != nil {
			_ = s.shutdown()
			return nil, false, err
		}
		return s, false, nil
	}

	var reasons []string
	if err := dockerHealthy(ctx); err != nil {
		reasons = append(reasons, fmt.Sprintf("no Docker engine (%v)", err))
	} else {
		s, err := startContainer(ctx)
		if err == nil {
			return s, false, s.checkMajor(ctx)
		}
		// Docker answered but the container failed: say so, then still try
		// the local binaries.
		reasons = append(reasons, fmt.Sprintf("Docker answered but the container failed: %v", err))
	}

	s, err := startLocal(ctx, "")
	if err == nil {
		return s, false, s.checkMajor(ctx)
	}
	reasons = append(reasons, err.Error())
	return nil, errors.Is(err, localpg.ErrNotFound),
		fmt.Errorf("set %s to a superuser DSN, or run a Docker engine, or install PostgreSQL: %s",
			envDSN, strings.Join(reasons, "; "))
}

// dockerHealthy reports whether a Docker engine answers, quickly.
func dockerHealthy(ctx context.Context) (err error) {
	defer func() {
		// testcontainers has panicked on odd Docker configurations.
		if r := recover(); r != nil {
			err = fmt.Errorf("docker provider panicked: %v", r)
		}
	}()
	p, err := testcontainers.ProviderDocker.GetProvider()
	if err != nil {
		return err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(ctx, dockerHealthTimeout)
	defer cancel()
	return p.Health(ctx)
}

// startContainer runs PostgreSQL in a container with a random superuser
// password (the image requires password authentication from outside).
func startContainer(ctx context.Context) (*server, error) {
	ctr, err := tcpostgres.Run(ctx, containerImage,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword(randomString(20)),
		testcontainers.WithCmd("postgres",
			"-c", "fsync=off", "-c", "synchronous_commit=off",
			"-c", "full_page_writes=off", "-c", "max_connections=200"),
		tcpostgres.BasicWaitStrategies(),
	)
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, err
	}
	dsn, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = testcontainers.TerminateContainer(ctr)
		return nil, err
	}
	s := &server{
		source: "testcontainers " + containerImage,
		dsn:    dsn,
		stop:   func() error { return testcontainers.TerminateContainer(ctr) },
	}
	if err := s.connect(ctx); err != nil {
		_ = s.stop()
		return nil, err
	}
	return s, nil
}

// startLocal starts a throwaway cluster from the binaries in bin, or the
// installed ones when bin is "".
func startLocal(ctx context.Context, bin string) (*server, error) {
	c, err := localpg.Start(ctx, localpg.Options{BinDir: bin, ParentDir: fastParentDir()})
	if err != nil {
		return nil, err
	}
	source := "local cluster in " + c.DataDir()
	if bin != "" {
		source += " from " + bin
	}
	s := &server{source: source, dsn: c.DSN("postgres"), trust: true, stop: c.Stop}
	if err := s.connect(ctx); err != nil {
		_ = c.Stop()
		return nil, err
	}
	if err := s.publicSchemaAs15(ctx, c.DSN("template1")); err != nil {
		_ = s.shutdown()
		return nil, err
	}
	return s, nil
}

// connect opens the superuser pool and checks the server answers.
func (s *server) connect(ctx context.Context) error {
	cfg, err := pgxpool.ParseConfig(s.dsn)
	if err != nil {
		return err // pgconn's parse errors redact the password
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return err
	}
	s.admin = pool
	return nil
}

// shutdown releases the server: closes the pool and stops what was started.
func (s *server) shutdown() error {
	if s.admin != nil {
		s.admin.Close()
	}
	if s.stop != nil {
		return s.stop()
	}
	return nil
}
