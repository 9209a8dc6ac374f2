package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// lockedBuffer collects a command's output while it runs in another goroutine.
type lockedBuffer = pgtest.SyncBuffer

func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"serve", "check-config", "healthcheck", "demo", "call", "mcp", "version"} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{cmd, "--help"}, &out, &errOut, envOf(nil))
		if code != 0 || !strings.Contains(errOut.String(), "Usage: pgtools "+cmd) {
			t.Errorf("%s --help: exit %d, output %q", cmd, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"help"}, &out, &errOut, envOf(nil)); code != 0 || !strings.Contains(out.String(), "Commands:") {
		t.Errorf("help: exit %d, %q", code, out.String())
	}
	if code := run(context.Background(), []string{"frobnicate"}, &out, &errOut, envOf(nil)); code != 2 || !strings.Contains(errOut.String(), "unknown command") {
		t.Errorf("unknown command: exit %d, %q", code, errOut.String())
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "no database configured"},
		{[]string{"serve", "--database-url", "postgres://u@127.0.0.1/db", "--listen", "0.0.0.0:0"}, "without API tokens"},
		{[]string{"serve", "--database-url", "postgres://u@127.0.0.1/db", "--token", "short:read"}, "shorter than 16"},
	}
	for _, c := range cases {
		var out, errOut bytes.Buffer
		code := run(context.Background(), c.args, &out, &errOut, envOf(nil))
		if code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errOut.String(), c.want)
		}
	}
}

// TestServeAndCall runs "pgtools serve" and "pgtools call" as a user would, in one process.
func TestServeAndCall(t *testing.T) {
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, status text); INSERT INTO orders VALUES (1, 'paid'), (2, 'open')`)
	dsn := db.RoleDSN(t, "cli")
	const token = "cli-test-token-0123456789"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--database-url", dsn, "--listen", "127.0.0.1:0", "--token", token + ":read"}, &stdout, &stderr, envOf(nil))
	}()
	addr := waitFor(t, &stderr, regexp.MustCompile(`"listen":"([^"]+)"`))
	url := "http://" + addr

	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"call", "--url", url, "--token", token, "select_query", `{"table":"orders","where":"status = $1","params":["paid"]}`}, &out, &errOut, envOf(nil))
	var res map[string]any
	if code != 0 || json.Unmarshal(out.Bytes(), &res) != nil || res["rowCount"].(float64) != 1 {
		t.Fatalf("call: exit %d, out %q, err %q", code, out.String(), errOut.String())
	}
	out.Reset()
	code = run(context.Background(), []string{"call", "--url", url, "--token", token, "select_query", `{"table":"nope"}`}, &out, &errOut, envOf(nil))
	if code != 1 || !strings.Contains(out.String(), `"errorType": "invalid_table"`) {
		t.Fatalf("failing call: exit %d, out %q", code, out.String())
	}
	if code := run(context.Background(), []string{"call", "--url", url, "select_query", `{not json`}, &out, &errOut, envOf(nil)); code != 2 {
		t.Fatalf("invalid JSON arguments: exit %d", code)
	}

	stopRun(t, cancel, done, "serve", &stderr, 15*time.Second)
	if strings.Contains(stderr.String(), token) || strings.Contains(stderr.String(), dsn) {
		t.Fatalf("serve logged a secret: %s", stderr.String())
	}
}

