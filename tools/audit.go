package tools

import (
	"cmp"
	"time"

	"github.com/pgtools/pgtools/tools/approval"
)

// audit reports a write attempt, as the call's arguments in say it is one, where route sent it
// (out); a call refused before it was routed names the database and session its arguments ask
// for, or the tool's own database.
func (r *Registry) audit(p Principal, t *toolEntry, in toolArgs, out Outcome, res Result, err *Error, started time.Time) {
	if r.auditor == nil || !isAudited(in) {
		return
	}
	ev := AuditEvent{Time: started.UTC(), Principal: p.Name, Tool: t.info.Name, Duration: time.Since(started),
		Database: out.Database, SessionID: out.Session}
	if ev.Database == "" {
		to := in.route()
		ev.Database = cmp.Or(t.database, to.Database, "default")
		ev.SessionID = to.SessionID
	}
	ev.ApprovalID = in.approvalID()
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

// AuditApprovals is the approval store's audit callback (approval.Options.Audit) that reports
// each event of a request to a, as an AuditEvent with Outcome "approval_" and the event; nil
// when a is nil.
func AuditApprovals(a Auditor) func(approval.Event) {
	if a == nil {
		return nil
	}
	return func(ev approval.Event) {
		ap := ev.Request
		total := int(ap.Effect.Total)
		a.Audit(AuditEvent{Time: ev.Time, Principal: ap.Principal, Tool: ap.Tool, Database: ap.Database,
			Outcome: "approval_" + ev.What, ApprovalID: ap.ID, Digest: ap.Digest, Approver: ev.Approver, AffectedRows: &total})
	}
}
