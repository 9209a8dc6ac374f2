package invoke_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/runnertest"
)

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
