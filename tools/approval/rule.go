package approval

import (
	"fmt"
	"slices"
	"strings"
)

// A Rule names writes that a person must approve before they commit (policy.require_approval,
// a token's require_approval). A call a rule matches runs in a transaction that is rolled
// back, and answers approval_required with what it measured; an approver with another
// credential approves that request; the call sent again with its approval_id commits only when
// it does exactly what was approved (Store).
type Rule struct {
	// When is the kind of rule: one of Kinds.
	When string `json:"when"`
	// Rows is rows_over's bound: writes that change more rows than this, in all tables together.
	Rows int64 `json:"rows,omitempty"`
	// Table is table's table, "schema.name" or "name" (in any schema): writes that change a row
	// of it.
	Table string `json:"table,omitempty"`
	// Tool is tool's tool (a built-in write tool or an operator-defined one): every write of it.
	Tool string `json:"tool,omitempty"`
}

// The kinds of rule.
const (
	WhenRowsOver    = "rows_over"   // a write that changes more than Rows rows
	WhenDDL         = "ddl"         // a statement that changes the schema
	WhenDestructive = "destructive" // DROP or TRUNCATE
	WhenTable       = "table"       // a write that changes a row of Table
	WhenTool        = "tool"        // any write of Tool
)

// kinds is every kind a rule may have and the fields it takes; a rule of any other kind is
// refused when the configuration loads, and one that got past that anyway matches every write
// (Matches), so a rule is never dropped in silence.
var kinds = map[string]struct {
	rows, table, tool bool
}{
	WhenRowsOver:    {rows: true},
	WhenDDL:         {},
	WhenDestructive: {},
	WhenTable:       {table: true},
	WhenTool:        {tool: true},
}

// Kinds lists the kinds of rule, sorted.
func Kinds() []string {
	out := make([]string, 0, len(kinds))
	for k := range kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Validate reports what is wrong with r, naming the fix.
func (r Rule) Validate() error {
	k, ok := kinds[r.When]
	if !ok {
		return fmt.Errorf("require_approval: unknown when %q; use one of %s", r.When, strings.Join(Kinds(), ", "))
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
func (r Rule) String() string {
	switch r.When {
	case WhenRowsOver:
		return fmt.Sprintf("writes that change more than %d rows", r.Rows)
	case WhenDDL:
		return "schema changes (DDL)"
	case WhenDestructive:
		return "DROP and TRUNCATE"
	case WhenTable:
		return "writes to table " + r.Table
	case WhenTool:
		return "every write of tool " + r.Tool
	}
	return fmt.Sprintf("every write (unknown rule %q)", r.When)
}

// Matches reports whether r asks approval for a write of tool that did eff. A rule of an
// unknown kind matches: a policy this runner cannot read must not let writes through.
func (r Rule) Matches(tool string, eff Effect) bool {
	switch r.When {
	case WhenRowsOver:
		return eff.Total > r.Rows
	case WhenDDL:
		return eff.DDL
	case WhenDestructive:
		return eff.Destructive
	case WhenTable:
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
	case WhenTool:
		return tool == r.Tool
	}
	return true
}
