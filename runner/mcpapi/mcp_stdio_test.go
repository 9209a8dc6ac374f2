package mcpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// TestMCPStdioPiped sends a whole conversation at once and then ends the input, as
// `pgtools mcp < requests.jsonl` does: every request is answered before ServeMCPStdio returns,
// the slow call included, and none is logged as cancelled.
func TestMCPStdioPiped(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	reg := toolstest.Registry(t, db.RoleDSN(t, "mcp"), tools.Policy{}, 4)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"file","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"select_query","arguments":{"table":"orders"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"execute_sql","arguments":{"sql":"select pg_sleep(0.5) is null as slept"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"select_query","arguments":{"table":"nope"}}}`,
	}, "\n") + "\n"
	var out, logs pgtest.SyncBuffer
	p := tools.Principal{Name: "mcp-stdio", Scopes: []string{"read"}}
	if err := mcpapi.ServeMCPStdio(t.Context(), reg, p, io.NopCloser(strings.NewReader(in)), &out, zerolog.New(&logs), mcpapi.MCPOptions{}); err != nil {
		t.Fatalf("ServeMCPStdio: %v", err)
	}
	answered := map[int]string{}
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(out.String())), []byte("\n")) {
		var m struct {
			ID     int             `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(line, &m); err != nil || m.Result == nil {
			t.Fatalf("not a result: %s", line)
		}
		answered[m.ID] = string(m.Result)
	}
	for id := 1; id <= 5; id++ {
		if answered[id] == "" {
			t.Errorf("request %d was not answered; output:\n%s\nlogs:\n%s", id, out.String(), logs.String())
		}
	}
	if !strings.Contains(answered[4], `\"slept\":false`) || !strings.Contains(answered[5], "invalid_table") {
		t.Errorf("answers: %v", answered)
	}
	if strings.Contains(logs.String(), "timeout") {
		t.Errorf("a call was cancelled:\n%s", logs.String())
	}
}

// TestMCPStdioDuplicateKeysRefused: on stdio too, a line that names a key twice in one object
// (here the method, which the go-sdk would read as its last value) is answered with an
// invalid_arguments error naming the key and never reaches the SDK; the lines around it are
// served as usual.
func TestMCPStdioDuplicateKeysRefused(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, mcptest.Fixture)
	reg := toolstest.Registry(t, db.RoleDSN(t, "mcp"), tools.Policy{}, 4)
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"file","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping","method":"tools/call","params":{"name":"select_query","arguments":{"table":"orders"}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
	}, "\n") + "\n"
	var out, logs pgtest.SyncBuffer
	p := tools.Principal{Name: "mcp-stdio", Scopes: []string{"read"}}
	if err := mcpapi.ServeMCPStdio(t.Context(), reg, p, io.NopCloser(strings.NewReader(in)), &out, zerolog.New(&logs), mcpapi.MCPOptions{}); err != nil {
		t.Fatalf("ServeMCPStdio: %v", err)
	}
	var refused, results int
	for _, line := range bytes.Split(bytes.TrimSpace([]byte(out.String())), []byte("\n")) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  struct {
				Data struct {
					ErrorType string `json:"errorType"`
					Error     string `json:"error"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		switch {
		case m.Result != nil:
			results++
		case m.Error.Data.ErrorType == "invalid_arguments" && strings.Contains(m.Error.Data.Error, `"method" appears more than once`):
			refused++
		default:
			t.Errorf("unexpected line: %s", line)
		}
	}
	if refused != 1 || results != 2 {
		t.Errorf("%d refused, %d results, want 1 and 2; output:\n%s", refused, results, out.String())
	}
}
