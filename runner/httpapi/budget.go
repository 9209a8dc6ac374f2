package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/plan"
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

// MaxEstimatedCostHeader and MaxEstimatedRowsHeader lower the plan budget of one tool call below
// the database's and the token's max_estimated_cost and max_estimated_rows (never above): a
// statement whose plan is estimated over them is refused before it runs (too_expensive). The n8n
// nodes send them from their Max Estimated Cost and Max Estimated Rows options.
const (
	MaxEstimatedCostHeader = "X-PgTools-Max-Estimated-Cost"
	MaxEstimatedRowsHeader = "X-PgTools-Max-Estimated-Rows"
)

// withPlanBudget returns ctx with the budget of the plan budget headers applied, or an
// invalid_arguments error naming the header whose value is not a positive number.
func withPlanBudget(ctx context.Context, r *http.Request) (context.Context, *tools.Error) {
	cost, rows := strings.TrimSpace(r.Header.Get(MaxEstimatedCostHeader)), strings.TrimSpace(r.Header.Get(MaxEstimatedRowsHeader))
	if cost == "" && rows == "" {
		return ctx, nil
	}
	var c float64
	var n int64
	var err error
	if cost != "" {
		if c, err = strconv.ParseFloat(cost, 64); err != nil || !(c > 0) || c > 1e300 {
			return nil, &tools.Error{Type: tools.ErrInvalidArguments,
				Message:    "Invalid arguments: the " + MaxEstimatedCostHeader + " header must be a positive number",
				Suggestion: "Send e.g. " + MaxEstimatedCostHeader + ": 10000, or leave the header out to use the configured budget."}
		}
	}
	if rows != "" {
		if n, err = strconv.ParseInt(rows, 10, 64); err != nil || n <= 0 {
			return nil, &tools.Error{Type: tools.ErrInvalidArguments,
				Message:    "Invalid arguments: the " + MaxEstimatedRowsHeader + " header must be a positive whole number of rows",
				Suggestion: "Send e.g. " + MaxEstimatedRowsHeader + ": 100000, or leave the header out to use the configured budget."}
		}
	}
	return plan.WithBudget(ctx, c, n), nil
}
