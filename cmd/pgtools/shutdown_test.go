package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestSIGTERMRollsBackSessions runs pgtools serve as a process, opens sessions with uncommitted
// writes, sends SIGTERM while calls are in flight, and checks the process exits 0 with every
// session rolled back and no backend left.
func TestSIGTERMRollsBackSessions(t *testing.T) {
	t.Parallel()
	bin := buildPgtools(t)
	db, dsn := notesDB(t, "term")
	const token = "sigterm-test-token-0123456789"
	cmd := exec.Command(bin, "serve", "--database-url", dsn, "--listen", "127.0.0.1:0", "--token", token+":read,write")
	stderr, _, call := startServe(t, cmd, token)
	for i := 0; i < 3; i++ {
		id := call("pg_tx", `{"action":"begin"}`)["session_id"].(string)
		if out := call("insert_data", fmt.Sprintf(`{"table":"notes","row":{"id":%d,"body":"uncommitted"},"session_id":%q}`, i, id)); out["success"] != true {
			t.Fatalf("insert in session: %v", out)
		}
	}
	if n := db.QueryInt(t, "select count(*) from pg_stat_activity where datname = current_database() and application_name like 'pgtools-session/%'"); n != 3 {
		t.Fatalf("%d session backends, want 3", n)
	}
	// Calls in flight while the signal arrives finish or are refused cleanly.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := call("execute_sql", `{"sql":"select pg_sleep(0.3), 1 as one"}`)
			if out["transport_error"] == nil && out["success"] != true && out["errorType"] == nil {
				t.Errorf("in-flight call ended without a result or error object: %v", out)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd, stderr)
	wg.Wait()
	if n := db.QueryInt(t, "select count(*) from notes"); n != 0 {
		t.Fatalf("%d uncommitted rows survived shutdown", n)
	}
	assertNoBackends(t, db, db.RoleName("term"))
	if !strings.Contains(stderr.String(), "rolling back open sessions") {
		t.Errorf("shutdown did not log the rollback:\n%s", stderr.String())
	}
}

// TestSIGTERMDrainsThenCancels runs serve from a config file with a drain delay and a short grace
// period: after SIGTERM /readyz answers 503 while calls are still served, then a call that outlives
// the grace period is cancelled on the server, its session rolled back, and the process exits 0
// with no backend left.
func TestSIGTERMDrainsThenCancels(t *testing.T) {
	t.Parallel()
	bin := buildPgtools(t)
	db, dsn := notesDB(t, "drain")
	const token = "drain-test-token-0123456789"
	cfgFile := filepath.Join(t.TempDir(), "pgtools.json")
	os.WriteFile(cfgFile, []byte(`{"listen": "127.0.0.1:0", "tokens": [{"name": "agent", "token": "`+token+`", "scopes": ["read", "write"]}],
	  "databases": {"default": {"url": "`+dsn+`"}}, "shutdown": {"drain_delay_seconds": 1, "grace_seconds": 0.5}}`), 0o600)
	cmd := exec.Command(bin, "serve", "--config", cfgFile)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	stderr, base, call := startServe(t, cmd, token)
	id := call("pg_tx", `{"action":"begin"}`)["session_id"].(string)
	if out := call("insert_data", `{"table":"notes","row":{"id":1,"body":"uncommitted"},"session_id":"`+id+`"}`); out["success"] != true {
		t.Fatalf("insert in session: %v", out)
	}
	long := make(chan map[string]any, 1)
	go func() { long <- call("execute_sql", `{"sql":"select pg_sleep(30)"}`) }()
	role := db.RoleName("drain")
	for i := 0; db.QueryInt(t, "select count(*) from pg_stat_activity where usename = $1 and query like '%pg_sleep(30)%'", role) == 0; i++ {
		if i > 250 {
			t.Fatal("the long call never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	signalled := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	resp, err := http.Get(base + "/readyz")
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("/readyz during the drain delay: %v %v", err, resp)
	}
	resp.Body.Close()
	if out := call("select_query", `{"table":"notes"}`); out["success"] != true {
		t.Fatalf("call during the drain delay: %v", out)
	}
	waitExit(t, cmd, stderr)
	if took := time.Since(signalled); took > 8*time.Second {
		t.Errorf("exit took %s after SIGTERM with drain 1s and grace 0.5s", took)
	}
	if out := <-long; out["transport_error"] == nil && out["errorType"] != "timeout" {
		t.Errorf("call past the grace period ended with %v, want a cancel (timeout) or a closed connection", out)
	}
	if !strings.Contains(stderr.String(), "cancelling them") {
		t.Errorf("the log does not say calls were cancelled:\n%s", stderr.String())
	}
	assertNoBackends(t, db, role)
	if n := db.QueryInt(t, "select count(*) from notes"); n != 0 {
		t.Fatalf("the session's insert survived shutdown")
	}
}

// notesDB is a database with an empty table notes that role may write, and role's DSN.
func notesDB(t *testing.T, role string) (*pgtest.DB, string) {
	t.Helper()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE notes (id int PRIMARY KEY, body text)`)
	dsn := db.RoleDSN(t, role)
	db.Exec(t, `GRANT INSERT, UPDATE, DELETE ON notes TO "`+db.RoleName(role)+`"`)
	return db, dsn
}

// waitExit waits up to 20 s for cmd, sent SIGTERM, to exit, and fails the test unless it exits 0.
func waitExit(t *testing.T, cmd *exec.Cmd, stderr fmt.Stringer) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v:\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("serve did not exit after SIGTERM:\n%s", stderr.String())
	}
}

// assertNoBackends waits up to 2 s for the backends of role (the runner's, whose name is unique
// to the test's database) to end, and fails the test if any is left.
func assertNoBackends(t *testing.T, db *pgtest.DB, role string) {
	t.Helper()
	const backends = "select count(*) from pg_stat_activity where usename = $1"
	for i := 0; i < 100 && db.QueryInt(t, backends, role) > 0; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if n := db.QueryInt(t, backends, role); n != 0 {
		t.Fatalf("%d backends of the runner's role left after exit", n)
	}
}

// startServe starts a pgtools serve process, waits until it listens, and returns its stderr, its
// base URL and a function that calls a tool on it with token (a transport failure comes back as
// {"transport_error": …}).
func startServe(t *testing.T, cmd *exec.Cmd, token string) (*lockedBuffer, string, func(tool, body string) map[string]any) {
	t.Helper()
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	base := "http://" + waitFor(t, stderr, regexp.MustCompile(`"listen":"([^"]+)"`))
	return stderr, base, func(tool, body string) map[string]any {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/tools/"+tool, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return map[string]any{"transport_error": err.Error()}
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return out
	}
}
