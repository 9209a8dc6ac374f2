package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Outcome is where a call ran, as Call routed it: what logs, metrics, the audit log, traces and
// confirmations name, so that no transport reads the arguments again to guess it.
type Outcome struct {
	// Database is the configured database the call ran on: the session's for a call in a
	// session, the tool's own for an operator-defined tool bound to one, else the database
	// argument or "default". "" when the call was refused before it was routed (unknown tool,
	// bad arguments, a database the principal may not use).
	Database string
	// Session is the id of the session the call ran in, "" for a call outside any session.
	Session string
}

// Preview is what a human is shown before a call that cannot be undone, and what is sent on
// once they agree. Registry.Preview fills it without running the call, routed as Call routes
// it, so transports name neither tools nor arguments.
type Preview struct {
	// Tool is the tool's wire name.
	Tool string
	// Database is the database the call would run on (Outcome.Database).
	Database string
	// Session is the session the call would run in, "" for none.
	Session string
	// Table is the table the call names, "" when it names none.
	Table string
	// Statement is the SQL text the call sends, "" for tools that take none; shown to the human.
	Statement string
	// CountArgs are the call's arguments as a dry run that counts the rows it would change; nil
	// when the call cannot be counted that way (a read, or already a dry run).
	CountArgs []byte
	// ConfirmedArgs are the call's arguments with the human's confirmation of a destructive
	// statement given; nil when the tool takes no such confirmation or the call already has it.
	ConfirmedArgs []byte

	verb string // what CountArgs counts: "update", "delete"; "" for an operator-defined tool
}

// AskRows is the question for a human before a call whose dry run counted rows rows of table
// (as the dry run's result names it), above the threshold over.
func (pv Preview) AskRows(rows int, table string, over int) string {
	what := fmt.Sprintf("%s %d rows of table %s", pv.verb, rows, table)
	if pv.verb == "" {
		what = fmt.Sprintf("change %d rows with tool %s", rows, pv.Tool)
	}
	return fmt.Sprintf("The agent wants to %s in database %s (counted by a dry run; pgtools asks above %d rows). Allow it?",
		what, pv.Database, over)
}

// AskDestructive is the question for a human before a statement the tool refused without
// confirmation; refusal is that refusal's message.
func (pv Preview) AskDestructive(refusal string) string {
	return fmt.Sprintf("The agent wants to run a statement that cannot be undone, on database %s: %s\n\n%s\n\nAllow it?",
		pv.Database, refusal, clipForHuman(pv.Statement, 2000))
}

// Preview validates and routes a call like Call, without running it, and says what a human
// asked to approve it must see. The error is the one Call would answer before running, with
// the caller's values masked as Call masks them.
func (r *Registry) Preview(ctx context.Context, p Principal, tool string, rawArgs []byte) (Preview, *Error) {
	t, ok := r.tools[tool]
	if !ok {
		return Preview{}, r.unknownTool(tool)
	}
	m, in, err := r.decodeCall(p, t, rawArgs)
	if err != nil {
		finishError(err, t, nil, m)
		return Preview{}, err
	}
	db, sess, err := r.route(ctx, p, t, m)
	if err != nil {
		finishError(err, t, nil, m)
		return Preview{}, err
	}
	pv := Preview{Tool: tool, Database: db.Name}
	if sess != nil {
		pv.Session = sess.ID
		r.sessions.Release(sess)
	}
	if t.preview != nil {
		t.preview(in, m, rawArgs, &pv)
	}
	return pv, nil
}

// previewCustom: an operator-defined write tool can be counted by its dry run.
func previewCustom(_ any, args map[string]any, raw []byte, pv *Preview) {
	if !boolArg(args, "dry_run") {
		pv.CountArgs = withArg(raw, "dry_run", true)
	}
}

// withArg returns args (a JSON object) with key set to v, or nil if args is not an object.
func withArg(args []byte, key string, v any) []byte {
	var m map[string]json.RawMessage
	if len(strings.TrimSpace(string(args))) == 0 {
		m = map[string]json.RawMessage{}
	} else if json.Unmarshal(args, &m) != nil || m == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	m[key] = b
	out, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	return out
}

// clipForHuman shortens s to at most n bytes for a message to a human.
func clipForHuman(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
