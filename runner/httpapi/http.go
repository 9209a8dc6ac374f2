package httpapi

import (
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/internal/httpx"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/tools"
)

// handler serves the HTTP API.
type handler struct {
	reg      *tools.Registry
	auth     *auth.Authenticator
	log      zerolog.Logger
	maxBody  int64
	bodyWait time.Duration // read deadline of a request body (withBodyDeadline)
	health   *Health
	metrics  *invoke.Metrics
	inv      *invoke.Invoker // runs the tool calls of /v1/tools/{name} and /mcp, with the per-token limits
	// openapiPublic serves the built-in catalog on /openapi.json without a token (openapi_public).
	openapiPublic bool
	// failures counts failed authentications per client and per credential tried (attempts.go),
	// shared with the /approvals sign-in; approverCalls counts approvals API calls per approver.
	failures, approverCalls *attemptLimiter
}

// HandlerOptions configures NewHandlerWith. Zero fields take their defaults.
type HandlerOptions struct {
	// Tokens are the accepted API tokens; none means open access as principal "local".
	Tokens []auth.Token
	// Log receives the access log, one line per request.
	Log zerolog.Logger
	// MaxBodyBytes caps a request body, in bytes (default DefaultMaxBodyBytes, 1 MiB).
	MaxBodyBytes int64
	// BodyReadTimeout bounds the time a client takes to send a request body after its headers
	// (default httpx.DefaultBodyReadTimeout, 10 s); a slower body is answered 408.
	BodyReadTimeout time.Duration
	// Limits are the per-token call limits (default: none).
	Limits invoke.Limits
	// Metrics, when set, counts authentication failures and rate-limited calls, and is served at
	// /metrics unless MetricsElsewhere is set. Tool calls are counted by the registry's observer
	// (tools.Options.Observer).
	Metrics *invoke.Metrics
	// MetricsElsewhere leaves /metrics to another listener (metrics_listen).
	MetricsElsewhere bool
	// Health answers /readyz (default: a Health over the registry, without metrics).
	Health *Health
	// Caller runs the tool calls of the API and of /mcp (default: the registry). A wrapper may
	// add behaviour around every call; listings and readiness always come from the registry.
	Caller invoke.Caller
	// Tracer, when set, traces every tool call (OpenTelemetry, runner/invoke/otel.go); nil: off.
	Tracer invoke.TracerProvider
	// JWT and MCPOAuth accept JWT bearer tokens and make /mcp an OAuth resource server
	// (Config.JWT, Config.MCPOAuth, validated); nil: off.
	JWT      *auth.JWTConfig
	MCPOAuth *auth.MCPOAuthConfig
	// MCP configures the tools on /mcp (MCPOptions; zero: the defaults).
	MCP mcpapi.MCPOptions
	// OpenAPIPublic serves /openapi.json without a token, listing the built-in tools only
	// (Config.OpenAPIPublic; default false: a token is required, as on /v1/tools).
	OpenAPIPublic bool
	// SignIns keeps the /approvals page's sign-ins (nil: the page's own, in memory).
	SignIns SignIns
	// Internal, when set, serves /internal/v1/: the endpoints the other replicas of a fleet
	// call (runner/forward), which check their own signatures instead of API tokens.
	Internal http.Handler
	// FleetSize, when set, is the number of live replicas: each token's rate limit is split by
	// it so that it holds for the fleet as a whole (invoke.Limiter.SetFleet).
	FleetSize *atomic.Int64
	// AuthFailuresPerSecond bounds the failed authentications (bearer tokens and /approvals
	// sign-ins the runner does not accept) of one client address and of one credential tried,
	// per second; the next is answered 429 rate_limited with Retry-After (default
	// DefaultAuthFailuresPerSecond, 30; negative: no limit).
	AuthFailuresPerSecond int
	// ApproverCallsPerSecond bounds the approvals API calls of one approver per second (default
	// DefaultApproverCallsPerSecond, 30; negative: no limit).
	ApproverCallsPerSecond int
}

// NewHandler returns the HTTP API with default options: see NewHandlerWith.
func NewHandler(reg *tools.Registry, tokens []auth.Token, log zerolog.Logger, maxBody int64) http.Handler {
	return NewHandlerWith(reg, HandlerOptions{Tokens: tokens, Log: log, MaxBodyBytes: maxBody})
}

