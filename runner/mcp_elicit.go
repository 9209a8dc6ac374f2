package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/tools"
)

// confirmKey names pgtools' one input request (elicitation) in a multi-round-trip call.
const confirmKey = "pgtools_confirm"

// confirmed runs call and, when the client declares elicitation, asks the human before what
// cannot be undone: a DROP or TRUNCATE that the tools refused without confirm_destructive, and an
// update_data or delete_data (not a dry run) whose dry run counts more than ConfirmRowsOver rows.
// It returns the answer to send, or a result asking the client for input.
//
// The question is an input request of the SDK's multi-round-trip calls (SEP-2322): a client on
// the 2026-07-28 protocol receives it as an input_required result and calls again with the
// human's answer, which needs no server-side state, so /mcp stays stateless and replicas stay
// interchangeable; for older clients the SDK sends elicitation/create on the same connection and
// calls the handler again with the answer (stdio). A stateless POST of an older protocol carries
// no capabilities, so such a client keeps the behaviour of a client without elicitation: the
// refusal (confirmation_required) or the call as sent. requestState binds an answer to the exact
// tool and arguments it was given for; an answer for anything else is ignored.
func confirmed(ctx context.Context, req *mcp.CallToolRequest, inv *Invoker, call Call, opts MCPOptions) (Answer, *mcp.CallToolResult) {
	caps := req.ClientCapabilities()
	canAsk := caps != nil && caps.Elicitation != nil && (caps.Elicitation.Form != nil || caps.Elicitation.URL == nil)
	state := confirmState(call)
	if resp, ok := req.Params.InputResponses[confirmKey].(*mcp.ElicitResult); ok && req.Params.RequestState == state {
		if resp.Action != "accept" {
			return declined(call), nil
		}
		if call.Tool == "execute_sql" {
			call.Args = withArg(call.Args, "confirm_destructive", true)
		}
		return inv.Invoke(ctx, call), nil
	}
	if !canAsk {
		return inv.Invoke(ctx, call), nil
	}
	if (call.Tool == "update_data" || call.Tool == "delete_data") && opts.ConfirmRowsOver > 0 && !argIs(call.Args, "dry_run", true) {
		dry := call
		dry.Args = withArg(call.Args, "dry_run", true)
		if dry.Args != nil {
			ans := inv.Invoke(ctx, dry)
			if ans.Err != nil {
				return ans, nil // the real call would fail the same way, and nothing was changed
			}
			var r struct {
				Table        string `json:"table"`
				AffectedRows int    `json:"affectedRows"`
			}
			if json.Unmarshal(ans.Body, &r) == nil && r.AffectedRows > opts.ConfirmRowsOver {
				verb := map[string]string{"update_data": "update", "delete_data": "delete"}[call.Tool]
				msg := fmt.Sprintf("The agent wants to %s %d rows of table %s in database %s (counted by a dry run; pgtools asks above %d rows). Allow it?",
					verb, r.AffectedRows, r.Table, databaseOf(call.Args), opts.ConfirmRowsOver)
				return Answer{}, askConfirm(msg, state)
			}
		}
		return inv.Invoke(ctx, call), nil
	}
	ans := inv.Invoke(ctx, call)
	if ans.Err != nil && ans.Err.Type == tools.ErrConfirmationRequired && call.Tool == "execute_sql" && !argIs(call.Args, "confirm_destructive", true) {
		var a struct {
			SQL string `json:"sql"`
		}
		_ = json.Unmarshal(call.Args, &a)
		msg := fmt.Sprintf("The agent wants to run a statement that cannot be undone, on database %s: %s\n\n%s\n\nAllow it?",
			databaseOf(call.Args), ans.Err.Message, clipForHuman(a.SQL, 2000))
		return Answer{}, askConfirm(msg, state)
	}
	return ans, nil
}

// askConfirm is the input-required result that asks the human msg; accepting needs no input.
func askConfirm(msg, state string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{confirmKey: &mcp.ElicitParams{Mode: "form", Message: msg,
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}}},
		RequestState: state,
	}
}

// declined is the answer to a call the human declined: refused like a call that lacked
// confirmation, and nothing was changed (the dry run or the refused statement rolled back).
func declined(call Call) Answer {
	e := &tools.Error{Type: tools.ErrConfirmationRequired,
		Message:    "The user declined to confirm this " + call.Tool + " call; nothing was changed",
		Suggestion: "Do not repeat the call unless the user asks for it; ask the user what to do instead."}
	body, _ := e.MarshalJSON()
	return Answer{Body: body, Err: e}
}

// confirmState binds a human's answer to the tool and arguments it was asked about.
func confirmState(call Call) string {
	h := sha256.New()
	h.Write([]byte(call.Tool))
	h.Write([]byte{0})
	h.Write(call.Args)
	return "pgtools-confirm-v1:" + hex.EncodeToString(h.Sum(nil))
}

// withArg returns args (a JSON object) with key set to v, or nil if args is not an object.
func withArg(args []byte, key string, v any) []byte {
	var m map[string]json.RawMessage
	if len(args) == 0 {
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

// argIs reports whether args (a JSON object) has key equal to v.
func argIs(args []byte, key string, v bool) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return false
	}
	return string(m[key]) == strconv.FormatBool(v)
}

// clipForHuman shortens s to at most n bytes for a message to the human.
func clipForHuman(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// httpRequestCtxKey carries the context of the HTTP request that brought an MCP message.
type httpRequestCtxKey struct{}

// withHTTPCancel ends ctx when the HTTP request that brought the call ends (the client closed
// the connection or aborted the POST). On stateless /mcp the POST is the whole call: nobody can
// receive its answer any more, so the statement is cancelled on the server rather than left to
// run to its timeout. The SDK does this itself only for the 2026-07-28 protocol.
func withHTTPCancel(ctx context.Context) (context.Context, context.CancelFunc) {
	reqCtx, ok := ctx.Value(httpRequestCtxKey{}).(context.Context)
	if !ok {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(reqCtx, cancel)
	return ctx, func() { stop(); cancel() }
}
