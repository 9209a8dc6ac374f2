package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// syncBuffer is a bytes.Buffer safe for the server's log goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startOrSkip starts a cluster, skipping the test when this machine has no
// PostgreSQL binaries (failing instead when CI is set).
func startOrSkip(t *testing.T, opts Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	c, err := Start(ctx, opts)
	if errors.Is(err, ErrNotFound) && os.Getenv("CI") == "" {
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("cluster on port %d started in %s", c.Port(), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return c
}

func TestStartQueryStop(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	c := startOrSkip(t, Options{Log: &log})

	if want := "postgres://postgres@127.0.0.1:"; !strings.HasPrefix(c.DSN("postgres"), want) {
		t.Errorf("DSN = %q, want prefix %q", c.DSN("postgres"), want)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.DSN("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	var one int
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("select 1 = %d, %v", one, err)
	}
	// The settings that make the cluster fast are in effect.
	var fsync string
	if err := conn.QueryRow(ctx, "show fsync").Scan(&fsync); err != nil || fsync != "off" {
		t.Errorf("fsync = %q, %v; want off", fsync, err)
	}
	_ = conn.Close(ctx)

	if !strings.Contains(log.String(), "ready to accept connections") {
		t.Errorf("Options.Log did not receive the server log; got:\n%s", log.String())
	}

	dir := c.DataDir()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("data dir: %v", err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data dir %s still there after Stop (stat: %v)", dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
	if _, err := pgx.Connect(ctx, c.DSN("postgres")); err == nil {
		t.Errorf("server still accepts connections after Stop")
	}
}

func TestStartFixedPortInUse(t *testing.T) {
	t.Parallel()
	c := startOrSkip(t, Options{})
	// A second cluster on the same fixed port must fail with the server
	// log in the error.
	_, err := Start(context.Background(), Options{Port: c.Port()})
	if err == nil {
		t.Fatal("Start on a taken port succeeded")
	}
	if !strings.Contains(err.Error(), "Address already in use") {
		t.Errorf("error lacks the server log tail: %v", err)
	}
}

func TestFindBinDir(t *testing.T) {
	t.Parallel()
	dir, err := FindBinDir()
	if err != nil {
		for _, want := range []string{"apt-get install -y postgresql", "DATABASE_URL", "PG_TEST_DSN"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("error does not wrap ErrNotFound")
		}
		return
	}
	if !hasServerBinaries(dir) {
		t.Errorf("FindBinDir = %s, which lacks initdb or postgres", dir)
	}
}

func TestStartBadBinDir(t *testing.T) {
	t.Parallel()
	_, err := Start(context.Background(), Options{BinDir: t.TempDir()})
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("Start with an empty BinDir: err = %v, want ErrNotFound", err)
	}
}

func TestSweepStale(t *testing.T) {
	t.Parallel()
	old := time.Now().Add(-2 * staleAge)
	mk := func(pidFile string) string {
		t.Helper()
		dir, err := os.MkdirTemp("", dirPattern)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if pidFile != "" {
			if err := os.WriteFile(filepath.Join(dir, "postmaster.pid"), []byte(pidFile), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// A pid far above pid_max (4194304 on Linux) is never alive.
	dead := mk("99999999\n/tmp/x\n")
	alive := mk(fmt.Sprintf("%d\n/tmp/x\n", os.Getpid()))
	noPid := mk("")
	fresh, err := os.MkdirTemp("", dirPattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(fresh) })

	sweepStale(os.TempDir())

	for dir, wantGone := range map[string]bool{dead: true, noPid: true, alive: false, fresh: false} {
		_, err := os.Stat(dir)
		if gone := errors.Is(err, os.ErrNotExist); gone != wantGone {
			t.Errorf("%s: removed = %v, want %v", dir, gone, wantGone)
		}
	}
}
