package mcpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// mcpPOST sends body to base/mcp with a client's headers (version v; on 2026-07-28 also the
// method and name headers the body implies) and returns the status and the body; an SSE answer
// is reduced to its last data line.
func mcpPOST(t *testing.T, base, token, v, body string, header map[string]string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", v)
	if v >= "2026-07-28" {
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		_ = json.Unmarshal([]byte(body), &msg)
		req.Header.Set("Mcp-Method", msg.Method)
		if msg.Params.Name != "" {
			req.Header.Set("Mcp-Name", msg.Params.Name)
		}
	}
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var last []byte
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
				last = append([]byte(nil), d...)
			}
		}
		b = last
	}
	return resp.StatusCode, b
}

// meta2026 is the _meta a 2026-07-28 request carries (SEP-2575), as the go-sdk client sends it.
const meta2026 = `{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"t","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`

// paramsFor returns params with the _meta that version v needs added.
func paramsFor(v, params string) string {
	if v < "2026-07-28" {
		return params
	}
	if params == "{}" {
		return `{"_meta":` + meta2026 + `}`
	}
	return `{"_meta":` + meta2026 + `,` + params[1:]
}

// rawID is the id member of an answer, byte for byte.
func rawID(t *testing.T, answer []byte) string {
	t.Helper()
	var env struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(answer, &env); err != nil {
		t.Fatalf("answer is not a JSON-RPC message: %v: %s", err, answer)
	}
	return string(env.ID)
}

// TestMCPIDsEchoedExactly: every JSON-RPC id comes back as it was sent, byte for byte (numbers
// keep their text, strings stay strings with their escapes), for every kind of message, on every
// protocol version, on both paths (the fast path and the SDK), also when the answer is an SSE
// stream (a call with a progress token) or a protocol error.
func TestMCPIDsEchoedExactly(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	reg := toolstest.Registry(t, db.RoleDSN(t, "ids"), tools.Policy{}, 4)
	ids := []string{`1.5`, `1e2`, `1E+2`, `-0`, `0`, `7`, `-3`, `1.0`, `12345678901234567890`, `9007199254740993`, `-9223372036854775809`,
		`"req-7"`, `""`, `"a\u00e9\"<b>&"`, `"\u0041"`, `"é ü"`, `"x/y"`, `"pgtools-id-0"`}
	kinds := map[string]string{
		"tools/call":                 `{"name":"select_query","arguments":{"table":"orders","limit":1}}`,
		"tools/call with progress":   `{"name":"select_query","arguments":{"table":"orders","limit":1},"_meta":{"progressToken":"p"}}`,
		"tools/call of unknown tool": `{"name":"nope","arguments":{}}`,
		"tools/list":                 `{}`,
		"ping":                       `{}`,
		"unknown method":             `{}`,
	}
	for _, sdkOnly := range []bool{false, true} {
		srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Log: zerolog.Nop(), Tokens: runnertest.MCPTokens(),
			MCP: mcpapi.MCPOptions{SDKOnly: sdkOnly}}))
		t.Cleanup(srv.Close)
		for _, v := range []string{"2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
			for kind, params := range kinds {
				method, _, _ := strings.Cut(kind, " ")
				if kind == "unknown method" {
					if v < "2026-07-28" {
						continue // the SDK answers a plain-text 400 there, with no id to compare
					}
					method = "tools/nope"
				}
				if kind == "tools/call with progress" && v >= "2026-07-28" {
					params = strings.Replace(params, `"_meta":{`, `"_meta":{`+meta2026[1:len(meta2026)-1]+`,`, 1)
				} else {
					params = paramsFor(v, params)
				}
				for _, id := range ids {
					body := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + params + `}`
					status, answer := mcpPOST(t, srv.URL, runnertest.AgentToken, v, body, nil)
					if got := rawID(t, answer); got != id {
						t.Errorf("sdkOnly %v, %s, %s: id %s answered as %s (status %d): %.200s", sdkOnly, v, kind, id, got, status, answer)
					}
				}
			}
		}
		// A batch (2025-03-26 and before): each answer keeps its own id. JSON-RPC lets a server
		// answer a batch in any order (the SDK does so when it runs them at once), so the ids are
		// compared as a set: each sent id exactly once, and no stand-in.
		batch := `[{"jsonrpc":"2.0","id":1.5,"method":"ping"},{"jsonrpc":"2.0","id":"b","method":"ping"},{"jsonrpc":"2.0","id":2e0,"method":"ping"}]`
		_, answer := mcpPOST(t, srv.URL, runnertest.AgentToken, "2025-03-26", batch, nil)
		var answers []json.RawMessage
		if err := json.Unmarshal(answer, &answers); err != nil || len(answers) != 3 {
			t.Fatalf("batch answer: %v: %s", err, answer)
		}
		want := map[string]int{`1.5`: 1, `"b"`: 1, `2e0`: 1}
		for _, a := range answers {
			want[rawID(t, a)]--
		}
		for id, n := range want {
			if n != 0 {
				t.Errorf("sdkOnly %v, batch: id %s answered %d times, want once: %s", sdkOnly, id, 1-n, answer)
			}
		}
	}
}

