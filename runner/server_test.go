package runner_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
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
