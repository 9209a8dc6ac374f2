package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pgtools/pgtools/schemas"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/page"
	"github.com/pgtools/pgtools/tools/plan"
	"github.com/pgtools/pgtools/tools/words"
)

// ToolInfo describes a tool for catalogs (HTTP /v1/tools, MCP tools/list, OpenAPI).
type ToolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	ReadOnly    bool            `json:"readOnlyHint"`
	Destructive bool            `json:"destructiveHint"`
	Idempotent  bool            `json:"idempotentHint"`
}

// request is one validated call as a handler sees it.
type request struct {
	sessions  SessionStore
	txLimit   *TxLimiter // bound on pg_transaction connections; nil: none
	principal Principal
	db        *Database
	session   *Session       // the session session_id names, locked for the call (nil: stateless)
	allowDDL  bool           // the database allows DDL and the principal has the ddl scope
	ddlFix    string         // without allowDDL: the suggestion naming what would allow DDL
	args      map[string]any // validated arguments, numbers as json.Number (for policy, masking and audit)
	in        any            // the same arguments decoded into the tool's struct (*selectArgs, …)
	started   time.Time
	maxBytes  int           // response byte cap: the database's, lowered by the principal's and the call's
	budget    plan.Budget   // plan estimate bound: the database's, lowered by the principal's and the call's
	lookAhead bool          // the read's SQL asks for one row past its limit (select_query): not counted by the budget
	approval  *approvalGate // the approval rules a write answers to, and the approval it claimed (nil: none)
}

// format is the row format of the call: its format argument (validated by the schema), else the
// principal's default, else the database's.
func (req *request) format(arg string) wire.Format {
	for _, s := range []string{arg, req.principal.DefaultFormat, req.db.Policy.DefaultFormat} {
		if f, ok := wire.ParseFormat(s); ok && s != "" {
			return f
		}
	}
	return wire.Objects
}

// who is the identity the call acts as: its session's (fixed at begin), else its principal's.
func (req *request) who() identity {
	if req.session != nil {
		return sessionIdentity(req.session)
	}
	return identityOf(req.principal)
}

type handler func(ctx context.Context, req *request) (Result, *Error)

type toolEntry struct {
	info      ToolInfo
	operation string   // the operation name errors carry before the handler runs
	scope     string   // scope a principal needs to call the tool at all
	props     []string // the schema's property names, sorted, for invalid_arguments suggestions
	schema    *jsonschema.Schema
	run       handler
	gate      gate            // the policy a call needs (authorize.go)
	decode    argDecoder      // fills the tool's struct from a validated call
	preview   previewer       // what a confirmation shows (preview.go); nil: nothing to confirm
	database  string          // fixed database (operator-defined tools); "" takes the argument
	paging    *page.Spec      // the tool takes page_token and issues next_page (pagetoken.go); nil: not
	plain     json.RawMessage // info.InputSchema without approval_id, listed to callers no approval rule applies to; nil: the same
}

// Registry holds the tools and the configured databases. Every transport calls Call. It is safe
// for concurrent use once built.
type Registry struct {
	dbs       map[string]*Database
	tools     map[string]*toolEntry
	order     []string
	auditor   Auditor
	sessions  SessionStore
	observer  Observer
	txLimit   *TxLimiter
	pages     *page.Signer
	approvals *approval.Store
}

// Options is everything a Registry is built from. Only Databases is needed for stateless calls;
// every other field is optional and its zero value switches its feature off.
type Options struct {
	// Databases are the configured databases, keyed by Name; one should be "default".
	Databases []*Database
	// Sessions holds pg_tx sessions. nil: session_id answers session_not_found and pg_tx begin
	// is refused. One store may serve several registries (a configuration reload builds a new
	// registry over the same sessions).
	Sessions SessionStore
	// TxLimiter bounds pg_transaction connections. nil: no bound.
	TxLimiter *TxLimiter
	// Auditor receives every write attempt. nil: nobody.
	Auditor Auditor
	// Observer receives every call. nil: nobody.
	Observer Observer
	// CustomTools are the operator-defined tools, each prepared on its database while the
	// registry is built (so NewRegistry needs ctx): one that does not fit fails NewRegistry,
	// naming it.
	CustomTools []CustomTool
	// Pages signs and checks the page tokens of truncated reads (select_query's next_page). The
	// zero value makes a random key: tokens then work on this registry only.
	Pages page.Tokens
	// Approvals holds approval requests (policy.require_approval). nil: the registry makes one
	// of its own; pass one to keep requests across configuration reloads.
	Approvals *approval.Store
}

// NewRegistry compiles every tool schema and registers the built-in tools and o.CustomTools over
// o.Databases. The registry is complete when it returns: nothing is set on it afterwards, so it
// is safe for concurrent use at once.
func NewRegistry(ctx context.Context, o Options) (*Registry, error) {
	r, err := newBuiltinRegistry(o.Databases)
	if err != nil {
		return nil, err
	}
	r.sessions, r.txLimit, r.auditor, r.observer, r.approvals = o.Sessions, o.TxLimiter, o.Auditor, o.Observer, o.Approvals
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
			gate: def.gate, decode: def.decode, preview: def.preview, paging: def.paging, plain: withoutApprovalID(served),
		}
		r.order = append(r.order, name)
	}
	return r, nil
}

