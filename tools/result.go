package tools

import (
	"encoding/json"

	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/plan"
)

// Result is a successful tool call's answer (docs/design.md §4): a *RowsResult, *WriteResult,
// *SchemaResult, *TxResult or *BatchResult. Each type declares the answer's keys in the order the
// answer sends them; MarshalJSON writes "success": true first, then every field that applies.
// Only this package makes results.
type Result interface {
	// MarshalJSON writes the answer as every transport sends it.
	MarshalJSON() ([]byte, error)
	// Summary is what logs, traces, metrics and the audit log read of the answer.
	Summary() Summary
	setExecutionTime(d string)
}

// Summary describes a result for logs, traces, metrics and the audit log: what it touched and how
// big it is, never a value. Its pointers point into the result: read them, do not write them.
type Summary struct {
	Table        string // the table read or changed, as the answer names it; "" when none
	Rows         *int   // the answer's rowCount; nil when it has none
	AffectedRows *int   // rows changed; nil for answers that change nothing
	Truncated    bool   // rows were cut at the row limit or the response byte cap
	DryRun       bool   // a dry run: the change was rolled back
}

// successMember opens every answer.
const successMember = `"success":true`

// The plans of the result types, made once when the program starts and only read after.
var (
	rowsEncoder   = wire.NewObjectEncoder[RowsResult](successMember)
	writeEncoder  = wire.NewObjectEncoder[WriteResult](successMember)
	schemaEncoder = wire.NewObjectEncoder[SchemaResult](successMember)
	txEncoder     = wire.NewObjectEncoder[TxResult](successMember)
	batchEncoder  = wire.NewObjectEncoder[BatchResult](successMember)
)

// timing is the executionTime every answer carries, set by Registry.Call when the call ends.
type timing struct {
	ExecutionTime string `json:"executionTime,omitempty"`
}

func (t *timing) setExecutionTime(d string) { t.ExecutionTime = d }

// echo is the active_session a call inside a session may carry (sessionEcho says when).
type echo struct {
	ActiveSession *SessionInfo `json:"active_session,omitempty"`
}

func (e *echo) setActiveSession(info *SessionInfo) { e.ActiveSession = info }

// RowsResult answers a read: select_query, execute_sql in read mode and operator-defined read
// tools.
type RowsResult struct {
	Operation string    `json:"operation"`
	Table     string    `json:"table,omitempty"`   // select_query's table
	Command   string    `json:"command,omitempty"` // PostgreSQL's command tag, for free SQL
	RowCount  int       `json:"rowCount"`          // rows in Rows
	Rows      wire.Rows `json:"data,omitempty"`
	Truncated bool      `json:"truncated"` // more rows matched than Rows holds
	// NextPage, on a truncated select_query, is the page_token that continues right after the
	// last row in Rows.
	NextPage string `json:"next_page,omitempty"`
	timing
	Hint string `json:"hint,omitempty"` // how to see the rest when Truncated
	echo
}

// MarshalJSON writes the answer with "success": true first.
func (r *RowsResult) MarshalJSON() ([]byte, error) { return rowsEncoder.Marshal(r) }

// Summary reports the table, the row count and whether rows were cut.
func (r *RowsResult) Summary() Summary {
	return Summary{Table: r.Table, Rows: &r.RowCount, Truncated: r.Truncated}
}

// WriteResult answers a change: insert_data, update_data, delete_data, execute_sql in write mode
// and operator-defined write tools, applied or as a dry run.
type WriteResult struct {
	Operation    string    `json:"operation"`
	Table        string    `json:"table,omitempty"`   // the generated statement's table
	Command      string    `json:"command,omitempty"` // PostgreSQL's command tag, for free SQL
	RowCount     int       `json:"rowCount"`          // rows in Rows: RETURNING's, or a dry run's preview
	AffectedRows int       `json:"affectedRows"`
	Rows         wire.Rows `json:"data,omitempty"`
	Truncated    bool      `json:"truncated,omitempty"` // Rows holds fewer rows than were affected
	DryRun       bool      `json:"dryRun,omitempty"`    // the change was rolled back
	timing
	Hint string `json:"hint,omitempty"`
	echo
}

