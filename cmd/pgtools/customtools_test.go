package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/n8n/brokertest"
	"github.com/pgtools/pgtools/tools/pgtest"
)

const (
	ctAgentToken  = "custom-agent-token-0123456789"
	ctReaderToken = "custom-reader-token-0123456789"
)

// customToolsConfig is a config file serving dsn with an agent (read, write) and a reader token
// and three custom tools: two reads (a string and an integer-array parameter) and a write.
func customToolsConfig(dsn string) string {
	return `{"tokens": [
	    {"name": "agent", "token": "` + ctAgentToken + `", "scopes": ["read", "write"]},
	    {"name": "reader", "token": "` + ctReaderToken + `", "scopes": ["read"]}],
	  "databases": {"default": {"url": "` + dsn + `"}},
	  "custom_tools": [
	    {"name": "orders_by_status", "description": "Orders of one status.",
	     "sql": "SELECT id, customer_id, status FROM orders WHERE status = $1 ORDER BY id",
	     "parameters": [{"name": "status", "type": "string", "required": true, "maxLength": 40}]},
	    {"name": "orders_of_customers", "description": "Orders of some customers.",
	     "sql": "SELECT id FROM orders WHERE customer_id = ANY($1) ORDER BY id",
	     "parameters": [{"name": "ids", "type": "array", "items": {"type": "integer"}, "required": true}]},
	    {"name": "set_note", "description": "Set the note of one order.", "mode": "write",
	     "sql": "UPDATE orders SET note = $2 WHERE id = $1 RETURNING id, note",
	     "parameters": [{"name": "order_id", "type": "integer", "required": true}, {"name": "note", "type": "string", "required": true}]}]}`
}

