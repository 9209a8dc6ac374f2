package tools

import (
	"bytes"
	"context"
	"fmt"
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
		if k := d.newArgs().access(); (k == readsOnly) != meta.ReadOnly {
			t.Errorf("%s: its arguments say %s but the schema's readOnlyHint is %v", d.name, k, meta.ReadOnly)
		}
	}
	want := slices.Clone(schemas.ToolNames())
	slices.Sort(want)
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("tool table %v, schemas %v", names, want)
	}
}

// classArgs are arguments whose access and per-call answer a test sets.
type classArgs struct {
	target
	k access
	w bool
}

func (a *classArgs) access() access                    { return a.k }
func (a *classArgs) writes() bool                      { return a.w }
func (a *classArgs) audited() bool                     { return a.w }
func (a *classArgs) intent() (autocommit, dryRun bool) { return false, false }
func (a *classArgs) approvalID() string                { return "" }

// TestToolTableRefusesAToolWithoutAGate walks every built-in tool: with a gate that does not fit
// what its arguments say of writing (a write tool's zero gate; write rules on a read tool), with
// arguments that say nothing of writing, or with arguments whose answer its schema contradicts
// (readOnly, approval_id), the table is refused; a tool without a schema and a schema without a
// tool are refused too.
func TestToolTableRefusesAToolWithoutAGate(t *testing.T) {
	t.Parallel()
	names := schemas.ToolNames()
	refused := func(what, name string, breakIt func(d *toolDef)) {
		t.Helper()
		defs := builtinTools()
		i := slices.IndexFunc(defs, func(x toolDef) bool { return x.name == name })
		breakIt(&defs[i])
		if err := checkToolTable(defs, names); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s with %s: %v, want a refusal naming the tool", name, what, err)
		}
	}
	for _, d := range builtinTools() {
		k := d.newArgs().access()
		if k == readsOnly {
			refused("write rules", d.name, func(d *toolDef) { d.gate.intent = true })
			refused("a read-only fix", d.name, func(d *toolDef) { d.gate.readOnlyFix = noWritesFix })
		} else {
			refused("a zero gate", d.name, func(d *toolDef) { d.gate = gate{} })
		}
		for _, unknown := range []access{accessUnset, controlsSessions + 1} {
			refused(fmt.Sprintf("access %d", unknown), d.name, func(d *toolDef) {
				d.newArgs = func() toolArgs { return &classArgs{k: unknown} }
			})
		}
		meta, _ := schemas.Meta(d.name)
		contradicted := 0
		for _, other := range []access{readsOnly, writesAlways, writesWhen, controlsSessions} {
			if other == k || (other == readsOnly) == meta.ReadOnly && other.judged() == k.judged() {
				continue // the schema says nothing that tells other from k
			}
			contradicted++
			refused("arguments that say "+other.String(), d.name, func(d *toolDef) {
				d.newArgs = func() toolArgs { return &classArgs{k: other} }
				if d.gate = (gate{}); other != readsOnly {
					d.gate.readOnlyFix = noWritesFix // a gate that fits: the schema is what disagrees
				}
			})
		}
		if contradicted == 0 {
			t.Errorf("%s: no other answer contradicts its schema", d.name)
		}
		defs := slices.DeleteFunc(builtinTools(), func(x toolDef) bool { return x.name == d.name })
		if err := checkToolTable(defs, names); err == nil || !strings.Contains(err.Error(), d.name) {
			t.Errorf("table without %s: %v, want a refusal naming it", d.name, err)
		}
	}
	extra := append(builtinTools(), defineTool("drop_everything", gate{readOnlyFix: noWritesFix}, deleteData))
	if err := checkToolTable(extra, names); err == nil || !strings.Contains(err.Error(), "drop_everything") {
		t.Errorf("a tool without a schema: %v", err)
	}
	twice := append(builtinTools(), builtinTools()[0])
	if err := checkToolTable(twice, names); err == nil {
		t.Error("a tool defined twice was accepted")
	}
}

// TestUnsetGateFailsClosed: arguments whose access is not one of the known ones count every
// call as a write (so it needs the write scope, a writable database and, with intent, stated
// intent) and as a write attempt for the audit log; arguments of a tool that never writes
// never do, whatever the call says.
func TestUnsetGateFailsClosed(t *testing.T) {
	t.Parallel()
	for _, k := range []access{accessUnset, controlsSessions + 1} {
		if in := (&classArgs{k: k}); !isWrite(in) || !isAudited(in) {
			t.Errorf("arguments with access %d: not treated as a write", k)
		}
	}
	if in := (&classArgs{k: readsOnly, w: true}); isWrite(in) || isAudited(in) {
		t.Error("a read-only tool's call wrote")
	}
}

