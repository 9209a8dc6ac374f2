package mcpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/approval"
)

// confirmKey names pgtools' one input request (elicitation) in a multi-round-trip call.
const confirmKey = "pgtools_confirm"

// confirmed runs call and, when the client declares elicitation, asks the human before what
// cannot be undone: a DROP or TRUNCATE that the tools refused without confirm_destructive, and a
// write the tools can count (update_data, delete_data, an operator-defined write tool; not a
// dry run) whose dry run counts more than ConfirmRowsOver rows. What to count, what to send once
// the human agrees and the question's text come from the registry's Preview, routed like the
// call itself, so the question names the database the call runs on. It returns the answer to
// send, or a result asking the client for input.
//
// The question is an input request of the SDK's multi-round-trip calls (SEP-2322): a client on
// the 2026-07-28 protocol receives it as an input_required result and calls again with the
// human's answer, which needs no server-side state, so /mcp stays stateless and replicas stay
// interchangeable; for older clients the SDK sends elicitation/create on the same connection and
// calls the handler again with the answer (stdio). A stateless POST of an older protocol carries
// no capabilities, so such a client keeps the behaviour of a client without elicitation: the
// refusal (confirmation_required) or the call as sent. requestState binds an answer to the exact
// tool and arguments it was given for; an answer for anything else is ignored.
func confirmed(ctx context.Context, req *mcp.CallToolRequest, inv *invoke.Invoker, call invoke.Call, opts MCPOptions) (invoke.Answer, *mcp.CallToolResult) {
	resp, answered := req.Params.InputResponses[confirmKey].(*mcp.ElicitResult)
	if id, ok := approvalAsked(opts.StateKey, req.Params.RequestState, call); answered && ok {
		return decidedByClient(ctx, inv, call, id, resp.Action == "accept"), nil
	}
	if answered && hmac.Equal([]byte(req.Params.RequestState), []byte(confirmState(opts.StateKey, call, ""))) {
		if resp.Action != "accept" {
			return declined(call), nil
		}
		if pv, perr := inv.Preview(ctx, call); perr == nil && pv.ConfirmedArgs != nil {
			call.Args = pv.ConfirmedArgs
		}
		return confirmedRun(ctx, inv, call), nil
	}
	return askOrRun(ctx, canElicit(req.ClientCapabilities()), inv, call, opts)
}

// canElicit reports whether a client with caps can be asked a form question.
func canElicit(caps *mcp.ClientCapabilities) bool {
	return caps != nil && caps.Elicitation != nil && (caps.Elicitation.Form != nil || caps.Elicitation.URL == nil)
}

// askOrRun runs call, or when canAsk and the call is one to confirm, returns the question
// instead (see confirmed). The fast path (mcp_fast.go) calls it for the calls it answers itself,
// which carry no answer to a question.
func askOrRun(ctx context.Context, canAsk bool, inv *invoke.Invoker, call invoke.Call, opts MCPOptions) (invoke.Answer, *mcp.CallToolResult) {
	ans, ask := askOrRunConfirm(ctx, canAsk, inv, call, opts)
	if ask == nil && canAsk {
		ask = askApproval(opts.StateKey, inv, call, ans)
	}
	return ans, ask
}

