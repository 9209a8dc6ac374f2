package mcpapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// fastCase is one /mcp POST for the differential test: its body, headers and whether the fast
// path should answer it.
type fastCase struct {
	name    string
	token   string
	body    string
	header  map[string]string // set over the defaults; "" deletes
	host    string            // the Host header, when not the server's
	fast    bool              // the fast path answers it (else the SDK does)
	wantErr bool              // the answer is a failed call (isError) or a protocol error
}

func fastCases() []fastCase {
	call := func(id, tool, args string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
	}
	sel := call("1", "select_query", `{"table":"orders","order_by":"id","limit":2}`)
	return []fastCase{
		{name: "select", body: sel, fast: true},
		{name: "select, string id", body: call(`"req-7"`, "select_query", `{"table":"orders","limit":1}`), fast: true},
		{name: "select, id 0", body: call("0", "select_query", `{"table":"orders","limit":1}`), fast: true},
		{name: "select, columns format", body: call("2", "select_query", `{"table":"orders","format":"columns","limit":3}`), fast: true},
		// encoding/json escapes <, >, & and U+2028 in strings; both paths must agree on it.
		{name: "text to escape", body: call("3", "execute_sql", `{"sql":"SELECT '<b>&amp;</b> \u2028 \u00e9 \\\\ \"q\"' AS t"}`), fast: true},
		{name: "no arguments", body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"describe_schema"}}`, fast: true},
		{name: "null arguments", body: call("5", "describe_schema", `null`), fast: true},
		{name: "invalid arguments", body: call("6", "select_query", `{"table":"orders","limit":"ten"}`), fast: true, wantErr: true},
		{name: "unknown column", body: call("7", "select_query", `{"table":"orders","columns":["nope"]}`), fast: true, wantErr: true},
		{name: "write without intent", body: call("8", "insert_data", `{"table":"orders","row":{"id":99,"status":"x"}}`), fast: true, wantErr: true},
		{name: "tool hidden from the token", token: runnertest.ReadToken, body: call("9", "insert_data", `{"table":"orders","row":{"id":98,"status":"x"},"autocommit":true}`), fast: true, wantErr: true},
		{name: "no protocol header", body: sel, header: map[string]string{"Mcp-Protocol-Version": ""}, fast: true},
		{name: "protocol 2025-06-18", body: sel, header: map[string]string{"Mcp-Protocol-Version": "2025-06-18"}, fast: true},
		{name: "accept */*", body: sel, header: map[string]string{"Accept": "*/*"}, fast: true},
		{name: "json with charset", body: sel, header: map[string]string{"Content-Type": "application/json; charset=utf-8"}, fast: true},

		// Everything else is the SDK's, and answered as it answers.
		// On 2026-07-28 a request must carry its metadata: the SDK says which.
		{name: "protocol 2026-07-28", body: sel, header: map[string]string{"Mcp-Protocol-Version": "2026-07-28"}, wantErr: true},
		{name: "unsupported protocol", body: sel, header: map[string]string{"Mcp-Protocol-Version": "1999-01-01"}, wantErr: true},
		{name: "unknown tool", body: call("10", "drop_everything", `{}`), wantErr: true},
		{name: "arguments not an object", body: call("11", "select_query", `[1]`), wantErr: true},
		{name: "float id", body: call("1.0", "select_query", `{"table":"orders","limit":1}`), fast: true},
		{name: "big id", body: call("12345678901234567890", "select_query", `{"table":"orders","limit":1}`), fast: true},
		{name: "progress token", body: `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"select_query","arguments":{"table":"orders","limit":1},"_meta":{"progressToken":"p1"}}}`},
		{name: "extra member", body: `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"select_query","arguments":{"table":"orders","limit":1}},"extra":1}`},
		{name: "batch", body: `[` + sel + `]`, wantErr: true},
		{name: "tools/list", body: `{"jsonrpc":"2.0","id":14,"method":"tools/list"}`},
		{name: "notification", body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{name: "not JSON", body: `{"jsonrpc":`, wantErr: true},
		{name: "text/plain", body: sel, header: map[string]string{"Content-Type": "text/plain"}, wantErr: true},
		{name: "accept without event streams", body: sel, header: map[string]string{"Accept": "application/json"}, wantErr: true},
		{name: "foreign host on loopback", body: sel, host: "rebind.example:8080", wantErr: true},
	}
}

// fastMasks matches what differs between two calls made a moment apart: the execution time, and
// a page token (its expiry, and so its signature, moves with the clock's second).
var fastMasks = regexp.MustCompile(`\\"(executionTime|next_page)\\":\\"[^\\]*\\"|"(executionTime|next_page)":"[^"]*"`)

