package httpapi_test

import (
	"net/http"
	"slices"
	"sort"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestToolListsPerCaller checks docs/design.md §12 on every listing transport: GET /v1/tools, MCP
// tools/list (go-sdk client) and /openapi.json show each token only the tools it can use, and a
// hidden tool called anyway is refused with not_allowed as before.
func TestToolListsPerCaller(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	const narrowToken = "narrow-token-0123456789abcdef"
	api := runnertest.NewAPI(t, db.RoleDSN(t, "lists"), append(runnertest.MCPTokens(),
		auth.Token{Secret: narrowToken, Name: "narrow", Scopes: []string{"read", "write"}, Tools: []string{"select_query"}}))
	writeTools := runnertest.BuiltinTools("write")
	cases := []struct {
		token string
		want  []string
	}{
		{runnertest.AgentToken, runnertest.BuiltinTools("read", "write")},
		{runnertest.ReadToken, runnertest.BuiltinTools("read")},
		{runnertest.WriteToken, writeTools},
		{narrowToken, []string{"select_query"}},
	}
	for _, c := range cases {
		// GET /v1/tools, in the registry's order.
		status, body, _ := apitest.Call(t, http.MethodGet, api.Srv.URL+"/v1/tools", c.token, "")
		var listed []string
		for _, item := range body["tools"].([]any) {
			listed = append(listed, item.(map[string]any)["name"].(string))
		}
		if status != http.StatusOK || !slices.Equal(listed, c.want) {
			t.Errorf("%.6s…: /v1/tools %d %v, want %v", c.token, status, listed, c.want)
		}
		// MCP tools/list through the go-sdk client.
		onMCP := apitest.MCPToolNames(t, api.Srv.URL, c.token)
		want := slices.Sorted(slices.Values(c.want)) // the SDK lists tools by name
		if !slices.Equal(onMCP, want) {
			t.Errorf("%.6s…: tools/list %v, want %v", c.token, onMCP, c.want)
		}
		// /openapi.json with the token: the same tools as paths.
		status, body, _ = apitest.Call(t, http.MethodGet, api.Srv.URL+"/openapi.json", c.token, "")
		var paths []string
		for p := range body["paths"].(map[string]any) {
			paths = append(paths, p[len("/v1/tools/"):])
		}
		sort.Strings(paths)
		if status != http.StatusOK || !slices.Equal(paths, want) {
			t.Errorf("%.6s…: /openapi.json %d %v, want %v", c.token, status, paths, want)
		}
	}
	// Without a token, or with a bad one, /openapi.json is refused like the API
	// (metaauth_test.go; openapi_public publishes the built-in tools only).
	if status, body, _ := apitest.Call(t, http.MethodGet, api.Srv.URL+"/openapi.json", "", ""); status != http.StatusUnauthorized {
		t.Errorf("/openapi.json without a token: %d %v", status, body)
	}
	if status, _, _ := apitest.Call(t, http.MethodGet, api.Srv.URL+"/openapi.json", "wrong-token-0123456789abcdef", ""); status != http.StatusUnauthorized {
		t.Errorf("/openapi.json with a bad token: %d", status)
	}

	// A hidden tool called anyway: not_allowed, on HTTP and as an MCP tool result.
	status, body, _ := api.Post(t, "/v1/tools/describe_schema", narrowToken, `{}`)
	if status != http.StatusForbidden || body["errorType"] != "not_allowed" {
		t.Errorf("describe_schema outside the allow-list over HTTP: %d %v", status, body)
	}
	cs, err := apitest.ConnectMCP(t, api.Srv.URL, runnertest.ReadToken)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "insert_data",
		Arguments: map[string]any{"table": "orders", "row": map[string]any{"id": 9}, "autocommit": true}})
	if err != nil {
		t.Fatal(err)
	}
	if out := mcptest.Decode(t, res); !out.IsError || out.Object["errorType"] != "not_allowed" {
		t.Errorf("insert_data with a read token over MCP: %s", out.Text)
	}
}
