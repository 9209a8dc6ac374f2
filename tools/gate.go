package tools

import "fmt"

// gate is what a tool's call needs before anything runs, beside the tool's schema and scope: the
// one place where policy is decided. Call resolves the call's target first (the session named by
// session_id fixes the database), then applies every gate to that target in authorize. Its zero
// value is invalid (access unset) and refused when a tool is registered (check).
type gate struct {
	// access says whether the tool's calls change data: never, always, or as writes decides.
	// A call that writes needs the write scope and a database that is not read-only.
	access access
	// writes reports whether a call changes data; set exactly when access is writesWhen.
	writes func(args map[string]any) bool
	// intent: a call that writes must state intent (session_id, autocommit: true, or dry_run).
	intent bool
	// session reports whether session_id names the session the call runs in. nil: never.
	session func(args map[string]any) bool
	// audits reports whether a call is a write attempt for the audit log; nil: when it writes.
	audits func(args map[string]any) bool
	// echoesSession: every result in a session names it (pg_tx), not only those that write.
	echoesSession bool
	// readOnlyFix is the suggestion for a write refused by a read-only database; scopeFix, when
	// set, the way to do without the write scope (the refusal adds how to get it); scopeMsg
	// names what needed the scope.
	readOnlyFix, scopeFix, scopeMsg string
}

// access is whether a tool's calls write. Its zero value is no answer, which no tool may give.
type access int

const (
	accessUnset  access = iota // invalid: refused by gate.check
	readsOnly                  // no call writes
	writesAlways               // every call writes
	writesWhen                 // a call writes when gate.writes says so
)

// check reports a gate that does not decide: access unset, or a writes function that
// disagrees with access.
func (g gate) check() error {
	switch g.access {
	case readsOnly, writesAlways:
		if g.writes != nil {
			return fmt.Errorf("gate: a writes function is only read with access writesWhen")
		}
	case writesWhen:
		if g.writes == nil {
			return fmt.Errorf("gate: access writesWhen needs a writes function")
		}
	default:
		return fmt.Errorf("gate: access is not set: say whether the tool writes")
	}
	return nil
}

// isWrite reports whether a call with args changes data. An access that is not one of the
// known ones counts as a write, so the stricter checks apply (fail closed).
func (g gate) isWrite(args map[string]any) bool {
	switch g.access {
	case readsOnly:
		return false
	case writesWhen:
		return g.writes(args)
	}
	return true
}

// isAudited reports whether a call is a write attempt for the audit log.
func (g gate) isAudited(args map[string]any) bool {
	if g.audits != nil {
		return g.audits(args)
	}
	return g.isWrite(args)
}

// endsSession: a pg_tx call that commits or rolls back, which the audit log records.
func endsSession(args map[string]any) bool {
	a := strArg(args, "action")
	return a == "commit" || a == "rollback"
}

// strArg returns a string argument of a validated call, or "". Gates read the arguments as a
// map, the form they take before a tool's struct is decoded.
func strArg(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

func boolArg(m map[string]any, key string) bool {
	b, _ := m[key].(bool)
	return b
}

func always(map[string]any) bool { return true }

func modeWrite(args map[string]any) bool { return strArg(args, "mode") == "write" }

// sessionActions are the pg_tx actions that act on an open session.
func sessionAction(args map[string]any) bool {
	switch strArg(args, "action") {
	case "commit", "rollback", "savepoint", "release", "rollback_to":
		return true
	}
	return false
}
