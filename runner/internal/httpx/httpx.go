// Package httpx holds what the HTTP API (runner/httpapi) and MCP over HTTP (runner/mcpapi) share
// on the wire: error answers with their status, request body deadlines and the access log's
// per-request record.
package httpx

import (
	"context"
	"net/http"
	"strconv"

	"github.com/pgtools/pgtools/tools"
)

// StatusFor maps an error category to its HTTP status (docs/design.md §4) from the category
// table beside the categories (tools/internal/pgerr). A category without an entry answers 500; the
// Invoker logs such an answer as an internal error.
func StatusFor(t tools.ErrorType) int {
	m, _ := tools.ErrorMetaOf(t)
	return m.Status
}

// WriteJSON answers body with status as application/json.
func WriteJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteError answers e with the status of its category.
func WriteError(w http.ResponseWriter, e *tools.Error) { WriteErrorStatus(w, StatusFor(e.Type), e) }

// WriteErrorStatus answers e with status.
func WriteErrorStatus(w http.ResponseWriter, status int, e *tools.Error) {
	out, _ := e.MarshalJSON()
	WriteJSON(w, status, out)
}

// RequestLog collects what the access log line reports about a request; the HTTP API's logging
// middleware puts one in every request's context (WithRequestLog) and the handlers fill it in.
type RequestLog struct {
	ReqID     string // the request's id, also the id of its tool calls
	Principal string
	Role      string // the principal's PostgreSQL role, "" for the login role
	Tool      string
	Database  string // where the call was routed (tools.Outcome)
	Session   string // the session the call ran in, "" for none
	ErrorType tools.ErrorType
}

type requestLogKey struct{}

// WithRequestLog returns ctx carrying l.
func WithRequestLog(ctx context.Context, l *RequestLog) context.Context {
	return context.WithValue(ctx, requestLogKey{}, l)
}

// RequestLogOf returns the record ctx carries, or nil outside a logged HTTP request (stdio).
func RequestLogOf(ctx context.Context) *RequestLog {
	l, _ := ctx.Value(requestLogKey{}).(*RequestLog)
	return l
}
