package invoke_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
)

// TestRateLimit checks the token bucket: calls over the burst get 429 rate_limited with
// Retry-After, other tokens are not affected, and the token recovers after the wait.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	dsn := runnertest.NewRoleDB(t, "rate", `CREATE TABLE t (id int); INSERT INTO t VALUES (1)`, "")
	cfg := &config.Config{Tokens: []auth.Token{{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read"}},
		{Secret: runnertest.LimitedToken, Name: "other", Scopes: []string{"read"}}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: dsn}},
		Limits:    config.Limits{Limits: invoke.Limits{RatePerSecond: 0.5, Burst: 3}}}
	f := runnertest.NewServerFixture(t, cfg)
	// One token comes back every 2 s: the four calls below must reach the runner within that,
	// which holds on a loaded machine too (at 2 a second, a slow run refilled the bucket).
	for i := 0; i < 3; i++ {
		if status, body, _ := f.Call(t, runnertest.AllToken, "select_query", `{"table":"t"}`); status != 200 {
			t.Fatalf("call %d within the burst: %d %v", i, status, body)
		}
	}
	status, body, hdr := f.Call(t, runnertest.AllToken, "select_query", `{"table":"t"}`)
	if status != 429 || body["errorType"] != "rate_limited" || body["success"] != false || !strings.Contains(body["error"].(string), "0.5 calls per second") ||
		!strings.Contains(body["suggestion"].(string), "Wait") {
		t.Fatalf("call over the burst: %d %v", status, body)
	}
	retry, err := strconv.Atoi(hdr.Get("Retry-After"))
	if err != nil || retry != 2 {
		t.Fatalf("Retry-After = %q, want 2 (the seconds one token takes to come back)", hdr.Get("Retry-After"))
	}
	// Another token has its own bucket.
	if status, body, _ := f.Call(t, runnertest.LimitedToken, "select_query", `{"table":"t"}`); status != 200 {
		t.Fatalf("other token: %d %v", status, body)
	}
	// The refused call took no token: after the advised wait, the call goes through.
	time.Sleep(time.Duration(retry) * time.Second)
	if status, body, _ := f.Call(t, runnertest.AllToken, "select_query", `{"table":"t"}`); status != 200 {
		t.Fatalf("after Retry-After: %d %v", status, body)
	}
	if got := f.Metric(t, "pgtools_rate_limited_total", map[string]string{"reason": "rate"}); got != 1 {
		t.Errorf("pgtools_rate_limited_total{reason=rate} = %v, want 1", got)
	}
	if !strings.Contains(f.Log.String(), `"error_type":"rate_limited"`) {
		t.Errorf("the access log does not record the refusal:\n%s", f.Log.String())
	}
}

// TestConcurrencyLimit checks max_concurrent_per_token: a second call while one runs is refused,
// and accepted again once the first has finished.
func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	dsn := runnertest.NewRoleDB(t, "conc", `CREATE TABLE t (id int)`, "")
	cfg := &config.Config{Tokens: []auth.Token{{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read"}}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: dsn}}, Limits: config.Limits{Limits: invoke.Limits{MaxConcurrentPerToken: 1}}}
	f := runnertest.NewServerFixture(t, cfg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if status, body, _ := f.Call(t, runnertest.AllToken, "execute_sql", `{"sql":"select pg_sleep(1.5)"}`); status != 200 {
			t.Errorf("slow call: %d %v", status, body)
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for f.Metric(t, "pgtools_pool_connections", map[string]string{"state": "acquired"}) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the slow call never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	status, body, hdr := f.Call(t, runnertest.AllToken, "select_query", `{"table":"t"}`)
	if status != 429 || body["errorType"] != "rate_limited" || !strings.Contains(body["error"].(string), "at most 1 at once") || hdr.Get("Retry-After") == "" {
		t.Fatalf("second concurrent call: %d %v", status, body)
	}
	wg.Wait()
	if status, body, _ := f.Call(t, runnertest.AllToken, "select_query", `{"table":"t"}`); status != 200 {
		t.Fatalf("after the first call ended: %d %v", status, body)
	}
	if got := f.Metric(t, "pgtools_rate_limited_total", map[string]string{"reason": "concurrency"}); got != 1 {
		t.Errorf("pgtools_rate_limited_total{reason=concurrency} = %v, want 1", got)
	}
}

// TestRateLimitOverMCP checks that /mcp tool calls share the token's limits: a call over the
// rate is a tool result with isError carrying the rate_limited object, and the MCP session
// itself (initialize, tools/list) is not refused.
func TestRateLimitOverMCP(t *testing.T) {
	t.Parallel()
	dsn := runnertest.NewRoleDB(t, "mcprate", `CREATE TABLE t (id int)`, "")
	cfg := &config.Config{Tokens: []auth.Token{{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read"}}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: dsn}}, Limits: config.Limits{Limits: invoke.Limits{RatePerSecond: 0.5, Burst: 1}}}
	f := runnertest.NewServerFixture(t, cfg)
	cs, err := apitest.ConnectMCP(t, f.HTTP.URL, runnertest.AllToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	args := map[string]any{"table": "t"}
	if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "select_query", Arguments: args}); err != nil || res.IsError {
		t.Fatalf("first call: %v %+v", err, res)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "select_query", Arguments: args})
	if err != nil || !res.IsError {
		t.Fatalf("second call within the second: %v %+v", err, res)
	}
	if body := mcptest.Decode(t, res).Object; body["errorType"] != "rate_limited" || !strings.Contains(body["suggestion"].(string), "Wait") {
		t.Fatalf("rate-limited MCP result: %v", body)
	}
	// The same bucket serves HTTP calls of the token.
	if status, body, _ := f.Call(t, runnertest.AllToken, "select_query", `{"table":"t"}`); status != 429 {
		t.Fatalf("HTTP call after the MCP calls: %d %v", status, body)
	}
}
