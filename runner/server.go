// Package runner is pgtools' composition root. Build assembles one Runtime from a validated
// config.Config (runner/config): the database pools, the registry of tools, the session manager,
// the pg_transaction bound, the approval store, the audit log and metrics (runner/invoke), the
// HTTP API and /mcp (runner/httpapi, runner/mcpapi) and the n8n task brokers it joins
// (runner/n8n, brokers.go). Reload (reload.go) swaps the registry and handler for a new
// configuration, applying what reloadtable.go marks live and reporting the rest as needing a
// restart; Server (this file) listens, drains and shuts down gracefully. Every transport is a
// thin adapter over tools.Registry.Call.
package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools"
)

// OpenDatabases builds a pool per configured database of cfg (validated, so defaults are filled). Pools connect lazily, so the runner starts
// even when a database is down. closeAll releases them all.
func OpenDatabases(ctx context.Context, cfg *config.Config) (dbs []*tools.Database, closeAll func(), err error) {
	var pools []*pgxpool.Pool
	closeAll = func() {
		for _, p := range pools {
			p.Close()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Databases)) {
		d := cfg.Databases[name]
		pcfg, err := tools.PoolConfig(d.URL, d.Policy, d.MaxConns)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("database %q: %w", name, err)
		}
		if d.Password != "" {
			pcfg.ConnConfig.Password = d.Password
		}
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("database %q: creating the pool failed", name)
		}
		pools = append(pools, pool)
		dbs = append(dbs, tools.NewDatabase(name, pool, d.Policy))
	}
	return dbs, closeAll, nil
}

// Server is the network side of pgtools serve: the HTTP API and MCP endpoint, metrics,
// readiness and graceful shutdown, over a Runtime (Runtime.Server), which owns the databases
// and sessions.
type Server struct {
	cfg     *config.Config
	log     zerolog.Logger
	health  *httpapi.Health
	metrics *invoke.Metrics
	api     http.Handler
}

// Handler is the HTTP API (what Run serves on the main listener).
func (s *Server) Handler() http.Handler { return s.api }

// Health is the server's readiness state.
func (s *Server) Health() *httpapi.Health { return s.health }

// Metrics are the server's metrics.
func (s *Server) Metrics() *invoke.Metrics { return s.metrics }

// healthInterval is how often Run checks the databases in the background.
const healthInterval = 2 * time.Second

// Run serves the API on ln (and, if metricsLn is not nil, /metrics, /healthz and /readyz on it)
// until ctx ends, then shuts down gracefully: /readyz answers 503 at once, requests are still
// served for the configured drain delay, then the listeners close and in-flight calls get the
// grace period to finish before they are cancelled (a cancelled call's statement is cancelled on
// the server). Run returns once every request has ended; the caller then rolls back sessions and
// closes the pools.
func (s *Server) Run(ctx context.Context, ln, metricsLn net.Listener) error {
	hctx, stopHealth := context.WithCancel(context.Background())
	defer stopHealth()
	go s.health.Run(hctx, healthInterval)

	var extra []*http.Server
	if metricsLn != nil {
		ms := &http.Server{Handler: httpapi.NewMetricsHandler(s.metrics, s.health), ReadHeaderTimeout: 10 * time.Second}
		extra = append(extra, ms)
		go func() { _ = ms.Serve(metricsLn) }()
	}
	drain := func() {
		s.health.SetDraining()
		if d := s.cfg.Shutdown.DrainDelay(); d > 0 {
			s.log.Info().Dur("drain_delay", d).Msg("shutting down: /readyz answers 503; still serving during the drain delay")
			time.Sleep(d)
		}
	}
	return serve(ctx, ln, s.api, s.log, s.cfg.Shutdown.Grace(), drain, extra)
}

// Serve runs the HTTP handler h on ln until ctx is cancelled, then shuts down gracefully: it stops
// accepting, lets in-flight calls finish for up to grace, then cancels them. Server.Run adds
// draining, metrics and readiness.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log zerolog.Logger, grace time.Duration) error {
	return serve(ctx, ln, h, log, grace, nil, nil)
}

func serve(ctx context.Context, ln net.Listener, h http.Handler, log zerolog.Logger, grace time.Duration, drain func(), extra []*http.Server) error {
	baseCtx, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		for _, e := range extra {
			_ = e.Close()
		}
		return err
	case <-ctx.Done():
	}
	if drain != nil {
		drain()
	}
	log.Info().Dur("grace", grace).Msg("shutting down: no new requests; waiting for in-flight calls")
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn().Dur("grace", grace).Msg("in-flight calls did not finish in time; cancelling them")
		cancelBase()
		_ = srv.Close()
		err = nil
	}
	for _, e := range extra {
		_ = e.Close()
	}
	if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) {
		return e
	}
	return err
}
