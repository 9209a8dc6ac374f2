package runner

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/forward"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/runner/state"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/page"
	"github.com/pgtools/pgtools/tools/session"
)

// BuildOptions are what a Runtime needs beyond its Config.
type BuildOptions struct {
	// Check runs the start-up checks that need the databases (roles, grants, …) over a
	// registry built from cfg, before it serves: at Build and at every Reload. An error stops
	// the start, or refuses the reload. nil: none.
	Check func(ctx context.Context, cfg *config.Config, reg *tools.Registry) error
	// NoSessions leaves pg_tx sessions off (no session manager): for a runner that only
	// measures stateless calls.
	NoSessions bool
	// ApprovalClock is the approval store's clock (tests move it to expire requests); nil:
	// time.Now.
	ApprovalClock func() time.Time
	// Locator, when set, says where the other replicas are (a shared registry of replicas)
	// instead of config.Fleet's peers; forwarding then needs only fleet.secret_file.
	Locator forward.Locator
	// FleetInterval is how often the peers of config.Fleet are asked their tag (default
	// forward.DefaultInterval); tests shorten it.
	FleetInterval time.Duration
}

// Runtime is pgtools assembled from one Config: the database pools, the session manager and
// the pg_transaction bound, the audit log, metrics and readiness, and the n8n task brokers it
// joined (n8n), which live as long as the process, and a generation (registry and HTTP handler)
// that Reload replaces atomically. It is the one place every command (serve, mcp, demo, the
// benchmark) builds pgtools from. It is safe for concurrent use.
type Runtime struct {
	log       zerolog.Logger
	opts      BuildOptions
	sessions  *session.Manager // nil with NoSessions
	txLimit   *tools.TxLimiter
	approvals *approval.Store // one store for every generation: requests survive a reload
	state     *state.State    // the fleet state (config state); nil without
	// signIns are the /approvals page's sign-ins, kept across generations: in the state
	// database when there is one (every replica's page shares them), else in memory.
	signIns    httpapi.SignIns
	closeState func() // deregisters the replica, stops its heartbeat, closes the state pool
	auditor    tools.Auditor
	metrics    *invoke.Metrics
	health     *httpapi.Health
	opened     *config.Config             // the config the pools were opened with
	dbs        map[string]*tools.Database // as opened: their pools serve every generation
	closeDBs   func()
	closeAudit func() error
	stopSweep  context.CancelFunc
	brokers    *brokers // the n8n brokers joined; they call the current generation
	fleet      *fleet   // forwarding to the other replicas (fleetwire.go); nil: off
	// pageKey signs page tokens when the config names no page_tokens.key_file: made once at
	// Build, so that a reload keeps the tokens already handed out valid.
	pageKey []byte

	reloadMu sync.Mutex // one reload at a time
	gen      atomic.Pointer[generation]
	pending  atomic.Pointer[[]string] // PendingRestart, set by each accepted reload
}

// generation is what one successfully loaded config serves: calls started under it finish
// under it, new calls take the newest.
type generation struct {
	n      int64
	loaded time.Time
	cfg    *config.Config
	reg    *tools.Registry
	api    http.Handler
}

