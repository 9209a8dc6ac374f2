package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools/page"
)

// toolDef is one built-in tool: its wire name, the gate its calls pass, its arguments' type and
// its handler, defined together by defineTool so that none can be left out. Its schema,
// description, scope and hints come from schemas/ by the same name.
type toolDef struct {
	name    string
	gate    gate
	newArgs func() toolArgs // a new argument struct of the handler's type
	run     handler
	preview previewer  // nil: a human is never asked about the tool's calls
	paging  *page.Spec // takes page_token and issues next_page
}

// defineTool binds a handler to its arguments' type A and to its gate. *A must implement
// toolArgs, so a tool cannot be defined without its arguments saying whether and when it
// writes; NewRegistry refuses a gate that does not fit that answer, and a schema that
// contradicts it.
func defineTool[A any, P interface {
	*A
	toolArgs
}](name string, g gate, run func(context.Context, *request, *A) (Result, *Error)) toolDef {
	return toolDef{name: name, gate: g, newArgs: func() toolArgs { return P(new(A)) }, run: bind[A, P](run)}
}

// bind is the handler that runs run with the call's arguments as its own type A, which the
// registry decoded them into (toolEntry.newArgs): the one place a call's toolArgs becomes the
// handler's struct again.
func bind[A any, P interface {
	*A
	toolArgs
}](run func(context.Context, *request, *A) (Result, *Error)) handler {
	return func(ctx context.Context, req *request) (Result, *Error) { return run(ctx, req, req.in.(P)) }
}

// withPages marks d as a tool whose truncated answers carry next_page and whose calls take
// page_token.
func withPages(d toolDef) toolDef { return withPageSpec(d, selectPages) }

// withPageSpec is withPages with the page spec of a tool other than select_query.
func withPageSpec(d toolDef, spec *page.Spec) toolDef {
	d.paging = spec
	return d
}

// withPreview adds to d what a confirmation shows of its calls; pv receives the decoded
// arguments as *A.
func withPreview[A any, P interface {
	*A
	toolArgs
}](d toolDef, pv func(a *A, raw []byte, out *Preview)) toolDef {
	d.preview = func(in toolArgs, raw []byte, out *Preview) { pv(in.(P), raw, out) }
	return d
}

const noWritesFix = `Use select_query or execute_sql with mode "read"; this database accepts no writes.`

// builtinTools is the tool table: every built-in tool, defined once. NewRegistry checks it
// against schemas.ToolNames() both ways. Whether a tool writes is its argument type's answer
// (args.go), not the table's.
func builtinTools() []toolDef {
	return []toolDef{
		withPages(defineTool("select_query", gate{}, selectQuery)),
		withPageSpec(defineTool("describe_schema", gate{}, describeSchema), describePages),
		defineTool("explain_query", gate{}, explainQuery),
		withPreview(defineTool("execute_sql", gate{intent: true, readOnlyFix: noWritesFix,
			scopeFix: `Use mode "read"`, scopeMsg: `execute_sql with mode "write"`}, executeSQL),
			previewStatement),
		defineTool("insert_data", gate{intent: true, readOnlyFix: noWritesFix}, insertData),
		withPreview(defineTool("update_data", gate{intent: true, readOnlyFix: noWritesFix}, updateData),
			previewChange("update")),
		withPreview(defineTool("delete_data", gate{intent: true, readOnlyFix: noWritesFix}, deleteData),
			previewChange("delete")),
		defineTool("pg_tx", gate{echoesSession: true,
			readOnlyFix: `Begin with "read_only": true; this database accepts no writes.`,
			scopeFix:    `Begin with "read_only": true`, scopeMsg: "a read-write session"}, pgTx),
		defineTool("pg_transaction", gate{readOnlyFix: noWritesFix}, pgTransaction),
	}
}

// checkToolTable reports the first disagreement between defs and the tool schemas, or a def
// whose gate does not fit its arguments: a tool must have a schema, a schema a tool, every tool
// arguments that say whether it writes and a gate that fits that answer, and the schema must
// say the same (checkSchemaAgrees).
func checkToolTable(defs []toolDef, names []string) error {
	seen := map[string]bool{}
	for _, d := range defs {
		switch {
		case seen[d.name]:
			return fmt.Errorf("tool %s: defined twice", d.name)
		case !slices.Contains(names, d.name):
			return fmt.Errorf("tool %s: no schema in schemas/", d.name)
		case d.run == nil || d.newArgs == nil:
			return fmt.Errorf("tool %s: no handler", d.name)
		}
		k := d.newArgs().access()
		if err := d.gate.check(k); err != nil {
			return fmt.Errorf("tool %s: %w", d.name, err)
		}
		if err := checkSchemaAgrees(d.name, k); err != nil {
			return fmt.Errorf("tool %s: %w", d.name, err)
		}
		seen[d.name] = true
	}
	for _, n := range names {
		if !seen[n] {
			return fmt.Errorf("schema %s: no tool defined", n)
		}
	}
	return nil
}

// checkSchemaAgrees reports where schemas/<name>.json contradicts k, what the tool's arguments
// say of writing: its x-pgtools readOnly (the catalog's readOnlyHint) must hold exactly for a
// tool that never writes, and it must take approval_id exactly when approval rules judge the
// tool's calls.
func checkSchemaAgrees(name string, k access) error {
	meta, ok := schemas.Meta(name)
	if !ok {
		return fmt.Errorf("no schema metadata")
	}
	if meta.ReadOnly != (k == readsOnly) {
		return fmt.Errorf("schemas/%s.json says readOnly %v, but its arguments say %s", name, meta.ReadOnly, k)
	}
	raw, _ := schemas.Tool(name)
	var doc struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("schemas/%s.json: %w", name, err)
	}
	if has := doc.Properties["approval_id"] != nil; has != k.judged() {
		return fmt.Errorf("schemas/%s.json takes approval_id: %v, but approval rules judge its calls: %v (its arguments say %s)", name, has, k.judged(), k)
	}
	return nil
}

func previewChange(verb string) func(a *changeArgs, raw []byte, pv *Preview) {
	return func(a *changeArgs, raw []byte, pv *Preview) {
		pv.Table, pv.verb = a.Table, verb
		if !a.DryRun {
			pv.CountArgs = withArg(raw, "dry_run", true)
		}
	}
}

func previewStatement(a *executeArgs, raw []byte, pv *Preview) {
	pv.Statement = a.SQL
	if !a.ConfirmDestructive {
		pv.ConfirmedArgs = withArg(raw, "confirm_destructive", true)
	}
}
