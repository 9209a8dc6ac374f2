package tools

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/pgtools/pgtools/tools/session"
)

// forward sends a call in another replica's session there. handled is false when the call
// runs here.
func (r *Registry) forward(ctx context.Context, p Principal, t *toolEntry, id string, rawArgs []byte) (res Result, out Outcome, err *Error, handled bool) {
	tag := session.TagOf(id)
	if r.forwarder == nil || tag == "" || isForwarded(ctx) {
		return nil, out, nil, false
	}
	if len(rawArgs) == 0 {
		rawArgs = []byte("{}")
	}
	ans, ferr := r.forwarder.Forward(ctx, ForwardCall{Tag: tag, SessionID: id, Tool: t.info.Name, Principal: narrowed(ctx, p), Args: rawArgs})
	out.Session = id
	var lost *ReplicaLostError
	switch {
	case errors.Is(ferr, ErrNotForwarded):
		return nil, Outcome{}, nil, false
	case errors.As(ferr, &lost):
		return nil, out, replicaLost(id, lost), true
	case ferr != nil:
		return nil, out, forwardFailed(id, tag), true
	}
	out.Database = ans.Database
	if ans.Failed {
		var e Error
		if json.Unmarshal(ans.Body, &e) != nil || e.Type == "" {
			return nil, out, forwardFailed(id, tag), true
		}
		return nil, out, &e, true
	}
	s := ans.Summary
	return &forwardedResult{body: ans.Body, sum: Summary{Table: s.Table, Rows: s.Rows, AffectedRows: s.AffectedRows, Truncated: s.Truncated, DryRun: s.DryRun}}, out, nil, true
}