// askOrRunConfirm is askOrRun before approvals: the confirmations of DROP, TRUNCATE and large
// counted writes.
func askOrRunConfirm(ctx context.Context, canAsk bool, inv *invoke.Invoker, call invoke.Call, opts MCPOptions) (invoke.Answer, *mcp.CallToolResult) {
	state := confirmState(opts.StateKey, call, "")
	if !canAsk {
		return inv.Invoke(ctx, call), nil
	}
	pv, perr := inv.Preview(ctx, call)
	if perr != nil {
		return inv.Invoke(ctx, call), nil // the call answers the same refusal, logged like any call
	}
	if pv.CountArgs != nil && opts.ConfirmRowsOver > 0 {
		dry := call
		dry.Args = pv.CountArgs
		ans := inv.Invoke(ctx, dry)
		if ans.Err != nil {
			return ans, nil // the real call would fail the same way, and nothing was changed
		}
		if n := ans.Summary.AffectedRows; n != nil && *n > opts.ConfirmRowsOver {
			return invoke.Answer{}, askConfirm(pv.AskRows(*n, ans.Summary.Table, opts.ConfirmRowsOver), state)
		}
		return inv.Invoke(ctx, call), nil
	}
	ans := inv.Invoke(ctx, call)
	if ans.Err != nil && ans.Err.Type == tools.ErrConfirmationRequired && pv.ConfirmedArgs != nil {
		return invoke.Answer{}, askConfirm(pv.AskDestructive(ans.Err.Message), state)
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
func declined(call invoke.Call) invoke.Answer {
	e := &tools.Error{Type: tools.ErrConfirmationRequired,
		Message:    "The user declined to confirm this " + call.Tool + " call; nothing was changed",
		Suggestion: "Do not repeat the call unless the user asks for it; ask the user what to do instead."}
	body, _ := e.MarshalJSON()
	return invoke.Answer{Body: body, Err: e}
}

// confirmState binds a human's answer to the principal, tool and arguments it was asked about
// (and the approval request, for a question about approving one):
// an HMAC under key (MCPOptions.StateKey), so that only this runner (or a replica sharing the
// key) can issue one. The server re-checks everything an answer leads to, and the state is
// what keeps a client from presenting an answer to a question it was never asked.
func confirmState(key []byte, call invoke.Call, approvalID string) string {
	h := hmac.New(sha256.New, key)
	for _, part := range []string{approvalID, call.Principal.Name, call.Tool} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(call.Args)
	return "pgtools-confirm-v2:" + hex.EncodeToString(h.Sum(nil))
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

// approvalStatePrefix leads the request state of a question asking the client's user to decide
// an approval request (policy.approval_by_client): the request's id, then the call's binding.
const approvalStatePrefix = "pgtools-approve-v1:"

// askApproval turns an approval_required answer into a question for the client's user, where
// the request's database lets clients approve; nil otherwise (the answer stands).
func askApproval(key []byte, inv *invoke.Invoker, call invoke.Call, ans invoke.Answer) *mcp.CallToolResult {
	id, ok := clientApprovable(inv, call, ans)
	if !ok {
		return nil
	}
	msg := ans.Err.Message + " Approve this change? (Accept runs it once, as measured; decline denies it.)"
	return askConfirm(msg, approvalStatePrefix+id+":"+confirmState(key, call, id))
}

// clientApprovable is the id of the request an approval_required answer of call carries, when
// the user of call's client may decide it (policy.approval_by_client).
func clientApprovable(inv *invoke.Invoker, call invoke.Call, ans invoke.Answer) (string, bool) {
	if ans.Err == nil || ans.Err.Type != tools.ErrApprovalRequired {
		return "", false
	}
	id, _, ok := approval.FromError(ans.Err)
	return id, ok && inv.ClientMayApprove(call.Principal, id)
}

// approvalAsked reads the approval request id from state, when state asked about approving
// exactly call (under key).
func approvalAsked(key []byte, state string, call invoke.Call) (string, bool) {
	rest, ok := strings.CutPrefix(state, approvalStatePrefix)
	if !ok {
		return "", false
	}
	id, binding, ok := strings.Cut(rest, ":")
	return id, ok && hmac.Equal([]byte(binding), []byte(confirmState(key, call, id)))
}

// decidedByClient records the client's user's decision on approval request id and, when it
// approves, runs call with the approval.
func decidedByClient(ctx context.Context, inv *invoke.Invoker, call invoke.Call, id string, approve bool) invoke.Answer {
	if _, e := inv.DecideByClient(call.Principal, id, approve); e != nil {
		body, _ := e.MarshalJSON()
		return invoke.Answer{Body: body, Err: e}
	}
	if !approve {
		e := &tools.Error{Type: tools.ErrNotAllowed,
			Message:    "The user denied approval request " + id + " of this " + call.Tool + " call; nothing was changed",
			Suggestion: "Do not repeat the call unless the user asks for it; ask the user what to do instead."}
		body, _ := e.MarshalJSON()
		return invoke.Answer{Body: body, Err: e}
	}
	var args map[string]json.RawMessage
	if len(call.Args) > 0 && tools.DecodeJSON(call.Args, &args) != nil {
		return inv.Invoke(ctx, call) // the registry answers the arguments' fault; nothing runs
	}
	if args == nil {
		args = map[string]json.RawMessage{}
	}
	args["approval_id"], _ = json.Marshal(id)
	call.Args, _ = json.Marshal(args)
	return inv.Invoke(ctx, call)
}

// confirmedRun runs a call the client's user confirmed. Where the call then needs approval and
// the client's user may give it (policy.approval_by_client), the confirmation was that: the
// user was just shown what the call changes, and is not asked twice.
func confirmedRun(ctx context.Context, inv *invoke.Invoker, call invoke.Call) invoke.Answer {
	ans := inv.Invoke(ctx, call)
	if id, ok := clientApprovable(inv, call, ans); ok {
		return decidedByClient(ctx, inv, call, id, true)
	}
	return ans
}
