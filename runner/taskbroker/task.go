package taskbroker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"time"

	"github.com/pgtools/pgtools/tools"
)

// Caller runs one tool call; *tools.Registry is the implementation. Every transport is a thin
// adapter over it.
type Caller interface {
	Call(ctx context.Context, p tools.Principal, tool string, rawArgs []byte) (*tools.Result, *tools.Error)
}

var _ Caller = (*tools.Registry)(nil)

// Settings is what a node passes to this.startJob("pgtools", settings, itemIndex): the tool's
// wire name, its arguments and optionally the database. Args is a JSON object, or a string
// holding one (what an n8n expression or a $fromAI json value often is); absent or null means
// {}. A non-empty Database is merged into args as "database"; args naming another database is
// an error.
type Settings struct {
	Tool     string          `json:"tool"`
	Args     json.RawMessage `json:"args,omitempty"`
	Database string          `json:"database,omitempty"`
}

// settingsError is the answer to settings the runner cannot turn into a call.
func settingsError(msg string) *tools.Error {
	return &tools.Error{Type: tools.ErrInvalidArguments, Message: msg,
		Suggestion: `Send the task settings {"tool": "<tool name>", "args": {…}, "database": "<optional>"}, e.g. {"tool": "select_query", "args": {"table": "orders", "limit": 10}}.`}
}

// parseSettings turns a task's settings into the tool name and the raw arguments for
// Registry.Call. Numbers in args stay as the node wrote them (never through float64).
func parseSettings(raw json.RawMessage, maxArgs int64) (tool string, args []byte, terr *tools.Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil, settingsError("The task has no settings")
	}
	if raw[0] != '{' {
		return "", nil, settingsError("The task settings must be a JSON object")
	}
	var s Settings
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return "", nil, settingsError("The task settings are not a valid settings object: " + describeDecodeError(err))
	}
	if s.Tool == "" {
		return "", nil, settingsError(`The task settings lack "tool"`)
	}
	args = bytes.TrimSpace(s.Args)
	if len(args) > 0 && args[0] == '"' {
		// A string holding the JSON object, as n8n expressions and $fromAI json values give.
		var inner string
		if err := json.Unmarshal(args, &inner); err != nil {
			return "", nil, settingsError(`"args" is not a valid JSON string`)
		}
		args = bytes.TrimSpace([]byte(inner))
	}
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		args = []byte("{}")
	}
	if args[0] != '{' || !json.Valid(args) {
		return "", nil, settingsError(`"args" must be a JSON object (or a string holding one)`)
	}
	if int64(len(args)) > maxArgs {
		return "", nil, &tools.Error{Type: tools.ErrInvalidArguments,
			Message:    fmt.Sprintf("The task's args are larger than the %d-byte limit", maxArgs),
			Suggestion: "Send fewer rows per call, or split the work into several calls."}
	}
	if s.Database != "" {
		if args, terr = withDatabase(args, s.Database); terr != nil {
			return "", nil, terr
		}
	}
	return s.Tool, args, nil
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
		return "unknown key " + key + `; the keys are "tool", "args" and "database"`
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
// the result (ok) or the error object (not ok), byte for byte what the HTTP API answers.
func (c *Client) call(ctx context.Context, taskID string, raw json.RawMessage) (body []byte, ok bool) {
	started := time.Now()
	tool, args, terr := parseSettings(raw, c.opts.MaxArgsBytes)
	var res *tools.Result
	if terr == nil {
		res, terr = c.callTool(ctx, tool, args)
	}
	if terr == nil {
		var err error
		if body, err = res.MarshalJSON(); err != nil {
			terr = &tools.Error{Type: tools.ErrInternal, Message: "Could not encode the result",
				Suggestion: "Retry; report it if it persists."}
		}
	}
	ev := c.log.Info()
	if terr != nil {
		body, _ = terr.MarshalJSON()
		ev = ev.Str("error_type", string(terr.Type))
	}
	if tool != "" {
		ev = ev.Str("tool", tool)
	}
	ev.Str("task_id", taskID).Str("principal", c.opts.Principal.Name).Dur("duration", time.Since(started)).Msg("n8n task")
	return body, terr == nil
}

// callTool is Caller.Call that turns a panic into an internal_error: one bad task must not take
// the process, and with it every other transport, down.
func (c *Client) callTool(ctx context.Context, tool string, args []byte) (res *tools.Result, terr *tools.Error) {
	defer func() {
		if r := recover(); r != nil {
			// A runtime error names the fault, never a value; anything else is logged by type only.
			what := fmt.Sprintf("%T", r)
			if re, ok := r.(runtime.Error); ok {
				what = re.Error()
			}
			c.log.Error().Str("tool", tool).Str("panic", what).Msg("n8n task panicked")
			res, terr = nil, &tools.Error{Type: tools.ErrInternal, Message: "Internal error while running the tool",
				Suggestion: "Retry the call; if it fails again, report it to the operator with the time of the call."}
		}
	}()
	return c.opts.Caller.Call(ctx, c.opts.Principal, tool, args)
}
