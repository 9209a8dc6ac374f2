// Package runnertest is pgtools as the tests of runner and of its packages (httpapi, mcpapi,
// auth, invoke) serve it, over a real test database (tools/pgtest): a runtime built by
// runner.Build from a Config behind an httptest server (ServerFixture), the HTTP API with /mcp
// over a test registry (APIFixture), accepting JWTs (JWTFixture) or tokens that act for users
// (IdentityFixture); the tokens those fixtures know; and the helpers their tests share: an MCP
// client that answers elicitations (Elicitor), an in-process OTLP receiver, and readers of logs
// and metrics. Every fixture is torn down when its test ends. It is for tests only; the client
// side of the server is runner/apitest.
package runnertest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// The bearer tokens of the fixtures. Each is long enough for config.Validate.
const (
	// AllToken and LimitedToken are the tokens of tests that write their own Config: usually
	// one for every database and one for a part of them.
	AllToken     = "token-for-all-databases-0123"
	LimitedToken = "token-for-main-only-0123456"
	// ReadToken has the read scope only, WriteToken the write scope only (Tokens).
	ReadToken  = "read-token-0123456789abcdef"
	WriteToken = "write-only-token-0123456789"
	// AgentToken may read and write, so a refused insert is refused for missing intent (or because
	// writes are not available yet), not for missing scope.
	AgentToken = "agent-token-0123456789abcdef"
	// ActAsToken acts for users and PlainToken does not (IdentityFixture).
	ActAsToken = "act-as-token-0123456789abcdef"
	PlainToken = "plain-token-0123456789abcdef"
)

// Tokens are ReadToken (principal "reader") and WriteToken ("writer").
func Tokens() []auth.Token {
	return []auth.Token{
		{Secret: ReadToken, Name: "reader", Scopes: []string{"read"}},
		{Secret: WriteToken, Name: "writer", Scopes: []string{"write"}},
	}
}

// MCPTokens are AgentToken (principal "agent", read and write) and the Tokens.
func MCPTokens() []auth.Token {
	return []auth.Token{
		{Secret: AgentToken, Name: "agent", Scopes: []string{"read", "write"}},
		{Secret: ReadToken, Name: "reader", Scopes: []string{"read"}},
		{Secret: WriteToken, Name: "writer", Scopes: []string{"write"}},
	}
}

// NewRoleDB creates a test database with schema (run as superuser), a least-privilege role with
// SELECT on it (and grant, formatted with the role, if set), and returns the role's DSN.
func NewRoleDB(t testing.TB, role, schema, grant string) string {
	t.Helper()
	db := pgtest.New(t)
	db.Exec(t, schema)
	dsn := db.RoleDSN(t, role)
	if grant != "" {
		db.Exec(t, strings.ReplaceAll(grant, "%s", `"`+db.RoleName(role)+`"`))
	}
	return dsn
}

// WaitFor polls cond every 20 ms until it holds, and fails the test naming what it waited for
// when limit passes first.
func WaitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// JSONLines returns the JSON lines of log whose key k equals v.
func JSONLines(t testing.TB, log *pgtest.SyncBuffer, k, v string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var m map[string]any
		if l == "" {
			continue
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m[k] == v {
			out = append(out, m)
		}
	}
	return out
}
