package runner_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/runnertest"
)

// TestTLSModes runs PostgreSQL with TLS (a certificate for 127.0.0.1 only, from a test CA) and
// checks what each sslmode of a database URL does through the runner: verify-full with the
// right CA connects over TLS; the wrong CA, or a host name the certificate does not name, is a
// connection_error that shows neither the URL nor the CA path; verify-ca does not check the name.
func TestTLSModes(t *testing.T) {
	t.Parallel()
	cluster := startLocalPG(t, 0)
	dir := t.TempDir()
	ca := apitest.NewPKI(t, dir, "test-ca")
	other := apitest.NewPKI(t, dir, "other-ca")
	certPEM, keyPEM := ca.Issue(t, "127.0.0.1")

	// The server's files live in its data directory, owned by the user postgres runs as.
	data := cluster.DataDir()
	fi, err := os.Stat(data)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	for name, content := range map[string][]byte{"server.crt": certPEM, "server.key": keyPEM} {
		p := filepath.Join(data, name)
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, cluster.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{"ALTER SYSTEM SET ssl = on", "SELECT pg_reload_conf()"} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	admin.Close(ctx)

	port := cluster.Port()
	dsn := func(host, mode, rootcert string) string {
		return fmt.Sprintf("postgres://postgres@%s:%d/postgres?sslmode=%s&sslrootcert=%s&connect_timeout=3", host, port, mode, rootcert)
	}
	cfg := &config.Config{Tokens: []auth.Token{{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read"}}},
		Databases: map[string]config.DatabaseConfig{
			"full":       {URL: dsn("127.0.0.1", "verify-full", ca.File)},
			"wrong_ca":   {URL: dsn("127.0.0.1", "verify-full", other.File)},
			"wrong_name": {URL: dsn("localhost", "verify-full", ca.File)},
			"ca_only":    {URL: dsn("localhost", "verify-ca", ca.File)},
		}}
	f := runnertest.NewServerFixture(t, cfg)
	sslQuery := `{"database":"%s","sql":"select ssl, version from pg_stat_ssl where pid = pg_backend_pid()"}`
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The reload takes effect asynchronously.
		status, body, _ := f.Call(t, runnertest.AllToken, "execute_sql", fmt.Sprintf(sslQuery, "full"))
		if status == 200 {
			rows := body["data"].([]any)
			if row := rows[0].(map[string]any); row["ssl"] != true || !strings.HasPrefix(row["version"].(string), "TLS") {
				t.Fatalf("verify-full connected without TLS: %v", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("verify-full with the right CA: %d %v", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status, body, _ := f.Call(t, runnertest.AllToken, "execute_sql", fmt.Sprintf(sslQuery, "ca_only")); status != 200 {
		t.Errorf("verify-ca against a certificate without the host name: %d %v", status, body)
	}
	for _, name := range []string{"wrong_ca", "wrong_name"} {
		status, body, _ := f.Call(t, runnertest.AllToken, "execute_sql", fmt.Sprintf(sslQuery, name))
		msg := fmt.Sprint(body)
		if status != 503 || body["errorType"] != "connection_error" || strings.Contains(msg, "postgres://") || strings.Contains(msg, dir) {
			t.Errorf("%s: want connection_error without the URL or CA path, got %d %v", name, status, body)
		}
	}
	if status, text := f.Get(t, "/readyz"); status != 503 || !strings.Contains(text, "2 of 4 databases") {
		t.Errorf("/readyz with two databases failing TLS verification: %d %s", status, text)
	}
	logs := f.Log.String()
	if !strings.Contains(logs, `"database":"wrong_ca"`) || !strings.Contains(logs, "certificate signed by unknown authority") ||
		!strings.Contains(logs, `"database":"wrong_name"`) {
		t.Errorf("the log does not name the databases that fail and why: %s", logs)
	}
}
