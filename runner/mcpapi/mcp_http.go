package mcpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/internal/httpx"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools"
)

// HTTP serves MCP over Streamable HTTP at /mcp, behind the same bearer tokens as the HTTP API
// (h.authed answers a missing or bad token with 401 before MCP sees the request).
//
// It runs stateless: every POST is a complete exchange and no Mcp-Session-Id is issued or
// honoured. A tool server needs nothing from an MCP session (pgtools sessions are pg_tx
// session_ids, owned by the token's principal), and stateless requests keep replicas
// interchangeable behind a load balancer and leave no per-client state to expire or hijack.
// Answers are plain JSON, not SSE streams, except for a call that asks for progress (a
// progressToken): its POST is answered with an SSE stream that carries the progress
// notifications and then the result.
type HTTP struct {
	reg      *tools.Registry
	inv      *invoke.Invoker
	opts     MCPOptions
	log      zerolog.Logger
	maxBody  int64
	bodyWait time.Duration
	stream   *mcp.StreamableHTTPHandler // JSON answers
	events   *mcp.StreamableHTTPHandler // SSE answers, for calls that asked for progress

	servers *mcpServers // one per principal, built on first use
	// registered holds the names of the tools the servers offer, for the fast path (mcp_fast.go).
	registered map[string]bool
	origins    originPolicy
	metaHead   []byte    // `{"_meta":{"io.modelcontextprotocol/serverInfo":…}`: how 2026-07-28 results start
	metaSeen   metaCache // the 2026-07-28 _meta members already decoded
}

type mcpPrincipalKey struct{}

// NewHTTP returns the /mcp handler offering reg's tools and running calls through inv (the HTTP
// API's, with its per-token limits). maxBody caps a JSON-RPC message, like a POST body of the
// HTTP API, and bodyWait is the body's read deadline (withBodyDeadline sets it; it is named in
// the 408). mcpOpts configures the tools (MCPOptions).
func NewHTTP(reg *tools.Registry, inv *invoke.Invoker, log zerolog.Logger, maxBody int64, bodyWait time.Duration, mcpOpts MCPOptions) *HTTP {
	m := &HTTP{reg: reg, inv: inv, opts: mcpOpts.withDefaults(), log: log, maxBody: maxBody, bodyWait: bodyWait}
	// As the SDK writes a result's _meta (annotateServerInfo): a map of one member.
	head, _ := json.Marshal(mcp.Meta{mcp.MetaKeyServerInfo: serverImpl()}) // plain data: cannot fail
	m.metaHead = append([]byte(`{"_meta":`), head...)
	m.registered = map[string]bool{}
	for _, t := range reg.Tools() {
		// A tool that binds arguments to headers (x-mcp-header) has the SDK check them.
		m.registered[t.Name] = !bytes.Contains(t.InputSchema, []byte("x-mcp-header"))
	}
	var err error
	if m.origins, err = newOriginPolicy(mcpOpts.AllowedOrigins); err != nil {
		log.Error().Err(err).Msg("mcp: allowed origins")
	}
	// m.opts, not mcpOpts: every server keys its questions' states with the one key withDefaults made.
	m.servers = newMCPServers(mcpServerCacheSize, func(p tools.Principal) *mcp.Server { return NewMCPServerWith(reg, p, log, inv, m.opts) })
	opts := mcp.StreamableHTTPOptions{
		Stateless:           true,
		JSONResponse:        true,
		MaxRequestBodyBytes: maxBody,
		Logger:              slogFor(log),
		// Cancels a tool call whose client went away (protocol versions where a POST is the whole
		// call); withHTTPCancel does it for the older ones.
		PropagateRequestCancellation: true,
	}
	m.stream = mcp.NewStreamableHTTPHandler(m.server, &opts)
	sse := opts
	sse.JSONResponse = false
	m.events = mcp.NewStreamableHTTPHandler(m.server, &sse)
	return m
}

// Serve is the principalHandler that h.authed calls with the token's principal.
//
// A POST body is read here, before the SDK sees it, so that a body that does not arrive in time
// is answered like on the HTTP API (408 with the pgtools error object) rather than with the
// SDK's plain-text 400. At most maxBody+1 bytes are read: a longer body still reaches the SDK's
// own limit, which answers 413.
func (m *HTTP) Serve(w http.ResponseWriter, r *http.Request, p tools.Principal) {
	if why := m.origins.check(r); why != "" {
		http.Error(w, "Forbidden: "+why, http.StatusForbidden)
		return
	}
	stream := m.stream
	if r.Method == http.MethodPost && r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(io.LimitReader(r.Body, m.maxBody+1))
		if err != nil {
			e := httpx.BodyReadError(w, err, m.maxBody, m.bodyWait)
			if info := httpx.RequestLogOf(r.Context()); info != nil {
				info.ErrorType = e.Type
			}
			return
		}
		if dup := tools.CheckDuplicateKeys(body); dup != nil {
			refuseDuplicateKey(w, r, dup)
			return
		}
		if m.serveFast(w, r, p, body) {
			return
		}
		if swapped, swap := swapIDs(body); swap != nil {
			body, w = swapped, &idRestorer{ResponseWriter: w, swap: swap}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		// Only a message that names a progress token can want notifications; the SDK's own
		// parsing decides whether it really is one.
		if bytes.Contains(body, []byte(`"progressToken"`)) {
			stream = m.events
		}
	}
	ctx := context.WithValue(r.Context(), mcpPrincipalKey{}, p)
	stream.ServeHTTP(w, r.WithContext(context.WithValue(ctx, httpRequestCtxKey{}, r.Context())))
}

// server returns the MCP server of the request's principal. The principal is bound into the
// server's tool handlers rather than looked up per call, so no call can run without one.
func (m *HTTP) server(r *http.Request) *mcp.Server {
	p, ok := r.Context().Value(mcpPrincipalKey{}).(tools.Principal)
	if !ok {
		return nil // not reached through authed: the SDK answers 400
	}
	return m.servers.get(p)
}

// refuseDuplicateKey answers a message that names a key twice in one object, anywhere: its
// envelope, _meta or the tool's arguments. The go-sdk decodes the envelope with a parser of its
// own and pgtools the arguments with wire's; refusing the message before either reads it means
// no reader's choice between two values matters. Which id the message has is among what cannot
// be known, so the JSON-RPC error has id null (as for a message that cannot be parsed); its data
// is the pgtools error object (invalid_arguments, naming the key).
func refuseDuplicateKey(w http.ResponseWriter, r *http.Request, e *tools.Error) {
	if info := httpx.RequestLogOf(r.Context()); info != nil {
		info.ErrorType = e.Type
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(duplicateKeyAnswer(e))
}

// duplicateKeyAnswer is the JSON-RPC error answering a message with a duplicate key e.
func duplicateKeyAnswer(e *tools.Error) []byte {
	data, _ := e.MarshalJSON()
	msg, _ := json.Marshal(e.Message)
	return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":` + string(msg) + `,"data":` + string(data) + `}}`)
}
