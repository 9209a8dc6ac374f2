// Package forward lets any replica of a pgtools fleet answer a call in a session another
// replica holds: the replica that receives it sends it, signed with the fleet's shared secret,
// to the owner's internal endpoint, which runs it as the caller's own principal and signs its
// answer; the receiver returns that answer unchanged. Where the owner listens comes from a
// Locator: Peers (a configured list of peers and/or a DNS name such as a Kubernetes headless
// Service, each peer telling its tag through a signed request) or a shared registry of
// replicas. docs/scaling.md describes the deployment, docs/security.md the authentication.
package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools"
)

// The internal endpoints, on the replica's main listener. They take no API token: every
// request must carry the fleet's signature.
const (
	PathReplica = "/internal/v1/replica" // GET: this replica's tag and name
	PathForward = "/internal/v1/forward" // POST: run a forwarded call (tools.ForwardCall)
)

// maxCallBytes bounds a forwarded call's body: the caller's arguments (capped by the
// receiver's limits.max_body_bytes) and principal.
const maxCallBytes = 16 << 20

// Forwarder is tools.Forwarder over a Locator and a Client.
type Forwarder struct {
	loc    Locator
	client *Client
	own    string
	log    zerolog.Logger
}

var _ tools.Forwarder = (*Forwarder)(nil)

// NewForwarder returns the Forwarder of the replica tagged own.
func NewForwarder(loc Locator, c *Client, own string, log zerolog.Logger) *Forwarder {
	return &Forwarder{loc: loc, client: c, own: own, log: log}
}

// namer is a Locator that knows the replicas' names (Peers).
type namer interface{ Name(tag string) string }

// loser is a Locator told when a peer refused a connection (Peers).
type loser interface{ Lost(tag string) }

// Forward implements tools.Forwarder.
func (f *Forwarder) Forward(ctx context.Context, c tools.ForwardCall) (tools.ForwardAnswer, error) {
	if c.Tag == f.own {
		return tools.ForwardAnswer{}, tools.ErrNotForwarded
	}
	addr, live, err := f.loc.Owner(ctx, c.Tag)
	if errors.Is(err, ErrUnknownTag) {
		return tools.ForwardAnswer{}, tools.ErrNotForwarded
	}
	if err != nil {
		// Where the owner is cannot be told now: answered here, as a session this replica does
		// not hold, naming the owner's tag. Nothing was sent.
		f.log.Warn().Str("tag", c.Tag).Err(err).Msg("fleet: finding a session's replica failed")
		return tools.ForwardAnswer{}, tools.ErrNotForwarded
	}
	name := ""
	if n, ok := f.loc.(namer); ok {
		name = n.Name(c.Tag)
	}
	if !live {
		return tools.ForwardAnswer{}, &tools.ReplicaLostError{Tag: c.Tag, Replica: name, Cause: "not live in the fleet"}
	}
	body, err := json.Marshal(c)
	if err != nil {
		return tools.ForwardAnswer{}, err
	}
	status, raw, err := f.client.do(ctx, http.MethodPost, addr, PathForward, c.Tag, body)
	switch {
	case err != nil && dialFailed(err):
		if l, ok := f.loc.(loser); ok {
			l.Lost(c.Tag)
		}
		return tools.ForwardAnswer{}, &tools.ReplicaLostError{Tag: c.Tag, Replica: name, Cause: err.Error()}
	case err != nil:
		f.log.Warn().Str("tag", c.Tag).Str("addr", addr).Err(err).Msg("fleet: a forwarded call got no answer")
		return tools.ForwardAnswer{}, err
	case status == http.StatusMisdirectedRequest:
		// The address now serves another replica: the owner is gone.
		return tools.ForwardAnswer{}, &tools.ReplicaLostError{Tag: c.Tag, Replica: name, Cause: "its address serves another replica"}
	case status != http.StatusOK:
		f.log.Error().Str("tag", c.Tag).Str("addr", addr).Int("status", status).Msg("fleet: a replica refused a forwarded call")
		return tools.ForwardAnswer{}, fmt.Errorf("replica %s answered %d", c.Tag, status)
	}
	var ans tools.ForwardAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		return tools.ForwardAnswer{}, fmt.Errorf("replica %s: the answer is not readable: %w", c.Tag, err)
	}
	return ans, nil
}

