package mcpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// referenceFastCall is parseFastCall's meaning written the slow, obvious way: the whole message
// decoded into maps, exact member names, each once.
func referenceFastCall(body []byte) (fastCall, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var msg map[string]json.RawMessage
	if dec.Decode(&msg) != nil || dec.More() || len(msg) != 4 || string(msg["jsonrpc"]) != `"2.0"` || string(msg["method"]) != `"tools/call"` {
		return fastCall{}, false
	}
	id := msg["id"]
	if !isID(id) {
		return fastCall{}, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil {
		return fastCall{}, false
	}
	name := plainString(params["name"])
	args, hasArgs := params["arguments"]
	metaRaw, hasMeta := params["_meta"]
	want := 1
	if hasArgs {
		want++
	}
	if hasMeta {
		want++
	}
	if name == "" || len(params) != want || hasArgs && args[0] != '{' && string(args) != "null" {
		return fastCall{}, false
	}
	var c fastCall
	if hasMeta {
		var meta map[string]json.RawMessage
		if json.Unmarshal(metaRaw, &meta) != nil {
			return fastCall{}, false
		}
		for k, v := range meta {
			switch k {
			case "io.modelcontextprotocol/protocolVersion":
				c.meta.version = plainString(v)
				if c.meta.version == "" {
					return fastCall{}, false
				}
			case "io.modelcontextprotocol/clientInfo", "io.modelcontextprotocol/clientCapabilities":
				if v[0] != '{' {
					return fastCall{}, false
				}
				if k == "io.modelcontextprotocol/clientInfo" {
					c.meta.clientInfo = v
				} else {
					c.meta.caps = v
				}
			case "traceparent":
				if c.meta.traceparent = plainString(v); c.meta.traceparent == "" {
					return fastCall{}, false
				}
			case "tracestate":
				if c.meta.tracestate = plainString(v); c.meta.tracestate == "" && string(v) != `""` {
					return fastCall{}, false
				}
			default:
				return fastCall{}, false
			}
		}
	}
	c.id, c.tool = id, name
	if hasArgs {
		c.args = args
	}
	return c, true
}

// TestParseFastCall: the canonical plain calls in any member order and spacing are taken, with
// their id, name and arguments as sent; anything else (repeated, escaped or differently cased
// members, extra members, other methods, batches) is not. Decoding into maps would also let a
// repeated member through (the last wins), which is why the reference refuses fewer; the
// duplicate cases are checked against the scanner alone.
func TestParseFastCall(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		body, id, tool, args string
		ok                   bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"select_query","arguments":{"table":"t"}}}`, "1", "select_query", `{"table":"t"}`, true},
		{` { "params" : { "arguments" : { "sql" : "select '}' , \"{\" " } , "name" : "execute_sql" } , "id" : "a-1" , "method" : "tools/call" , "jsonrpc" : "2.0" } `, `"a-1"`, "execute_sql", `{ "sql" : "select '}' , \"{\" " }`, true},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}`, "2", "x", "", true},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":null}}`, "2", "x", "null", true},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,{"b":"]"}]}}}`, "2", "x", `{"a":[1,{"b":"]"}]}`, true},
		{`{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"x"}}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","name":"y"}}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"na\u006de":"x"}}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x\u0041"}}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"x"}}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":1}}}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":"x"}}`, "1", "x", "", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},"name":"x"}}`, "1", "x", "", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":[]},"name":"x"}}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"traceparent":"a","traceparent":"b"},"name":"x"}}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{},"_meta":{},"name":"x"}}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/logLevel":"debug"},"name":"x"}}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "", "", "", false},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}`, "", "", "", false},
		{`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}]`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":[1]}}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}} {}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x"}}`, "1.5", "x", "", true},
		{`{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}`, "", "", "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":""}}`, "", "", "", false},
	} {
		got, ok := parseFastCall([]byte(c.body))
		if ok != c.ok || ok && (string(got.id) != c.id || got.tool != c.tool || string(got.args) != c.args) {
			t.Errorf("%s: got %v %q %q %q, want %v %q %q %q", c.body, ok, got.id, got.tool, got.args, c.ok, c.id, c.tool, c.args)
		}
	}
}

// FuzzParseFastCall: whatever the scanner takes, the obvious decoding takes too, with the same
// id, tool and arguments; so the fast path never reads a message otherwise than the SDK would.
func FuzzParseFastCall(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"select_query","arguments":{"table":"orders","limit":2}}}`,
		`{"jsonrpc":"2.0","id":"req-7","method":"tools/call","params":{"name":"execute_sql","arguments":{"sql":"SELECT '<b>&amp;</b> \u2028' AS t"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"describe_schema"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"describe_schema","arguments":null}}`,
		`{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"select_query","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"select_query","arguments":{},"_meta":{"progressToken":"p1"}}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}]`,
		`{"jsonrpc":`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},"name":"select_query","arguments":{"a":1}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Add([]byte(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"arguments":{"a":"\"}"},"name":"n"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := parseFastCall(body)
		if !ok {
			return
		}
		want, wok := referenceFastCall(body)
		if !wok || string(got.id) != string(want.id) || got.tool != want.tool || string(got.args) != string(want.args) ||
			got.meta.version != want.meta.version || string(got.meta.caps) != string(want.meta.caps) || string(got.meta.clientInfo) != string(want.meta.clientInfo) ||
			got.meta.traceparent != want.meta.traceparent || got.meta.tracestate != want.meta.tracestate {
			t.Fatalf("%q: scanner %q %q %q; reference %v %q %q %q", body, got.id, got.tool, got.args, wok, want.id, want.tool, want.args)
		}
	})
}

// TestMCPFastPathRefusesForeignHosts: on a loopback listener, a request whose Host is not
// loopback (DNS rebinding) is never answered by the fast path; the SDK refuses it with 403.
func TestMCPFastPathRefusesForeignHosts(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(nil))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for host, want := range map[string]bool{"127.0.0.1:8080": true, "localhost:8080": true, "[::1]:8080": true,
		"rebind.example:8080": false, "LOCALHOST:8080": false, "127.0.0.1.nip.io:8080": false} {
		r := req.WithContext(context.WithValue(t.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}))
		r.Host = host
		if got := fastHeadersOK(r); got != want {
			t.Errorf("Host %s on a loopback listener: fast path %v, want %v", host, got, want)
		}
	}
}

// TestFastProtocolVersions walks every entry of fastProtocolVersions: each is a version the
// go-sdk offers (or none, the header's absence), and carries per-request metadata exactly from
// 2026-07-28 on.
func TestFastProtocolVersions(t *testing.T) {
	t.Parallel()
	offered := map[string]bool{"": true}
	for _, v := range mcp.SupportedProtocolVersions() {
		offered[v] = true
	}
	for v, perRequest := range fastProtocolVersions {
		if !offered[v] {
			t.Errorf("fast path version %q is not offered by the go-sdk", v)
		}
		if perRequest != (v >= "2026-07-28") {
			t.Errorf("fast path version %q: per-request metadata %v", v, perRequest)
		}
	}
	if len(fastProtocolVersions) != len(offered) {
		t.Errorf("the fast path knows %d versions, the go-sdk offers %d (and none)", len(fastProtocolVersions), len(offered)-1)
	}
}
