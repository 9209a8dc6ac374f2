package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pgtools/pgtools/tools/internal/wire"
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
	var dc decoded
	var db *Database
	routed := false    // the principal may use db
	forwarded := false // the owner of the call's session answered it, and audited it
	defer func() {
		if forwarded {
			r.observe(tool, nil, false, res, err, started)
			return
		}
		if err != nil {
			finishError(err, t, db, dc.parsed)
		}
		if res != nil {
			res.setExecutionTime(formatDuration(time.Since(started)))
		}
		r.audit(p, t, dc.in, out, res, err, started)
		r.observe(tool, db, routed, res, err, started)
	}()
	if dc, err = r.decodeCall(p, t, rawArgs); err != nil {
		return nil, out, err
	}
	// A session another replica holds: its answer, unchanged (forward.go). The route hint is
	// checked first, here as there.
	if id := dc.in.route().SessionID; id != "" && r.forwarder != nil {
		if err = checkRouteHint(ctx, id); err != nil {
			return nil, out, err
		}
		if res, out, err, forwarded = r.forward(ctx, p, t, id, rawArgs); forwarded {
			return res, out, err
		}
	}
	// Route once: the session the arguments route to fixes the database; every gate then
	// applies to it.
	var sess *Session
	db, sess, err = r.route(ctx, p, t, dc.in)
	if err != nil {
		return nil, out, err
	}
	out.Database = db.Name
	if sess != nil {
		out.Session = sess.ID
		defer r.sessions.Release(sess)
	}
	routed = p.mayUse(db.Name)
	req := &request{sessions: r.sessions, txLimit: r.txLimit, principal: p, tool: t.info.Name, db: db, session: sess, in: dc.in, given: dc.given, started: started,
		maxBytes: responseCap(ctx, p, db), budget: planBudgetOf(ctx, p, db)}
	if t.paging != nil {
		req.pages = &pager{state: dc.page, spec: t.paging, signer: r.pages}
	}
	if req.budget.Set() {
		req.budget.Estimates = req.catalogEstimate
		req.budget.Hidden = req.rowSecured
	}
	if err = r.authorize(req, t); err != nil {
		return nil, out, err
	}
	if t.access.judged() {
		if req.approval, err = newApprovalGate(r.approvals, p, db, tool, req.in, req.given); err != nil {
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

// decoded is a call as decodeCall leaves it, also when it refused the call.
type decoded struct {
	// parsed is the call's arguments as parsed for the schema, as far as parsing got (nil for a
	// body that is not a JSON object). After decodeCall only masking reads it (finishError): a
	// refused call's message may echo values that never reached a typed struct.
	parsed map[string]any
	// in is the tool's typed arguments: the only carrier of a validated call's arguments. For a
	// refused call they are read as far as they go, unchecked (uncheckedArgs), only for the
	// audit log to name what the call asked for.
	in toolArgs
	// given names the arguments the call gave (with those a page token added), sorted.
	given []string
	// page is the page token the call continues, opened; nil for none.
	page *page.State
}

// decodeCall checks p's scope for t and decodes rawArgs: parsed into the map the schema
// validates, then, once valid, decoded into the tool's struct.
func (r *Registry) decodeCall(p Principal, t *toolEntry, rawArgs []byte) (dc decoded, err *Error) {
	dc.in = t.newArgs()
	if !p.Can(t.scope) {
		return dc, p.lacksScope(t.scope, t.info.Name, "")
	}
	var args any
	if len(strings.TrimSpace(string(rawArgs))) == 0 {
		args = map[string]any{}
	} else if e := wire.Unmarshal(rawArgs, &args); e != nil {
		if dup := DuplicateKey(e); dup != nil {
			return dc, dup
		}
		return dc, errorf(ErrInvalidArguments, "Send the arguments as one JSON object, e.g. {\"table\": \"orders\"}.",
			"Invalid arguments: the body is not valid JSON")
	}
	m, _ := args.(map[string]any)
	dc.parsed = m
	defer func() {
		if err != nil {
			dc.in = uncheckedArgs(t, m)
		}
	}()
	// A page token brings the arguments of the call that issued it: merged first, the call
	// then validates as that one did.
	if tok, ok := m["page_token"].(string); ok && t.paging != nil && r.pages != nil {
		if dc.page, err = r.pages.Open(pageWho(p), t.info.Name, tok); err != nil {
			return dc, err
		}
		if err = t.paging.Merge(m, dc.page); err != nil {
			return dc, err
		}
	}
	if verr := t.schema.Validate(args); verr != nil {
		return dc, validationError(verr, t)
	}
	if e := nulError(m, ""); e != nil {
		return dc, e
	}
	// The typed struct is decoded from the call's own JSON; only a call a page token added to
	// is encoded again, as merged.
	body := rawArgs
	if dc.page != nil {
		body, _ = json.Marshal(m)
	} else if len(strings.TrimSpace(string(rawArgs))) == 0 {
		body = []byte("{}")
	}
	if derr := wire.Unmarshal(body, dc.in); derr != nil {
		return dc, argsError(derr, m)
	}
	dc.given = make([]string, 0, len(m))
	for k := range m {
		dc.given = append(dc.given, k)
	}
	slices.Sort(dc.given)
	return dc, nil
}

// uncheckedArgs reads what it can of a refused call's arguments m into t's struct, for the
// audit log: each of the tool's arguments on its own, so that one the struct cannot hold leaves
// the others readable; names the schema does not know are skipped.
func uncheckedArgs(t *toolEntry, m map[string]any) toolArgs {
	in := t.newArgs()
	for _, k := range t.props {
		v, ok := m[k]
		if !ok {
			continue
		}
		if one, err := json.Marshal(map[string]any{k: v}); err == nil {
			_ = wire.Unmarshal(one, in)
		}
	}
	return in
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