// TestDemo runs "pgtools demo" end to end with a small events table: it must start PostgreSQL,
// load data, serve with a printed token, answer the printed kind of call, and clean up on Ctrl-C.
func TestDemo(t *testing.T) {
	if os.Getenv("PG_TEST_DSN") != "" {
		t.Skip("the demo starts its own PostgreSQL; skipped when tests use PG_TEST_DSN")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--listen", "127.0.0.1:0", "--events", "5000"}, &stdout, &stderr, envOf(nil))
	}()
	env := waitFor(t, &stdout, regexp.MustCompile(`export PGTOOLS_URL=(\S+) PGTOOLS_TOKEN=(\S+)`))
	parts := strings.Fields(env)
	url, token := parts[0], parts[1]
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"call", "--url", url, "--token", token, "execute_sql", `{"sql":"select count(*) as n from events"}`}, &out, &errOut, envOf(nil))
	if code != 0 || !strings.Contains(out.String(), `"n": 5000`) {
		t.Fatalf("demo call: exit %d, %s %s", code, out.String(), errOut.String())
	}
	// The runner's role may not read server files.
	out.Reset()
	code = run(context.Background(), []string{"call", "--url", url, "--token", token, "execute_sql", `{"sql":"select pg_read_file('postgresql.conf')"}`}, &out, &errOut, envOf(nil))
	if code != 1 || !strings.Contains(out.String(), "permission_denied") {
		t.Fatalf("pg_read_file as the demo role: exit %d, %s", code, out.String())
	}
	// The quick start's example script (docs/quick-start.md) runs as written against the demo.
	script := exec.Command("bash", "../../examples/curl/read.sh")
	script.Env = append(os.Environ(), "PGTOOLS_URL="+url, "PGTOOLS_TOKEN="+token)
	sout, err := script.CombinedOutput()
	if err != nil || !strings.Contains(string(sout), `"errorType":"invalid_column"`) || !strings.Contains(string(sout), `"operation":"describe"`) {
		t.Fatalf("examples/curl/read.sh: %v\n%s", err, sout)
	}
	script = exec.Command("bash", "../../examples/curl/write.sh")
	script.Env = append(os.Environ(), "PGTOOLS_URL="+url, "PGTOOLS_TOKEN="+token)
	sout, err = script.CombinedOutput()
	for _, want := range []string{`"errorType":"write_intent_required"`, `"dryRun":true`, `"errorType":"too_many_rows"`,
		`"status":"committed"`, `"action":"begin"`, `"note":"checked"`, `"status":"rolled_back"`, `"errorType":"permission_denied"`} {
		if err != nil || !strings.Contains(string(sout), want) {
			t.Fatalf("examples/curl/write.sh lacks %s: %v\n%s", want, err, sout)
		}
	}
	// The act-as token reads only each user's own notes: row-level security on the demo's
	// tenant role, as printed.
	tenant := waitFor(t, &stdout, regexp.MustCompile(`export PGTOOLS_TENANTS_TOKEN=(\S+)`))
	for user, want := range map[string]int{"alice": 2, "bob": 1, "mallory": 0} {
		req, _ := http.NewRequest("POST", url+"/v1/tools/select_query", strings.NewReader(`{"table":"tenant_notes"}`))
		req.Header.Set("Authorization", "Bearer "+tenant)
		req.Header.Set("X-PgTools-Act-As", user)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			RowCount int `json:"rowCount"`
			Data     []struct {
				Owner string `json:"owner"`
			} `json:"data"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != 200 || body.RowCount != want {
			t.Fatalf("acting as %s: status %d, %d rows, want %d", user, resp.StatusCode, body.RowCount, want)
		}
		for _, r := range body.Data {
			if r.Owner != user {
				t.Fatalf("acting as %s: read %s's note", user, r.Owner)
			}
		}
	}
	stopRun(t, cancel, done, "demo", &stderr, 30*time.Second)
	if !strings.Contains(stdout.String(), "stopping PostgreSQL") {
		t.Fatalf("demo did not report cleanup:\n%s", stdout.String())
	}
}

// waitFor polls buf until re matches and returns the submatches joined by a space.
// stopRun cancels a command that run runs in another goroutine and waits up to within for it to
// exit 0; name names it in failures, out is its captured stderr.
func stopRun(t *testing.T, cancel context.CancelFunc, done <-chan int, name string, out fmt.Stringer, within time.Duration) {
	t.Helper()
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("%s exited %d: %s", name, code, out.String())
		}
	case <-time.After(within):
		t.Fatalf("%s did not stop within %s", name, within)
	}
}

func waitFor(t *testing.T, buf interface{ String() string }, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(buf.String()); m != nil {
			return strings.Join(m[1:], " ")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s in:\n%s", re, buf.String())
	return ""
}