// Build opens cfg's databases (validated: defaults filled), starts the session manager, builds
// the first generation, checked with opts.Check, and joins the n8n task brokers of cfg.N8N,
// whose tasks call the current generation as cfg.N8N.TaskPrincipal. Close releases everything.
func Build(ctx context.Context, cfg *config.Config, log zerolog.Logger, opts BuildOptions) (rt *Runtime, err error) {
	rt = &Runtime{log: log, opts: opts, opened: cfg, dbs: map[string]*tools.Database{}}
	dbs, closeDBs, err := OpenDatabases(ctx, cfg)
	if err != nil {
		return nil, err
	}
	rt.closeDBs = closeDBs
	rt.pageKey = make([]byte, page.KeyMinBytes)
	if _, err := rand.Read(rt.pageKey); err != nil {
		closeDBs()
		return nil, fmt.Errorf("making a page token key: %w", err)
	}
	defer func() {
		if err != nil {
			rt.Close()
		}
	}()
	for _, db := range dbs {
		rt.dbs[db.Name] = db
	}
	audit, closeAudit, err := invoke.OpenAuditLog(cfg.AuditLog)
	if err != nil {
		return rt, err
	}
	rt.closeAudit = closeAudit
	if audit != nil {
		rt.auditor = audit // a nil *invoke.AuditLog in the interface would not read as "none"
	}
	l := cfg.ConnLimits()
	rt.txLimit = tools.NewTxLimiter(l.MaxTransactions, l.MaxTransactionsPerPrincipal, l.MaxTransactionsPerSubject)
	var stats invoke.SessionStats
	if !opts.NoSessions {
		rt.sessions = session.New(session.Config{MaxSessions: l.MaxSessions, MaxPerPrincipal: l.MaxSessionsPerPrincipal,
			MaxPerSubject: l.MaxSessionsPerSubject, TTL: cfg.Sessions.TTL(), Log: log, ReplicaID: cfg.ReplicaID})
		sweepCtx, stop := context.WithCancel(context.Background())
		rt.stopSweep = stop
		go rt.sessions.Run(sweepCtx, 0)
		for _, db := range dbs { // spare connections, so that even the first begin finds one
			rt.sessions.Warm(db.Name, db.Pool.Config().ConnConfig)
		}
		stats = rt.sessions
	}
	ao := approval.Options{TTL: cfg.Approvals.TTL(), MaxPending: cfg.Approvals.MaxPending,
		Audit: tools.AuditApprovals(rt.auditor), Now: opts.ApprovalClock,
		OnError: func(op string, err error) {
			log.Warn().Str("op", op).Err(err).Msg("approval state: the state database did not answer")
		}}
	if cfg.State != "" {
		if err := rt.openState(ctx, cfg); err != nil {
			return rt, err
		}
		ao.Backend = rt.state.Approvals()
	}
	if err := rt.startFleet(cfg, log); err != nil {
		return rt, err
	}
	rt.approvals = approval.NewStore(ao)
	rt.signIns = httpapi.NewMemorySignIns()
	if rt.state != nil {
		rt.signIns = stateSignIns{rt.state}
	}
	rt.metrics = invoke.NewMetricsFor(dbs, stats)
	rt.metrics.WatchApprovals(rt.approvals)
	g, err := rt.newGeneration(ctx, cfg, dbs, 1)
	if err != nil {
		return rt, err
	}
	rt.health = httpapi.NewHealth(g.reg, log, rt.metrics)
	g.api = rt.handler(g)
	rt.publish(g)
	if rt.brokers, err = joinBrokers(cfg, rt, log); err != nil {
		return rt, err
	}
	return rt, nil
}

// newGeneration builds and checks the registry of cfg over dbs; its handler is left to the
// caller.
func (rt *Runtime) newGeneration(ctx context.Context, cfg *config.Config, dbs []*tools.Database, n int64) (*generation, error) {
	o := tools.Options{Databases: dbs, TxLimiter: rt.txLimit, Auditor: rt.auditor, Observer: rt.metrics,
		Approvals: rt.approvals, CustomTools: cfg.CustomTools, Pages: page.Tokens{Key: cfg.PageTokens.Key, TTL: cfg.PageTokens.TTL()}}
	if len(o.Pages.Key) == 0 {
		o.Pages.Key = rt.pageKey
	}
	if rt.sessions != nil {
		o.Sessions = rt.sessions
	}
	if rt.fleet != nil {
		o.Forwarder = rt.fleet.forwarder
	}
	reg, err := tools.NewRegistry(ctx, o)
	if err != nil {
		if ce := (*tools.CustomToolError)(nil); errors.As(err, &ce) {
			return nil, fmt.Errorf("custom_tools[%d]: %w", ce.Index, ce.Err)
		}
		return nil, err
	}
	if rt.opts.Check != nil {
		if err := rt.opts.Check(ctx, cfg, reg); err != nil {
			return nil, err
		}
	}
	return &generation{n: n, loaded: time.Now().UTC(), cfg: cfg, reg: reg}, nil
}

func (rt *Runtime) handler(g *generation) http.Handler {
	cfg := g.cfg
	// Questions asked through /mcp are keyed like page tokens: the configured key, shared by the
	// replicas, or the one made at Build, so a reload keeps pending questions answerable.
	stateKey := cfg.PageTokens.Key
	if len(stateKey) == 0 {
		stateKey = rt.pageKey
	}
	return httpapi.NewHandlerWith(g.reg, httpapi.HandlerOptions{Tokens: cfg.Tokens, Log: rt.log, MaxBodyBytes: cfg.Limits.MaxBodyBytes,
		AuthFailuresPerSecond: cfg.Limits.AuthFailuresPerSecond, ApproverCallsPerSecond: cfg.Limits.ApproverCallsPerSecond,
		Limits: cfg.Limits.Limits, Metrics: rt.metrics, MetricsElsewhere: rt.opened.MetricsListen != "", Health: rt.health, JWT: cfg.JWT,
		MCPOAuth: cfg.MCPOAuth, Tracer: rt.opened.Tracer, MCP: mcpapi.MCPOptions{StructuredContent: cfg.MCP.StructuredContent, AllowedOrigins: cfg.MCP.AllowedOrigins,
			StateKey: mcpapi.StateKeyFrom(stateKey)},
		OpenAPIPublic: cfg.OpenAPIPublic, Internal: rt.internalHandler(), FleetSize: rt.fleetSize(), SignIns: rt.signIns})
}

