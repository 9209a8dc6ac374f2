package runnertest

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// APIFixture is the HTTP API (httpapi.NewHandler, with /mcp) over a registry of one database,
// behind an httptest server.
type APIFixture struct {
	Srv *httptest.Server
	Log *pgtest.SyncBuffer // the access and call log
	DB  *pgtest.DB         // the database, when the fixture made it
}

// NewAPI serves the HTTP API over dsn with tokens and a 4,096-byte body limit.
func NewAPI(t testing.TB, dsn string, tokens []auth.Token) *APIFixture {
	t.Helper()
	reg := toolstest.Registry(t, dsn, tools.Policy{}, 4)
	logs := &pgtest.SyncBuffer{}
	srv := httptest.NewServer(httpapi.NewHandler(reg, tokens, zerolog.New(logs), 4096))
	t.Cleanup(srv.Close)
	return &APIFixture{Srv: srv, Log: logs}
}

// Post sends body to path with token and returns the status, the decoded body and the headers.
func (a *APIFixture) Post(t testing.TB, path, token, body string) (int, map[string]any, http.Header) {
	t.Helper()
	return apitest.Call(t, http.MethodPost, a.Srv.URL+path, token, body)
}

// SetupDB creates a test database with table orders (five paid orders) and returns it and the
// DSN of a role that may read it.
func SetupDB(t testing.TB) (*pgtest.DB, string) {
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, status text); INSERT INTO orders SELECT i, 'paid' FROM generate_series(1, 5) i`)
	return db, db.RoleDSN(t, "api")
}

// NewMCPAPI serves the runner with mcptest.Fixture in its database.
func NewMCPAPI(t testing.TB) *APIFixture {
	t.Helper()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	return NewAPI(t, db.RoleDSN(t, "mcp"), MCPTokens())
}

// BuiltinTools returns, in the registry's order, the built-in tools a token with the given scopes
// is shown where no policy hides one: those whose schema's x-pgtools scope it holds. Each tool's
// scope is pinned by tools' TestRegistryToolMeta and what each caller is shown by its
// TestToolsFor; the transport tests check that every listing applies the caller's scopes, and
// follow a new tool without an edit.
func BuiltinTools(scopes ...string) []string {
	var names []string
	for _, name := range schemas.ToolNames() {
		if meta, _ := schemas.Meta(name); slices.Contains(scopes, meta.Scope) {
			names = append(names, name)
		}
	}
	return names
}

// ListedTools returns the tool names of a /v1/tools answer, sorted.
func ListedTools(t testing.TB, body map[string]any) []string {
	t.Helper()
	list, ok := body["tools"].([]any)
	if !ok {
		t.Fatalf("no tools list: %v", body)
	}
	var names []string
	for _, item := range list {
		names = append(names, item.(map[string]any)["name"].(string))
	}
	sort.Strings(names)
	return names
}

// OpenAPITools returns the tool names of an /openapi.json answer, sorted.
func OpenAPITools(t testing.TB, body map[string]any) []string {
	t.Helper()
	paths, ok := body["paths"].(map[string]any)
	if !ok {
		t.Fatalf("no paths: %v", body)
	}
	var names []string
	for p := range paths {
		names = append(names, p[len("/v1/tools/"):])
	}
	sort.Strings(names)
	return names
}
