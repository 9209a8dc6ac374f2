// Package mcptest holds the contract every pgtools MCP transport keeps, as one check that the
// tests of each transport (Streamable HTTP in runner/mcpapi, stdio in cmd/pgtools) run against a
// connected client session, so both are held to the same words. It is for tests only.
package mcptest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools"
)

// Fixture is the SQL Check expects the server's "default" database to hold: five orders, the
// odd ids paid and the even ids open.
const Fixture = `CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL);
INSERT INTO orders SELECT i, CASE WHEN i % 2 = 1 THEN 'paid' ELSE 'open' END FROM generate_series(1, 5) i`

// Check runs the MCP contract on cs, a session initialized by the go-sdk client against a
// pgtools server whose database holds Fixture and whose principal has the read scope:
//   - initialize names the server and offers tools;
//   - tools/list offers every tool with its schemas/ file as input schema (compared as decoded
//     JSON), the schema's description, annotations matching the registry's hints, and no output
//     schema (the default: mcp.structured_content off);
//   - select_query returns rows once, as the JSON object of its one text item, without
//     structured content;
//   - insert_data without write intent (or scope) is an isError result carrying an error object
//     with errorType and a suggestion, and writes nothing;
//   - malformed arguments are isError results with errorType invalid_arguments;
//   - an unknown tool is a JSON-RPC error (invalid params), not a crash.
func Check(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := t.Context()

	t.Run("initialize", func(t *testing.T) {
		init := cs.InitializeResult()
		if init == nil || init.ServerInfo == nil || init.ServerInfo.Name != "pgtools" || init.Capabilities == nil || init.Capabilities.Tools == nil {
			t.Fatalf("initialize result: %+v", init)
		}
	})

	t.Run("tools/list", func(t *testing.T) {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		reg, err := tools.NewRegistry(ctx, tools.Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]tools.ToolInfo{}
		for _, info := range reg.Tools() {
			want[info.Name] = info
		}
		if len(res.Tools) != len(schemas.ToolNames()) {
			t.Fatalf("tools/list has %d tools, want %d", len(res.Tools), len(schemas.ToolNames()))
		}
		for _, tool := range res.Tools {
			name := tool.Name
			fromFile, ok := ServedSchema(name)
			if !ok {
				t.Fatalf("tools/list offers %q, which has no schema", name)
			}
			if !reflect.DeepEqual(roundTrip(t, tool.InputSchema), fromFile) {
				t.Errorf("%s: inputSchema differs from schemas/%s.json", name, name)
			}
			if tool.Description == "" || tool.Description != schemas.Description(name) {
				t.Errorf("%s: description %q is not the schema's", name, tool.Description)
			}
			a, info := tool.Annotations, want[name]
			if a == nil || a.ReadOnlyHint != info.ReadOnly || a.DestructiveHint == nil || *a.DestructiveHint != info.Destructive ||
				a.IdempotentHint != info.Idempotent || a.OpenWorldHint == nil || *a.OpenWorldHint {
				t.Errorf("%s: annotations %+v do not match the registry's hints %+v (and openWorldHint false)", name, a, info)
			}
			if tool.OutputSchema != nil {
				t.Errorf("%s: an outputSchema without mcp.structured_content", name)
			}
		}
	})

	t.Run("select_query returns rows", func(t *testing.T) {
		out := call(t, cs, "select_query", map[string]any{"table": "orders", "where": "status = $1", "params": []any{"paid"}, "order_by": "id"})
		if out.IsError || out.Object["success"] != true || out.Object["rowCount"] != float64(3) {
			t.Fatalf("select_query: %s", out.Text)
		}
		if out.Structured {
			t.Fatal("select_query sent its rows twice: as text and as structuredContent")
		}
		var ids []float64
		for _, row := range out.Object["data"].([]any) {
			ids = append(ids, row.(map[string]any)["id"].(float64))
		}
		if !reflect.DeepEqual(ids, []float64{1, 3, 5}) {
			t.Fatalf("select_query rows: %v", ids)
		}
	})

	t.Run("refused write is an error result", func(t *testing.T) {
		// Which refusal it is (scope, tool not yet available, write_intent_required without
		// session_id or autocommit) depends on the principal and the version; its shape does not.
		out := call(t, cs, "insert_data", map[string]any{"table": "orders", "row": map[string]any{"id": 9, "status": "new"}})
		errType, _ := out.Object["errorType"].(string)
		suggestion, _ := out.Object["suggestion"].(string)
		if !out.IsError || out.Object["success"] != false || errType == "" || suggestion == "" || out.Object["error"] == "" {
			t.Fatalf("insert_data without write intent: isError=%v %s", out.IsError, out.Text)
		}
		t.Logf("insert_data without write intent: %s", errType)
		count := call(t, cs, "select_query", map[string]any{"table": "orders", "columns": "id"})
		if count.IsError || count.Object["rowCount"] != float64(5) {
			t.Fatalf("the refused insert changed the table: %s", count.Text)
		}
	})

	t.Run("malformed arguments are invalid_arguments results", func(t *testing.T) {
		for _, c := range []struct {
			name string
			args any
			want string // in the error message
		}{
			{"unknown property", map[string]any{"tabel": "orders"}, "tabel"},
			{"missing required", map[string]any{"limit": 1}, "table"},
			{"wrong type", map[string]any{"table": "orders", "limit": "ten"}, "limit"},
			{"not an object", []any{"orders"}, "object"},
		} {
			out := call(t, cs, "select_query", c.args)
			msg, _ := out.Object["error"].(string)
			if !out.IsError || out.Object["errorType"] != "invalid_arguments" || !strings.Contains(msg, c.want) || out.Object["suggestion"] == "" {
				t.Errorf("%s: isError=%v %s", c.name, out.IsError, out.Text)
			}
		}
	})

	t.Run("unknown tool is a protocol error", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "drop_everything", Arguments: map[string]any{}})
		var rpcErr *jsonrpc.Error
		if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, "drop_everything") {
			t.Fatalf("unknown tool: result %+v, error %v", res, err)
		}
		// The session survives it.
		if out := call(t, cs, "describe_schema", nil); out.IsError {
			t.Fatalf("describe_schema after a protocol error: %s", out.Text)
		}
	})
}

