package mcpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
)

const (
	// catalogBudget caps the tools/list result. Every tool's whole schemas/ file is its input
	// schema (one source of truth), descriptions included; the cap keeps growth a reviewed choice.
	catalogBudget = 24 << 10
	// outputSchemaBudget caps the output schemas of all tools in tools/list together.
	outputSchemaBudget = 6 << 10
)

func TestMCPStreamableHTTP(t *testing.T) {
	t.Parallel()
	api := runnertest.NewMCPAPI(t)
	cs, err := apitest.ConnectMCP(t, api.Srv.URL, runnertest.AgentToken)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	mcptest.Check(t, cs)

	// Access and call logs name the principal and the tool, never a parameter value or a token.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "select_query",
		Arguments: map[string]any{"table": "orders", "where": "status = $1", "params": []any{"PARAM-SECRET-VALUE"}}})
	if err != nil || res.IsError {
		t.Fatalf("select_query with a parameter: %v %+v", err, res)
	}
	logs := api.Log.String()
	for _, secret := range []string{runnertest.AgentToken, "PARAM-SECRET-VALUE"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("logs contain %q:\n%s", secret, logs)
		}
	}
	if !strings.Contains(logs, `"path":"/mcp"`) || !strings.Contains(logs, `"principal":"agent","tool":"select_query"`) {
		t.Fatalf("logs lack the /mcp access line or the tool call line:\n%s", logs)
	}
}

// TestMCPPrincipals checks that every call runs as its own token's principal, on one handler and
// interleaved: scopes never leak between tokens.
func TestMCPPrincipals(t *testing.T) {
	t.Parallel()
	api := runnertest.NewMCPAPI(t)
	sessions := map[string]*mcp.ClientSession{}
	for _, tok := range runnertest.MCPTokens() {
		cs, err := apitest.ConnectMCP(t, api.Srv.URL, tok.Secret)
		if err != nil {
			t.Fatalf("%s: connect: %v", tok.Name, err)
		}
		sessions[tok.Name] = cs
	}
	insert := &mcp.CallToolParams{Name: "insert_data", Arguments: map[string]any{"table": "orders", "row": map[string]any{"id": 9, "status": "new"}}}
	read := &mcp.CallToolParams{Name: "select_query", Arguments: map[string]any{"table": "orders"}}
	for range 3 {
		for _, name := range []string{"reader", "agent", "writer"} {
			res, err := sessions[name].CallTool(t.Context(), insert)
			if err != nil {
				t.Fatal(err)
			}
			out := mcptest.Decode(t, res)
			lacksWrite := strings.Contains(out.Object["error"].(string), `lacks the "write" scope`)
			if !out.IsError || lacksWrite != (name == "reader") {
				t.Fatalf("%s: insert_data: %s", name, out.Text)
			}
			if fix, _ := out.Object["suggestion"].(string); lacksWrite && (!strings.Contains(fix, "token with the write scope") || strings.Contains(fix, "--scopes")) {
				t.Fatalf("%s: insert_data over MCP-over-HTTP names no token as the fix: %s", name, out.Text)
			}
			res, err = sessions[name].CallTool(t.Context(), read)
			if err != nil {
				t.Fatal(err)
			}
			out = mcptest.Decode(t, res)
			if out.IsError != (name == "writer") {
				t.Fatalf("%s: select_query: %s", name, out.Text)
			}
		}
	}
}

