package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// PgBouncer starts a PgBouncer in transaction pooling mode in front of the server behind dsn (a
// DSN of this DB, e.g. from RoleDSN), with poolSize server connections, on 127.0.0.1. It returns
// a DSN for the same role and database through the pooler, and stops it when the test ends.
// PgBouncer refuses to run as root, so as root it runs as the "postgres" user.
//
// The pooler forwards the runner's startup parameters it cannot handle (statement_timeout,
// lock_timeout, idle_in_transaction_session_timeout) nowhere: it ignores them, as an operator's
// ignore_startup_parameters would. Without the pgbouncer binary the test skips, and under CI it
// fails, naming the package to install.
func (d *DB) PgBouncer(t testing.TB, dsn string, poolSize int) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr == nil {
			bin = "/usr/sbin/pgbouncer"
		} else {
			msg := "pgtest: pgbouncer is not installed (apt-get install -y pgbouncer; make deps installs it)"
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("pgtest: parsing the DSN for PgBouncer: %v", err)
	}
	// Not t.TempDir: its parents are 0700 and owned by root, so the postgres user could not read
	// the configuration.
	dir, err := os.MkdirTemp("", "pgtools-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	userlist := filepath.Join(dir, "userlist.txt")
	if err := os.WriteFile(userlist, []byte(fmt.Sprintf("%q %q\n", cfg.User, cfg.Password)), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{}
	if os.Geteuid() == 0 {
		if _, err := user.Lookup("postgres"); err != nil {
			t.Fatalf("pgtest: running as root, PgBouncer needs the postgres user: %v", err)
		}
		args = append(args, "-u", "postgres")
	}

	// A free port can be taken by another process before PgBouncer binds it: try a few.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		ini := filepath.Join(dir, "pgbouncer.ini")
		conf := fmt.Sprintf(`[databases]
%s = host=%s port=%d dbname=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 100
ignore_startup_parameters = statement_timeout,lock_timeout,idle_in_transaction_session_timeout,extra_float_digits
server_reset_query =
logfile =
pidfile =
`, cfg.Database, cfg.Host, cfg.Port, cfg.Database, port, userlist, poolSize)
		if err := os.WriteFile(ini, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		var out SyncBuffer
		cmd := exec.Command(bin, append(args, ini)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("pgtest: starting pgbouncer: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if err := waitListening(addr, exited, 10*time.Second); err != nil {
			_ = cmd.Process.Kill()
			<-exited
			lastErr = fmt.Errorf("%v; pgbouncer said:\n%s", err, strings.TrimSpace(out.String()))
			continue
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		u := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cfg.User, addr, cfg.Database)
		if cfg.Password != "" {
			u = fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", cfg.User, cfg.Password, addr, cfg.Database)
		}
		return u
	}
	t.Fatalf("pgtest: pgbouncer did not start: %v", lastErr)
	return ""
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// waitListening waits until addr accepts a TCP connection, the process exits, or the time is up.
func waitListening(addr string, exited <-chan struct{}, within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("pgbouncer exited")
		case <-ctx.Done():
			return fmt.Errorf("pgbouncer is not listening on %s after %s", addr, within)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