// Outcome is one tools/call result as a model sees it.
type Outcome struct {
	IsError bool
	// Text is the text content: the result's JSON object.
	Text string
	// Object is the text content, decoded.
	Object map[string]any
	// Structured says the result also carried structuredContent (the same object).
	Structured bool
}

// call runs a tool that must answer with a result (never a protocol error), and decodes it with
// Decode.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args any) Outcome {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", tool, err)
	}
	return Decode(t, res)
}

// Decode checks that res carries one JSON object as its only text content and, if it has
// structured content, that this is the same object; it returns the object.
func Decode(t testing.TB, res *mcp.CallToolResult) Outcome {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want exactly one content item, got %d", len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text.Text), &fromText); err != nil {
		t.Fatalf("text content is not a JSON object: %q", text.Text)
	}
	if res.StructuredContent != nil {
		if obj, _ := roundTrip(t, res.StructuredContent).(map[string]any); !reflect.DeepEqual(obj, fromText) {
			t.Fatalf("structured content %v differs from text content %s", res.StructuredContent, text.Text)
		}
	}
	return Outcome{IsError: res.IsError, Text: text.Text, Object: fromText, Structured: res.StructuredContent != nil}
}

// roundTrip normalizes a decoded value to what encoding/json decodes from its encoding.
func roundTrip(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// ServedSchema is the input schema of tool name as a caller no approval rule applies to is
// served it: schemas/<name>.json, decoded, without the approval_id argument (tools.Registry
// lists approval_id only to callers it can concern). ok is false for a name without a schema.
func ServedSchema(name string) (schema map[string]any, ok bool) {
	raw, ok := schemas.Tool(name)
	if !ok || json.Unmarshal(raw, &schema) != nil {
		return nil, false
	}
	if props, _ := schema["properties"].(map[string]any); props != nil {
		delete(props, "approval_id")
	}
	return schema, true
}
