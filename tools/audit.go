package tools

import "time"

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
}

// Auditor receives one event per write attempt, allowed or refused. Implementations must be safe
// for concurrent use and must not block for long.
type Auditor interface {
	Audit(ev AuditEvent)
}

// SetAuditor sets where write attempts are reported (nil: nowhere). Call it before serving.
func (r *Registry) SetAuditor(a Auditor) { r.auditor = a }

// isWriteCall reports whether a call is a write attempt for the audit log.
func isWriteCall(tool string, args map[string]any) bool {
	switch tool {
	case "insert_data", "update_data", "delete_data", "pg_transaction":
		return true
	case "execute_sql":
		return args != nil && args["mode"] == "write"
	case "pg_tx":
		return args != nil && (args["action"] == "commit" || args["action"] == "rollback")
	}
	return false
}

func (r *Registry) audit(p Principal, t *toolEntry, args map[string]any, res Result, err *Error, started time.Time) {
	tool := t.info.Name
	if r.auditor == nil || !(t.writes || isWriteCall(tool, args)) {
		return
	}
	ev := AuditEvent{Time: started.UTC(), Principal: p.Name, Tool: tool, Duration: time.Since(started)}
	if args != nil {
		ev.Database, _ = args["database"].(string)
		ev.SessionID, _ = args["session_id"].(string)
	}
	if t.database != "" {
		ev.Database = t.database
	}
	if ev.Database == "" {
		ev.Database = "default"
	}
	switch {
	case err != nil:
		ev.Outcome, ev.ErrorType, ev.Table = "error", err.Type, err.Table
	case res != nil:
		sum := res.Summary()
		ev.Table, ev.AffectedRows = sum.Table, sum.AffectedRows
		switch {
		case sum.DryRun:
			ev.Outcome = "dry_run"
		case ev.SessionID != "":
			ev.Outcome = "in_session"
		default:
			ev.Outcome = "committed"
		}
	}
	r.auditor.Audit(ev)
}
