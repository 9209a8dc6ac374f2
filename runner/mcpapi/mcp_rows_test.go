package mcpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/runnertest"
)

// rowsFixture is a 100-row table of several types, the size issue 16 measures a result at.
const rowsFixture = `CREATE TABLE items AS SELECT i AS id, 'item number ' || i AS name, (i * 1.25)::numeric(10,2) AS price,
	DATE '2024-01-01' + i AS created, i % 3 = 0 AS active, NULLIF(i % 5, 0) AS bucket FROM generate_series(1, 100) i`

// TestMCPRowsOnce: by default an MCP result carries its rows once, as the text item every client
// shows its model, and tools/list has no outputSchema; with the config's mcp.structured_content
// (through Config, NewServer and /mcp as pgtools serve wires it) every tool has its outputSchema
// and every result its object as structuredContent too. It prints the o200k tokens of a 100-row
// tools/call result either way, and fails if the default is not about half of the doubled one.
func TestMCPRowsOnce(t *testing.T) {
	t.Parallel()
	dsn := runnertest.NewRoleDB(t, "mcprows", rowsFixture, "")
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"select_query","arguments":{"table":"items","order_by":"id"}}}`
	tokens := map[bool]int{}
	for _, structured := range []bool{false, true} {
		cfg := &config.Config{Tokens: []auth.Token{{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read"}}},
			Databases: map[string]config.DatabaseConfig{"default": {URL: dsn}}, MCP: config.MCPConfig{StructuredContent: structured}}
		f := runnertest.NewServerFixture(t, cfg)

		status, body, _ := apitest.MCPPost(t, f.HTTP.URL, runnertest.AllToken, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		var list struct {
			Result struct {
				Tools []map[string]json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &list) != nil || len(list.Result.Tools) == 0 {
			t.Fatalf("tools/list: %d %s", status, body)
		}
		for _, tool := range list.Result.Tools {
			if _, has := tool["outputSchema"]; has != structured {
				t.Errorf("structured_content %v: tool %s has outputSchema: %v", structured, tool["name"], has)
			}
		}

		status, body, _ = apitest.MCPPost(t, f.HTTP.URL, runnertest.AllToken, call)
		var resp struct {
			Result map[string]json.RawMessage `json:"result"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &resp) != nil {
			t.Fatalf("tools/call: %d %s", status, body)
		}
		var content []struct{ Type, Text string }
		if err := json.Unmarshal(resp.Result["content"], &content); err != nil || len(content) != 1 || content[0].Type != "text" {
			t.Fatalf("content: %s", resp.Result["content"])
		}
		var fromText map[string]any
		if err := json.Unmarshal([]byte(content[0].Text), &fromText); err != nil || fromText["rowCount"] != float64(100) {
			t.Fatalf("text item is not the 100-row answer: %.300s", content[0].Text)
		}
		sc, has := resp.Result["structuredContent"]
		if has != structured {
			t.Fatalf("structured_content %v: the result has structuredContent: %v", structured, has)
		}
		if has {
			var obj map[string]any
			if err := json.Unmarshal(sc, &obj); err != nil || !reflect.DeepEqual(obj, fromText) {
				t.Fatalf("structuredContent is not the text item's object")
			}
		}
		var compact bytes.Buffer
		raw, _ := json.Marshal(resp.Result)
		if err := json.Compact(&compact, raw); err != nil {
			t.Fatal(err)
		}
		tokens[structured] = o200k(t, compact.Bytes())
	}
	t.Logf("select_query, 100 rows, tools/call result: %d o200k tokens (default: text only), %d with mcp.structured_content",
		tokens[false], tokens[true])
	if r := float64(tokens[false]) / float64(tokens[true]); r > 0.55 {
		t.Errorf("the default result costs %.2f of the doubled one; want about half (≤ 0.55)", r)
	}
}

// TestMCPStructuredContentConfig: the config file's mcp.structured_content reaches Config and
// check-config's effective config, and a misspelled key is refused naming it.
func TestMCPStructuredContentConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const db = `"databases": {"default": {"url": "postgres://pgtools@127.0.0.1:5432/app"}}`
	for _, c := range []struct {
		doc  string
		want bool
	}{{`{` + db + `}`, false}, {`{"mcp": {"structured_content": true}, ` + db + `}`, true}} {
		cfg, err := config.LoadConfigFile(write("ok.json", c.doc))
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
		var eff struct {
			MCP struct {
				StructuredContent *bool `json:"structured_content"`
			} `json:"mcp"`
		}
		if err := json.Unmarshal(raw, &eff); err != nil {
			t.Fatal(err)
		}
		if cfg.MCP.StructuredContent != c.want || eff.MCP.StructuredContent == nil || *eff.MCP.StructuredContent != c.want {
			t.Errorf("%s: MCPStructuredContent %v, effective config %s", c.doc, cfg.MCP.StructuredContent, raw)
		}
	}
	_, err := config.LoadConfigFile(write("bad.json", `{"mcp": {"structured": true}, `+db+`}`))
	if err == nil || !strings.Contains(err.Error(), "structured") {
		t.Fatalf("a misspelled mcp key: %v", err)
	}
}
