package httpx

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/pgtools/pgtools/tools"
)

// DefaultBodyReadTimeout is how long a client may take to send a request body once its headers
// have arrived (headers have their own 10 s). A 1 MiB body needs well under a second on any
// working link; a client that trickles bytes would otherwise hold a connection and a goroutine
// for as long as it likes.
const DefaultBodyReadTimeout = 10 * time.Second

// WithBodyDeadline gives every request that has a body a read deadline d from now, on the
// connection itself (http.ResponseController), so a body sent at 1 byte/s fails with a timeout
// instead of holding the connection. net/http lifts the deadline the moment the body has been
// read to its end (it then watches the connection for the client going away), so a tool call
// may run far longer than d (TestBodyDeadlineSparesLongCalls). Requests without a body (GET, and
// so MCP's event streams) get no deadline. A body a handler never reads (a 401, an unknown path)
// keeps it, which bounds the server's own draining of that body before it answers.
//
// It must wrap the handler the http.Server calls, so that w is the server's own ResponseWriter.
func WithBodyDeadline(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d > 0 && r.Body != nil && r.Body != http.NoBody {
			// Not every ResponseWriter supports deadlines (httptest's recorder does not); the body
			// is then read without one rather than refused.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}

// BodyReadError answers a failed read of a request body: 400 for a body over maxBody, 408 for
// one that did not arrive within timeout, 400 otherwise. The 408 closes the connection, whose
// unread rest would otherwise be taken for the next request.
func BodyReadError(w http.ResponseWriter, err error, maxBody int64, timeout time.Duration) *tools.Error {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		e := &tools.Error{Type: tools.ErrInvalidArguments,
			Message:    fmt.Sprintf("Request body is larger than the %d-byte limit", maxBody),
			Suggestion: "Send fewer rows per call, or split the work into several calls."}
		WriteError(w, e)
		return e
	case errors.Is(err, os.ErrDeadlineExceeded):
		e := &tools.Error{Type: tools.ErrTimeout,
			Message:    fmt.Sprintf("The request body did not arrive within %s", timeout),
			Suggestion: "Send the whole body right after the headers, then retry the call; a client or proxy that streams it slowly must buffer it first."}
		w.Header().Set("Connection", "close")
		WriteErrorStatus(w, http.StatusRequestTimeout, e)
		return e
	}
	e := &tools.Error{Type: tools.ErrInvalidArguments, Message: "Could not read the request body", Suggestion: "Send the arguments as a JSON object."}
	WriteError(w, e)
	return e
}
