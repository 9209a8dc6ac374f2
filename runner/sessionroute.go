package runner

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/pgtools/pgtools/tools"
)

// SessionHeader is the HTTP header that carries a call's session_id for load balancers: NGINX
// `hash $http_x_pgtools_session consistent`, ingress-nginx's upstream-hash-by, Envoy ring_hash,
// HAProxy `balance hdr(X-PgTools-Session)`, or a map on the id's replica prefix. pgtools itself
// reads it only to refuse a call whose header and session_id disagree: the proxy routed by
// one, the runner would run the other. A header without session_id is ignored (it does not
// open or select a session): session_id in the arguments stays the one way to name a session.
const SessionHeader = "X-PgTools-Session"

type sessionHeaderKey struct{}

// withSessionHeader remembers the request's X-PgTools-Session for the calls it carries (one for
// the HTTP API, one per tools/call for /mcp).
func withSessionHeader(r *http.Request) *http.Request {
	v := r.Header.Get(SessionHeader)
	if v == "" {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), sessionHeaderKey{}, v))
}

// checkSessionHeader refuses a call whose arguments name a session other than the
// X-PgTools-Session header of its request: the proxy routed by the header, so the call may have
// reached a replica that does not hold the session it names.
func checkSessionHeader(ctx context.Context, args []byte) *tools.Error {
	h, _ := ctx.Value(sessionHeaderKey{}).(string)
	if h == "" {
		return nil
	}
	var a struct {
		SessionID *string `json:"session_id"`
	}
	if json.Unmarshal(args, &a) != nil || a.SessionID == nil || strings.EqualFold(*a.SessionID, strings.TrimSpace(h)) {
		return nil // malformed arguments get the tool's own invalid_arguments
	}
	return &tools.Error{Type: tools.ErrInvalidArguments,
		Message: "Invalid arguments: session_id and the header " + SessionHeader + " name different sessions",
		Suggestion: "Send the same session id in both: the header routes the request to the replica holding the session, and session_id selects it there. " +
			"Set the header from the session_id of each call, or leave the header out."}
}

// addRoutingHint tells the caller of pg_tx begin how to keep the session's calls on this
// replica: clients other than the n8n nodes do not send the header by themselves.
func addRoutingHint(res tools.Result) {
	tx, ok := res.(*tools.TxResult)
	if !ok || tx.Action != "begin" || tx.SessionID == "" {
		return
	}
	tx.Hint += " Behind a load balancer with several replicas, send the HTTP header " + SessionHeader + ": " + tx.SessionID +
		" with every call of this session so it reaches the replica holding it."
}
