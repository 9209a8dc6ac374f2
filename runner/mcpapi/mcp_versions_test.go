package mcpapi_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/runner/runnertest"
)

// mcpVersions are the protocol versions a client may speak to /mcp: none (no header) and every
// version the go-sdk offers.
func mcpVersions() []string { return append([]string{""}, mcp.SupportedProtocolVersions()...) }

// versionCase is one message of the cross-version differential test. body builds the message
// for a protocol version; fast says on which versions the fast path answers it: "all", "new"
// (2026-07-28 and later), "old" (before), or "" (never: the SDK answers).
type versionCase struct {
	name   string
	token  string
	body   func(v string) string
	header func(v string) map[string]string // over the client's headers for v; "" deletes
	only   string                           // "new" or "old": the versions the case is sent on
	fast   string
}

// withMeta is params with the 2026-07-28 _meta (caps as the client capabilities, extra as more
// members) on versions that carry it, and extra alone before.
func withMeta(v, params, caps, extra string) string {
	var members []string
	if v >= "2026-07-28" {
		members = append(members, `"io.modelcontextprotocol/clientCapabilities":`+caps, `"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"}`,
			`"io.modelcontextprotocol/protocolVersion":"`+v+`"`)
	}
	if extra != "" {
		members = append(members, extra)
	}
	if len(members) == 0 {
		return params
	}
	meta := `"_meta":{` + strings.Join(members, ",") + `}`
	if params == "" || params == "{}" {
		return `{` + meta + `}`
	}
	return `{` + meta + `,` + params[1:]
}

// msg is a JSON-RPC request of method with params (which withMeta completes for v).
func msg(id, method, params string) func(v string) string {
	return func(v string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + withMeta(v, params, `{}`, "") + `}`
	}
}

// versionsStateKey keys the request states of both servers of the differential test, so that
// their questions are the same bytes and the test can answer one (confirmStateOf).
var versionsStateKey = []byte("state key of the versions test, 32+ bytes")

// confirmStateOf is the requestState pgtools gives principal's question about tool with args
// (mcpapi confirmState) under versionsStateKey, for answering it.
func confirmStateOf(principal, tool, args string) string {
	h := hmac.New(sha256.New, versionsStateKey)
	h.Write([]byte("\x00" + principal + "\x00" + tool + "\x00" + args))
	return "pgtools-confirm-v2:" + hex.EncodeToString(h.Sum(nil))
}