// TestCustomToolsEndToEnd runs pgtools serve with custom_tools from a config file and calls them
// on every transport: HTTP (list, call, OpenAPI), MCP with the go-sdk client, and an n8n broker.
// Values are bound, never spliced; scopes and write intent apply as to the built-in tools.
func TestCustomToolsEndToEnd(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL, note text);
	  INSERT INTO orders SELECT i, 1 + i % 3, CASE WHEN i % 2 = 0 THEN 'paid' ELSE 'pending' END, NULL FROM generate_series(1, 9) i`)
	dsn := db.RoleDSN(t, "ct") // SELECT only: the write tool needs UPDATE
	db.Exec(t, "GRANT UPDATE ON orders TO "+db.RoleName("ct"))
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "pgtools.json")
	if err := os.WriteFile(cfgFile, []byte(customToolsConfig(dsn)), 0o600); err != nil {
		t.Fatal(err)
	}
	const brokerToken = "n8n-runners-auth-token-custom-0123"
	tokenFile := filepath.Join(dir, "broker-token")
	if err := os.WriteFile(tokenFile, []byte(brokerToken), 0o600); err != nil {
		t.Fatal(err)
	}
	broker := brokertest.New(t, brokerToken)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", cfgFile, "--listen", "127.0.0.1:0",
			"--n8n-broker", broker.URL, "--n8n-broker-token-file", tokenFile}, &stdout, &stderr, envOf(nil))
	}()
	base := "http://" + waitFor(t, &stderr, regexp.MustCompile(`"listen":"([^"]+)"`))
	call := func(token, tool, body string) (int, map[string]any) {
		t.Helper()
		status, out, _ := apitest.Call(t, http.MethodPost, base+"/v1/tools/"+tool, token, body)
		return status, out
	}

	t.Run("HTTP", func(t *testing.T) {
		_, list, _ := apitest.Call(t, http.MethodGet, base+"/v1/tools", ctAgentToken, "")
		schemaOf := map[string]map[string]any{}
		for _, ti := range list["tools"].([]any) {
			m := ti.(map[string]any)
			s, _ := m["inputSchema"].(map[string]any)
			schemaOf[m["name"].(string)] = s
		}
		for _, name := range []string{"select_query", "orders_by_status", "orders_of_customers", "set_note"} {
			if schemaOf[name] == nil {
				t.Fatalf("GET /v1/tools lacks %s: %v", name, list)
			}
		}
		if p := schemaOf["orders_by_status"]["properties"].(map[string]any)["status"].(map[string]any); p["maxLength"] != 40.0 {
			t.Fatalf("orders_by_status schema: %v", schemaOf["orders_by_status"])
		}

		status, out := call(ctReaderToken, "orders_by_status", `{"status": "paid"}`)
		if status != 200 || out["rowCount"] != 4.0 {
			t.Fatalf("orders_by_status paid: %d %v", status, out)
		}
		// A string parameter holding SQL is a value: no row has that status, nothing is dropped.
		status, out = call(ctReaderToken, "orders_by_status", `{"status": "paid' OR '1'='1'; DROP TABLE orders; --"}`)
		if status != 200 || out["rowCount"] != 0.0 || db.QueryInt(t, "SELECT count(*) FROM orders") != 9 {
			t.Fatalf("injection attempt: %d %v", status, out)
		}
		for _, bad := range []string{`{}`, `{"status": 1}`, `{"status": "paid", "sql": "DELETE FROM orders"}`, `{"status": "` + strings.Repeat("x", 41) + `"}`} {
			if status, out := call(ctReaderToken, "orders_by_status", bad); status != 400 || out["errorType"] != "invalid_arguments" {
				t.Errorf("%s: %d %v, want 400 invalid_arguments", bad, status, out)
			}
		}
		// Arrays are bound as arrays: customers 1 and 2 are 1 + i % 3 for i = 1, 3, 4, 6, 7, 9.
		if status, out := call(ctReaderToken, "orders_of_customers", `{"ids": [1, 2]}`); status != 200 || out["rowCount"] != 6.0 {
			t.Fatalf("orders_of_customers: %d %v", status, out)
		}

		if status, out := call(ctReaderToken, "set_note", `{"order_id": 1, "note": "x", "autocommit": true}`); status != 403 || out["errorType"] != "not_allowed" {
			t.Fatalf("reader on a write tool: %d %v", status, out)
		}
		if _, out := call(ctAgentToken, "set_note", `{"order_id": 1, "note": "x"}`); out["errorType"] != "write_intent_required" || db.QueryInt(t, "SELECT count(*) FROM orders WHERE note IS NOT NULL") != 0 {
			t.Fatalf("write without intent: %v", out)
		}
		note := `x'); DELETE FROM orders; --`
		body, _ := json.Marshal(map[string]any{"order_id": 1, "note": note, "autocommit": true})
		status, out = call(ctAgentToken, "set_note", string(body))
		if status != 200 || out["affectedRows"] != 1.0 {
			t.Fatalf("set_note: %d %v", status, out)
		}
		if db.QueryInt(t, "SELECT count(*) FROM orders WHERE id = 1 AND note = $1", note) != 1 || db.QueryInt(t, "SELECT count(*) FROM orders") != 9 {
			t.Fatal("set_note did not store the note as given, or changed other rows")
		}

		_, doc, _ := apitest.Call(t, http.MethodGet, base+"/openapi.json", ctAgentToken, "")
		paths, _ := doc["paths"].(map[string]any)
		op, _ := paths["/v1/tools/set_note"].(map[string]any)
		raw, _ := json.Marshal(op)
		if !strings.Contains(string(raw), `"order_id":{"type":"integer"}`) || !strings.Contains(string(raw), `"autocommit"`) {
			t.Fatalf("/openapi.json for set_note: %s", raw)
		}
	})

	t.Run("MCP", func(t *testing.T) {
		agent := connectMCPHTTP(t, base, ctAgentToken)
		res, err := agent.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, tool := range res.Tools {
			if tool.Name == "orders_by_status" || tool.Name == "set_note" {
				found++
				if tool.InputSchema == nil || tool.OutputSchema != nil {
					t.Errorf("%s: input schema missing, or an output schema without mcp.structured_content", tool.Name)
				}
			}
		}
		if found != 2 {
			t.Fatalf("tools/list lacks the custom tools: %d found", found)
		}
		out := mcpCall(t, agent, "orders_by_status", map[string]any{"status": "pending"})
		if out.IsError || out.Object["rowCount"] != 5.0 {
			t.Fatalf("orders_by_status over MCP: %s", out.Text)
		}
		out = mcpCall(t, agent, "set_note", map[string]any{"order_id": 2, "note": "mcp"})
		if !out.IsError || out.Object["errorType"] != "write_intent_required" {
			t.Fatalf("set_note without intent over MCP: %s", out.Text)
		}
		out = mcpCall(t, agent, "set_note", map[string]any{"order_id": 2, "note": "mcp", "autocommit": true})
		if out.IsError || db.QueryInt(t, "SELECT count(*) FROM orders WHERE id = 2 AND note = 'mcp'") != 1 {
			t.Fatalf("set_note over MCP: %s", out.Text)
		}
		reader := connectMCPHTTP(t, base, ctReaderToken)
		out = mcpCall(t, reader, "set_note", map[string]any{"order_id": 3, "note": "no", "autocommit": true})
		if !out.IsError || out.Object["errorType"] != "not_allowed" {
			t.Fatalf("reader's set_note over MCP: %s", out.Text)
		}
	})

	t.Run("n8n broker", func(t *testing.T) {
		rn := broker.NextRunner(t, 10*time.Second)
		id := rn.StartTask(t, map[string]any{"tool": "orders_by_status", "args": map[string]any{"status": "paid"}})
		if ans := rn.Answer(t, id, 5*time.Second); ans.Type != "runner:taskdone" || !bytes.Contains(ans.Result(), []byte(`"rowCount":4`)) {
			t.Fatalf("orders_by_status from the broker: %s", ans.Raw)
		}
	})

	stopRun(t, cancel, done, "serve", &stderr, 15*time.Second)
}

