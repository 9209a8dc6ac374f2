package tools

import (
	"bytes"
	"context"
	"testing"

	"github.com/pgtools/pgtools/schemas"
)

// TestRegistryToolMeta: the registry takes each tool's class from the "x-pgtools" object of its
// schema file (the same object the n8n build reads), and the input schema it serves on every
// catalog (/v1/tools, MCP tools/list and /openapi.json all show ToolInfo.InputSchema) carries
// none of it.
func TestRegistryToolMeta(t *testing.T) {
	t.Parallel()
	reg, err := NewRegistry(context.Background(), Options{Databases: nil})
	if err != nil {
		t.Fatal(err)
	}
	infos := reg.Tools()
	if len(infos) != len(schemas.ToolNames()) {
		t.Fatalf("%d tools, want %d", len(infos), len(schemas.ToolNames()))
	}
	// Pinned here as well as in the files: changing a tool's class is a decision, not an edit.
	want := map[string]struct {
		operation, scope                  string
		readOnly, destructive, idempotent bool
	}{
		"select_query":    {"select", "read", true, false, true},
		"describe_schema": {"describe", "read", true, false, true},
		"explain_query":   {"explain", "read", true, false, true},
		"execute_sql":     {"execute", "read", false, true, false},
		"insert_data":     {"insert", "write", false, false, false},
		"update_data":     {"update", "write", false, true, false},
		"delete_data":     {"delete", "write", false, true, false},
		"pg_tx":           {"pg_tx", "read", false, false, false},
		"pg_transaction":  {"transaction", "write", false, true, false},
	}
	for _, info := range infos {
		if bytes.Contains(info.InputSchema, []byte("x-pgtools")) {
			t.Errorf("%s: the served inputSchema contains x-pgtools", info.Name)
		}
		w, ok := want[info.Name]
		if !ok {
			t.Errorf("unexpected tool %s", info.Name)
			continue
		}
		entry := reg.tools[info.Name]
		if entry.operation != w.operation || entry.scope != w.scope || info.ReadOnly != w.readOnly ||
			info.Destructive != w.destructive || info.Idempotent != w.idempotent {
			t.Errorf("%s: operation %q scope %q hints %v/%v/%v, want %+v", info.Name, entry.operation, entry.scope,
				info.ReadOnly, info.Destructive, info.Idempotent, w)
		}
	}
}
