package mcpapi_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// TestMCPNginxRateLimit runs examples/nginx/mcp-rate-limit.conf (its addresses changed to
// loopback) in front of /mcp: execute_sql calls of 2026-07-28 clients beyond the burst get the
// proxy's 429, select_query calls at the same pace never do, and a request whose Mcp-Name
// names another tool than its body is refused by pgtools, so the header cannot be used to slip
// past the limit. Without nginx it skips, and fails under CI.
func TestMCPNginxRateLimit(t *testing.T) {
	t.Parallel()
	ngx, err := exec.LookPath("nginx")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nginx"); serr != nil {
			if os.Getenv("CI") != "" {
				t.Fatal("nginx is not installed (make deps-test installs it)")
			}
			t.Skip("nginx is not installed: make deps-test installs it")
		}
		ngx = "/usr/sbin/nginx"
	}
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	reg := toolstest.Registry(t, db.RoleDSN(t, "ngx"), tools.Policy{}, 4)
	backend := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Log: zerolog.Nop(), Tokens: runnertest.MCPTokens()}))
	t.Cleanup(backend.Close)

	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "nginx", "mcp-rate-limit.conf"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	proxy := l.Addr().String()
	l.Close()
	site := strings.Replace(strings.Replace(string(example), "server pgtools:8080;", "server "+strings.TrimPrefix(backend.URL, "http://")+";", 1),
		"listen 8080;", "listen "+proxy+";", 1)
	if site == string(example) {
		t.Fatal("the example's addresses were not found: update this test with the example")
	}
	dir, err := os.MkdirTemp("", "pgtools-nginx-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var conf strings.Builder
	fmt.Fprintf(&conf, "worker_processes 1;\ndaemon off;\npid %s/nginx.pid;\nerror_log %s/error.log warn;\nevents { worker_connections 64; }\nhttp {\n  access_log off;\n", dir, dir)
	for _, p := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&conf, "  %s_temp_path %s/%s;\n", p, dir, p)
	}
	conf.WriteString(site + "\n}\n")
	confFile := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(ngx, "-p", dir, "-c", confFile, "-e", filepath.Join(dir, "error.log"))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGQUIT); <-done })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + proxy + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("nginx did not come up")
		}
	}

	const v = "2026-07-28"
	url := "http://" + proxy
	call := func(tool, args string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + paramsFor(v, `{"name":"`+tool+`","arguments":`+args+`}`) + `}`
	}
	count := func(body string, header map[string]string) map[int]int {
		got := map[int]int{}
		for range 30 {
			status, _ := mcpPOST(t, url, runnertest.AgentToken, v, body, header)
			got[status]++
		}
		return got
	}
	if got := count(call("select_query", `{"table":"orders","limit":1}`), nil); got[http.StatusOK] != 30 {
		t.Errorf("30 select_query calls through the proxy: statuses %v, want all 200", got)
	}
	// 30 calls in a row: the burst (4) and the rate (2/s) let through far fewer than 30 in the
	// seconds they take.
	sql := call("execute_sql", `{"sql":"SELECT 1"}`)
	if got := count(sql, nil); got[http.StatusTooManyRequests] == 0 || got[http.StatusOK] == 0 || got[http.StatusOK]+got[http.StatusTooManyRequests] != 30 {
		t.Errorf("30 execute_sql calls through the proxy: statuses %v, want some 200 and the rest 429", got)
	}
	if status, b := mcpPOST(t, url, runnertest.AgentToken, v, sql, map[string]string{"Mcp-Name": "select_query"}); status != http.StatusBadRequest || !strings.Contains(string(b), "Mcp-Name") {
		t.Errorf("execute_sql under Mcp-Name select_query: %d %s, want pgtools' 400", status, b)
	}
}