// TestStartRefusesBrokenCustomTool: a custom tool whose statement does not fit its declared
// parameters stops pgtools serve and pgtools mcp at start, naming the tool and the fix.
func TestStartRefusesBrokenCustomTool(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL)`)
	dsn := db.RoleDSN(t, "ctbad")
	cases := []struct{ name, tool, want string }{
		{"two parameters declared for three", `{"name": "by_three", "description": "d", "sql": "SELECT id FROM orders WHERE id = $1 AND status = $2 AND id > $3",
		   "parameters": [{"name": "a", "type": "integer"}, {"name": "b", "type": "string"}]}`,
			`custom_tools[0]: custom tool \"by_three\": the statement has 3 parameters`},
		{"integer for a text comparison", `{"name": "by_status", "description": "d", "sql": "SELECT id FROM orders WHERE status = $1",
		   "parameters": [{"name": "status", "type": "integer"}]}`,
			`custom_tools[0]: custom tool \"by_status\": parameter 1 (\"status\") is declared integer, but PostgreSQL takes $1 as text`},
		{"SQL that does not parse", `{"name": "broken", "description": "d", "sql": "SELEC id FROM orders"}`,
			`custom_tools[0]: custom tool \"broken\": PostgreSQL does not accept the statement`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfgFile := filepath.Join(t.TempDir(), "pgtools.json")
			doc := `{"databases": {"default": {"url": "` + dsn + `"}}, "custom_tools": [` + c.tool + `]}`
			if err := os.WriteFile(cfgFile, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range [][]string{{"serve", "--config", cfgFile, "--listen", "127.0.0.1:0"}, {"mcp", "--config", cfgFile}} {
				var out, errOut bytes.Buffer
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				code := run(ctx, cmd, &out, &errOut, envOf(nil))
				cancel()
				if code != 1 || !strings.Contains(errOut.String(), c.want) {
					t.Errorf("%s: exit %d, stderr %s\nwant %s", cmd[0], code, errOut.String(), c.want)
				}
				if strings.Contains(errOut.String(), dsn) {
					t.Errorf("%s: stderr holds the DSN", cmd[0])
				}
			}
		})
	}
}

// TestCheckConfigCustomToolsExample: examples/config/custom-tools.json is valid and check-config
// prints each tool with its argument schema and says the statements are checked at start.
func TestCheckConfigCustomToolsExample(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	file := filepath.Join(examplesDir, "config", "custom-tools.json")
	if code := run(context.Background(), []string{"check-config", "--no-secrets", "--config", file}, &out, &errOut, envOf(nil)); code != 0 {
		t.Fatalf("exit %d:\n%s", code, errOut.String())
	}
	var eff struct {
		CustomTools []struct {
			Name        string         `json:"name"`
			Mode        string         `json:"mode"`
			InputSchema map[string]any `json:"input_schema"`
		} `json:"custom_tools"`
	}
	if err := json.Unmarshal(out.Bytes(), &eff); err != nil {
		t.Fatal(err)
	}
	if len(eff.CustomTools) != 2 || eff.CustomTools[0].Name != "orders_of_customer" || eff.CustomTools[1].Mode != "write" {
		t.Fatalf("custom_tools: %s", out.String())
	}
	if req, _ := eff.CustomTools[1].InputSchema["required"].([]any); len(req) != 2 {
		t.Fatalf("refund_order's schema: %v", eff.CustomTools[1].InputSchema)
	}
	if !strings.Contains(errOut.String(), "2 custom tool(s): orders_of_customer (read), refund_order (write); their statements are checked against their databases when pgtools serve or pgtools mcp starts") {
		t.Fatalf("stderr: %s", errOut.String())
	}
}

func connectMCPHTTP(t *testing.T, base, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := apitest.ConnectMCP(t, base, token)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func mcpCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) mcptest.Outcome {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return mcptest.Decode(t, res)
}
