package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/pgtools/pgtools/tools/page"
	"github.com/pgtools/pgtools/tools/words"
)

// Call validates rawArgs against the tool's schema and runs it for principal. Every failure is an
// *Error; a nil error means res is set. out says where the call ran, also when it failed after
// being routed.
func (r *Registry) Call(ctx context.Context, p Principal, tool string, rawArgs []byte) (res Result, out Outcome, err *Error) {
	started := time.Now()
	t, ok := r.tools[tool]
	if !ok {
		e := r.unknownTool(tool)
		r.observe("", nil, false, nil, e, started)
		return nil, out, e
	}
	var m map[string]any
	var db *Database
	routed := false // the principal may use db
	defer func() {
		if err != nil {
			finishError(err, t, db, m)
		}
		if res != nil {
			res.setExecutionTime(formatDuration(time.Since(started)))
		}
		r.audit(p, t, m, out, res, err, started)
		r.observe(tool, db, routed, res, err, started)
	}()
	m, in, pg, err := r.decodeCall(p, t, rawArgs)
	if err != nil {
		return nil, out, err
	}
	// Route once: the session session_id names fixes the database; every gate then applies to it.
	var sess *Session
	db, sess, err = r.route(ctx, p, t, m)
	if err != nil {
		return nil, out, err
	}
	out.Database = db.Name
	if sess != nil {
		out.Session = sess.ID
		defer r.sessions.Release(sess)
	}
	routed = p.mayUse(db.Name)
	req := &request{sessions: r.sessions, txLimit: r.txLimit, principal: p, db: db, session: sess, args: m, in: in, started: started,
		maxBytes: responseCap(ctx, p, db), budget: planBudgetOf(ctx, p, db)}
	if t.paging != nil {
		req.pages = &pager{state: pg, spec: t.paging, signer: r.pages}
	}
	if req.budget.Set() {
		req.budget.Estimates = req.catalogEstimate
	}
	if err = r.authorize(req, t); err != nil {
		return nil, out, err
	}
	if t.writes() {
		if req.approval, err = newApprovalGate(r.approvals, p, db, tool, m); err != nil {
			return nil, out, err
		}
		defer req.approval.release()
	}
	res, err = t.run(ctx, req)
	if sess != nil {
		res, err = settleSession(req, t, res, err)
	}
	return res, out, err
}

// finishError completes a failed call's error as the model reads it: the tool's operation, the
// caller's values masked where echoed (unless db shows them), long echoes clipped.
func finishError(err *Error, t *toolEntry, db *Database, args map[string]any) {
	if err.Operation == "" {
		err.Operation = t.operation
	}
	if db == nil || db.Policy.MasksErrorValues() {
		redactValues(err, args)
	}
	clipEchoes(err) // after masking, which must see whole values
}

func (r *Registry) unknownTool(tool string) *Error {
	return &Error{Type: ErrUnknownTool, Message: fmt.Sprintf("Unknown tool %s", words.Quote(tool)),
		Suggestion: "Available tools: " + strings.Join(r.order, ", ")}
}

// decodeCall checks p's scope for t and decodes rawArgs: parsed into the map the schema
// validates, then, once valid, decoded into the tool's struct. m is set as far as parsing got,
// for masking.
func (r *Registry) decodeCall(p Principal, t *toolEntry, rawArgs []byte) (m map[string]any, in any, pg *page.State, err *Error) {
	if !p.Can(t.scope) {
		return nil, nil, nil, p.lacksScope(t.scope, t.info.Name, "")
	}
	var args any
	if len(strings.TrimSpace(string(rawArgs))) == 0 {
		args = map[string]any{}
	} else if e := decodeJSON(rawArgs, &args); e != nil {
		return nil, nil, nil, errorf(ErrInvalidArguments, "Send the arguments as one JSON object, e.g. {\"table\": \"orders\"}.",
			"Invalid arguments: the body is not valid JSON")
	}
	m, _ = args.(map[string]any)
	// A page token brings the arguments of the call that issued it: merged first, the call
	// then validates as that one did.
	if tok, ok := m["page_token"].(string); ok && t.paging != nil && r.pages != nil {
		if pg, err = r.pages.Open(pageWho(p), t.info.Name, tok); err != nil {
			return m, nil, nil, err
		}
		if err = t.paging.Merge(m, pg); err != nil {
			return m, nil, nil, err
		}
	}
	if verr := t.schema.Validate(args); verr != nil {
		return m, nil, nil, validationError(verr, t)
	}
	if e := nulError(m, ""); e != nil {
		return m, nil, nil, e
	}
	// The typed struct is decoded from the call's own JSON; only a call a page token added to
	// is encoded again, as merged.
	body := rawArgs
	if pg != nil {
		body, _ = json.Marshal(m)
	} else if len(strings.TrimSpace(string(rawArgs))) == 0 {
		body = []byte("{}")
	}
	in, derr := t.decode(body)
	if derr != nil {
		return m, nil, nil, argsError(derr, m)
	}
	return m, in, pg, nil
}

// formatDuration renders a duration for executionTime: "3ms", "0.42ms", "1.2s".
func formatDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%dms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000)
	}
}