func versionCases() []versionCase {
	call := func(id, tool, args string) func(v string) string {
		return msg(id, "tools/call", `{"name":"`+tool+`","arguments":`+args+`}`)
	}
	const elicit = `{"elicitation":{"form":{}}}`
	deleteBig := `{"table":"big","where":"id > $1","params":[0],"autocommit":true}`
	drop := `{"sql":"DROP TABLE doomed","mode":"write","autocommit":true}`
	return []versionCase{
		{name: "select", body: call("1", "select_query", `{"table":"orders","order_by":"id","limit":2}`), fast: "all"},
		{name: "select, string id", body: call(`"req-7"`, "select_query", `{"table":"orders","limit":1}`), fast: "all"},
		{name: "select, float id", body: call(`1.5`, "select_query", `{"table":"orders","limit":1}`), fast: "all"},
		{name: "select, columns format", body: call("2", "select_query", `{"table":"orders","format":"columns","limit":3}`), fast: "all"},
		{name: "text to escape", body: call("3", "execute_sql", `{"sql":"SELECT '<b>&amp;</b> \u2028 \u00e9 \\\\ \"q\"' AS t"}`), fast: "all"},
		{name: "no arguments", body: msg("4", "tools/call", `{"name":"describe_schema"}`), fast: "all"},
		{name: "null arguments", body: call("5", "describe_schema", `null`), fast: "all"},
		{name: "invalid arguments", body: call("6", "select_query", `{"table":"orders","limit":"ten"}`), fast: "all"},
		{name: "write without intent", body: call("8", "insert_data", `{"table":"orders","row":{"id":99,"status":"x"}}`), fast: "all"},
		{name: "tool hidden from the token", token: runnertest.ReadToken, body: call("9", "insert_data", `{"table":"orders","row":{"id":98,"status":"x"},"autocommit":true}`), fast: "all"},
		{name: "DROP without confirmation, no elicitation", token: ddlToken, body: call("10", "execute_sql", drop), fast: "all"},
		{name: "trace context in _meta", body: func(v string) string {
			return `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":` + withMeta(v, `{"name":"select_query","arguments":{"table":"orders","limit":1}}`, `{}`,
				`"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"k=v"`) + `}`
		}, fast: "all"},
		{name: "client that can answer questions", body: func(v string) string {
			return `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":` + withMeta(v, `{"name":"select_query","arguments":{"table":"orders","limit":1}}`, elicit, "") + `}`
		}, fast: "all"},
		// A question (multi-round-trip input request) instead of a result; nothing is written.
		{name: "delete over the row limit asks", token: ddlToken, only: "new", body: func(v string) string {
			return `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":` + withMeta(v, `{"name":"delete_data","arguments":`+deleteBig+`}`, elicit, "") + `}`
		}, fast: "new"},
		{name: "DROP asks", token: ddlToken, only: "new", body: func(v string) string {
			return `{"jsonrpc":"2.0","id":14,"method":"tools/call","params":` + withMeta(v, `{"name":"execute_sql","arguments":`+drop+`}`, elicit, "") + `}`
		}, fast: "new"},
		{name: "declined answer", token: ddlToken, only: "new", body: func(v string) string {
			return `{"jsonrpc":"2.0","id":15,"method":"tools/call","params":` + withMeta(v, `{"name":"delete_data","arguments":`+deleteBig+
				`,"inputResponses":{"pgtools_confirm":{"action":"decline"}},"requestState":"`+confirmStateOf("ddl", "delete_data", deleteBig)+`"}`, elicit, "") + `}`
		}},

		// Everything else is the SDK's, and answered as it answers.
		{name: "progress token", body: func(v string) string {
			return `{"jsonrpc":"2.0","id":20,"method":"tools/call","params":` + withMeta(v, `{"name":"select_query","arguments":{"table":"orders","limit":1}}`, `{}`, `"progressToken":"p1"`) + `}`
		}},
		{name: "unknown tool", body: call("21", "drop_everything", `{}`)},
		{name: "arguments not an object", body: call("22", "select_query", `[1]`)},
		{name: "extra member", body: func(v string) string {
			return strings.TrimSuffix(call("23", "select_query", `{}`)(v), "}") + `,"extra":1}`
		}},
		{name: "tools/list", body: msg("24", "tools/list", `{}`)},
		{name: "ping", body: msg("25", "ping", `{}`)},
		{name: "server/discover", body: msg("26", "server/discover", `{}`)},
		{name: "initialize", only: "old", body: func(v string) string {
			return `{"jsonrpc":"2.0","id":27,"method":"initialize","params":{"protocolVersion":"` + cmpOr(v, "2025-03-26") + `","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		}},
		{name: "notification", body: func(string) string { return `{"jsonrpc":"2.0","method":"notifications/initialized"}` }},
		{name: "resources/list", body: msg("28", "resources/list", `{}`)},
		{name: "prompts/list", body: msg("29", "prompts/list", `{}`)},
		{name: "unknown method", body: msg("30", "tools/nope", `{}`)},
		{name: "not JSON", body: func(string) string { return `{"jsonrpc":` }},
		{name: "batch", body: func(v string) string {
			return `[` + call("31", "select_query", `{"table":"orders","limit":1}`)(v) + `]`
		}},
		{name: "2026-07-28 metadata on an older version", only: "old", body: func(v string) string {
			return `{"jsonrpc":"2.0","id":32,"method":"tools/call","params":` + withMeta("2026-07-28", `{"name":"select_query","arguments":{"table":"orders","limit":1}}`, `{}`, "") + `}`
		}},
		{name: "log level in _meta", only: "new", body: func(v string) string {
			return `{"jsonrpc":"2.0","id":33,"method":"tools/call","params":` + withMeta(v, `{"name":"select_query","arguments":{"table":"orders","limit":1}}`, `{}`, `"io.modelcontextprotocol/logLevel":"debug"`) + `}`
		}},
		// What 2026-07-28 requires of a request, each missing or wrong.
		{name: "no _meta", only: "new", body: func(string) string {
			return `{"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"select_query","arguments":{"table":"orders","limit":1}}}`
		}},
		{name: "no capabilities", only: "new", body: func(v string) string {
			return `{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `"},"name":"select_query","arguments":{}}}`
		}},
		{name: "capabilities not an object", only: "new", body: func(v string) string {
			return `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `","io.modelcontextprotocol/clientCapabilities":{"elicitation":"yes"}},"name":"select_query","arguments":{}}}`
		}},
		{name: "client info of the wrong type", only: "new", body: func(v string) string {
			return `{"jsonrpc":"2.0","id":43,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + v + `","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":5}},"name":"select_query","arguments":{}}}`
		}},
		{name: "_meta version other than the header's", only: "new", body: func(string) string {
			return `{"jsonrpc":"2.0","id":44,"method":"tools/call","params":` + withMeta("2026-07-29", `{"name":"select_query","arguments":{}}`, `{}`, "") + `}`
		}},
		{name: "Mcp-Name other than the body's", only: "new", body: call("45", "select_query", `{"table":"orders","limit":1}`),
			header: func(string) map[string]string { return map[string]string{"Mcp-Name": "execute_sql"} }},
		{name: "no Mcp-Name", only: "new", body: call("46", "select_query", `{"table":"orders","limit":1}`),
			header: func(string) map[string]string { return map[string]string{"Mcp-Name": ""} }},
		{name: "Mcp-Method other than the body's", only: "new", body: call("47", "select_query", `{"table":"orders","limit":1}`),
			header: func(string) map[string]string { return map[string]string{"Mcp-Method": "tools/list"} }},
		{name: "no Mcp-Method", only: "new", body: call("48", "select_query", `{"table":"orders","limit":1}`),
			header: func(string) map[string]string { return map[string]string{"Mcp-Method": ""} }},
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestMCPFastPathAnswersAsTheSDKOnEveryVersion sends every message kind the server answers, on
// every protocol version the go-sdk offers (and with no version header), to /mcp twice: once with
// the fast path, once through the SDK alone. Status, Content-Type, Cache-Control and body must
// be the same (execution times aside), with and without structured content. It also checks which
// messages the fast path takes, so a change that quietly sends a version to the SDK (or takes a
// message it should not) fails here.
func TestMCPFastPathAnswersAsTheSDKOnEveryVersion(t *testing.T) {
	t.Parallel()
	f := newMCPFeatures(t)
	names := map[string]bool{}
	for _, info := range f.reg.Tools() {
		names[info.Name] = true
	}
	tokens := append(runnertest.MCPTokens(), auth.Token{Secret: ddlToken, Name: "ddl", Scopes: []string{"read", "write", "ddl"}})
	asked := 0
	for _, structured := range []bool{false, true} {
		serve := func(sdkOnly bool) *httptest.Server {
			srv := httptest.NewServer(httpapi.NewHandlerWith(f.reg, httpapi.HandlerOptions{Log: zerolog.Nop(), Tokens: tokens,
				MCP: mcpapi.MCPOptions{StructuredContent: structured, SDKOnly: sdkOnly, ConfirmRowsOver: 10, StateKey: versionsStateKey}}))
			t.Cleanup(srv.Close)
			return srv
		}
		fast, sdk := serve(false), serve(true)
		for _, v := range mcpVersions() {
			isNew := v >= "2026-07-28"
			for _, c := range versionCases() {
				if c.only == "new" && !isNew || c.only == "old" && isNew {
					continue
				}
				body := c.body(v)
				var header map[string]string
				if c.header != nil {
					header = c.header(v)
				}
				post := func(base string) (int, http.Header, string) {
					req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+cmpOr(c.token, runnertest.AgentToken))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					if v != "" {
						req.Header.Set("Mcp-Protocol-Version", v)
					}
					if isNew {
						setMethodHeaders(req, body)
					}
					for k, val := range header {
						if val == "" {
							req.Header.Del(k)
						} else {
							req.Header.Set(k, val)
						}
					}
					tool, fastOK := mcpapi.TakesFastPath(req, []byte(body))
					taken := fastOK && names[tool]
					want := c.fast == "all" || c.fast == "new" && isNew || c.fast == "old" && !isNew
					if taken != want {
						t.Errorf("version %q, %s: taken by the fast path = %v, want %v", v, c.name, taken, want)
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatalf("%s: %v", c.name, err)
					}
					defer resp.Body.Close()
					b, _ := io.ReadAll(resp.Body)
					return resp.StatusCode, resp.Header, string(fastMasks.ReplaceAll(b, []byte("<time>")))
				}
				fs, fh, fb := post(fast.URL)
				ss, sh, sb := post(sdk.URL)
				for _, h := range []string{"Content-Type", "Cache-Control"} {
					if fh.Get(h) != sh.Get(h) {
						t.Errorf("structured %v, version %q, %s: %s %q (fast) vs %q (sdk)", structured, v, c.name, h, fh.Get(h), sh.Get(h))
					}
				}
				if fs != ss || fb != sb {
					t.Errorf("structured %v, version %q, %s: the paths differ\nfast: %d %s\nsdk:  %d %s", structured, v, c.name, fs, fb, ss, sb)
				}
				if strings.Contains(fb, `"resultType":"input_required"`) {
					asked++
				}
			}
		}
	}
	if asked != 4 { // two questions, with and without structured content
		t.Errorf("%d answers asked the human, want 4: the question cases no longer ask", asked)
	}
	if n := f.db.QueryInt(t, `SELECT (SELECT count(*) FROM big) + (SELECT count(*) FROM pg_tables WHERE tablename = 'doomed')`); n != 151 {
		t.Errorf("big rows + doomed table = %d, want 151: a question or a refusal changed data", n)
	}
}

// setMethodHeaders sets Mcp-Method and Mcp-Name from body, as a 2026-07-28 client does.
func setMethodHeaders(req *http.Request, body string) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal([]byte(body), &m) != nil {
		return
	}
	req.Header.Set("Mcp-Method", m.Method)
	if m.Params.Name != "" {
		req.Header.Set("Mcp-Name", m.Params.Name)
	}
}

// TestMCPFastPathVersions: the fast path knows every protocol version the go-sdk offers, and
// only those (a version it does not list is the SDK's to answer, which would be slow, not wrong).
func TestMCPFastPathVersions(t *testing.T) {
	t.Parallel()
	for _, v := range mcpVersions() {
		req, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if v != "" {
			req.Header.Set("Mcp-Protocol-Version", v)
		}
		body := msg("1", "tools/call", `{"name":"select_query","arguments":{}}`)(v)
		if v >= "2026-07-28" {
			setMethodHeaders(req, body)
		}
		if _, ok := mcpapi.TakesFastPath(req, []byte(body)); !ok {
			t.Errorf("version %q: a plain tools/call is not taken by the fast path", v)
		}
	}
	for _, v := range []string{"1999-01-01", "2026-07-29", "2025-11-26"} {
		if slices.Contains(mcp.SupportedProtocolVersions(), v) {
			continue
		}
		req, _ := http.NewRequest(http.MethodPost, "/mcp", nil)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", v)
		if _, ok := mcpapi.TakesFastPath(req, []byte(msg("1", "tools/call", `{"name":"select_query","arguments":{}}`)(v))); ok {
			t.Errorf("version %q, which the go-sdk does not offer, is taken by the fast path", v)
		}
	}
}
