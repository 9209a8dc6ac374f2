package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/pgtools/pgtools/tools/plan"
)

// Forwarder sends a call in a session that another replica holds to that replica (the runner's
// fleet package implements it over HTTP). The registry asks it only for a validated call whose
// session_id carries a tag, and never for a call that was itself forwarded (WithForwarded).
type Forwarder interface {
	// Forward runs c on the replica whose tag c.SessionID starts with and returns its answer.
	// ErrNotForwarded says the call runs here: the tag is this replica's, or one no replica of
	// the fleet ever answered to (the local answer then names it). A *ReplicaLostError says the
	// owner is known but not live, or could not be reached before the call was sent. Any other
	// error means the call was sent and its answer is unknown.
	Forward(ctx context.Context, c ForwardCall) (ForwardAnswer, error)
}

// ErrNotForwarded is a Forwarder's answer for a call that runs on this replica.
var ErrNotForwarded = errors.New("not forwarded: the session is this replica's or its tag is unknown")

// ReplicaLostError is a Forwarder's answer for a session whose replica is known but gone: not
// live in the fleet, or refusing connections. PostgreSQL rolled its transaction back when that
// replica's connection ended.
type ReplicaLostError struct {
	Tag     string // the session's tag
	Replica string // the replica's name when the fleet knows it, else ""
	Cause   string // what showed it gone, for the log (never sent to the caller)
}

func (e *ReplicaLostError) Error() string { return "replica " + e.Tag + " is gone: " + e.Cause }

// ForwardCall is a call as the replica that received it sends it on: validated arguments and
// the caller's principal, narrowed by the caps of the call's context (WithMaxResponseBytes,
// plan.WithBudget), so the owner runs it with exactly the caller's rights and limits.
type ForwardCall struct {
	Tag       string          `json:"tag"`
	SessionID string          `json:"session_id"`
	Tool      string          `json:"tool"`
	Principal Principal       `json:"principal"`
	Args      json.RawMessage `json:"args"`
}

// ForwardAnswer is the owner's answer to a ForwardCall: its result or error object, byte for
// byte, and what logs and confirmations read of it.
type ForwardAnswer struct {
	// Body is the answer's JSON as the owner encoded it: a result, or the error object when
	// Failed.
	Body     json.RawMessage `json:"body"`
	Failed   bool            `json:"failed,omitempty"`
	Database string          `json:"database,omitempty"`
	Summary  ForwardSummary  `json:"summary"`
}

// ForwardSummary is Summary as it travels.
type ForwardSummary struct {
	Table        string `json:"table,omitempty"`
	Rows         *int   `json:"rows,omitempty"`
	AffectedRows *int   `json:"affected_rows,omitempty"`
	Truncated    bool   `json:"truncated,omitempty"`
	DryRun       bool   `json:"dry_run,omitempty"`
}

type forwardedKey struct{}

// WithForwarded marks ctx as carrying a call another replica forwarded: the registry runs it
// here whatever its session's tag, so a call is forwarded at most once.
func WithForwarded(ctx context.Context) context.Context {
	return context.WithValue(ctx, forwardedKey{}, true)
}

func isForwarded(ctx context.Context) bool { v, _ := ctx.Value(forwardedKey{}).(bool); return v }

// forwardedResult is the owner's result, sent on unchanged.
type forwardedResult struct {
	body []byte
	sum  Summary
}

func (f *forwardedResult) MarshalJSON() ([]byte, error) { return f.body, nil }
func (f *forwardedResult) Summary() Summary             { return f.sum }
func (f *forwardedResult) setExecutionTime(string)      {} // the owner's timing stands

// narrowed is p with the context's caps folded in, so the owner, which has no such context,
// applies the same (never larger) response cap and plan budget.
func narrowed(ctx context.Context, p Principal) Principal {
	if c, ok := ctx.Value(maxBytesKey{}).(int); ok && c > 0 && (p.MaxResponseBytes <= 0 || c < p.MaxResponseBytes) {
		p.MaxResponseBytes = c
	}
	b := plan.BudgetOf(ctx, plan.Budget{Cost: p.MaxEstimatedCost, Rows: p.MaxEstimatedRows})
	p.MaxEstimatedCost, p.MaxEstimatedRows = b.Cost, b.Rows
	return p
}

// replicaLost answers a call in a session whose replica is gone.
func replicaLost(id string, e *ReplicaLostError) *Error {
	who := "replica with tag " + e.Tag
	if e.Replica != "" {
		who = fmt.Sprintf("replica %q (tag %s)", e.Replica, e.Tag)
	}
	return &Error{Type: ErrConnection,
		Message:    fmt.Sprintf("Session %s was lost: the %s that held it is no longer running, and PostgreSQL rolled its transaction back when that replica's connection ended", id, who),
		Suggestion: `Nothing of this session was committed. Begin again: open a new session with pg_tx {"action":"begin"} and redo its changes.`}
}

// forwardFailed answers a call sent to the session's replica that gave no answer: it may have
// run.
func forwardFailed(id, tag string) *Error {
	return &Error{Type: ErrConnection,
		Message: fmt.Sprintf("Session %s: the replica holding it (tag %s) did not answer this call; whether the call ran there is unknown", id, tag),
		Suggestion: `Check the session with pg_tx {"action":"list"} or by reading what the call would have changed before repeating it; ` +
			`if that replica stopped, the session was rolled back: begin again with pg_tx {"action":"begin"}.`}
}
