package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/pgtools/pgtools/tools"
)

// MaxResponseBytesHeader lowers the byte cap of one tool call's rows below the database's
// max_response_bytes (never above): a host that hands the answer to a model, such as the n8n
// nodes, asks for an answer that fits the model's context.
const MaxResponseBytesHeader = "X-PgTools-Max-Response-Bytes"

// withResponseCap returns the request's context with the cap of MaxResponseBytesHeader applied,
// or an invalid_arguments error naming the header when its value is not a positive integer.
func withResponseCap(r *http.Request) (context.Context, *tools.Error) {
	v := strings.TrimSpace(r.Header.Get(MaxResponseBytesHeader))
	if v == "" {
		return r.Context(), nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return nil, &tools.Error{Type: tools.ErrInvalidArguments,
			Message:    "Invalid arguments: the " + MaxResponseBytesHeader + " header must be a positive whole number of bytes",
			Suggestion: "Send e.g. " + MaxResponseBytesHeader + ": 16384, or leave the header out to use the database's cap."}
	}
	return tools.WithMaxResponseBytes(r.Context(), n), nil
}