// NewHandlerWith returns the HTTP API: /healthz, /readyz, /metrics, /v1/tools, POST
// /v1/tools/{name}, /v1/approvals (approvals.go), /openapi.json, and MCP (Streamable HTTP) at /mcp behind the same tokens and
// limits. Access logs go to opts.Log, one line per request, without query strings, headers or
// bodies.
func NewHandlerWith(reg *tools.Registry, opts HandlerOptions) http.Handler {
	h := &handler{reg: reg, auth: auth.NewAuthenticator(opts.Tokens), log: opts.Log, maxBody: opts.MaxBodyBytes,
		health: opts.Health, metrics: opts.Metrics, openapiPublic: opts.OpenAPIPublic}
	h.auth.WithIdentity(opts.JWT, opts.MCPOAuth, opts.Log)
	h.failures = newAttemptLimiter(cmp.Or(opts.AuthFailuresPerSecond, DefaultAuthFailuresPerSecond), nil)
	h.approverCalls = newAttemptLimiter(cmp.Or(opts.ApproverCallsPerSecond, DefaultApproverCallsPerSecond), nil)
	if h.maxBody <= 0 {
		h.maxBody = config.DefaultMaxBodyBytes
	}
	if h.bodyWait = opts.BodyReadTimeout; h.bodyWait <= 0 {
		h.bodyWait = httpx.DefaultBodyReadTimeout
	}
	if h.health == nil {
		h.health = NewHealth(reg, opts.Log, opts.Metrics)
	}
	var caller invoke.Caller = reg
	if opts.Caller != nil {
		caller = opts.Caller
	}
	lim := invoke.NewLimiter(opts.Limits, h.auth.PrincipalNames(), opts.Metrics)
	lim.SetFleet(opts.FleetSize)
	h.inv = invoke.NewLimitedInvoker(caller, opts.Log, lim)
	h.inv.SetTracerProvider(opts.Tracer)
	mux := http.NewServeMux()
	h.probes(mux)
	if opts.Metrics != nil && !opts.MetricsElsewhere {
		mux.Handle("GET /metrics", opts.Metrics.Handler())
	}
	mux.HandleFunc("GET /v1/tools", h.authed(h.listTools))
	mux.HandleFunc("POST /v1/tools/{name}", h.authed(h.callTool))
	h.mountApprovals(mux) // approvals.go
	mux.HandleFunc("GET /openapi.json", h.openapi)
	h.auth.RegisterOAuth(mux)
	mux.HandleFunc("/mcp", h.authed(mcpapi.NewHTTP(reg, h.inv, opts.Log, h.maxBody, h.bodyWait, opts.MCP).Serve))
	// The approvers' HTML page, signed in with the same tokens (approvals_page.go).
	approvalsPage := NewApprovalsPage(reg, h.auth, ApprovalsPageOptions{Log: opts.Log, Metrics: opts.Metrics, failures: h.failures, SignIns: opts.SignIns})
	mux.Handle("/approvals", approvalsPage)
	mux.Handle("/approvals/", approvalsPage)
	if opts.Internal != nil {
		mux.Handle("/internal/v1/", opts.Internal)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, &tools.Error{Type: tools.ErrUnknownTool, Message: "No such endpoint",
			Suggestion: "Call tools with POST /v1/tools/{name}; GET /v1/tools lists them."})
	})
	return httpx.WithBodyDeadline(h.logged(mux), h.bodyWait)
}

// NewMetricsHandler returns what a separate metrics listener serves: /metrics, /healthz and
// /readyz, without tokens and without an access log.
func NewMetricsHandler(m *invoke.Metrics, health *Health) http.Handler {
	h := &handler{health: health}
	mux := http.NewServeMux()
	h.probes(mux)
	mux.Handle("GET /metrics", m.Handler())
	return httpx.WithBodyDeadline(mux, httpx.DefaultBodyReadTimeout)
}

func (h *handler) probes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("GET /readyz", h.readyz)
}

type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusWriter) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }
func (s *statusWriter) Write(b []byte) (int, error) {
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

// logged adds a request id and writes the access log line.
func (h *handler) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		r = invoke.WithSessionHeader(invoke.WithTraceContext(r)) // invoke/sessionroute.go, invoke/otel.go
		id := r.Header.Get("X-Request-Id")
		if !validRequestID(id) {
			id = h.inv.NextID()
		}
		w.Header().Set("X-Request-Id", id)
		info := &httpx.RequestLog{ReqID: id}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(httpx.WithRequestLog(r.Context(), info)))
		ev := h.log.Info()
		switch {
		case r.Method == http.MethodGet && (r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/metrics"):
			// Probes and scrapes arrive every few seconds; Health logs readiness changes itself.
			ev = h.log.Debug()
		case sw.status >= 500:
			ev = h.log.Warn()
		}
		ev.Str("req_id", id).Str("method", r.Method).Str("path", r.URL.Path).Int("status", sw.status).
			Int("bytes", sw.bytes).Dur("duration", time.Since(start))
		if info.Principal != "" {
			ev = ev.Str("principal", info.Principal)
		}
		if info.Role != "" {
			ev = ev.Str("role", info.Role)
		}
		if info.Tool != "" {
			ev = ev.Str("tool", info.Tool)
		}
		if info.Database != "" {
			ev = ev.Str("database", info.Database)
		}
		if info.Session != "" {
			ev = ev.Str("session", info.Session)
		}
		if info.ErrorType != "" {
			ev = ev.Str("error_type", string(info.ErrorType))
		}
		ev.Msg("request")
	})
}

