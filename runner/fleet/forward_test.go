package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/runner/forward"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
)

// spreadConf is NGINX spreading every request round-robin over the replicas, with no routing
// by header at all: what a plain load balancer, or an MCP client sending no X-PgTools-Session,
// gives. A replica that refuses connections is skipped.
func spreadConf(dir, listen string, rs []*replica) string {
	var b strings.Builder
	fmt.Fprintf(&b, "worker_processes 1;\ndaemon off;\npid %s/nginx.pid;\nerror_log %s/error.log warn;\nevents { worker_connections 512; }\nhttp {\n", dir, dir)
	for _, p := range []string{"client_body", "proxy", "fastcgi", "uwsgi", "scgi"} {
		fmt.Fprintf(&b, "  %s_temp_path %s/%s;\n", p, dir, p)
	}
	b.WriteString("  access_log off;\n  upstream pgtools_all {\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "    server %s max_fails=1 fail_timeout=30s;\n", r.addr)
	}
	b.WriteString("    keepalive 16;\n  }\n")
	fmt.Fprintf(&b, `  server {
    listen %s;
    location / {
      proxy_pass http://pgtools_all;
      proxy_http_version 1.1;
      proxy_set_header Host $http_host;
      proxy_set_header Connection "";
      proxy_next_upstream error timeout http_502;
      add_header X-Upstream $upstream_addr always;
    }
  }
}
`, listen)
	return b.String()
}

const fleetSecret = "fleet-secret-0123456789abcdef0123456789abcdef"

