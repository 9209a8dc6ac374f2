package httpapi_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// metaCustomTool is the operator's tool the metadata tests look for: readable by a read token,
// never published without one.
const metaCustomTool = "paid_order_count"

// newMetaAPI serves mcptest.Fixture with tokens (none: open loopback mode), a custom read tool,
// and opts over the defaults.
func newMetaAPI(t *testing.T, tokens []auth.Token, opts httpapi.HandlerOptions) *runnertest.APIFixture {
	t.Helper()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	reg := toolstest.RegistryWith(t, db.RoleDSN(t, "meta"), tools.Policy{}, 4, tools.Options{
		CustomTools: []tools.CustomTool{{Name: metaCustomTool, Description: "Counts the paid orders.",
			Database: "default", Mode: "read", SQL: "SELECT count(*) AS n FROM orders WHERE status = $1",
			Parameters: []tools.CustomParam{{Name: "status", Type: "string", Required: true, Description: "Order status."}}}}})
	logs := &pgtest.SyncBuffer{}
	opts.Tokens, opts.Log = tokens, zerolog.New(logs)
	srv := httptest.NewServer(httpapi.NewHandlerWith(reg, opts))
	t.Cleanup(srv.Close)
	return &runnertest.APIFixture{Srv: srv, Log: logs, DB: db}
}

// refusal is what an unauthenticated request is answered: status, body and challenge.
type refusal struct {
	status    int
	body      map[string]any
	challenge string
}

// String keeps a failure message short when a listing answers instead of refusing.
func (r refusal) String() string {
	raw, _ := json.Marshal(r.body)
	return fmt.Sprintf("%d %.200s %q", r.status, raw, r.challenge)
}

func refusedAs(t *testing.T, method, url, token, body string) refusal {
	t.Helper()
	status, out, hdr := apitest.Call(t, method, url, token, body)
	return refusal{status, out, hdr.Get("WWW-Authenticate")}
}

// TestMetadataNeedsAToken: /openapi.json and /v1/tools answer a request without a valid token
// exactly as a tool call is answered (401, the error object, the same WWW-Authenticate), and with
// a token list only what that token may use. /mcp (tools/list) is refused the same way.
func TestMetadataNeedsAToken(t *testing.T) {
	t.Parallel()
	api := newMetaAPI(t, runnertest.MCPTokens(), httpapi.HandlerOptions{})
	readTools := slices.Sorted(slices.Values(append(runnertest.BuiltinTools("read"), metaCustomTool)))
	for _, token := range []string{"", "wrong-token-0123456789abcdef", "eyJhbGciOiJIUzI1NiJ9.e30.x"} {
		want := refusedAs(t, http.MethodPost, api.Srv.URL+"/v1/tools/select_query", token, `{"table": "orders"}`)
		if want.status != http.StatusUnauthorized || want.body["errorType"] != "authentication_error" || want.challenge == "" {
			t.Fatalf("token %q: the tool call itself: %v", token, want)
		}
		for _, path := range []string{"/openapi.json", "/v1/tools"} {
			got := refusedAs(t, http.MethodGet, api.Srv.URL+path, token, "")
			if got.status != want.status || !maps.Equal(got.body, want.body) || got.challenge != want.challenge {
				t.Errorf("token %q: GET %s answered %v, want the tool call's %v", token, path, got, want)
			}
		}
		status, raw, hdr := apitest.MCPPost(t, api.Srv.URL, token, `{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}`)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		if status != http.StatusUnauthorized || body["errorType"] != "authentication_error" || hdr.Get("WWW-Authenticate") != want.challenge {
			t.Errorf("token %q: MCP tools/list answered %d %s %q", token, status, raw, hdr.Get("WWW-Authenticate"))
		}
	}
	// With a read token: the read tools, the custom one included, and no write tool.
	status, body, _ := apitest.Call(t, http.MethodGet, api.Srv.URL+"/v1/tools", runnertest.ReadToken, "")
	if got := runnertest.ListedTools(t, body); status != http.StatusOK || !slices.Equal(got, readTools) {
		t.Errorf("/v1/tools with a read token: %d %v, want %v", status, got, readTools)
	}
	status, body, _ = apitest.Call(t, http.MethodGet, api.Srv.URL+"/openapi.json", runnertest.ReadToken, "")
	if got := runnertest.OpenAPITools(t, body); status != http.StatusOK || !slices.Equal(got, readTools) {
		t.Errorf("/openapi.json with a read token: %d %v, want %v", status, got, readTools)
	}
	// The probes stay open: load balancers and orchestrators carry no token.
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, body, _ := apitest.Call(t, http.MethodGet, api.Srv.URL+path, "", ""); status != http.StatusOK {
			t.Errorf("%s without a token: %d %v", path, status, body)
		}
	}
}