// TestArgumentsSayWhetherACallWrites decodes calls of every built-in tool as Call does and
// checks what the pipeline reads of them: whether the call writes and is audited, where it
// routes, the intent it states and the approval it claims.
func TestArgumentsSayWhetherACallWrites(t *testing.T) {
	t.Parallel()
	reg := closedPortRegistry(t)
	const sid = "00000000-0000-4000-8000-000000000000"
	cases := []struct {
		tool, args      string
		writes, audited bool
		route           target
		autocommit, dry bool
		approval        string
	}{
		{tool: "select_query", args: `{"table":"t","database":"d","session_id":"` + sid + `"}`, route: target{"d", sid}},
		{tool: "describe_schema", args: `{"database":"d"}`, route: target{Database: "d"}},
		{tool: "explain_query", args: `{"sql":"select 1"}`},
		{tool: "execute_sql", args: `{"sql":"select 1","session_id":"` + sid + `"}`, route: target{SessionID: sid}},
		{tool: "execute_sql", args: `{"sql":"delete from t","mode":"write","autocommit":true,"approval_id":"a1"}`, writes: true, audited: true, autocommit: true, approval: "a1"},
		{tool: "insert_data", args: `{"table":"t","row":{"a":1}}`, writes: true, audited: true},
		{tool: "update_data", args: `{"table":"t","set":{"a":1},"where":"true","dry_run":true}`, writes: true, audited: true, dry: true},
		{tool: "delete_data", args: `{"table":"t","where":"true","session_id":"` + sid + `"}`, writes: true, audited: true, route: target{SessionID: sid}},
		{tool: "pg_tx", args: `{"action":"begin","database":"d"}`, writes: true, route: target{Database: "d"}},
		{tool: "pg_tx", args: `{"action":"begin","read_only":true}`},
		{tool: "pg_tx", args: `{"action":"list","session_id":"` + sid + `"}`},
		{tool: "pg_tx", args: `{"action":"savepoint","name":"s","session_id":"` + sid + `"}`, route: target{SessionID: sid}},
		{tool: "pg_tx", args: `{"action":"commit","session_id":"` + sid + `"}`, audited: true, route: target{SessionID: sid}},
		{tool: "pg_transaction", args: `{"operations":[{"sql":"select 1"}],"approval_id":"a2"}`, writes: true, audited: true, approval: "a2"},
	}
	for _, c := range cases {
		in, _ := typedArgs(t, reg, c.tool, c.args)
		ac, dry := in.intent()
		if isWrite(in) != c.writes || isAudited(in) != c.audited || in.route() != c.route || ac != c.autocommit || dry != c.dry || in.approvalID() != c.approval {
			t.Errorf("%s %s: writes %v, audited %v, route %+v, intent %v/%v, approval %q", c.tool, c.args, isWrite(in), isAudited(in), in.route(), ac, dry, in.approvalID())
		}
	}
}

// TestApprovableTools: the tools an approval rule may name are those whose arguments say
// approval rules judge them, which are exactly the built-in tools whose schema takes
// approval_id, and the operator-defined tools of mode write.
func TestApprovableTools(t *testing.T) {
	t.Parallel()
	var withID []string
	for _, name := range schemas.ToolNames() {
		raw, _ := schemas.Tool(name)
		if strings.Contains(string(raw), `"approval_id"`) {
			withID = append(withID, name)
		}
	}
	slices.Sort(withID)
	if got := ApprovableTools(nil); !slices.Equal(got, withID) || len(got) != 5 {
		t.Fatalf("ApprovableTools: %v, schemas taking approval_id: %v", got, withID)
	}
	custom := []CustomTool{{Name: "pay_order", Mode: "write"}, {Name: "one_order"}, {Name: "list_orders", Mode: "read"}}
	if got := ApprovableTools(custom); !slices.Contains(got, "pay_order") || slices.Contains(got, "one_order") || slices.Contains(got, "list_orders") {
		t.Fatalf("ApprovableTools with custom tools: %v", got)
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
		if err := te.gate.check(te.access); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if k := te.newArgs().access(); te.access != k || te.info.ReadOnly != (k == readsOnly) {
			t.Errorf("%s: readOnlyHint %v, access %d, but its arguments say %s", name, te.info.ReadOnly, te.access, k)
		}
		if has := bytes.Contains(te.info.InputSchema, []byte(`"approval_id"`)); has != te.access.judged() {
			t.Errorf("%s: schema takes approval_id: %v, but approval rules judge it: %v", name, has, te.access.judged())
		}
	}
}
