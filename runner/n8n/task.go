package n8n

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/plan"
)

// Caller runs one tool call; *tools.Registry is the implementation. Every transport is a thin
// adapter over it, through invoke.Invoker.
type Caller = invoke.Caller

// Settings is what a node passes to this.startJob("pgtools", settings, itemIndex): the tool's
// wire name, its arguments and optionally the database. Args is a JSON object, or a string
// holding one (what an n8n expression or a $fromAI json value often is); absent or null means
// {}. A non-empty Database is merged into args as "database"; args naming another database is
// an error.
type Settings struct {
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"args,omitempty"`
	Database string          `json:"database,omitempty"`
	// MaxResponseBytes lowers the byte cap of the call's rows below the database's (never
	// above), as the HTTP header X-PgTools-Max-Response-Bytes does; absent or null: the
	// database's cap. It must be a positive integer.
	MaxResponseBytes json.RawMessage `json:"max_response_bytes,omitempty"`
	// MaxEstimatedCost and MaxEstimatedRows lower the call's plan budget below the database's
	// and the principal's (never above), as the HTTP headers X-PgTools-Max-Estimated-Cost and
	// -Rows do; absent or null: the configured budget. Each must be a positive number (rows: a
	// whole one).
	MaxEstimatedCost json.RawMessage `json:"max_estimated_cost,omitempty"`
	MaxEstimatedRows json.RawMessage `json:"max_estimated_rows,omitempty"`
	// TextResult asks for the answer (result or error) as a string holding its JSON text rather
	// than as a JSON object: n8n parses task messages with JavaScript, which would round
	// integers past ±2^53 (in json and jsonb values), and the node parses the text losslessly.
	TextResult bool `json:"text_result,omitempty"`
	// Subject names the end user the call is for (the node's builder-only "Act as user" field,
	// never a $fromAI value): the call runs as principal "<broker principal>:<subject>" with its
	// own sessions, role and claims (auth.ActAs). Only a client configured with Options.ActAs
	// may send it; otherwise the task is refused with not_allowed.
	Subject string `json:"subject,omitempty"`
	// Traceparent (and Tracestate) continue the caller's W3C trace: the call's span becomes a
	// child of it, as the HTTP API's traceparent header does. A malformed value is ignored.
	Traceparent string `json:"traceparent,omitempty"`
	Tracestate  string `json:"tracestate,omitempty"`
}

// taskCall is a task's settings made ready for Registry.Call.
type taskCall struct {
	tool     string
	args     []byte
	maxBytes int                    // 0: the database's cap
	maxCost  float64                // 0: the configured plan cost budget
	maxRows  int64                  // 0: the configured plan row budget
	text     bool                   // answer as a JSON string holding the answer's JSON text
	subject  string                 // "": the broker principal itself
	trace    propagation.MapCarrier // traceparent and tracestate, if given
}

// settingsError is the answer to settings the runner cannot turn into a call.
func settingsError(msg string) *tools.Error {
	return &tools.Error{Type: tools.ErrInvalidArguments, Message: msg,
		Suggestion: `Send the task settings {"tool": "<tool name>", "args": {…}, "database": "<optional>", "max_response_bytes": <optional>, "text_result": <optional>}, e.g. {"tool": "select_query", "args": {"table": "orders", "limit": 10}}.`}
}

// parseSettings turns a task's settings into the tool name, the raw arguments for
// Registry.Call and the answer's options. Numbers in args stay as the node wrote them (never
// through float64).
func parseSettings(raw json.RawMessage, maxArgs int64) (tc taskCall, terr *tools.Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return taskCall{}, settingsError("The task has no settings")
	}
	if raw[0] != '{' {
		return taskCall{}, settingsError("The task settings must be a JSON object")
	}
	// A key named twice, in the settings or in args at any depth, is refused before anything
	// reads them: withDatabase re-encodes args through a map, which would keep one of the two.
	if dup := tools.CheckDuplicateKeys(raw); dup != nil {
		return taskCall{}, dup
	}
	var s Settings
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return taskCall{}, settingsError("The task settings are not a valid settings object: " + describeDecodeError(err))
	}
	if s.Tool == "" {
		return taskCall{}, settingsError(`The task settings lack "tool"`)
	}
	if tc.maxBytes, terr = maxResponseBytes(s.MaxResponseBytes); terr != nil {
		return taskCall{}, terr
	}
	if tc.maxCost, tc.maxRows, terr = planBudget(s.MaxEstimatedCost, s.MaxEstimatedRows); terr != nil {
		return taskCall{}, terr
	}
	tc.tool, tc.text, tc.subject = s.Tool, s.TextResult, s.Subject
	if s.Traceparent != "" {
		tc.trace = propagation.MapCarrier{"traceparent": s.Traceparent, "tracestate": s.Tracestate}
	}
	args := bytes.TrimSpace(s.Args)
	if len(args) > 0 && args[0] == '"' {
		// A string holding the JSON object, as n8n expressions and $fromAI json values give.
		var inner string
		if err := json.Unmarshal(args, &inner); err != nil {
			return taskCall{}, settingsError(`"args" is not a valid JSON string`)
		}
		args = bytes.TrimSpace([]byte(inner))
		if dup := tools.CheckDuplicateKeys(args); dup != nil {
			return taskCall{}, dup
		}
	}
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	if args[0] != '{' || !json.Valid(args) {
		return taskCall{}, settingsError(`"args" must be a JSON object (or a string holding one)`)
	}
	if int64(len(args)) > maxArgs {
		return taskCall{}, &tools.Error{Type: tools.ErrInvalidArguments,
			Message:    fmt.Sprintf("The task's args are larger than the %d-byte limit", maxArgs),
			Suggestion: "Send fewer rows per call, or split the work into several calls."}
	}
	if s.Database != "" {
		if args, terr = withDatabase(args, s.Database); terr != nil {
			return taskCall{}, terr
		}
	}
	tc.args = args
	return tc, nil
}

// maxResponseBytes reads the max_response_bytes setting: absent or null is 0 (the database's
// cap), anything but a positive integer an error naming the setting.
func maxResponseBytes(raw json.RawMessage) (int, *tools.Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, nil
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil || n <= 0 {
		return 0, &tools.Error{Type: tools.ErrInvalidArguments,
			Message:    `The task setting "max_response_bytes" must be a positive whole number of bytes`,
			Suggestion: `Send e.g. "max_response_bytes": 16384, or leave the setting out to use the database's cap.`}
	}
	return n, nil
}