// validRequestID accepts a caller's request id only when it is short and plain, so it cannot
// inject into logs.
func validRequestID(s string) bool { return s != "" && config.PlainName(s, 64) }

type principalHandler func(w http.ResponseWriter, r *http.Request, p tools.Principal)

func (h *handler) authed(next principalHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// A client or a credential that failed too often in the last second is not even
		// checked: guessing tokens costs a second per 30 guesses, from each address.
		bearer := bearerOf(r)
		keys := authKeys(r, bearer)
		if wait, over := h.failures.blocked(keys...); over {
			writeRateLimited(w, r, rateLimitedError("failed authentications", h.failures.limit, wait), wait)
			return
		}
		p, terr := h.auth.Authenticate(r)
		info := httpx.RequestLogOf(r.Context())
		if terr != nil {
			if info != nil {
				info.ErrorType = terr.Type
			}
			if terr.Type == tools.ErrAuthentication {
				if bearer != "" { // a request without a token (a client discovering OAuth) guesses nothing
					h.failures.add(keys...)
				}
				w.Header().Set("WWW-Authenticate", h.auth.Challenge(r))
				h.metrics.AuthFailed(r.Header.Get("Authorization") == "")
				httpx.WriteErrorStatus(w, http.StatusUnauthorized, terr)
				return
			}
			httpx.WriteError(w, terr) // act-as refused or malformed: 403 not_allowed, 400
			return
		}
		if info != nil {
			info.Principal, info.Role = p.Name, p.Role
		}
		next(w, r, p)
	}
}

func (h *handler) callTool(w http.ResponseWriter, r *http.Request, p tools.Principal) {
	name := r.PathValue("name")
	info := httpx.RequestLogOf(r.Context())
	if info == nil {
		info = &httpx.RequestLog{} // not reached through logged: nobody reads it
	}
	info.Tool = name
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		info.ErrorType = httpx.BodyReadError(w, err, h.maxBody, h.bodyWait).Type
		return
	}
	ctx, terr := withResponseCap(r)
	if terr == nil {
		ctx, terr = withPlanBudget(ctx, r)
	}
	if terr != nil {
		info.ErrorType = terr.Type
		httpx.WriteError(w, terr)
		return
	}
	ans := h.inv.Invoke(ctx, invoke.Call{Principal: p, Tool: name, Args: body, RequestID: info.ReqID, Transport: "http", AccessLogged: true})
	info.Database, info.Session = ans.Database, ans.Session
	if ans.Err != nil {
		info.ErrorType = ans.Err.Type
		if m, _ := tools.ErrorMetaOf(ans.Err.Type); m.Retryable && ans.RetryAfter > 0 {
			w.Header().Set("Retry-After", invoke.RetryAfterSeconds(ans.RetryAfter))
		}
		httpx.WriteJSON(w, httpx.StatusFor(ans.Err.Type), ans.Body)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, ans.Body)
}

// listTools lists the tools the caller can use (Registry.ToolsFor, docs/design.md §12).
func (h *handler) listTools(w http.ResponseWriter, r *http.Request, p tools.Principal) {
	out, _ := json.Marshal(map[string]any{"tools": h.reg.ToolsFor(p)})
	httpx.WriteJSON(w, http.StatusOK, out)
}

// readyz answers 200 when the runner can serve calls, and 503 while it drains for shutdown or
// while a database does not answer.
func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	if h.health.Draining() {
		httpx.WriteJSON(w, http.StatusServiceUnavailable, []byte(`{"status":"draining","reason":"shutting down"}`))
		return
	}
	type ready struct {
		Status string `json:"status"`
		Reason string `json:"reason,omitempty"`
		*genInfo
	}
	g := h.health.gen.Load()
	if down := h.health.Check(r.Context()); len(down) > 0 {
		out, _ := json.Marshal(ready{Status: "unavailable", Reason: readyReason(down, len(h.health.reg.Databases())), genInfo: g})
		httpx.WriteJSON(w, http.StatusServiceUnavailable, out)
		return
	}
	out, _ := json.Marshal(ready{Status: "ready", genInfo: g})
	httpx.WriteJSON(w, http.StatusOK, out)
}