// startForwardingFleet starts three replicas that forward to each other (fleet.peers, a shared
// secret) with a token rate of 10 calls/s, behind the spreading NGINX.
func startForwardingFleet(t *testing.T) *fleet {
	t.Helper()
	cfgDir := t.TempDir()
	secretFile := filepath.Join(cfgDir, "fleet.secret")
	if err := os.WriteFile(secretFile, []byte(fleetSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(cfgDir, "pgtools.json")
	if err := os.WriteFile(cfgFile, []byte(`{"limits":{"rate_per_second":10}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, dir := startReplicasWith(t, func(r *replica, all []*replica) []string {
		var peers []string
		for _, o := range all {
			peers = append(peers, "http://"+o.addr)
		}
		return []string{"--config", cfgFile, "--fleet-peers", strings.Join(peers, ","), "--fleet-secret-file", secretFile}
	}, "r1", "r2", "r3")
	f.proxy = freeAddr(t)
	startNGINX(t, dir, f.proxy, spreadConf(dir, f.proxy, f.replicas))
	// Every replica has found every other: a session begun on each is reached through each.
	c := &http.Client{Timeout: 10 * time.Second}
	for _, holder := range f.replicas {
		id := direct(t, c, holder, "pg_tx", `{"action":"begin"}`)["session_id"].(string)
		for _, via := range f.replicas {
			deadline := time.Now().Add(15 * time.Second)
			for {
				out := direct(t, c, via, "select_query", `{"table":"items","limit":1,"session_id":"`+id+`"}`)
				if out["success"] == true {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("replica %s does not reach %s's session: %v", via.id, holder.id, out)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		direct(t, c, holder, "pg_tx", `{"action":"rollback","session_id":"`+id+`"}`)
	}
	time.Sleep(2500 * time.Millisecond) // one more probe: each counts 3 live replicas for the limits
	return f
}

// direct calls a replica without the proxy.
func direct(t *testing.T, c *http.Client, r *replica, tool, args string) map[string]any {
	t.Helper()
	for {
		resp, err := c.Post("http://"+r.addr+"/v1/tools/"+tool, "application/json", strings.NewReader(args))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			time.Sleep(300 * time.Millisecond) // the fleet's rate limit
			continue
		}
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: %d %s", tool, resp.StatusCode, raw)
		}
		return out
	}
}

// TestFleetForwardsSessions: three replicas behind NGINX spreading round-robin, no routing
// header anywhere. HTTP, go-sdk and TypeScript SDK clients run begin → insert → commit with no
// session_not_found; a forged inter-replica request is refused; a token limited to 10 calls/s
// gets about 10/s from the fleet; a SIGKILLed owner's session is answered as lost.
func TestFleetForwardsSessions(t *testing.T) {
	f := startForwardingFleet(t)
	c := &http.Client{Timeout: 10 * time.Second}
	paced := func(tool, args string) answer {
		for {
			a := f.call(t, c, tool, args, "")
			if a.status != http.StatusTooManyRequests {
				return a
			}
			time.Sleep(300 * time.Millisecond)
		}
	}

	// HTTP: 6 sessions, each call landing wherever NGINX sends it.
	forwarded, calls := 0, 0
	for i := range 6 {
		begin := paced("pg_tx", `{"action":"begin"}`)
		id, _ := begin.body["session_id"].(string)
		if begin.status != 200 || id == "" {
			t.Fatalf("begin: %d %v", begin.status, begin.body)
		}
		holder := f.byTag[session.TagOf(id)]
		for _, step := range []struct{ tool, args string }{
			{"insert_data", fmt.Sprintf(`{"table":"items","row":{"id":%d,"name":"http"},"session_id":"%s"}`, 1000+i, id)},
			{"select_query", fmt.Sprintf(`{"table":"items","where":"id = %d","session_id":"%s"}`, 1000+i, id)},
			{"pg_tx", fmt.Sprintf(`{"action":"commit","session_id":"%s"}`, id)},
		} {
			a := paced(step.tool, step.args)
			if a.status != 200 {
				t.Fatalf("%s in session %s via %v: %d %v", step.tool, id, a.replica, a.status, a.body)
			}
			calls++
			if a.replica != holder {
				forwarded++
			}
		}
	}
	t.Logf("FLEET forward: 18 continued session calls over HTTP, %d of them reached a replica not holding the session and were forwarded; 0 session_not_found", forwarded)
	if forwarded == 0 {
		t.Fatalf("round-robin never sent a session call to another replica (%d calls)", calls)
	}

	// The go-sdk MCP client, no header.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "fleet-go", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + f.proxy + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mcpCall := func(tool string, args map[string]any) mcptest.Outcome {
		for {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
			if err != nil {
				t.Fatalf("%s: %v", tool, err)
			}
			out := mcptest.Decode(t, res)
			if out.IsError && out.Object["errorType"] == "rate_limited" {
				time.Sleep(300 * time.Millisecond)
				continue
			}
			return out
		}
	}
	for i := range 3 {
		begin := mcpCall("pg_tx", map[string]any{"action": "begin"})
		id, _ := begin.Object["session_id"].(string)
		if begin.IsError || id == "" {
			t.Fatalf("MCP begin: %s", begin.Text)
		}
		if out := mcpCall("insert_data", map[string]any{"table": "items", "row": map[string]any{"id": 2000 + i, "name": "go-sdk"}, "session_id": id}); out.IsError {
			t.Fatalf("MCP insert: %s", out.Text)
		}
		if out := mcpCall("pg_tx", map[string]any{"action": "commit", "session_id": id}); out.IsError {
			t.Fatalf("MCP commit: %s", out.Text)
		}
	}
	cs.Close()

	// The TypeScript SDK, no header (after the buckets refill: its three calls come at once).
	time.Sleep(1500 * time.Millisecond)
	tsClient(t, f)

	// Rows: 6 from HTTP, 3 from go-sdk, 1 or more from TypeScript, each committed once.
	n := direct(t, c, f.replicas[0], "select_query", `{"table":"items","where":"id >= 1000","limit":100}`)
	if got := n["rowCount"]; got != float64(6+3+1) {
		t.Fatalf("committed rows: %v", n)
	}

	// A forged inter-replica request is refused: unsigned 401, another secret 403.
	body, _ := json.Marshal(tools.ForwardCall{Tag: session.ReplicaTag("r1"), SessionID: session.ReplicaTag("r1") + "-0000-4000-8000-000000000000",
		Tool: "select_query", Principal: tools.Principal{Name: "local", Scopes: []string{"read", "write", "ddl"}}, Args: json.RawMessage(`{"table":"items"}`)})
	for _, tc := range []struct {
		name   string
		secret string
		want   int
	}{{"unsigned", "", 401}, {"another secret", "not-the-fleet-secret-0123456789abcdef", 403}} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+f.replicas[0].addr+forward.PathForward, bytes.NewReader(body))
		if tc.secret != "" {
			forward.NewSigner([]byte(tc.secret), nil).Sign(req, body, session.ReplicaTag("r1"), session.ReplicaTag("r2"))
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Fatalf("%s inter-replica request: %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}

	// The token's 10 calls/s hold for the fleet: ~60 calls/s round-robin for 3 s.
	time.Sleep(1500 * time.Millisecond) // let the buckets refill
	ok, limited := 0, 0
	tick := time.NewTicker(16 * time.Millisecond)
	start := time.Now()
	for range 180 {
		<-tick.C
		switch a := f.call(t, c, "select_query", `{"table":"items","limit":1}`, ""); a.status {
		case 200:
			ok++
		case 429:
			limited++
		default:
			t.Fatalf("rate: %d %v", a.status, a.body)
		}
	}
	tick.Stop()
	secs := time.Since(start).Seconds()
	most := int(10*secs) + 12 // the rate over the time, plus the replicas' bursts (3 × ceil(10/3))
	t.Logf("FLEET rate: a token limited to 10 calls/s, %d admitted and %d refused of 180 calls in %.1f s through 3 replicas (bound %d)", ok, limited, secs, most)
	if ok > most || ok < int(10*secs)-5 {
		t.Fatalf("%d calls admitted in %.1f s; want about %d, at most %d", ok, secs, int(10*secs), most)
	}

	// SIGKILL the owner of a session: the others answer it as lost and rolled back.
	time.Sleep(1500 * time.Millisecond)
	begin := paced("pg_tx", `{"action":"begin"}`)
	id := begin.body["session_id"].(string)
	owner := f.byTag[session.TagOf(id)]
	if a := paced("insert_data", fmt.Sprintf(`{"table":"items","row":{"id":3000,"name":"lost"},"session_id":"%s"}`, id)); a.status != 200 {
		t.Fatalf("insert before the kill: %d %v", a.status, a.body)
	}
	if err := owner.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-owner.done
	answered := map[string]bool{}
	for i := 0; len(answered) < 2 && i < 20; i++ {
		a := paced("pg_tx", fmt.Sprintf(`{"action":"commit","session_id":"%s"}`, id))
		msg, _ := a.body["error"].(string)
		if a.status != 503 || a.body["errorType"] != "connection_error" || !strings.Contains(msg, "was lost") || !strings.Contains(msg, "rolled") {
			t.Fatalf("commit of a killed replica's session via %v: %d %v", a.replica, a.status, a.body)
		}
		if a.replica != nil {
			answered[a.replica.id] = true
		}
	}
	if len(answered) < 2 {
		t.Fatalf("the lost session was answered by %v, not by both survivors", answered)
	}
	if got := direct(t, c, f.replicas[(indexOf(f, owner)+1)%3], "select_query", `{"table":"items","where":"id = 3000"}`)["rowCount"]; got != float64(0) {
		t.Fatalf("the killed session's insert is visible: %v rows", got)
	}
	t.Logf("FLEET lost: replica %s SIGKILLed holding a session with an insert; both survivors answered its commit as lost and rolled back, and the row was not there", owner.id)
}

func indexOf(f *fleet, r *replica) int {
	for i, o := range f.replicas {
		if o == r {
			return i
		}
	}
	return -1
}

// tsClient runs the TypeScript SDK's begin → insert → commit through the proxy.
func tsClient(t *testing.T, f *fleet) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not on PATH; CI must run the TypeScript MCP client", tool)
			}
			t.Logf("%s is not on PATH: the TypeScript MCP client part is skipped", tool)
			return
		}
	}
	dir := filepath.Join("..", "mcpapi", "testdata", "mcp-ts")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		npm := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
		npm.Dir = dir
		if out, err := npm.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	for attempt := 0; ; attempt++ {
		cmd := exec.CommandContext(ctx, "node", "session-client.mjs", "http://"+f.proxy+"/mcp", "items", "4000")
		cmd.Dir = dir
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("session-client.mjs: %v\n%s", err, out)
		}
		var rep struct {
			SessionID             string
			Begin, Insert, Commit struct {
				IsError bool
				Text    string
			}
		}
		if err := json.Unmarshal(out, &rep); err != nil {
			t.Fatalf("session-client.mjs printed %s", out)
		}
		limitedStep := strings.Contains(rep.Begin.Text+rep.Insert.Text+rep.Commit.Text, "rate_limited")
		if limitedStep && attempt < 5 && !strings.Contains(rep.Commit.Text, `"success":true`) {
			time.Sleep(time.Second)
			continue
		}
		if rep.Begin.IsError || rep.Insert.IsError || rep.Commit.IsError || strings.Contains(string(out), "session_not_found") {
			t.Fatalf("TypeScript SDK session through the spreading proxy: %s", out)
		}
		t.Logf("FLEET forward: the TypeScript MCP SDK ran begin → insert → commit in session %s through the proxy, no header", rep.SessionID)
		return
	}
}
