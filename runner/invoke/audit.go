package invoke

import (
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/tools"
)

// AuditLog writes one JSON line per write attempt: time, principal, tool, database, table,
// affected rows, session, outcome, error type and duration, and for approvals (outcomes
// approval_requested, approval_approved, …) the approval's id, digest and approver. Never values
// or SQL. It is safe for
// concurrent use.
type AuditLog struct {
	log zerolog.Logger
}

var _ tools.Auditor = (*AuditLog)(nil)

// NewAuditLog writes audit lines to w.
func NewAuditLog(w io.Writer) *AuditLog {
	return &AuditLog{log: zerolog.New(zerolog.SyncWriter(w))}
}

// OpenAuditLog opens the audit destination of the config: "" → none (nil), "-" → stderr, else a
// file opened for appending (created 0600). close releases it.
func OpenAuditLog(dest string) (a *AuditLog, closeFn func() error, err error) {
	switch dest {
	case "":
		return nil, func() error { return nil }, nil
	case "-":
		return NewAuditLog(os.Stderr), func() error { return nil }, nil
	}
	f, err := os.OpenFile(dest, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the audit log: %w", err)
	}
	return NewAuditLog(f), f.Close, nil
}

// Audit implements tools.Auditor.
func (a *AuditLog) Audit(ev tools.AuditEvent) {
	e := a.log.Log().Time("time", ev.Time).Str("kind", "audit").Str("principal", ev.Principal).Str("tool", ev.Tool).
		Str("database", ev.Database).Str("outcome", ev.Outcome).Dur("duration_ms", ev.Duration)
	if ev.Table != "" {
		e = e.Str("table", ev.Table)
	}
	if ev.AffectedRows != nil {
		e = e.Int("affected_rows", *ev.AffectedRows)
	}
	if ev.SessionID != "" {
		e = e.Str("session", ev.SessionID)
	}
	if ev.ErrorType != "" {
		e = e.Str("error_type", string(ev.ErrorType))
	}
	// The approval's id, the digest of the arguments it binds and who decided: never the
	// arguments themselves.
	if ev.ApprovalID != "" {
		e = e.Str("approval_id", ev.ApprovalID)
	}
	if ev.Digest != "" {
		e = e.Str("digest", ev.Digest)
	}
	if ev.Approver != "" {
		e = e.Str("approver", ev.Approver)
	}
	e.Send()
}
