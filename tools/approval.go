package tools

import (
	"fmt"
	"slices"
	"strings"
)

// An approval rule names writes that a person must approve before they commit
// (policy.require_approval, a token's require_approval). A call a rule matches runs in a
// transaction that is rolled back, and answers approval_required with what it measured; an
// approver with another credential approves that request; the call sent again with its
// approval_id commits only when it does exactly what was approved (approvals.go).
type ApprovalRule struct {
	// When is the kind of rule: one of ApprovalKinds.
	When string `json:"when"`
	// Rows is rows_over's bound: writes that change more rows than this, in all tables together.
	Rows int64 `json:"rows,omitempty"`
	// Table is table's table, "schema.name" or "name" (in any schema): writes that change a row
	// of it.
	Table string `json:"table,omitempty"`
	// Tool is tool's tool (a built-in write tool or an operator-defined one): every write of it.
	Tool string `json:"tool,omitempty"`
}

// The kinds of approval rule.
const (
	ApproveRowsOver    = "rows_over"   // a write that changes more than Rows rows
	ApproveDDL         = "ddl"         // a statement that changes the schema
	ApproveDestructive = "destructive" // DROP or TRUNCATE
	ApproveTable       = "table"       // a write that changes a row of Table
	ApproveTool        = "tool"        // any write of Tool
)

// approvalKinds is every kind a rule may have and the fields it takes; a rule of any other kind
// is refused when the configuration loads, and one that got past that anyway matches every write
// (matches), so a rule is never dropped in silence.
var approvalKinds = map[string]struct {
	rows, table, tool bool
}{
	ApproveRowsOver:    {rows: true},
	ApproveDDL:         {},
	ApproveDestructive: {},
	ApproveTable:       {table: true},
	ApproveTool:        {tool: true},
}

// ApprovalKinds lists the kinds of approval rule, sorted.
func ApprovalKinds() []string {
	out := make([]string, 0, len(approvalKinds))
	for k := range approvalKinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Validate reports what is wrong with r, naming the fix.
func (r ApprovalRule) Validate() error {
	k, ok := approvalKinds[r.When]
	if !ok {
		return fmt.Errorf("require_approval: unknown when %q; use one of %s", r.When, strings.Join(ApprovalKinds(), ", "))
	}
	switch {
	case k.rows && r.Rows < 0:
		return fmt.Errorf("require_approval: rows_over needs rows of 0 or more (0: any write that changes a row)")
	case !k.rows && r.Rows != 0:
		return fmt.Errorf("require_approval: %s takes no rows (rows belongs to rows_over)", r.When)
	case k.table && strings.TrimSpace(r.Table) == "":
		return fmt.Errorf(`require_approval: table needs "table": "schema.name" or "name"`)
	case !k.table && r.Table != "":
		return fmt.Errorf("require_approval: %s takes no table (table belongs to when: table)", r.When)
	case k.tool && strings.TrimSpace(r.Tool) == "":
		return fmt.Errorf(`require_approval: tool needs "tool": the tool's name`)
	case !k.tool && r.Tool != "":
		return fmt.Errorf("require_approval: %s takes no tool (tool belongs to when: tool)", r.When)
	}
	return nil
}

// String says what r asks approval for, for messages and the approver's page.
func (r ApprovalRule) String() string {
	switch r.When {
	case ApproveRowsOver:
		return fmt.Sprintf("writes that change more than %d rows", r.Rows)
	case ApproveDDL:
		return "schema changes (DDL)"
	case ApproveDestructive:
		return "DROP and TRUNCATE"
	case ApproveTable:
		return "writes to table " + r.Table
	case ApproveTool:
		return "every write of tool " + r.Tool
	}
	return fmt.Sprintf("every write (unknown rule %q)", r.When)
}

// matches reports whether r asks approval for a write of tool that did eff. A rule of an
// unknown kind matches: a policy this runner cannot read must not let writes through.
func (r ApprovalRule) matches(tool string, eff Effect) bool {
	switch r.When {
	case ApproveRowsOver:
		return eff.Total > r.Rows
	case ApproveDDL:
		return eff.DDL
	case ApproveDestructive:
		return eff.Destructive
	case ApproveTable:
		schema, name, qualified := strings.Cut(r.Table, ".")
		if !qualified {
			schema, name = "", r.Table
		}
		for _, t := range eff.Tables {
			if t.Rows > 0 && t.Name == name && (schema == "" || t.Schema == schema) {
				return true
			}
		}
		return false
	case ApproveTool:
		return tool == r.Tool
	}
	return true
}

// Effect is what a write did in its transaction, as measured before it committed: the rows it
// inserted, updated or deleted per table (a partition's rows count for its partitioned table;
// rows written by triggers count too), and whether it changed the schema.
type Effect struct {
	Tables []TableRows `json:"tables"`
	// Total is the rows of every table together.
	Total int64 `json:"total"`
	// Commands are the statements' command tags, in order (UPDATE, DELETE, CREATE TABLE …).
	Commands []string `json:"commands"`
	// DDL: a statement changed the schema; Destructive: one was a DROP or a TRUNCATE.
	DDL         bool `json:"ddl,omitempty"`
	Destructive bool `json:"destructive,omitempty"`
}

// TableRows is one table's rows in an Effect.
type TableRows struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	Rows   int64  `json:"rows"`
	// hidden: the caller's role holds no privilege on the table (rows a trigger wrote into an
	// audit table, say). The approver sees it; the caller is told only how many such rows.
	hidden bool
}

// same reports whether e and o are the same effect: the same rows in the same tables and the
// same kind of statements.
func (e Effect) same(o Effect) bool {
	if e.Total != o.Total || e.DDL != o.DDL || e.Destructive != o.Destructive || !slices.Equal(e.Commands, o.Commands) || len(e.Tables) != len(o.Tables) {
		return false
	}
	for i := range e.Tables {
		a, b := e.Tables[i], o.Tables[i]
		if a.Schema != b.Schema || a.Name != b.Name || a.Rows != b.Rows {
			return false
		}
	}
	return true
}

// forCaller is e as the caller may see it: tables its role holds no privilege on are one
// entry without a name.
func (e Effect) forCaller() Effect {
	out := e
	out.Tables = nil
	var hidden int64
	for _, t := range e.Tables {
		if t.hidden {
			hidden += t.Rows
			continue
		}
		out.Tables = append(out.Tables, t)
	}
	if hidden > 0 {
		out.Tables = append(out.Tables, TableRows{Name: "(tables your role cannot read)", Rows: hidden})
	}
	return out
}

// describe is e in words: "delete 120 rows of public.orders".
func (e Effect) describe() string {
	var parts []string
	for _, t := range e.Tables {
		name := t.Name
		if t.Schema != "" {
			name = t.Schema + "." + t.Name
		}
		parts = append(parts, fmt.Sprintf("%d rows of %s", t.Rows, name))
	}
	what := strings.Join(parts, ", ")
	if what == "" {
		what = "no rows"
	}
	cmds := strings.Join(e.Commands, ", ")
	if cmds == "" {
		cmds = "write"
	}
	return fmt.Sprintf("%s (%s)", what, cmds)
}

// approvalRules are the rules that apply to p's calls on db: the database's, then p's.
func approvalRules(p Principal, db *Database) []ApprovalRule {
	if len(p.RequireApproval) == 0 {
		return db.Policy.RequireApproval
	}
	return append(slices.Clip(db.Policy.RequireApproval), p.RequireApproval...)
}
