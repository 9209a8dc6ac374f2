package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/page"
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

type handler func(ctx context.Context, req *request) (Result, *Error)

type toolEntry struct {
	info      ToolInfo
	operation string   // the operation name errors carry before the handler runs
	scope     string   // scope a principal needs to call the tool at all
	props     []string // the schema's property names, sorted, for invalid_arguments suggestions
	schema    *jsonschema.Schema
	run       handler
	gate      gate            // the policy a call needs (authorize.go)
	newArgs   func() toolArgs // a new, empty argument struct of the tool's type, which a validated call is decoded into
	access    access          // whether the tool's calls write, as its argument type says
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
	forwarder Forwarder // nil: sessions of other replicas are answered here
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
	// Forwarder sends a call in a session another replica holds to that replica. nil: such a
	// call is answered here (session_not_found naming the replica's tag).
	Forwarder Forwarder
}

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

// previewer fills, from a call's typed arguments and its raw JSON, what a confirmation shows a
// human and the arguments it sends on (Preview).
type previewer func(in toolArgs, raw []byte, pv *Preview)

// Outcome is where a call ran, as Call routed it: what logs, metrics, the audit log, traces and
// confirmations name, so that no transport reads the arguments again to guess it.
type Outcome struct {
	// Database is the configured database the call ran on: the session's for a call in a
	// session, the tool's own for an operator-defined tool bound to one, else the database
	// argument or "default". "" when the call was refused before it was routed (unknown tool,
	// bad arguments, a database the principal may not use).
	Database string
	// Session is the id of the session the call ran in, "" for a call outside any session.
	Session string
}

// Preview is what a human is shown before a call that cannot be undone, and what is sent on
// once they agree. Registry.Preview fills it without running the call, routed as Call routes
// it, so transports name neither tools nor arguments.
type Preview struct {
	// Tool is the tool's wire name.
	Tool string
	// Database is the database the call would run on (Outcome.Database).
	Database string
	// Session is the session the call would run in, "" for none.
	Session string
	// Table is the table the call names, "" when it names none.
	Table string
	// Statement is the SQL text the call sends, "" for tools that take none; shown to the human.
	Statement string
	// CountArgs are the call's arguments as a dry run that counts the rows it would change; nil
	// when the call cannot be counted that way (a read, or already a dry run).
	CountArgs []byte
	// ConfirmedArgs are the call's arguments with the human's confirmation of a destructive
	// statement given; nil when the tool takes no such confirmation or the call already has it.
	ConfirmedArgs []byte

	verb string // what CountArgs counts: "update", "delete"; "" for an operator-defined tool
}

// AskRows is the question for a human before a call whose dry run counted rows rows of table
// (as the dry run's result names it), above the threshold over.
func (pv Preview) AskRows(rows int, table string, over int) string {
	what := fmt.Sprintf("%s %d rows of table %s", pv.verb, rows, table)
	if pv.verb == "" {
		what = fmt.Sprintf("change %d rows with tool %s", rows, pv.Tool)
	}
	return fmt.Sprintf("The agent wants to %s in database %s (counted by a dry run; pgtools asks above %d rows). Allow it?",
		what, pv.Database, over)
}

// AskDestructive is the question for a human before a statement the tool refused without
// confirmation; refusal is that refusal's message.
func (pv Preview) AskDestructive(refusal string) string {
	return fmt.Sprintf("The agent wants to run a statement that cannot be undone, on database %s: %s\n\n%s\n\nAllow it?",
		pv.Database, refusal, clipForHuman(pv.Statement, 2000))
}

// CallEvent is one finished tool call as metrics see it: what ran where, how it ended and how
// long it took. It never holds arguments, values, SQL or the principal.
type CallEvent struct {
	// Tool is the tool's wire name, or "" when the name was not a known tool.
	Tool string
	// Database is the configured database the call was routed to, or "" when it never got that
	// far (bad arguments, a database the principal may not use, an unknown name).
	Database string
	// ErrorType is the failure's category, or "" for a success.
	ErrorType ErrorType
	// Duration is the time spent in Registry.Call, validation included.
	Duration time.Duration
	// Rows is the result's rowCount (rows returned), 0 when it has none.
	Rows int
	// Truncated reports a result cut at its row limit or byte cap.
	Truncated bool
}

// Observer receives one event per Registry.Call, on the caller's goroutine, after the call has
// finished. Implementations must be safe for concurrent use and cheap: they run on every call.
type Observer interface {
	ObserveCall(ev CallEvent)
}

// AuditEvent is one write attempt as the audit log records it. It never holds values, SQL text or
// secrets: who, which tool, where, how many rows, and how it ended.
type AuditEvent struct {
	Time         time.Time
	Principal    string
	Tool         string
	Database     string
	Table        string
	SessionID    string
	AffectedRows *int
	// Outcome is "committed", "dry_run", "in_session" (applied inside an open session) or "error".
	Outcome   string
	ErrorType ErrorType
	Duration  time.Duration
	// ApprovalID names the approval request the event belongs to: one a call made
	// (approval_required), used or mismatched, or one an approver decided (Outcome
	// "approval_approved", "approval_denied"; "approval_requested", "approval_expired",
	// "approval_used", "approval_mismatched" as the store records them).
	ApprovalID string
	// Digest is the approved call's digest (tool, database, arguments); Approver who decided.
	Digest   string
	Approver string
}

// Auditor receives one event per write attempt, allowed or refused. Implementations must be safe
// for concurrent use and must not block for long.
type Auditor interface {
	Audit(ev AuditEvent)
}

// clipForHuman shortens s to at most n bytes for a message to a human.
func clipForHuman(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
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
