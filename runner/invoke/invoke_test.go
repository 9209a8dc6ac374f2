package invoke_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// panicRegistry is a registry over mcptest.Fixture whose describe_schema panics.
func panicRegistry(t *testing.T) (*tools.Registry, invoke.Caller) {
	t.Helper()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	reg := toolstest.Registry(t, db.RoleDSN(t, "inv"), tools.Policy{}, 4)
	return reg, toolstest.PanicOn{Caller: reg, Tool: "describe_schema"}
}

// TestPanicIsAnInternalErrorOverHTTP: a panicking tool answers 500 internal_error naming the
// request id, the connection stays open for the next call, and the per-token concurrency slot
// is given back.
func TestPanicIsAnInternalErrorOverHTTP(t *testing.T) {
	t.Parallel()
	reg, caller := panicRegistry(t)
	logs := &pgtest.SyncBuffer{}
	srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Tokens: runnertest.MCPTokens(), Log: zerolog.New(logs),
		Caller: caller, Limits: invoke.Limits{MaxConcurrentPerToken: 1}}))
	t.Cleanup(srv.Close)
	client := srv.Client()
	reused := 0
	post := func(tool, args string) (int, map[string]any, string) {
		t.Helper()
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			if i.Reused {
				reused++
			}
		}}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost,
			srv.URL+"/v1/tools/"+tool, strings.NewReader(args))
		req.Header.Set("Authorization", "Bearer "+runnertest.AgentToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s: body is not JSON: %q", tool, raw)
		}
		return resp.StatusCode, out, resp.Header.Get("X-Request-Id")
	}
	for i := range 3 { // more than MaxConcurrentPerToken: a leaked slot would refuse the second call
		status, out, id := post("describe_schema", `{"table":"SECRET-ARG-VALUE"}`)
		if status != http.StatusInternalServerError || out["errorType"] != "internal_error" || id == "" ||
			!strings.Contains(out["error"].(string), id) || !strings.Contains(out["suggestion"].(string), id) {
			t.Fatalf("call %d: %d %v (request id %q), want 500 internal_error naming the request id", i, status, out, id)
		}
		status, out, _ = post("select_query", `{"table":"orders"}`)
		if status != http.StatusOK || out["rowCount"] != float64(5) {
			t.Fatalf("call %d after the panic: %d %v", i, status, out)
		}
	}
	if reused < 5 {
		t.Errorf("%d of 6 calls reused the connection, want every call after the first", reused)
	}
	l := logs.String()
	if !strings.Contains(l, `"message":"tool call panicked"`) || !strings.Contains(l, "assignment to entry in nil map") ||
		!strings.Contains(l, `"tool":"describe_schema","error_type":"internal_error"`) {
		t.Errorf("no panic or call log line:\n%s", l)
	}
	// The call panicked before the registry routed it, so its line names no database: the
	// database is where a call ran (tools.Outcome), never a guess from its arguments.
	if strings.Contains(l, `"tool":"describe_schema","database"`) {
		t.Errorf("the panicked call's line names a database:\n%s", l)
	}
	if strings.Contains(l, "SECRET-ARG-VALUE") {
		t.Errorf("logs hold an argument value:\n%s", l)
	}
}

// mcpInternalError checks that the MCP result is an isError internal_error naming a request id.
func mcpInternalError(t *testing.T, res *mcp.CallToolResult, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("describe_schema: %v", err)
	}
	var e map[string]any
	_ = json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &e)
	if !res.IsError || e["errorType"] != "internal_error" || !strings.Contains(e["error"].(string), "request id ") {
		t.Fatalf("describe_schema answered %+v, want an isError internal_error naming the request id", e)
	}
}

// mcpStillServes checks that the session answers the next call.
func mcpStillServes(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "select_query", Arguments: map[string]any{"table": "orders"}})
	if err != nil || res.IsError {
		t.Fatalf("select_query after the panic: %v %+v", err, res)
	}
}

func TestPanicIsAnInternalErrorOverMCP(t *testing.T) {
	t.Parallel()
	// A new params value for every call: the SDK's client writes its _meta into the one it is
	// given, so the parallel subtests must not share one.
	describe := func() *mcp.CallToolParams {
		return &mcp.CallToolParams{Name: "describe_schema", Arguments: map[string]any{}}
	}

	t.Run("streamable HTTP", func(t *testing.T) {
		t.Parallel()
		reg, caller := panicRegistry(t)
		srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Tokens: runnertest.MCPTokens(), Log: zerolog.Nop(), Caller: caller}))
		t.Cleanup(srv.Close)
		cs, err := apitest.ConnectMCP(t, srv.URL, runnertest.AgentToken)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			res, err := cs.CallTool(t.Context(), describe())
			mcpInternalError(t, res, err)
			mcpStillServes(t, cs)
		}
	})

	t.Run("stdio server", func(t *testing.T) {
		t.Parallel()
		reg, caller := panicRegistry(t)
		p := tools.Principal{Name: "stdio", Scopes: []string{"read"}}
		ct, st := mcp.NewInMemoryTransports()
		ss, err := mcpapi.NewMCPServerWith(reg, p, zerolog.Nop(), invoke.NewInvoker(caller, zerolog.Nop()), mcpapi.MCPOptions{}).Connect(t.Context(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ss.Close() })
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "pgtools-test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		for range 2 {
			res, err := cs.CallTool(t.Context(), describe())
			mcpInternalError(t, res, err)
			mcpStillServes(t, cs)
		}
	})
}