func (rt *Runtime) publish(g *generation) {
	rt.gen.Store(g)
	rt.health.SetGeneration(g.n, g.loaded)
	rt.metrics.SetGeneration(g.n)
}

// Registry is the current generation's registry.
func (rt *Runtime) Registry() *tools.Registry { return rt.gen.Load().reg }

// Config is the current generation's config. Callers must not change it.
func (rt *Runtime) Config() *config.Config { return rt.gen.Load().cfg }

// Generation is the current generation's number (1 at Build, one more per accepted reload) and
// when it was loaded.
func (rt *Runtime) Generation() (n int64, loaded time.Time) {
	g := rt.gen.Load()
	return g.n, g.loaded
}

// Sessions is the session manager every generation shares (nil with NoSessions).
func (rt *Runtime) Sessions() *session.Manager { return rt.sessions }

// State is the fleet state in the state database (config state), nil without it: the replica
// registry (Replicas, Owner) and the approvals' backend.
func (rt *Runtime) State() *state.State { return rt.state }

// Approvals is the approval store every generation shares.
func (rt *Runtime) Approvals() *approval.Store { return rt.approvals }

// Metrics are the runtime's metrics, shared by every generation.
func (rt *Runtime) Metrics() *invoke.Metrics { return rt.metrics }

// Health is the runtime's readiness state.
func (rt *Runtime) Health() *httpapi.Health { return rt.health }

// Handler is the HTTP API of the current generation, looked up per request: a request keeps
// the generation it started under.
func (rt *Runtime) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rt.gen.Load().api.ServeHTTP(w, r) })
}

// Call runs a tool call on the current generation's registry (for transports that hold the
// runtime rather than a registry: the n8n broker).
func (rt *Runtime) Call(ctx context.Context, p tools.Principal, tool string, args []byte) (tools.Result, tools.Outcome, *tools.Error) {
	return rt.Registry().Call(ctx, p, tool, args)
}

// Preview runs a preview on the current generation's registry.
func (rt *Runtime) Preview(ctx context.Context, p tools.Principal, tool string, args []byte) (tools.Preview, *tools.Error) {
	return rt.Registry().Preview(ctx, p, tool, args)
}

// Server is the network side of the runtime: its Handler (always the current generation's),
// metrics, readiness and graceful shutdown.
func (rt *Runtime) Server() *Server {
	return &Server{cfg: rt.opened, log: rt.log, health: rt.health, metrics: rt.metrics, api: rt.Handler()}
}

// Run serves the runtime on ln (and the probes and metrics on metricsLn, when set) until ctx
// ends: Server.Run. When ctx ends, the n8n brokers stop taking tasks too, and those in flight
// get their grace to finish while the HTTP calls get theirs.
func (rt *Runtime) Run(ctx context.Context, ln, metricsLn net.Listener) error {
	stop := context.AfterFunc(ctx, rt.brokers.drain)
	defer stop()
	return rt.Server().Run(ctx, ln, metricsLn)
}

// Close stops the n8n brokers (their tasks in flight finish first, within their grace), rolls
// back every open session, then closes the audit log and the pools, last.
func (rt *Runtime) Close() {
	rt.brokers.stop()
	rt.fleet.close()
	if rt.stopSweep != nil {
		rt.stopSweep()
	}
	if rt.sessions != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if n := rt.sessions.Open(); n > 0 {
			rt.log.Info().Int("sessions", n).Msg("rolling back open sessions")
		}
		rt.sessions.Close(cctx)
		cancel()
	}
	if rt.closeState != nil {
		rt.closeState()
	}
	if rt.closeAudit != nil {
		_ = rt.closeAudit()
	}
	if rt.closeDBs != nil {
		rt.closeDBs()
	}
}
