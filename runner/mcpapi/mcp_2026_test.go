package mcpapi_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// listAnswer is what tools/list answers, as far as these tests read it.
type listAnswer struct {
	Result struct {
		ResultType string         `json:"resultType"`
		TTLMs      *int           `json:"ttlMs"`
		CacheScope string         `json:"cacheScope"`
		Meta       map[string]any `json:"_meta"`
		Tools      []struct {
			Name string `json:"name"`
		} `json:"tools"`
	} `json:"result"`
}

// TestMCP20260728 holds what protocol 2026-07-28 gives a client of pgtools, with the go-sdk
// client at its default version and raw messages: server/discover names every version served;
// results carry resultType; tools/list is in name order with cache hints (private, ToolsListTTL)
// and a catalog digest that differs exactly when the caller's catalog does; Mcp-Method and
// Mcp-Name must match the body.
func TestMCP20260728(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	reg := toolstest.Registry(t, db.RoleDSN(t, "v2026"), tools.Policy{}, 4)
	serve := func(opts mcpapi.MCPOptions) string {
		srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Log: zerolog.Nop(), Tokens: runnertest.MCPTokens(), MCP: opts}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	base, structured := serve(mcpapi.MCPOptions{}), serve(mcpapi.MCPOptions{StructuredContent: true})
	const v = "2026-07-28"

	// The go-sdk client at its default version.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), apitest.MCPTransport(base, runnertest.AgentToken), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if init := cs.InitializeResult(); init.ProtocolVersion != v || init.ServerInfo == nil || init.ServerInfo.Name != "pgtools" {
		t.Fatalf("go-sdk client at its default: %+v", init)
	}
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if list.TTLMs != int(mcpapi.ToolsListTTL.Milliseconds()) || list.CacheScope != "private" || list.Meta[mcpapi.CatalogMetaKey] == nil {
		t.Errorf("go-sdk client's tools/list: ttlMs %d, cacheScope %q, _meta %v", list.TTLMs, list.CacheScope, list.Meta)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "select_query", Arguments: map[string]any{"table": "orders", "limit": 1}})
	if err != nil || res.IsError || res.NeedsInput() {
		t.Fatalf("go-sdk client's call: %v %+v", err, res)
	}

	// server/discover names every version the server answers.
	_, discover := mcpPOST(t, base, runnertest.AgentToken, v, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":`+paramsFor(v, `{}`)+`}`, nil)
	var d struct {
		Result struct {
			ResultType        string   `json:"resultType"`
			SupportedVersions []string `json:"supportedVersions"`
		} `json:"result"`
	}
	if json.Unmarshal(discover, &d) != nil || d.Result.ResultType != "complete" || !slices.Equal(d.Result.SupportedVersions, mcp.SupportedProtocolVersions()) {
		t.Errorf("server/discover: %s", discover)
	}

	// A call's result says it is complete, on both paths.
	for _, url := range []string{base, structured} {
		_, call := mcpPOST(t, url, runnertest.AgentToken, v, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":`+
			paramsFor(v, `{"name":"select_query","arguments":{"table":"orders","limit":1}}`)+`}`, nil)
		if !strings.Contains(string(call), `"resultType":"complete"`) || !strings.Contains(string(call), `"io.modelcontextprotocol/serverInfo":{"name":"pgtools"`) {
			t.Errorf("tools/call result: %s", call)
		}
	}

	// tools/list: order, hints and the catalog digest.
	listFor := func(url, token string) listAnswer {
		t.Helper()
		_, b := mcpPOST(t, url, token, v, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":`+paramsFor(v, `{}`)+`}`, nil)
		var a listAnswer
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("tools/list: %v: %s", err, b)
		}
		names := make([]string, len(a.Result.Tools))
		for i, tool := range a.Result.Tools {
			names[i] = tool.Name
		}
		if len(names) == 0 || !slices.IsSorted(names) {
			t.Errorf("tools/list for %s: tools %v, want a non-empty list in name order", token, names)
		}
		if a.Result.ResultType != "complete" || a.Result.TTLMs == nil || *a.Result.TTLMs != int(mcpapi.ToolsListTTL.Milliseconds()) || a.Result.CacheScope != "private" {
			t.Errorf("tools/list for %s: resultType %q, ttlMs %v, cacheScope %q", token, a.Result.ResultType, a.Result.TTLMs, a.Result.CacheScope)
		}
		return a
	}
	digest := func(a listAnswer) string { s, _ := a.Result.Meta[mcpapi.CatalogMetaKey].(string); return s }
	agent, agentAgain, reader := listFor(base, runnertest.AgentToken), listFor(base, runnertest.AgentToken), listFor(base, runnertest.ReadToken)
	agentStructured := listFor(structured, runnertest.AgentToken)
	if digest(agent) == "" || digest(agent) != digest(agentAgain) {
		t.Errorf("the same caller's catalog digest: %q then %q", digest(agent), digest(agentAgain))
	}
	if len(reader.Result.Tools) >= len(agent.Result.Tools) || digest(reader) == digest(agent) {
		t.Errorf("a reader (%d tools, %q) and a writer (%d tools, %q) see different catalogs with different digests",
			len(reader.Result.Tools), digest(reader), len(agent.Result.Tools), digest(agent))
	}
	if digest(agentStructured) == digest(agent) {
		t.Errorf("output schemas added to the catalog left its digest %q", digest(agent))
	}

	// Mcp-Method and Mcp-Name must name what the body does, so a proxy that routes or limits
	// by header cannot be steered past by a body that says otherwise.
	call := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":` + paramsFor(v, `{"name":"select_query","arguments":{"table":"orders","limit":1}}`) + `}`
	for h, val := range map[string]string{"Mcp-Name": "execute_sql", "Mcp-Method": "tools/list"} {
		status, b := mcpPOST(t, base, runnertest.AgentToken, v, call, map[string]string{h: val})
		if status != http.StatusBadRequest || !strings.Contains(string(b), h) || !strings.Contains(string(b), `"id":4`) {
			t.Errorf("%s %s over a select_query call: %d %s", h, val, status, b)
		}
	}
}

