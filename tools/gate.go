package tools

import "errors"

// gate is the policy a tool's calls answer to beside its schema, its scope and what its
// arguments say of writing (toolArgs): the one place where the rest of policy is decided. Call
// resolves the call's target first (the session its arguments route to fixes the database),
// then applies the gate to that target in authorize. check refuses a gate that does not fit
// its tool's access.
type gate struct {
	// intent: a call that writes must state intent (session_id, autocommit: true, or dry_run).
	intent bool
	// echoesSession: every result in a session names it (pg_tx), not only those that write.
	echoesSession bool
	// readOnlyFix is the suggestion for a write refused by a read-only database; scopeFix, when
	// set, the way to do without the write scope (the refusal adds how to get it); scopeMsg
	// names what needed the scope.
	readOnlyFix, scopeFix, scopeMsg string
}

// check reports a gate that does not fit a tool of access k: a tool that may write must say
// how to do without writing on a read-only database; one that never writes has no write rules.
func (g gate) check(k access) error {
	switch k {
	case readsOnly:
		if g.intent || g.echoesSession || g.readOnlyFix != "" || g.scopeFix != "" || g.scopeMsg != "" {
			return errors.New("gate: write rules on a tool whose arguments say it never writes")
		}
	case writesAlways, writesWhen, controlsSessions:
		if g.readOnlyFix == "" {
			return errors.New("gate: a tool that writes needs readOnlyFix, the way to do without writing on a read-only database")
		}
	default:
		return errors.New("gate: the tool's arguments do not say whether it writes")
	}
	return nil
}

// isWrite reports whether the call in changes data, as its argument type says: never, always,
// or as the call's writes says. An access that is not one of the known ones counts as a write,
// so the stricter checks apply (fail closed).
func isWrite(in toolArgs) bool {
	switch in.access() {
	case readsOnly:
		return false
	case writesWhen, controlsSessions:
		return in.writes()
	}
	return true
}

// isAudited reports whether the call in is a write attempt for the audit log, like isWrite.
func isAudited(in toolArgs) bool {
	switch in.access() {
	case readsOnly:
		return false
	case writesWhen, controlsSessions:
		return in.audited()
	}
	return true
}