func TestMCPAuth(t *testing.T) {
	t.Parallel()
	api := runnertest.NewMCPAPI(t)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	for _, c := range []struct{ name, token string }{{"no token", ""}, {"wrong token", "wrong-token-0123456789abcdef"}} {
		t.Run(c.name, func(t *testing.T) {
			status, body, hdr := apitest.MCPPost(t, api.Srv.URL, c.token, initialize)
			var obj map[string]any
			if status != http.StatusUnauthorized || json.Unmarshal(body, &obj) != nil || obj["errorType"] != "authentication_error" ||
				!strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("status %d, %s, %v", status, body, hdr)
			}
			if _, err := apitest.ConnectMCP(t, api.Srv.URL, c.token); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
				t.Fatalf("go-sdk client connected with %s: %v", c.name, err)
			}
		})
	}
	if status, body, _ := apitest.MCPPost(t, api.Srv.URL, runnertest.AgentToken, initialize); status != http.StatusOK || !bytes.Contains(body, []byte(`"name":"pgtools"`)) {
		t.Fatalf("initialize with a good token: %d %s", status, body)
	}
}

// TestMCPProtocolErrors sends what no SDK client would: every answer is a clean HTTP or JSON-RPC
// error, and the server keeps serving.
func TestMCPProtocolErrors(t *testing.T) {
	t.Parallel()
	api := runnertest.NewMCPAPI(t)
	cases := []struct {
		name, body string
		status     int
		inBody     string
	}{
		{"not JSON", `{"jsonrpc":`, http.StatusBadRequest, ""},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"tools/frobnicate"}`, http.StatusBadRequest, "not handled"},
		{"unknown tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, http.StatusOK, `"code":-32602`},
		{"arguments not JSON-RPC params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"select_query"}`, http.StatusOK, `"error"`},
		{"arguments a string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"select_query","arguments":"orders"}}`, http.StatusOK, `invalid_arguments`},
		{"arguments null", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"describe_schema","arguments":null}}`, http.StatusOK, `\"operation\":\"describe\"`},
		{"over the body limit", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"select_query","arguments":{"table":"` + strings.Repeat("x", 5000) + `"}}}`, http.StatusRequestEntityTooLarge, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := apitest.MCPPost(t, api.Srv.URL, runnertest.AgentToken, c.body)
			if status != c.status || !bytes.Contains(body, []byte(c.inBody)) {
				t.Fatalf("status %d (want %d), body %s", status, c.status, body)
			}
		})
	}
	req, _ := http.NewRequest(http.MethodGet, api.Srv.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+runnertest.AgentToken)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /mcp (no server-sent stream on a stateless server): %d", resp.StatusCode)
	}
	cs, err := apitest.ConnectMCP(t, api.Srv.URL, runnertest.AgentToken)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "describe_schema"}); err != nil || res.IsError {
		t.Fatalf("after the bad requests: %v %+v", err, res)
	}
}

// TestMCPCatalogSize measures what a client loads into its model's context from tools/list.
func TestMCPCatalogSize(t *testing.T) {
	t.Parallel()
	api := runnertest.NewMCPAPI(t)
	status, body, _ := apitest.MCPPost(t, api.Srv.URL, runnertest.AgentToken, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var resp struct {
		Result json.RawMessage `json:"result"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &resp) != nil || len(resp.Result) == 0 {
		t.Fatalf("tools/list: %d %s", status, body)
	}
	// The output schemas are for the client to validate results with, not text for the model:
	// they are measured apart, against a budget of their own.
	var list struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(resp.Result, &list); err != nil {
		t.Fatal(err)
	}
	outputs := 0
	for _, tool := range list.Tools {
		outputs += len(tool["outputSchema"])
		delete(tool, "outputSchema")
	}
	rest, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, rest); err != nil {
		t.Fatal(err)
	}
	n := compact.Len()
	t.Logf("tools/list result without output schemas: %d bytes, ~%d tokens (bytes/4); budget %d bytes; output schemas %d bytes (budget %d)",
		n, n/4, catalogBudget, outputs, outputSchemaBudget)
	if n > catalogBudget {
		t.Fatalf("tools/list result is %d bytes, over the %d-byte budget: shorten descriptions in schemas/ or raise the budget on purpose", n, catalogBudget)
	}
	if outputs > outputSchemaBudget {
		t.Fatalf("the output schemas are %d bytes, over their %d-byte budget", outputs, outputSchemaBudget)
	}
}