// TestMCPTraceParentInMeta: a 2026-07-28 call that carries a W3C traceparent in _meta has its
// tool_call span in that trace, under that span, on both paths (the fast path and the SDK's).
func TestMCPTraceParentInMeta(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	reg := toolstest.Registry(t, db.RoleDSN(t, "mcptrace"), tools.Policy{}, 2)
	recv := runnertest.NewOTLPReceiver(t)
	exp, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(recv.Srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	const trace, span = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	for i, sdkOnly := range []bool{false, true} {
		srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Log: zerolog.Nop(), Tokens: runnertest.MCPTokens(), Tracer: tp,
			MCP: mcpapi.MCPOptions{SDKOnly: sdkOnly}}))
		t.Cleanup(srv.Close)
		for _, v := range []string{"2025-11-25", "2026-07-28"} {
			meta := `"traceparent":"00-` + trace + `-` + span + `-01"`
			if v >= "2026-07-28" {
				meta = meta2026[1:len(meta2026)-1] + `,` + meta
			}
			// The HTTP header names another trace: the call's own context in _meta wins.
			status, b := mcpPOST(t, srv.URL, runnertest.AgentToken, v, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{`+meta+
				`},"name":"select_query","arguments":{"table":"orders","limit":1}}}`, map[string]string{"Traceparent": "00-11111111111111111111111111111111-2222222222222222-01"})
			if status != http.StatusOK || !strings.Contains(string(b), `\"success\":true`) {
				t.Fatalf("sdkOnly %v, %s: %d %s", sdkOnly, v, status, b)
			}
		}
		var calls int
		for _, s := range recv.Received() {
			if strings.HasPrefix(s.Name, "tool_call") {
				calls++
				if hex.EncodeToString(s.TraceId) != trace || hex.EncodeToString(s.ParentSpanId) != span {
					t.Errorf("sdkOnly %v: span %s in trace %x under %x, want %s under %s", sdkOnly, s.Name, s.TraceId, s.ParentSpanId, trace, span)
				}
			}
		}
		if calls != 2*(i+1) {
			t.Errorf("sdkOnly %v: %d tool_call spans in all, want %d", sdkOnly, calls, 2*(i+1))
		}
	}
}