// MarshalJSON writes the answer with "success": true first.
func (r *WriteResult) MarshalJSON() ([]byte, error) { return writeEncoder.Marshal(r) }

// Summary reports the table, the rows returned and changed, and whether it was a dry run.
func (r *WriteResult) Summary() Summary {
	return Summary{Table: r.Table, Rows: &r.RowCount, AffectedRows: &r.AffectedRows, Truncated: r.Truncated, DryRun: r.DryRun}
}

// SchemaResult answers describe_schema: a page of the tables the caller may read, or of one
// table's detail.
type SchemaResult struct {
	Operation string `json:"operation"`
	Table     string `json:"table,omitempty"`    // the described table
	RowCount  *int   `json:"rowCount,omitempty"` // tables listed; nil for one table's detail
	// Schemas, on the first page of a listing without schema, search or kind that does not hold
	// every table, is each schema with its number of tables: the overview to narrow by.
	Schemas   json.RawMessage `json:"schemas,omitempty"`
	Data      json.RawMessage `json:"data"`
	Truncated bool            `json:"truncated"` // more tables, or more of the table's columns, follow
	// NextPage, when truncated, is the page_token that continues after the last one sent.
	NextPage string `json:"next_page,omitempty"`
	timing
	Hint string `json:"hint,omitempty"`
}

// MarshalJSON writes the answer with "success": true first.
func (r *SchemaResult) MarshalJSON() ([]byte, error) { return schemaEncoder.Marshal(r) }

// Summary reports the described table or the number of tables listed, and whether more follow.
func (r *SchemaResult) Summary() Summary {
	return Summary{Table: r.Table, Rows: r.RowCount, Truncated: r.Truncated}
}

// TxResult answers pg_tx: a session begun, committed or rolled back, a savepoint action, or the
// caller's sessions listed.
type TxResult struct {
	Operation string `json:"operation"`
	Action    string `json:"action,omitempty"`
	Status    string `json:"status,omitempty"` // open, committed, rolled_back or ok
	SessionID string `json:"session_id,omitempty"`
	ExpiresIn string `json:"expires_in,omitempty"` // begin: the idle time after which it expires
	RowCount  *int   `json:"rowCount,omitempty"`   // list: the number of sessions
	timing
	Hint     string          `json:"hint,omitempty"`
	Sessions json.RawMessage `json:"sessions,omitempty"` // list
	echo
}

// MarshalJSON writes the answer with "success": true first.
func (r *TxResult) MarshalJSON() ([]byte, error) { return txEncoder.Marshal(r) }

// Summary reports the number of sessions a list found.
func (r *TxResult) Summary() Summary { return Summary{Rows: r.RowCount} }

// BatchResult answers pg_transaction: every operation's outcome, all committed.
type BatchResult struct {
	Operation string `json:"operation"`
	Status    string `json:"status"`
	RowCount  int    `json:"rowCount"` // operations run
	timing
	Results json.RawMessage `json:"results"` // one object per operation: command, rowCount, rows
}

// MarshalJSON writes the answer with "success": true first.
func (r *BatchResult) MarshalJSON() ([]byte, error) { return batchEncoder.Marshal(r) }

// Summary reports the number of operations run.
func (r *BatchResult) Summary() Summary {
	return Summary{Rows: &r.RowCount}
}

var (
	_ Result = (*RowsResult)(nil)
	_ Result = (*WriteResult)(nil)
	_ Result = (*SchemaResult)(nil)
	_ Result = (*TxResult)(nil)
	_ Result = (*BatchResult)(nil)
)

// PlanSummary is plan.Summary under the name PlanResult embeds it by, so that its fields are
// PlanResult's own and its name does not collide with PlanResult's Summary method.
type PlanSummary = plan.Summary

// PlanResult answers explain_query: the summary of the statement's plan.
type PlanResult struct {
	Operation string `json:"operation"`
	PlanSummary
	timing
}

var planEncoder = wire.NewObjectEncoder[PlanResult](successMember)

// MarshalJSON writes the answer with "success": true first.
func (r *PlanResult) MarshalJSON() ([]byte, error) { return planEncoder.Marshal(r) }

// Summary reports nothing read or changed: a plan touches no rows.
func (r *PlanResult) Summary() Summary { return Summary{} }