// TestMCPOrigin: a request whose Origin is neither the host /mcp was reached at nor one of
// mcp.allowed_origins is refused with 403, like a foreign Host, before any message is read; one
// without Origin (a client that is not a browser) and an allowed one are served.
func TestMCPOrigin(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	reg := toolstest.Registry(t, db.RoleDSN(t, "origin"), tools.Policy{}, 2)
	srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Log: zerolog.Nop(), Tokens: runnertest.MCPTokens(),
		MCP: mcpapi.MCPOptions{AllowedOrigins: []string{"https://App.Example.com", "http://localhost:3000/"}}}))
	t.Cleanup(srv.Close)
	self := strings.TrimPrefix(srv.URL, "http://")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"select_query","arguments":{"table":"orders","limit":1}}}`
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	cases := []struct {
		origin string // "" sends none
		ok     bool
	}{
		{"", true},
		{"http://" + self, true},
		{"HTTP://" + strings.ToUpper(self), true},
		{"https://app.example.com", true},
		{"https://app.example.com:443", true},
		{"http://localhost:3000", true},
		{"https://evil.example", false},
		{"http://app.example.com", false}, // another scheme is another origin
		{"https://app.example.com:8443", false},
		{"https://" + self + ".evil.example", false},
		{"null", false},
		{"http://" + self + "/path", false},
		{"*", false},
		{"http://localhost:3001", false},
	}
	for _, c := range cases {
		for _, body := range []string{call, list} {
			for _, v := range []string{"2025-11-25", "2026-07-28"} {
				b := body
				if v >= "2026-07-28" {
					b = strings.Replace(b, `"method":"tools/list"`, `"method":"tools/list","params":{"_meta":`+meta2026+`}`, 1)
					b = strings.Replace(b, `"params":{"name"`, `"params":{"_meta":`+meta2026+`,"name"`, 1)
				}
				status, answer := mcpPOST(t, srv.URL, runnertest.AgentToken, v, b, map[string]string{"Origin": c.origin})
				if c.ok && status != http.StatusOK {
					t.Errorf("Origin %q, %s: status %d, want 200: %s", c.origin, v, status, answer)
				}
				if !c.ok && (status != http.StatusForbidden || !strings.Contains(string(answer), "Origin")) {
					t.Errorf("Origin %q, %s: status %d, want 403 naming Origin: %s", c.origin, v, status, answer)
				}
			}
		}
	}
	// Two Origin headers are refused: no browser sends that.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(call))
	req.Header.Set("Authorization", "Bearer "+runnertest.AgentToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Add("Origin", "https://app.example.com")
	req.Header.Add("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("two Origin headers: status %d, want 403", resp.StatusCode)
	}
}

// TestMCPStdioIDsEchoedExactly: on stdio too every answer carries its request's id byte for byte
// (a batch too, so the client speaks 2025-03-26, the last version with batches), and a
// notifications/cancelled naming such an id (1.5) cancels that request.
func TestMCPStdioIDsEchoedExactly(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	reg := toolstest.Registry(t, db.RoleDSN(t, "stdioids"), tools.Policy{}, 4)
	ids := []string{`1.5e0`, `1e2`, `-0`, `12345678901234567890`, `"\u0041"`, `7`, `"x"`}
	lines := []string{`{"jsonrpc":"2.0","id":` + ids[0] + `,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"file","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":` + ids[1] + `,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":` + ids[2] + `,"method":"tools/call","params":{"name":"select_query","arguments":{"table":"orders"}}}`,
		`{"jsonrpc":"2.0","id":` + ids[3] + `,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":` + ids[4] + `,"method":"tools/call","params":{"name":"nope","arguments":{}}}`,
		`[{"jsonrpc":"2.0","id":` + ids[5] + `,"method":"ping"},{"jsonrpc":"2.0","id":` + ids[6] + `,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"execute_sql","arguments":{"sql":"select pg_sleep(3) is null as slept"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1.5,"reason":"test"}}`,
	}
	var out, logs pgtest.SyncBuffer
	p := tools.Principal{Name: "mcp-stdio", Scopes: []string{"read"}}
	// A guard, not a measure: an answer that never settles its request would wait for ever.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := mcpapi.ServeMCPStdio(ctx, reg, p, io.NopCloser(strings.NewReader(strings.Join(lines, "\n")+"\n")), &out, zerolog.New(&logs), mcpapi.MCPOptions{}); err != nil {
		t.Fatalf("ServeMCPStdio: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(out.String())), []byte("\n")) {
		var msgs []json.RawMessage
		if bytes.HasPrefix(line, []byte("[")) {
			_ = json.Unmarshal(line, &msgs)
		} else {
			msgs = []json.RawMessage{line}
		}
		for _, m := range msgs {
			id := rawID(t, m)
			seen[id] = true
			if id == "1.5" && strings.Contains(string(m), "slept") {
				t.Errorf("the cancelled call ran to its end: %s", m)
			}
			if strings.Contains(id, "pgtools-id") {
				t.Errorf("a stand-in id went out: %s", m)
			}
		}
	}
	for _, id := range ids {
		if !seen[id] {
			t.Errorf("no answer with id %s; output:\n%s", id, out.String())
		}
	}
}