// writes reports tools whose calls may commit a write that approval rules judge: every tool
// but the read-only ones and pg_tx, whose begin, commit and rollback write nothing of their own.
func (t *toolEntry) writes() bool { return !t.info.ReadOnly && t.info.Name != "pg_tx" }

// Tools lists the registered tools in a stable order.
func (r *Registry) Tools() []ToolInfo {
	out := make([]ToolInfo, 0, len(r.order))
	for _, n := range r.order {
		out = append(out, r.tools[n].info)
	}
	return out
}

// Databases returns the configured database names, sorted.
func (r *Registry) Databases() []string {
	names := make([]string, 0, len(r.dbs))
	for n := range r.dbs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Database returns a configured database by name.
func (r *Registry) Database(name string) (*Database, bool) {
	db, ok := r.dbs[name]
	return db, ok
}

// Call validates rawArgs against the tool's schema and runs it for principal. Every failure is an
// *Error; a nil error means res is set. out says where the call ran, also when it failed after
// being routed.
func (r *Registry) Call(ctx context.Context, p Principal, tool string, rawArgs []byte) (res Result, out Outcome, err *Error) {
	started := time.Now()
	t, ok := r.tools[tool]
	if !ok {
		e := r.unknownTool(tool)
		r.observe("", nil, false, nil, e, started)
		return nil, out, e
	}
	var m map[string]any
	var db *Database
	routed := false // the principal may use db
	defer func() {
		if err != nil {
			finishError(err, t, db, m)
		}
		if res != nil {
			res.setExecutionTime(formatDuration(time.Since(started)))
		}
		r.audit(p, t, m, out, res, err, started)
		r.observe(tool, db, routed, res, err, started)
	}()
	m, in, err := r.decodeCall(p, t, rawArgs)
	if err != nil {
		return nil, out, err
	}
	// Route once: the session session_id names fixes the database; every gate then applies to it.
	var sess *Session
	db, sess, err = r.route(ctx, p, t, m)
	if err != nil {
		return nil, out, err
	}
	out.Database = db.Name
	if sess != nil {
		out.Session = sess.ID
		defer r.sessions.Release(sess)
	}
	routed = p.mayUse(db.Name)
	req := &request{sessions: r.sessions, txLimit: r.txLimit, principal: p, db: db, session: sess, args: m, in: in, started: started,
		maxBytes: responseCap(ctx, p, db), budget: planBudgetOf(ctx, p, db)}
	if req.budget.Set() {
		req.budget.Estimates = req.catalogEstimate
	}
	if err = r.authorize(req, t); err != nil {
		return nil, out, err
	}
	if t.writes() {
		if req.approval, err = newApprovalGate(r.approvals, p, db, tool, m); err != nil {
			return nil, out, err
		}
		defer req.approval.release()
	}
	res, err = t.run(ctx, req)
	if sess != nil {
		res, err = settleSession(req, t, res, err)
	}
	return res, out, err
}

// finishError completes a failed call's error as the model reads it: the tool's operation, the
// caller's values masked where echoed (unless db shows them), long echoes clipped.
func finishError(err *Error, t *toolEntry, db *Database, args map[string]any) {
	if err.Operation == "" {
		err.Operation = t.operation
	}
	if db == nil || db.Policy.MasksErrorValues() {
		redactValues(err, args)
	}
	clipEchoes(err) // after masking, which must see whole values
}

func (r *Registry) unknownTool(tool string) *Error {
	return &Error{Type: ErrUnknownTool, Message: fmt.Sprintf("Unknown tool %s", words.Quote(tool)),
		Suggestion: "Available tools: " + strings.Join(r.order, ", ")}
}

// decodeCall checks p's scope for t and decodes rawArgs: parsed once into the map the schema
// validates, then into the tool's struct. m is set as far as parsing got, for masking.
func (r *Registry) decodeCall(p Principal, t *toolEntry, rawArgs []byte) (m map[string]any, in any, err *Error) {
	if !p.Can(t.scope) {
		return nil, nil, p.lacksScope(t.scope, t.info.Name, "")
	}
	var args any
	if len(strings.TrimSpace(string(rawArgs))) == 0 {
		args = map[string]any{}
	} else if e := decodeJSON(rawArgs, &args); e != nil {
		return nil, nil, errorf(ErrInvalidArguments, "Send the arguments as one JSON object, e.g. {\"table\": \"orders\"}.",
			"Invalid arguments: the body is not valid JSON")
	}
	m, _ = args.(map[string]any)
	// A page token brings the arguments of the call that issued it: merged first, the call
	// then validates as that one did.
	var pg *page.State
	if tok, ok := m["page_token"].(string); ok && t.paging != nil && r.pages != nil {
		if pg, err = r.pages.Open(pageWho(p), t.info.Name, tok); err != nil {
			return m, nil, err
		}
		if err = t.paging.Merge(m, pg); err != nil {
			return m, nil, err
		}
	}
	if verr := t.schema.Validate(args); verr != nil {
		return m, nil, validationError(verr, t)
	}
	if e := nulError(m, ""); e != nil {
		return m, nil, e
	}
	in, derr := t.decode(m)
	if derr != nil {
		return m, nil, argsError(derr, m)
	}
	if pa, ok := in.(pageable); ok {
		pa.setPage(pg, r.pages, p, t.paging)
	}
	return m, in, nil
}

func schemaProperties(raw json.RawMessage) []string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(raw, &s)
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// formatDuration renders a duration for executionTime: "3ms", "0.42ms", "1.2s".
func formatDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%dms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
	}
}