// Handler serves the internal endpoints of one replica. It is safe for concurrent use.
type Handler struct {
	signer  *Signer
	own     string
	replica string
	inv     *invoke.Invoker
	log     zerolog.Logger
}

// NewHandler returns the internal endpoints of the replica tagged own, named replica, running
// forwarded calls with c (the current registry), without the per-token limits: the replica
// that received the call counted it.
func NewHandler(s *Signer, own, replica string, c invoke.Caller, log zerolog.Logger) *Handler {
	return &Handler{signer: s, own: own, replica: replica, inv: invoke.NewInvoker(c, log), log: log}
}

// refusal is what an unsigned, forged, stale, replayed or misdirected request gets.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, nonce string, err error) {
	status := http.StatusForbidden
	switch {
	case errors.Is(err, ErrUnsigned):
		status = http.StatusUnauthorized
	case errors.Is(err, ErrMisdirected):
		status = http.StatusMisdirectedRequest
	case errors.Is(err, ErrBusy):
		status = http.StatusServiceUnavailable
	}
	h.log.Warn().Str("path", r.URL.Path).Str("remote", r.RemoteAddr).Str("sender", clip(r.Header.Get(headerSender))).
		Err(err).Msg("fleet: internal request refused")
	e := &tools.Error{Type: tools.ErrAuthentication, Message: "Internal request refused: " + err.Error(),
		Suggestion: "Replicas of one fleet must share fleet.secret_file and keep their clocks within 30 s of each other."}
	body, _ := e.MarshalJSON()
	if nonce != "" {
		h.signer.SignAnswer(w.Header(), nonce, status, body)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func clip(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCallBytes))
	if err != nil {
		http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	switch {
	case r.URL.Path == PathReplica && r.Method == http.MethodGet:
		nonce, err := h.signer.Verify(r, body, h.own, true)
		if err != nil {
			h.refuse(w, r, nonce, err)
			return
		}
		out, _ := json.Marshal(Identity{Tag: h.own, Replica: h.replica})
		h.answer(w, nonce, out)
	case r.URL.Path == PathForward && r.Method == http.MethodPost:
		nonce, err := h.signer.Verify(r, body, h.own, false)
		if err != nil {
			h.refuse(w, r, nonce, err)
			return
		}
		var c tools.ForwardCall
		if err := json.Unmarshal(body, &c); err != nil || c.Tool == "" || c.Principal.Name == "" {
			http.Error(w, "not a forwarded call", http.StatusBadRequest)
			return
		}
		ans := h.inv.Invoke(tools.WithForwarded(r.Context()), invoke.Call{Principal: c.Principal, Tool: c.Tool, Args: c.Args, Transport: "fleet"})
		fa := tools.ForwardAnswer{Body: ans.Body, Failed: ans.Err != nil, Database: ans.Database}
		if ans.Err == nil {
			s := ans.Summary
			fa.Summary = tools.ForwardSummary{Table: s.Table, Rows: s.Rows, AffectedRows: s.AffectedRows, Truncated: s.Truncated, DryRun: s.DryRun}
		}
		out, err := json.Marshal(fa)
		if err != nil {
			http.Error(w, "the answer could not be encoded", http.StatusInternalServerError)
			return
		}
		h.answer(w, nonce, out)
	default:
		http.Error(w, "no such internal endpoint", http.StatusNotFound)
	}
}

func (h *Handler) answer(w http.ResponseWriter, nonce string, body []byte) {
	h.signer.SignAnswer(w.Header(), nonce, http.StatusOK, body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}
