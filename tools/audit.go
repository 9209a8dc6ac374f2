package tools

import (
	"cmp"
	"time"

	"github.com/pgtools/pgtools/tools/approval"
)

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

// audit reports a write attempt where route sent it (out); a call refused before it was
// routed names the database its arguments ask for, or the tool's own.
func (r *Registry) audit(p Principal, t *toolEntry, args map[string]any, out Outcome, res Result, err *Error, started time.Time) {
	if r.auditor == nil || !t.gate.isAudited(args) {
		return
	}
	ev := AuditEvent{Time: started.UTC(), Principal: p.Name, Tool: t.info.Name, Duration: time.Since(started),
		Database: out.Database, SessionID: out.Session}
	if ev.Database == "" {
		ev.Database = cmp.Or(t.database, strArg(args, "database"), "default")
		ev.SessionID = strArg(args, "session_id")
	}
	ev.ApprovalID = strArg(args, "approval_id")
	if id, digest, ok := approval.FromError(err); ok {
		ev.ApprovalID, ev.Digest = id, digest
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
