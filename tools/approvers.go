package tools

import (
	"fmt"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/words"
)

// Approvals is the registry's approval store (Options.Approvals, or the one it made).
func (r *Registry) Approvals() *approval.Store { return r.approvals }

// ClientMayApprove reports whether the user of p's MCP client may decide p's pending request id
// itself (Policy.ApprovalByClient on the request's database).
func (r *Registry) ClientMayApprove(p Principal, id string) bool {
	ap, ok := r.approvals.Own(p.Party(), id)
	if !ok {
		return false
	}
	db, ok := r.dbs[ap.Database]
	return ok && db.Policy.ApprovalByClient && ap.Status == approval.Pending
}

// DecideByClient records the decision of the user of p's MCP client on p's own pending request
// id, where the request's database allows it (ClientMayApprove). The approver is recorded as
// "client-user:" and p's name: the person behind the client, as the client reported it.
func (r *Registry) DecideByClient(p Principal, id string, approve bool) (approval.Request, *Error) {
	if !r.ClientMayApprove(p, id) {
		return approval.Request{}, &Error{Type: ErrNotAllowed,
			Message:    fmt.Sprintf("Approval request %s cannot be decided by this client: it is not pending, or its database does not let clients approve", words.Quote(id)),
			Suggestion: "An approver must decide it: another person's token with the approve scope, on the runner's /approvals page or POST /v1/approvals/{id}."}
	}
	return r.approvals.DecideUnchecked(approval.Party{Name: "client-user:" + p.Name}, id, approve)
}
