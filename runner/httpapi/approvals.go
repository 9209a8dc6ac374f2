package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/pgtools/pgtools/runner/internal/httpx"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/approval"
)

// The approvals API (docs/approvals.md): an approver, a bearer with the approve scope, lists the
// pending requests it may decide, reads one, and approves or denies it. The store decides who
// may see and decide what (approval.Store); these handlers only carry its answers, with the
// status of their category, like every other answer of the API.

// mountApprovals adds GET /v1/approvals, GET /v1/approvals/{id} and POST /v1/approvals/{id}.
func (h *handler) mountApprovals(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/approvals", h.authed(h.approverLimited(h.listApprovals)))
	mux.HandleFunc("GET /v1/approvals/{id}", h.authed(h.approverLimited(h.getApproval)))
	mux.HandleFunc("POST /v1/approvals/{id}", h.authed(h.approverLimited(h.decideApproval)))
}

// approverLimited bounds the approvals API calls of one principal (ApproverCallsPerSecond):
// even a valid approver's credential cannot be used to walk the request ids at speed.
func (h *handler) approverLimited(next principalHandler) principalHandler {
	return func(w http.ResponseWriter, r *http.Request, p tools.Principal) {
		key := "approver " + p.Name
		if wait, over := h.approverCalls.blocked(key); over {
			writeRateLimited(w, r, rateLimitedError("approvals API calls", h.approverCalls.limit, wait), wait)
			return
		}
		h.approverCalls.add(key)
		next(w, r, p)
	}
}

// approverOnly refuses a bearer without the approve scope, before the store is asked: such a
// token must learn neither which requests exist nor their arguments.
func approverOnly(w http.ResponseWriter, r *http.Request, p tools.Principal) bool {
	if p.Can("approve") {
		return true
	}
	writeAPIError(w, r, &tools.Error{Type: tools.ErrNotAllowed,
		Message:    "This token has no approve scope: only approvers list and decide approval requests",
		Suggestion: "Use an approver's own token (its scopes include approve). A caller never decides its own requests: another person approves them."})
	return false
}

func (h *handler) listApprovals(w http.ResponseWriter, r *http.Request, p tools.Principal) {
	if !approverOnly(w, r, p) {
		return
	}
	list, e := h.reg.Approvals().List(p.Party())
	if e != nil {
		writeAPIError(w, r, e)
		return
	}
	if list == nil {
		list = []approval.Request{}
	}
	for i := range list {
		list[i] = inUTC(list[i])
	}
	writeApprovalJSON(w, struct {
		Success   bool               `json:"success"`
		Approvals []approval.Request `json:"approvals"`
	}{true, list})
}

func (h *handler) getApproval(w http.ResponseWriter, r *http.Request, p tools.Principal) {
	if !approverOnly(w, r, p) {
		return
	}
	ap, e := h.reg.Approvals().Get(p.Party(), r.PathValue("id"))
	if e != nil {
		writeAPIError(w, r, e)
		return
	}
	writeApprovalJSON(w, approvalAnswer{true, inUTC(ap)})
}

// approvalAnswer is the answer of GET and POST /v1/approvals/{id}.
type approvalAnswer struct {
	Success  bool             `json:"success"`
	Approval approval.Request `json:"approval"`
}

func (h *handler) decideApproval(w http.ResponseWriter, r *http.Request, p tools.Principal) {
	if !approverOnly(w, r, p) {
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		e := httpx.BodyReadError(w, err, h.maxBody, h.bodyWait)
		if info := httpx.RequestLogOf(r.Context()); info != nil {
			info.ErrorType = e.Type
		}
		return
	}
	// Read as a map through the callers' one decoder: a key named twice is refused (which of
	// two decisions counts would depend on the parser), and no other spelling of "decision" is
	// read as one (encoding/json matches struct fields without regard to case).
	var fields map[string]any
	err = tools.DecodeJSON(raw, &fields)
	if dup := tools.DuplicateKey(err); dup != nil {
		writeAPIError(w, r, dup)
		return
	}
	decision, _ := fields["decision"].(string)
	if err != nil || len(fields) != 1 || (decision != "approve" && decision != "deny") {
		writeAPIError(w, r, &tools.Error{Type: tools.ErrInvalidArguments,
			Message:    `The body must be {"decision": "approve"} or {"decision": "deny"}`,
			Suggestion: `Send {"decision": "approve"} to let the call commit once, or {"decision": "deny"} to refuse it.`})
		return
	}
	ap, e := h.reg.Approvals().Decide(p.Party(), r.PathValue("id"), decision == "approve")
	if e != nil {
		writeAPIError(w, r, e)
		return
	}
	writeApprovalJSON(w, approvalAnswer{true, inUTC(ap)})
}

// writeAPIError answers e with its category's status and notes the category in the access log.
func writeAPIError(w http.ResponseWriter, r *http.Request, e *tools.Error) {
	if info := httpx.RequestLogOf(r.Context()); info != nil {
		info.ErrorType = e.Type
	}
	httpx.WriteError(w, e)
}

// writeApprovalJSON answers v with 200. HTML is not escaped: an approver reads the arguments
// (where clauses with < and >) as the caller sent them.
func writeApprovalJSON(w http.ResponseWriter, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		httpx.WriteError(w, &tools.Error{Type: tools.ErrInternal, Message: "The approval could not be encoded", Suggestion: "Report it to the operator."})
		return
	}
	httpx.WriteJSON(w, http.StatusOK, bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// inUTC is ap with its times in UTC, as every answer of the API states times.
func inUTC(ap approval.Request) approval.Request {
	ap.Created, ap.Expires = ap.Created.UTC(), ap.Expires.UTC()
	if ap.Decided != nil {
		d := ap.Decided.UTC()
		ap.Decided = &d
	}
	return ap
}
