package tools

import (
	"context"
	"encoding/json"
	"strings"
)

// Preview validates and routes a call like Call, without running it, and says what a human
// asked to approve it must see. The error is the one Call would answer before running, with
// the caller's values masked as Call masks them.
func (r *Registry) Preview(ctx context.Context, p Principal, tool string, rawArgs []byte) (Preview, *Error) {
	t, ok := r.tools[tool]
	if !ok {
		return Preview{}, r.unknownTool(tool)
	}
	dc, err := r.decodeCall(p, t, rawArgs)
	if err != nil {
		finishError(err, t, nil, dc.parsed)
		return Preview{}, err
	}
	db, sess, err := r.route(ctx, p, t, dc.in)
	if err != nil {
		finishError(err, t, nil, dc.parsed)
		return Preview{}, err
	}
	pv := Preview{Tool: tool, Database: db.Name}
	if sess != nil {
		pv.Session = sess.ID
		r.sessions.Release(sess)
	}
	if t.preview != nil {
		t.preview(dc.in, rawArgs, &pv)
	}
	return pv, nil
}

// previewCustom: an operator-defined write tool can be counted by its dry run.
func previewCustom(in toolArgs, raw []byte, pv *Preview) {
	if _, dryRun := in.intent(); !dryRun {
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
