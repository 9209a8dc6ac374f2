package tools

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/schemas"
)

// TestToolTableMatchesSchemas: the tool table and schemas.ToolNames() name the same tools, every
// definition has a valid gate, and a gate's access agrees with its schema's readOnlyHint (a tool
// the catalog calls read-only must never write, and one it does not must be able to).
func TestToolTableMatchesSchemas(t *testing.T) {
	t.Parallel()
	defs := builtinTools()
	if err := checkToolTable(defs, schemas.ToolNames()); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.name)
		meta, ok := schemas.Meta(d.name)
		if !ok {
			t.Errorf("%s: no schema metadata", d.name)
			continue
		}
		if readsOnly := d.gate.access == readsOnly; readsOnly != meta.ReadOnly {
			t.Errorf("%s: gate access %d but the schema's readOnlyHint is %v", d.name, d.gate.access, meta.ReadOnly)
		}
	}
	want := slices.Clone(schemas.ToolNames())
	slices.Sort(want)
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("tool table %v, schemas %v", names, want)
	}
}

// TestToolTableRefusesAToolWithoutAGate walks every built-in tool: with its gate zeroed, or
// with a gate that cannot decide, the table is refused; a tool without a schema and a schema
// without a tool are refused too.
func TestToolTableRefusesAToolWithoutAGate(t *testing.T) {
	t.Parallel()
	names := schemas.ToolNames()
	broken := map[string]func(g *gate){
		"zero gate":                  func(g *gate) { *g = gate{} },
		"writesWhen without writes":  func(g *gate) { g.access, g.writes = writesWhen, nil },
		"writes read with readsOnly": func(g *gate) { g.access, g.writes = readsOnly, always },
		"unknown access":             func(g *gate) { g.access = writesWhen + 1 },
	}
	for _, d := range builtinTools() {
		for what, breakIt := range broken {
			defs := builtinTools()
			i := slices.IndexFunc(defs, func(x toolDef) bool { return x.name == d.name })
			breakIt(&defs[i].gate)
			err := checkToolTable(defs, names)
			if err == nil || !strings.Contains(err.Error(), d.name) {
				t.Errorf("%s with %s: %v, want a refusal naming the tool", d.name, what, err)
			}
		}
		defs := slices.DeleteFunc(builtinTools(), func(x toolDef) bool { return x.name == d.name })
		if err := checkToolTable(defs, names); err == nil || !strings.Contains(err.Error(), d.name) {
			t.Errorf("table without %s: %v, want a refusal naming it", d.name, err)
		}
	}
	extra := append(builtinTools(), defineTool("drop_everything", gate{access: writesAlways}, deleteData))
	if err := checkToolTable(extra, names); err == nil || !strings.Contains(err.Error(), "drop_everything") {
		t.Errorf("a tool without a schema: %v", err)
	}
	twice := append(builtinTools(), builtinTools()[0])
	if err := checkToolTable(twice, names); err == nil {
		t.Error("a tool defined twice was accepted")
	}
}

// TestUnsetGateFailsClosed: a gate whose access is not one of the known ones counts every call
// as a write (so it needs the write scope, a writable database and, with intent, stated intent).
func TestUnsetGateFailsClosed(t *testing.T) {
	t.Parallel()
	for _, g := range []gate{{}, {access: writesWhen + 1}} {
		if !g.isWrite(nil) || !g.isAudited(nil) {
			t.Errorf("gate with access %d: not treated as a write", g.access)
		}
	}
	if (gate{access: readsOnly}).isWrite(map[string]any{"mode": "write"}) {
		t.Error("a read-only gate wrote")
	}
}

// TestEveryRegisteredToolHasAGate walks a registry with operator-defined tools of both modes:
// every tool it serves, built-in or not, has a gate that decides.
func TestEveryRegisteredToolHasAGate(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{})
	if err := b.reg.addCustomTools(context.Background(), []CustomTool{
		{Name: "one_order", Description: "One order.", SQL: "SELECT id FROM orders WHERE id = $1",
			Parameters: []CustomParam{{Name: "id", Type: "integer", Required: true}}},
		{Name: "pay_order", Description: "Mark one order paid.", Mode: "write", SQL: "UPDATE orders SET status = 'paid' WHERE id = $1",
			Parameters: []CustomParam{{Name: "id", Type: "integer", Required: true}}},
	}); err != nil {
		t.Fatal(err)
	}
	if len(b.reg.tools) != len(schemas.ToolNames())+2 {
		t.Fatalf("%d tools registered", len(b.reg.tools))
	}
	for name, te := range b.reg.tools {
		if err := te.gate.check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if te.info.ReadOnly != (te.gate.access == readsOnly) {
			t.Errorf("%s: readOnlyHint %v but gate access %d", name, te.info.ReadOnly, te.gate.access)
		}
	}
}