// TestMCPFastPathAnswersAsTheSDK sends every message of fastCases to /mcp twice, once with the
// fast path and once with the SDK alone, and requires the same status, Content-Type and body
// (execution times aside), with and without structured content. It also checks which messages
// the fast path takes, so a change that quietly sends everything to the SDK (or takes a message
// it should not) fails here.
func TestMCPFastPathAnswersAsTheSDK(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	reg := toolstest.Registry(t, db.RoleDSN(t, "fast"), tools.Policy{}, 4)
	names := map[string]bool{}
	for _, info := range reg.Tools() {
		names[info.Name] = true
	}
	for _, structured := range []bool{false, true} {
		serve := func(noFast bool) *httptest.Server {
			srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Log: zerolog.Nop(), Tokens: runnertest.MCPTokens(),
				MCP: mcpapi.MCPOptions{StructuredContent: structured, SDKOnly: noFast}}))
			t.Cleanup(srv.Close)
			return srv
		}
		fast, sdk := serve(false), serve(true)
		for _, c := range fastCases() {
			post := func(base string) (int, string, string) {
				req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(c.body))
				token := c.token
				if token == "" {
					token = runnertest.AgentToken
				}
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				for k, v := range c.header {
					if v == "" {
						req.Header.Del(k)
					} else {
						req.Header.Set(k, v)
					}
				}
				if c.host != "" {
					req.Host = c.host
				}
				// The client's request has no listener address: the Host check is the foreign-host case's.
				tool, fastOK := mcpapi.TakesFastPath(req, []byte(c.body))
				taken := fastOK && c.host == "" && names[tool]
				if taken != c.fast {
					t.Errorf("%s: taken by the fast path = %v, want %v", c.name, taken, c.fast)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, resp.Header.Get("Content-Type"), string(fastMasks.ReplaceAll(body, []byte("<time>")))
			}
			fs, fct, fb := post(fast.URL)
			ss, sct, sb := post(sdk.URL)
			if fs != ss || fct != sct || fb != sb {
				t.Errorf("structured %v, %s: the paths differ\nfast: %d %s %s\nsdk:  %d %s %s", structured, c.name, fs, fct, fb, ss, sct, sb)
			}
			failed := fs >= 400 || strings.Contains(fb, `"isError":true`) || strings.Contains(fb, `,"error":{"code"`)
			if failed != c.wantErr {
				t.Errorf("structured %v, %s: failed = %v, want %v: %d %s", structured, c.name, failed, c.wantErr, fs, fb)
			}
		}
	}
}

// TestMCPFastPathCancel: a client that abandons a plain tools/call POST (a 2025-11-25 client, so
// the fast path answers it) stops its statement on the server: it leaves pg_stat_activity.
func TestMCPFastPathCancel(t *testing.T) {
	t.Parallel()
	f := newMCPFeatures(t)
	f.assertCancelStops(t, "cancel_me_fast", func(ctx context.Context, sql string) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_sql","arguments":{"sql":"` + sql + `"}}}`
		probe, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
		probe.Header.Set("Content-Type", "application/json")
		probe.Header.Set("Accept", "application/json, text/event-stream")
		if _, ok := mcpapi.TakesFastPath(probe, []byte(body)); !ok {
			t.Error("the call is not one the fast path takes")
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ddlToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
}
