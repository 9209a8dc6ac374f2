package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/n8n/brokertest"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestServeJoinsSeveralBrokers runs "pgtools serve" with two --n8n-broker flags (n8n queue mode
// has a broker per worker): it joins both beside the HTTP API, serves tasks from each as the
// broker principal, and leaves both on shutdown.
func TestServeJoinsSeveralBrokers(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, status text); INSERT INTO orders VALUES (1, 'paid'), (2, 'open')`)
	dsn := db.RoleDSN(t, "brk")
	const brokerToken = "n8n-runners-auth-token-0123456789"
	tokenFile := filepath.Join(t.TempDir(), "broker-token")
	if err := os.WriteFile(tokenFile, []byte(brokerToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b1, b2 := brokertest.New(t, brokerToken), brokertest.New(t, brokerToken)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--database-url", dsn, "--listen", "127.0.0.1:0",
			"--n8n-broker", b1.URL, "--n8n-broker", b2.URL, "--n8n-broker-token-file", tokenFile, "--n8n-principal", "n8n-test"}, &stdout, &stderr, envOf(nil))
	}()
	waitFor(t, &stderr, regexp.MustCompile(`"listen":"([^"]+)"`))

	for i, b := range []*brokertest.Broker{b1, b2} {
		rn := b.NextRunner(t, 10*time.Second)
		taskID := rn.StartTask(t, map[string]any{"tool": "select_query", "args": map[string]any{"table": "orders", "where": "status = $1", "params": []string{"paid"}}})
		ans := rn.Answer(t, taskID, 5*time.Second)
		if ans.Type != "runner:taskdone" || !bytes.Contains(ans.Result(), []byte(`"rowCount":1`)) {
			t.Fatalf("broker %d: got %s", i+1, ans.Raw)
		}
	}
	waitFor(t, &stderr, regexp.MustCompile(`"principal":"(n8n-test)"`))

	stopRun(t, cancel, done, "serve", &stderr, 15*time.Second)
	if strings.Contains(stderr.String(), brokerToken) || strings.Contains(stderr.String(), dsn) {
		t.Fatalf("serve logged a secret: %s", stderr.String())
	}
}

func TestServeRefusesBadBrokerConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	env["DATABASE_URL"] = "postgres://u@127.0.0.1/db"
	cases := []struct {
		env  map[string]string
		args []string
		want string
	}{
		{nil, []string{"--n8n-broker", "http://127.0.0.1:5679"}, "needs the brokers' auth token"},
		{map[string]string{"PGTOOLS_N8N_BROKERS": "http://127.0.0.1:5679, http://127.0.0.1:5680"}, nil, "needs the brokers' auth token"},
		{map[string]string{"N8N_RUNNERS_AUTH_TOKEN": "x"}, []string{"--n8n-broker", "127.0.0.1:5679"}, "is not a URL"},
		{map[string]string{"N8N_RUNNERS_AUTH_TOKEN": "x"}, []string{"--n8n-broker", "http://a:5679", "--n8n-broker", "http://a:5679"}, "listed twice"},
		{nil, []string{"--n8n-broker", "http://a:5679", "--n8n-broker-token-file", "/nonexistent/token"}, "cannot read"},
		{map[string]string{"N8N_RUNNERS_AUTH_TOKEN": "x"}, []string{"--n8n-broker", "http://a:5679", "--token", "api-token-0123456789abcdef:read", "--n8n-principal", "token-1"}, "share sessions"},
	}
	for _, c := range cases {
		for k, v := range c.env {
			env[k] = v
		}
		var out, errOut bytes.Buffer
		code := run(context.Background(), append([]string{"serve"}, c.args...), &out, &errOut, envOf(env))
		if code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v %v: exit %d, stderr %q, want %q", c.env, c.args, code, errOut.String(), c.want)
		}
		for k := range c.env {
			delete(env, k)
		}
	}
}

// TestServeJoinsBrokersFromConfigFile: the config file's n8n object alone joins a broker (its
// token read from n8n.token_file), a flag overrides the file's principal, and check-config shows
// the settings without the token.
func TestServeJoinsBrokersFromConfigFile(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, status text); INSERT INTO orders VALUES (1, 'paid'), (2, 'open')`)
	const brokerToken = "n8n-runners-auth-token-from-a-file-42"
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "broker-token")
	if err := os.WriteFile(tokenFile, []byte(brokerToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := brokertest.New(t, brokerToken)
	doc, _ := json.Marshal(map[string]any{
		"databases": map[string]any{"default": map[string]any{"url": db.RoleDSN(t, "brkf")}},
		"n8n":       map[string]any{"brokers": []string{b.URL}, "token_file": tokenFile, "principal": "n8n-file", "task_timeout_ms": 2000},
	})
	cfgFile := filepath.Join(dir, "pgtools.json")
	if err := os.WriteFile(cfgFile, doc, 0o600); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"check-config", "--config", cfgFile}, &out, &errOut, envOf(nil)); code != 0 {
		t.Fatalf("check-config: %d %s", code, errOut.String())
	}
	var eff struct {
		N8N map[string]any `json:"n8n"`
	}
	if err := json.Unmarshal(out.Bytes(), &eff); err != nil || eff.N8N["principal"] != "n8n-file" || eff.N8N["token_file"] != tokenFile {
		t.Errorf("check-config's n8n: %v %v", eff.N8N, err)
	}
	if strings.Contains(out.String()+errOut.String(), brokerToken) {
		t.Fatal("check-config printed the broker token")
	}

	for _, c := range []struct {
		flags     []string
		principal string
	}{
		{nil, "n8n-file"},
		{[]string{"--n8n-principal", "n8n-flag"}, "n8n-flag"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		var stdout, stderr lockedBuffer
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, append([]string{"serve", "--config", cfgFile, "--listen", "127.0.0.1:0"}, c.flags...), &stdout, &stderr, envOf(nil))
		}()
		waitFor(t, &stderr, regexp.MustCompile(`"listen":"([^"]+)"`))
		rn := b.NextRunner(t, 10*time.Second)
		taskID := rn.StartTask(t, map[string]any{"tool": "select_query", "args": map[string]any{"table": "orders", "where": "status = $1", "params": []string{"paid"}}})
		if ans := rn.Answer(t, taskID, 5*time.Second); ans.Type != "runner:taskdone" || !bytes.Contains(ans.Result(), []byte(`"rowCount":1`)) {
			t.Fatalf("%v: got %s", c.flags, ans.Raw)
		}
		if c.flags == nil {
			// n8n.task_timeout_ms reaches the broker client: a longer call ends at it.
			slow := rn.StartTask(t, map[string]any{"tool": "execute_sql", "args": map[string]any{"sql": "select pg_sleep(20)"}})
			if ans := rn.Answer(t, slow, 10*time.Second); ans.Type != "runner:taskerror" || !bytes.Contains(ans.Error, []byte(`n8n's task timeout (2 s)`)) {
				t.Fatalf("a call past n8n.task_timeout_ms: got %s\n%s", ans.Raw, stderr.String())
			}
		}
		waitFor(t, &stderr, regexp.MustCompile(`"principal":"(`+c.principal+`)"`))
		stopRun(t, cancel, done, "serve", &stderr, 15*time.Second)
		if strings.Contains(stderr.String(), brokerToken) {
			t.Fatalf("serve logged the broker token: %s", stderr.String())
		}
	}
}
