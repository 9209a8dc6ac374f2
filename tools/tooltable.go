package tools

import (
	"context"
	"fmt"
	"slices"
)

// toolDef is one built-in tool: its wire name, the gate its calls pass, its arguments' decoder
// and its handler, defined together by defineTool so that none can be left out. Its schema,
// description, scope and hints come from schemas/ by the same name.
type toolDef struct {
	name    string
	gate    gate
	decode  argDecoder
	run     handler
	preview previewer // nil: a human is never asked about the tool's calls
	paging  *pageSpec // takes page_token; its arguments implement pageable
}

// previewer fills, from a call's decoded arguments (the tool's own struct, and the map the
// schema validated) and its raw JSON, what a confirmation shows a human and the arguments it
// sends on (Preview).
type previewer func(in any, args map[string]any, raw []byte, pv *Preview)

// defineTool binds a handler to its arguments' type A and to its gate. The gate is a required
// value whose zero value is refused by NewRegistry, so a tool cannot be registered without
// saying whether and when it writes.
func defineTool[A any](name string, g gate, run func(context.Context, *request, *A) (Result, *Error)) toolDef {
	return toolDef{name: name, gate: g, decode: decoderFor[A](),
		run: func(ctx context.Context, req *request) (Result, *Error) { return run(ctx, req, req.in.(*A)) }}
}

// withPages marks d as a tool whose truncated answers carry next_page and whose calls take
// page_token.
func withPages(d toolDef) toolDef { return withPageSpec(d, selectPages) }

// withPageSpec is withPages with the page spec of a tool other than select_query.
func withPageSpec(d toolDef, spec *pageSpec) toolDef {
	d.paging = spec
	return d
}

// withPreview adds to d what a confirmation shows of its calls; pv receives the decoded
// arguments as *A.
func withPreview[A any](d toolDef, pv func(a *A, raw []byte, out *Preview)) toolDef {
	d.preview = func(in any, _ map[string]any, raw []byte, out *Preview) { pv(in.(*A), raw, out) }
	return d
}

const noWritesFix = `Use select_query or execute_sql with mode "read"; this database accepts no writes.`

// builtinTools is the tool table: every built-in tool, defined once. NewRegistry checks it
// against schemas.ToolNames() both ways.
func builtinTools() []toolDef {
	return []toolDef{
		withPages(defineTool("select_query", gate{access: readsOnly, session: always}, selectQuery)),
		withPageSpec(defineTool("describe_schema", gate{access: readsOnly}, describeSchema), describePages),
		defineTool("explain_query", gate{access: readsOnly}, explainQuery),
		withPreview(defineTool("execute_sql", gate{access: writesWhen, writes: modeWrite, intent: true, session: always, readOnlyFix: noWritesFix,
			scopeFix: `Use mode "read"`, scopeMsg: `execute_sql with mode "write"`}, executeSQL),
			previewStatement),
		defineTool("insert_data", gate{access: writesAlways, intent: true, session: always, readOnlyFix: noWritesFix}, insertData),
		withPreview(defineTool("update_data", gate{access: writesAlways, intent: true, session: always, readOnlyFix: noWritesFix}, updateData),
			previewChange("update")),
		withPreview(defineTool("delete_data", gate{access: writesAlways, intent: true, session: always, readOnlyFix: noWritesFix}, deleteData),
			previewChange("delete")),
		defineTool("pg_tx", gate{access: writesWhen, writes: func(args map[string]any) bool {
			return strArg(args, "action") == "begin" && !boolArg(args, "read_only")
		}, session: sessionAction, audits: endsSession, echoesSession: true,
			readOnlyFix: `Begin with "read_only": true; this database accepts no writes.`,
			scopeFix:    `Begin with "read_only": true`, scopeMsg: "a read-write session"}, pgTx),
		defineTool("pg_transaction", gate{access: writesAlways, readOnlyFix: noWritesFix}, pgTransaction),
	}
}

// checkToolTable reports the first disagreement between defs and the tool schemas, or a def
// whose gate is invalid: a tool must have a schema, a schema a tool, and every tool a gate.
func checkToolTable(defs []toolDef, names []string) error {
	seen := map[string]bool{}
	for _, d := range defs {
		switch {
		case seen[d.name]:
			return fmt.Errorf("tool %s: defined twice", d.name)
		case !slices.Contains(names, d.name):
			return fmt.Errorf("tool %s: no schema in schemas/", d.name)
		case d.run == nil || d.decode == nil:
			return fmt.Errorf("tool %s: no handler", d.name)
		}
		if err := d.gate.check(); err != nil {
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