// TestOpenAPIPublic: with openapi_public a request without a token gets the built-in tools only
// (never the operator's), while a token still gets its own list and a bad token is still refused;
// /v1/tools and /mcp keep requiring a token.
func TestOpenAPIPublic(t *testing.T) {
	t.Parallel()
	api := newMetaAPI(t, runnertest.MCPTokens(), httpapi.HandlerOptions{OpenAPIPublic: true})
	builtins := slices.Sorted(slices.Values(schemas.ToolNames()))
	status, body, _ := apitest.Call(t, http.MethodGet, api.Srv.URL+"/openapi.json", "", "")
	if got := runnertest.OpenAPITools(t, body); status != http.StatusOK || !slices.Equal(got, builtins) {
		t.Errorf("public /openapi.json: %d %v, want the built-in tools %v", status, got, builtins)
	}
	status, body, _ = apitest.Call(t, http.MethodGet, api.Srv.URL+"/openapi.json", runnertest.ReadToken, "")
	want := slices.Sorted(slices.Values(append(runnertest.BuiltinTools("read"), metaCustomTool)))
	if got := runnertest.OpenAPITools(t, body); status != http.StatusOK || !slices.Equal(got, want) {
		t.Errorf("/openapi.json with a read token: %d %v, want %v", status, got, want)
	}
	if status, body, _ := apitest.Call(t, http.MethodGet, api.Srv.URL+"/openapi.json", "wrong-token-0123456789abcdef", ""); status != http.StatusUnauthorized || body["errorType"] != "authentication_error" {
		t.Errorf("/openapi.json with a bad token: %d %v", status, body)
	}
	if status, body, _ := apitest.Call(t, http.MethodGet, api.Srv.URL+"/v1/tools", "", ""); status != http.StatusUnauthorized {
		t.Errorf("/v1/tools without a token under openapi_public: %d %v", status, body)
	}
	if status, raw, _ := apitest.MCPPost(t, api.Srv.URL, "", `{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}`); status != http.StatusUnauthorized {
		t.Errorf("MCP tools/list without a token under openapi_public: %d %s", status, raw)
	}
}

// TestOpenAPIPublicHidesDisabledBuiltins: the public catalog leaves out a built-in tool no
// caller can use (disabled on every database, writes on read-only ones), and every built-in tool
// a caller can use is in it.
func TestOpenAPIPublicHidesDisabledBuiltins(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	reg := toolstest.Registry(t, db.RoleDSN(t, "meta"), tools.Policy{ReadOnly: true, DisabledTools: []string{"execute_sql"}}, 4)
	srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Tokens: runnertest.MCPTokens(), Log: zerolog.Nop(), OpenAPIPublic: true}))
	t.Cleanup(srv.Close)
	status, body, _ := apitest.Call(t, http.MethodGet, srv.URL+"/openapi.json", "", "")
	// The read tools but execute_sql: a read-only database hides only the tools that always write,
	// which are the write-scope ones.
	want := slices.Sorted(slices.Values(slices.DeleteFunc(runnertest.BuiltinTools("read"), func(n string) bool { return n == "execute_sql" })))
	if got := runnertest.OpenAPITools(t, body); status != http.StatusOK || !slices.Equal(got, want) {
		t.Errorf("public /openapi.json over a read-only database without execute_sql: %d %v, want %v", status, got, want)
	}
}

// TestOpenLoopbackMetadata: without tokens (loopback only) every caller is the local principal,
// so the listings need no token and show every tool, the operator's included.
func TestOpenLoopbackMetadata(t *testing.T) {
	t.Parallel()
	api := newMetaAPI(t, nil, httpapi.HandlerOptions{})
	all := slices.Sorted(slices.Values(append(schemas.ToolNames(), metaCustomTool)))
	status, body, _ := apitest.Call(t, http.MethodGet, api.Srv.URL+"/v1/tools", "", "")
	if got := runnertest.ListedTools(t, body); status != http.StatusOK || !slices.Equal(got, all) {
		t.Errorf("/v1/tools: %d %v, want %v", status, got, all)
	}
	status, body, _ = apitest.Call(t, http.MethodGet, api.Srv.URL+"/openapi.json", "", "")
	if got := runnertest.OpenAPITools(t, body); status != http.StatusOK || !slices.Equal(got, all) {
		t.Errorf("/openapi.json: %d %v, want %v", status, got, all)
	}
	onMCP := apitest.MCPToolNames(t, api.Srv.URL, "")
	sort.Strings(onMCP)
	if !slices.Equal(onMCP, all) {
		t.Errorf("MCP tools/list: %v, want %v", onMCP, all)
	}
}

// TestOpenAPIPublicConfig: openapi_public flows from the config file through Validate to
// check-config's effective view and to the server NewServer builds; it is off by default.
func TestOpenAPIPublicConfig(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	dir := t.TempDir()
	for _, c := range []struct {
		key  string
		want bool
	}{{``, false}, {`"openapi_public": false,`, false}, {`"openapi_public": true,`, true}} {
		file := apitest.WriteFile(t, dir, "c.json", `{`+c.key+` "tokens": [{"name": "a", "token": "`+runnertest.ReadToken+`", "scopes": ["read"]}],
			"databases": {"default": {"url": "`+db.DSN+`"}}}`)
		cfg, err := config.LoadConfigFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		raw, err := cfg.EffectiveJSON()
		if err != nil {
			t.Fatal(err)
		}
		var eff map[string]any
		_ = json.Unmarshal(raw, &eff)
		if cfg.OpenAPIPublic != c.want || eff["openapi_public"] != c.want {
			t.Errorf("%q: config.Config.OpenAPIPublic %v, check-config shows %v, want %v", c.key, cfg.OpenAPIPublic, eff["openapi_public"], c.want)
		}
		rt, err := runner.Build(t.Context(), cfg, zerolog.Nop(), runner.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(rt.Handler())
		status, _, _ := apitest.Call(t, http.MethodGet, srv.URL+"/openapi.json", "", "")
		srv.Close()
		rt.Close()
		if want := map[bool]int{false: http.StatusUnauthorized, true: http.StatusOK}[c.want]; status != want {
			t.Errorf("%q: /openapi.json without a token: %d, want %d", c.key, status, want)
		}
	}
}