// planBudget reads the max_estimated_cost and max_estimated_rows settings: absent or null is 0
// (the configured budget), anything but a positive number an error naming the setting.
func planBudget(costRaw, rowsRaw json.RawMessage) (float64, int64, *tools.Error) {
	var cost float64
	var rows int64
	if raw := bytes.TrimSpace(costRaw); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		c, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || !(c > 0) || c > 1e300 {
			return 0, 0, &tools.Error{Type: tools.ErrInvalidArguments,
				Message:    `The task setting "max_estimated_cost" must be a positive number`,
				Suggestion: `Send e.g. "max_estimated_cost": 10000, or leave the setting out to use the configured budget.`}
		}
		cost = c
	}
	if raw := bytes.TrimSpace(rowsRaw); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, &tools.Error{Type: tools.ErrInvalidArguments,
				Message:    `The task setting "max_estimated_rows" must be a positive whole number of rows`,
				Suggestion: `Send e.g. "max_estimated_rows": 100000, or leave the setting out to use the configured budget.`}
		}
		rows = n
	}
	return cost, rows, nil
}

// withDatabase sets "database" in the args object. Only the top level is decoded, so values
// keep their exact text.
func withDatabase(args []byte, db string) ([]byte, *tools.Error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return nil, settingsError(`"args" must be a JSON object (or a string holding one)`)
	}
	if prev, ok := m["database"]; ok {
		var name string
		if json.Unmarshal(prev, &name) != nil || name != db {
			return nil, settingsError(`"args" names another database than the settings' "database"; give it in one place only`)
		}
	}
	m["database"], _ = json.Marshal(db)
	out, err := json.Marshal(m)
	if err != nil {
		return nil, settingsError(`"args" must be a JSON object (or a string holding one)`)
	}
	return out, nil
}

// describeDecodeError names the problem without echoing values from the settings.
func describeDecodeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%q must be a %s, not a %s", te.Field, jsonKind(te.Type.Kind()), te.Value)
	}
	if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return "unknown key " + key + `; the keys are "tool", "args", "database", "max_response_bytes", "max_estimated_cost", "max_estimated_rows", "text_result" and "subject"`
	}
	return "expected a JSON object"
}

func jsonKind(k reflect.Kind) string {
	if k == reflect.String {
		return "string"
	}
	return "JSON value"
}

// call runs one task's settings as a tool call and returns the JSON object the node receives:
// the result (ok) or the error object (not ok), byte for byte what the HTTP API answers (with
// text_result: a JSON string holding that text). The task id is the call's request id; timeout
// is n8n's task timeout the task started under, which ctx's deadline is taken from.
func (c *Client) call(ctx context.Context, taskID string, raw json.RawMessage, timeout time.Duration) (body []byte, ok bool) {
	tc, terr := parseSettings(raw, c.maxArgs.Load())
	p := c.opts.Principal
	if terr == nil && tc.subject != "" {
		p, terr = c.opts.ActAs.Principal(p, tc.subject)
		if terr != nil {
			p = c.opts.Principal // the refusal is logged as the broker's
		}
	}
	if tc.trace != nil {
		ctx = propagation.TraceContext{}.Extract(ctx, tc.trace)
	}
	ctx = plan.WithBudget(tools.WithMaxResponseBytes(ctx, tc.maxBytes), tc.maxCost, tc.maxRows)
	ans := c.inv.Invoke(ctx, invoke.Call{Principal: p,
		Tool: tc.tool, Args: tc.args, RequestID: taskID, Transport: "n8n", Refused: terr})
	body = ans.Body
	if ans.Err != nil && errors.Is(context.Cause(ctx), errTaskTimeout) {
		// Whatever the call's own error says (a cancelled statement), the cause is n8n's bound.
		body, _ = taskTimeoutError(timeout).MarshalJSON()
	}
	if tc.text {
		// Marshalling a string cannot fail.
		body, _ = json.Marshal(string(body))
	}
	return body, ans.Err == nil
}

// errTaskTimeout is the cause of a task context that reached taskBudget.
var errTaskTimeout = errors.New("n8n's task timeout is near")

// taskBudget is how long a task's call may run: n8n's task timeout less a margin for the answer
// to reach n8n before n8n cancels the task (2 s, or a tenth of a short timeout).
func taskBudget(timeout time.Duration) time.Duration {
	return timeout - min(2*time.Second, timeout/10)
}

// taskTimeoutError is the answer of a call cancelled at taskBudget.
func taskTimeoutError(timeout time.Duration) *tools.Error {
	return &tools.Error{Type: tools.ErrTimeout,
		Message: fmt.Sprintf("The call did not finish within n8n's task timeout (%g s); pgtools cancelled its statement before n8n would cancel the task", timeout.Seconds()),
		Suggestion: "Narrow the call (a where clause, a lower limit, fewer operations per pg_transaction) and call again; " +
			"if calls this long are expected, raise N8N_RUNNERS_TASK_TIMEOUT in n8n and n8n.task_timeout_ms in the pgtools config to the same value."}
}
