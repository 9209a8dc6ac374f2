package runner_test

import (
	"encoding/json"
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
	"github.com/pgtools/pgtools/tools"
)

// TestTwoDatabasesWithTheirOwnPolicies serves two databases at once, each with its own pool and
// policy, and checks that a token limited to one can neither reach the other nor learn its name.
func TestTwoDatabasesWithTheirOwnPolicies(t *testing.T) {
	t.Parallel()
	mainDB := runnertest.NewRoleDB(t, "main", `CREATE TABLE orders (id int PRIMARY KEY, status text);
		CREATE TABLE api_keys (id int PRIMARY KEY, secret text);
		INSERT INTO orders SELECT i, 'paid' FROM generate_series(1, 3) i`, "GRANT INSERT, UPDATE, DELETE ON orders TO %s")
	reportsDB := runnertest.NewRoleDB(t, "reports", `CREATE TABLE quarterly_revenue (quarter text PRIMARY KEY, revenue numeric);
		INSERT INTO quarterly_revenue VALUES ('2026-Q1', 100), ('2026-Q2', 120)`, "GRANT INSERT ON quarterly_revenue TO %s")
	cfg := &config.Config{
		Tokens: []auth.Token{
			{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read", "write"}},
			{Secret: runnertest.LimitedToken, Name: "agent", Scopes: []string{"read", "write"}, Databases: []string{"default"}},
		},
		Databases: map[string]config.DatabaseConfig{
			"default":      {URL: mainDB, MaxConns: 3, Policy: tools.Policy{DenyTables: []string{"api_keys"}}},
			"finance_2026": {URL: reportsDB, MaxConns: 2, Policy: tools.Policy{ReadOnly: true, MaxLimit: 1}},
		},
	}
	f := runnertest.NewServerFixture(t, cfg)

	// Each database answers with its own data and policy.
	if status, body, _ := f.Call(t, runnertest.AllToken, "select_query", `{"table":"orders"}`); status != 200 || body["rowCount"] != 3.0 {
		t.Fatalf("default: %d %v", status, body)
	}
	if status, body, _ := f.Call(t, runnertest.AllToken, "select_query", `{"database":"finance_2026","table":"quarterly_revenue","limit":1}`); status != 200 || body["rowCount"] != 1.0 {
		t.Fatalf("finance_2026: %d %v", status, body)
	}
	if status, body, _ := f.Call(t, runnertest.AllToken, "select_query", `{"database":"finance_2026","table":"quarterly_revenue","limit":2}`); status != 400 || body["errorType"] != "invalid_arguments" {
		t.Fatalf("finance_2026 max_limit 1: %d %v", status, body)
	}
	if status, body, _ := f.Call(t, runnertest.AllToken, "insert_data", `{"database":"finance_2026","table":"quarterly_revenue","row":{"quarter":"2026-Q3","revenue":1},"autocommit":true}`); status != 403 || body["errorType"] != "not_allowed" {
		t.Fatalf("write on the read_only database: %d %v", status, body)
	}
	if status, body, _ := f.Call(t, runnertest.AllToken, "insert_data", `{"table":"orders","row":{"id":4,"status":"open"},"autocommit":true}`); status != 200 || body["affectedRows"] != 1.0 {
		t.Fatalf("write on default: %d %v", status, body)
	}
	if status, body, _ := f.Call(t, runnertest.AllToken, "select_query", `{"table":"api_keys"}`); status != 403 || body["errorType"] != "not_allowed" {
		t.Fatalf("denied table on default: %d %v", status, body)
	}
	if status, body, _ := f.Call(t, runnertest.AllToken, "select_query", `{"database":"finance_2026","table":"orders"}`); status != 400 || body["errorType"] != "invalid_table" {
		t.Fatalf("default's table through finance_2026: %d %v", status, body)
	}

	// The limited token works on its database …
	if status, body, _ := f.Call(t, runnertest.LimitedToken, "select_query", `{"table":"orders","limit":1}`); status != 200 {
		t.Fatalf("limited token on default: %d %v", status, body)
	}
	// … and gets the same answer for the other database as for one that does not exist, naming
	// only the databases it may use.
	var answers []string
	for _, name := range []string{"finance_2026", "no_such_db"} {
		for _, call := range []struct{ tool, args string }{
			{"select_query", `{"table":"quarterly_revenue"}`},
			{"describe_schema", `{}`},
			{"execute_sql", `{"sql":"select 1"}`},
			{"insert_data", `{"table":"quarterly_revenue","row":{"quarter":"x"},"autocommit":true}`},
			{"pg_tx", `{"action":"begin"}`},
		} {
			args := `{"database":"` + name + `"` + strings.TrimPrefix(call.args, "{")
			if call.args != `{}` {
				args = `{"database":"` + name + `",` + strings.TrimPrefix(call.args, "{")
			}
			status, body, _ := f.Call(t, runnertest.LimitedToken, call.tool, args)
			if status != 403 || body["errorType"] != "not_allowed" {
				t.Fatalf("limited token, %s on %s: %d %v", call.tool, name, status, body)
			}
			raw, _ := json.Marshal(body)
			answer := strings.ReplaceAll(string(raw), name, "<db>")
			if strings.Contains(answer, "finance") || strings.Contains(answer, "quarterly") {
				t.Fatalf("answer leaks the other database: %s", raw)
			}
			if !strings.Contains(answer, "default") {
				t.Errorf("answer does not name the databases the token may use: %s", raw)
			}
			answers = append(answers, call.tool+" "+answer)
		}
	}
	for i := 0; i < len(answers)/2; i++ {
		if answers[i] != answers[i+len(answers)/2] {
			t.Errorf("an existing database answers differently from a missing one:\n%s\n%s", answers[i], answers[i+len(answers)/2])
		}
	}
	// describe_schema lists only the token's database's tables, and /readyz names none.
	status, body, _ := f.Call(t, runnertest.LimitedToken, "describe_schema", `{}`)
	raw, _ := json.Marshal(body)
	if status != 200 || !strings.Contains(string(raw), "orders") || strings.Contains(string(raw), "quarterly") || strings.Contains(string(raw), "api_keys") {
		t.Fatalf("describe_schema for the limited token: %d %s", status, raw)
	}
	if status, text := f.Get(t, "/readyz"); status != 200 || strings.Contains(text, "finance") {
		t.Fatalf("/readyz: %d %s", status, text)
	}

	// Each database has its own pool.
	if got := f.Metric(t, "pgtools_pool_max_connections", map[string]string{"database": "default"}); got != 3 {
		t.Errorf("default pool size %v, want 3", got)
	}
	if got := f.Metric(t, "pgtools_pool_max_connections", map[string]string{"database": "finance_2026"}); got != 2 {
		t.Errorf("finance_2026 pool size %v, want 2", got)
	}
}

func TestMetricsMoveWithCalls(t *testing.T) {
	t.Parallel()
	dsn := runnertest.NewRoleDB(t, "metrics", `CREATE TABLE orders (id int PRIMARY KEY, status text);
		INSERT INTO orders SELECT i, 'paid' FROM generate_series(1, 10) i`, "")
	cfg := &config.Config{Tokens: []auth.Token{{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read"}}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: dsn}}, Sessions: config.Sessions{TTLSeconds: 3600}}
	f := runnertest.NewServerFixture(t, cfg)
	sel := map[string]string{"tool": "select_query", "database": "default"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range m {
			out[a] = b
		}
		return out
	}
	if got := f.Metric(t, "pgtools_tool_calls_total", with(sel, "outcome", "success")); got != 0 {
		t.Fatalf("calls before any call: %v", got)
	}
	for i := 0; i < 3; i++ {
		if status, body, _ := f.Call(t, runnertest.AllToken, "select_query", `{"table":"orders","limit":4}`); status != 200 {
			t.Fatalf("%d %v", status, body)
		}
	}
	f.Call(t, runnertest.AllToken, "select_query", `{"table":"ordrs"}`)
	f.Call(t, runnertest.AllToken, "select_query", `{"table":"orders","database":"nope"}`)
	f.Call(t, runnertest.AllToken, "no_such_tool", `{}`)
	f.Call(t, "", "select_query", `{"table":"orders"}`)
	f.Call(t, "wrong-token-0123456789abcdef", "select_query", `{"table":"orders"}`)
	if status, body, _ := f.Call(t, runnertest.AllToken, "pg_tx", `{"action":"begin","read_only":true}`); status != 200 {
		t.Fatalf("begin: %d %v", status, body)
	}

	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"pgtools_tool_calls_total", with(sel, "outcome", "success"), 3},
		{"pgtools_tool_calls_total", with(sel, "outcome", "invalid_table"), 1},
		{"pgtools_tool_calls_total", map[string]string{"tool": "select_query", "database": "none", "outcome": "not_allowed"}, 1},
		{"pgtools_tool_calls_total", map[string]string{"tool": "unknown", "database": "none", "outcome": "unknown_tool"}, 1},
		{"pgtools_tool_calls_total", map[string]string{"tool": "pg_tx", "database": "default", "outcome": "success"}, 1},
		{"pgtools_tool_call_duration_seconds", sel, 4},
		{"pgtools_rows_returned_total", sel, 12},
		{"pgtools_truncated_results_total", sel, 3},
		{"pgtools_auth_failures_total", map[string]string{"reason": "missing"}, 1},
		{"pgtools_auth_failures_total", map[string]string{"reason": "invalid"}, 1},
		{"pgtools_sessions_open", nil, 1},
		{"pgtools_session_expiries_total", nil, 0},
		{"pgtools_pool_acquires_total", map[string]string{"database": "default"}, -2}, // at least 1
		{"pgtools_pool_connections", map[string]string{"database": "default", "state": "idle"}, -2},
		{"pgtools_build_info", nil, 1},
	}
	_, text := f.Get(t, "/metrics")
	for _, c := range checks {
		got := runnertest.MetricValue(t, text, c.name, c.labels)
		if c.want == -2 {
			if got < 1 {
				t.Errorf("%s%v = %v, want ≥ 1", c.name, c.labels, got)
			}
			continue
		}
		if got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if strings.Contains(text, runnertest.AllToken) || strings.Contains(text, "principal") || strings.Contains(text, dsn) {
		t.Errorf("/metrics shows a token, principal or DSN")
	}
	// /readyz updates the database gauge.
	if status, _ := f.Get(t, "/readyz"); status != 200 {
		t.Fatalf("/readyz %d", status)
	}
	if got := f.Metric(t, "pgtools_database_up", map[string]string{"database": "default"}); got != 1 {
		t.Errorf("pgtools_database_up = %v", got)
	}
}

func TestSessionExpiriesAreCounted(t *testing.T) {
	t.Parallel()
	dsn := runnertest.NewRoleDB(t, "expiry", `CREATE TABLE t (id int)`, "")
	cfg := &config.Config{Tokens: []auth.Token{{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read"}}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: dsn}}, Sessions: config.Sessions{TTLSeconds: 0.2}}
	f := runnertest.NewServerFixture(t, cfg)
	if status, body, _ := f.Call(t, runnertest.AllToken, "pg_tx", `{"action":"begin","read_only":true}`); status != 200 {
		t.Fatalf("begin: %d %v", status, body)
	}
	time.Sleep(300 * time.Millisecond)
	f.Sessions.Sweep()
	if got := f.Metric(t, "pgtools_session_expiries_total", nil); got != 1 {
		t.Errorf("pgtools_session_expiries_total = %v, want 1", got)
	}
	if got := f.Metric(t, "pgtools_sessions_open", nil); got != 0 {
		t.Errorf("pgtools_sessions_open = %v, want 0", got)
	}
}

// TestRateLimit checks the token bucket: calls over the burst get 429 rate_limited with
// Retry-After, other tokens are not affected, and the token recovers after the wait.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	dsn := runnertest.NewRoleDB(t, "rate", `CREATE TABLE t (id int); INSERT INTO t VALUES (1)`, "")
	cfg := &config.Config{Tokens: []auth.Token{{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read"}},
		{Secret: runnertest.LimitedToken, Name: "other", Scopes: []string{"read"}}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: dsn}},
		Limits:    config.Limits{Limits: invoke.Limits{RatePerSecond: 2, Burst: 3}}}
	f := runnertest.NewServerFixture(t, cfg)
	for i := 0; i < 3; i++ {
		if status, body, _ := f.Call(t, runnertest.AllToken, "select_query", `{"table":"t"}`); status != 200 {
			t.Fatalf("call %d within the burst: %d %v", i, status, body)
		}
	}
	status, body, hdr := f.Call(t, runnertest.AllToken, "select_query", `{"table":"t"}`)
	if status != 429 || body["errorType"] != "rate_limited" || body["success"] != false || !strings.Contains(body["error"].(string), "2 calls per second") ||
		!strings.Contains(body["suggestion"].(string), "Wait") {
		t.Fatalf("call over the burst: %d %v", status, body)
	}
	retry, err := strconv.Atoi(hdr.Get("Retry-After"))
	if err != nil || retry < 1 || retry > 1 {
		t.Fatalf("Retry-After = %q, want 1 (half a second, rounded up)", hdr.Get("Retry-After"))
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

// TestPoolWaitIsNotAStatementTimeout fills a one-connection pool and checks that the next call
// fails with a timeout that says it never started, unlike a statement that ran too long.
func TestPoolWaitIsNotAStatementTimeout(t *testing.T) {
	t.Parallel()
	dsn := runnertest.NewRoleDB(t, "poolwait", `CREATE TABLE t (id int)`, "")
	cfg := &config.Config{Tokens: []auth.Token{{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read"}}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: dsn, MaxConns: 1,
			Policy: tools.Policy{PoolWait: 200 * time.Millisecond, StatementTimeout: 2 * time.Second}}}}
	f := runnertest.NewServerFixture(t, cfg)
	// Load the catalog first: its query waits for the pool without pool_wait_ms (tools' catalog
	// cache uses the pool directly), which would blur what this test measures. On a busy machine
	// opening the pool's one connection, beside the sessions' spare connections opened at start,
	// can itself take longer than the 200 ms wait: that is set-up, so it may take a few tries.
	for try := 1; ; try++ {
		status, body, _ := f.Call(t, runnertest.AllToken, "select_query", `{"table":"t"}`)
		if status == 200 {
			break
		}
		if try == 10 || body["errorType"] != "timeout" {
			t.Fatalf("warm-up: %d %v", status, body)
		}
	}
	cancelledBefore := f.Metric(t, "pgtools_pool_acquire_cancelled_total", map[string]string{"database": "default"})
	var wg sync.WaitGroup
	wg.Add(1)
	var slow map[string]any
	go func() {
		defer wg.Done()
		_, slow, _ = f.Call(t, runnertest.AllToken, "execute_sql", `{"sql":"select pg_sleep(5)"}`)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for f.Metric(t, "pgtools_pool_connections", map[string]string{"state": "acquired"}) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the slow call never started")
		}
		time.Sleep(5 * time.Millisecond)
	}
	status, waited, _ := f.Call(t, runnertest.AllToken, "select_query", `{"table":"t"}`)
	wg.Wait()
	if status != 504 || waited["errorType"] != "timeout" || !strings.Contains(waited["error"].(string), "waiting for a free connection") ||
		!strings.Contains(waited["error"].(string), "never started") {
		t.Fatalf("call that waited for the pool: %d %v", status, waited)
	}
	if slow["errorType"] != "timeout" || strings.Contains(slow["error"].(string), "free connection") || slow["sqlState"] != "57014" {
		t.Fatalf("statement past statement_timeout: %v", slow)
	}
	if got := f.Metric(t, "pgtools_pool_acquire_cancelled_total", map[string]string{"database": "default"}) - cancelledBefore; got != 1 {
		t.Errorf("pgtools_pool_acquire_cancelled_total grew by %v, want 1", got)
	}
	if got := f.Metric(t, "pgtools_pool_acquire_waits_total", map[string]string{"database": "default"}); got < 1 {
		t.Errorf("pgtools_pool_acquire_waits_total = %v, want ≥ 1", got)
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
