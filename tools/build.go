package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/page"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// NewRegistry compiles every tool schema and registers the built-in tools and o.CustomTools over
// o.Databases. The registry is complete when it returns: nothing is set on it afterwards, so it
// is safe for concurrent use at once.
func NewRegistry(ctx context.Context, o Options) (*Registry, error) {
	r, err := newBuiltinRegistry(o.Databases)
	if err != nil {
		return nil, err
	}
	r.sessions, r.txLimit, r.auditor, r.observer, r.approvals = o.Sessions, o.TxLimiter, o.Auditor, o.Observer, o.Approvals
	r.forwarder = o.Forwarder
	if r.approvals == nil {
		r.approvals = approval.NewStore(approval.Options{Audit: AuditApprovals(o.Auditor)})
	}
	if r.pages, err = page.NewSigner(o.Pages); err != nil {
		return nil, err
	}
	if len(o.CustomTools) > 0 {
		if err := r.addCustomTools(ctx, o.CustomTools); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func newBuiltinRegistry(dbs []*Database) (*Registry, error) {
	r := &Registry{dbs: map[string]*Database{}, tools: map[string]*toolEntry{}}
	for _, db := range dbs {
		r.dbs[db.Name] = db
	}
	defs := builtinTools()
	if err := checkToolTable(defs, schemas.ToolNames()); err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	for _, name := range schemas.ToolNames() {
		// Present: checkToolTable matched every schema with a definition.
		def := defs[slices.IndexFunc(defs, func(d toolDef) bool { return d.name == name })]
		raw, _ := schemas.Validation(name) // compiled with every keyword; served as schemas.Tool
		served, _ := schemas.Tool(name)
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		url := "mem://schemas/" + name + ".json"
		if err := c.AddResource(url, doc); err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		sch, err := c.Compile(url)
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		meta, _ := schemas.Meta(name)
		r.tools[name] = &toolEntry{
			info: ToolInfo{Name: name, Description: schemas.Description(name), InputSchema: served,
				ReadOnly: meta.ReadOnly, Destructive: meta.Destructive, Idempotent: meta.Idempotent},
			operation: meta.Operation, scope: meta.Scope, props: schemaProperties(raw), schema: sch, run: def.run,
			gate: def.gate, newArgs: def.newArgs, access: def.newArgs().access(), preview: def.preview, paging: def.paging, plain: withoutApprovalID(served),
		}
		r.order = append(r.order, name)
	}
	return r, nil
}

// ApprovableTools names, sorted, the tools whose calls approval rules (policy.require_approval)
// judge: the built-in tools whose arguments say they commit writes of their own, and the
// operator-defined tools of custom whose mode is write. A rule of kind tool must name one of
// them, or it would never ask. It needs no registry, so configuration is checked before one
// is built.
func ApprovableTools(custom []CustomTool) []string {
	var out []string
	for _, d := range builtinTools() {
		if d.newArgs().access().judged() {
			out = append(out, d.name)
		}
	}
	for _, t := range custom {
		if customArgsFor(t.Mode)().access().judged() {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out
}
