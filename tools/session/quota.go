package session

import (
	"fmt"

	"github.com/pgtools/pgtools/tools/internal/pgerr"
)

// The shares a begin is checked against, narrowest first: when the caller's own share is full,
// ending one of its own sessions is the fix, whatever the others hold; when its owner's is, the
// other users of the same token or issuer hold the slots; only then the runner's total.

// admit counts one begin of principal, owned by owner, or says which share is full. Caller holds mu.
func (m *Manager) admit(principal, owner string) *pgerr.Error {
	subject := owner != principal
	if n := m.subjects[principal]; subject && n >= m.cfg.MaxPerSubject {
		return &pgerr.Error{Type: pgerr.ErrSessionLimitReached,
			Message: fmt.Sprintf("You already hold %d of your %d sessions, the most one user of %q may have open at once (sessions.max_sessions_per_subject; %q has %d in all)",
				n, m.cfg.MaxPerSubject, owner, owner, m.cfg.MaxPerPrincipal),
			Suggestion: "Commit or roll back one of your sessions you no longer need (pg_tx commit/rollback), or use autocommit: true or pg_transaction, which need no session. " +
				"If you need more at once, ask the operator to raise sessions.max_sessions_per_subject." + m.describe(principal)}
	}
	if n := m.held[owner]; n >= m.cfg.MaxPerPrincipal {
		if subject {
			return &pgerr.Error{Type: pgerr.ErrSessionLimitReached,
				Message: fmt.Sprintf("All %d sessions of %q, shared by every user it acts for, are in use (sessions.max_sessions_per_principal); you hold %d of them",
					m.cfg.MaxPerPrincipal, owner, m.subjects[principal]),
				Suggestion: fmt.Sprintf("Commit or roll back a session of yours you no longer need, or retry once other users of %q end theirs; autocommit: true and pg_transaction need no session. "+
					"If this keeps happening, ask the operator to raise sessions.max_sessions_per_principal.", owner) + m.describe(principal)}
		}
		return &pgerr.Error{Type: pgerr.ErrSessionLimitReached,
			Message: fmt.Sprintf("You already hold %d of your %d sessions, the most one caller may have open at once (sessions.max_sessions_per_principal; the runner has %d in all)",
				n, m.cfg.MaxPerPrincipal, m.cfg.MaxSessions),
			Suggestion: "Commit or roll back one of your sessions you no longer need (pg_tx commit/rollback), or use autocommit: true or pg_transaction, which need no session. " +
				"If you need more at once, ask the operator to raise sessions.max_sessions_per_principal." + m.describe(principal)}
	}
	if len(m.sessions)+m.pending >= m.cfg.MaxSessions {
		return &pgerr.Error{Type: pgerr.ErrSessionLimitReached,
			Message: fmt.Sprintf("All %d session slots of this runner are in use (sessions.max_sessions)", m.cfg.MaxSessions),
			Suggestion: "Commit or roll back a session you no longer need (pg_tx commit/rollback), or use autocommit: true or pg_transaction, which need no session. " +
				"If this keeps happening, ask the operator to raise sessions.max_sessions." + m.describe(principal)}
	}
	m.held[owner]++
	if subject {
		m.subjects[principal]++
	}
	return nil
}

// drop counts one session (or begin in progress) of principal, owned by owner, less. Caller holds mu.
func (m *Manager) drop(principal, owner string) {
	if owner == "" {
		owner = principal
	}
	if m.held[owner]--; m.held[owner] <= 0 {
		delete(m.held, owner)
	}
	if owner != principal {
		if m.subjects[principal]--; m.subjects[principal] <= 0 {
			delete(m.subjects, principal)
		}
	}
}
