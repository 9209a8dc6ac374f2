package invoke

import (
	"net/http"

	"github.com/pgtools/pgtools/tools"
)

// SessionHeader is the HTTP header that carries a call's session_id for load balancers: NGINX
// `hash $http_x_pgtools_session consistent`, ingress-nginx's upstream-hash-by, Envoy ring_hash,
// HAProxy `balance hdr(X-PgTools-Session)`, or a map on the id's replica prefix. pgtools itself
// reads it only to refuse a call whose header and session_id disagree: the proxy routed by
// one, the runner would run the other. A header without session_id is ignored (it does not
// open or select a session): session_id in the arguments stays the one way to name a session.
const SessionHeader = "X-PgTools-Session"

// withSessionHeader gives the calls a request carries (one for the HTTP API, one per tools/call
// for /mcp) its X-PgTools-Session, which the registry checks against the session each call
// runs in (tools.WithRouteHint).
func WithSessionHeader(r *http.Request) *http.Request {
	v := r.Header.Get(SessionHeader)
	if v == "" {
		return r
	}
	return r.WithContext(tools.WithRouteHint(r.Context(), tools.RouteHint{Header: SessionHeader, ID: v}))
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
