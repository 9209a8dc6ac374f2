// Package runner hosts the pgtools tools: configuration, the HTTP API, authentication, access
// logs and the server's lifecycle. Every transport is a thin adapter over tools.Registry.Call.
package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/tools"
)

// OpenDatabases builds a pool per configured database. Pools connect lazily, so the runner starts
// even when a database is down. close releases them all.
func OpenDatabases(ctx context.Context, cfg *Config) (dbs []*tools.Database, closeAll func(), err error) {
	names := make([]string, 0, len(cfg.Databases))
	for n := range cfg.Databases {
		names = append(names, n)
	}
	sort.Strings(names)
	var pools []*pgxpool.Pool
	closeAll = func() {
		for _, p := range pools {
			p.Close()
		}
	}
	for _, name := range names {
		d := cfg.Databases[name]
		maxConns := d.MaxConns
		if maxConns <= 0 {
			maxConns = 10
		}
		pcfg, err := tools.PoolConfig(d.URL, d.Policy, maxConns)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("database %q: %w", name, err)
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

// Serve runs the HTTP API on ln until ctx is cancelled, then shuts down gracefully: it stops
// accepting, lets in-flight calls finish for up to grace, then cancels them.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log zerolog.Logger, grace time.Duration) error {
	baseCtx, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          nil,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info().Msg("shutting down: no new requests; waiting for in-flight calls")
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		log.Warn().Dur("grace", grace).Msg("in-flight calls did not finish in time; cancelling them")
		cancelBase()
		_ = srv.Close()
		err = nil
	}
	if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) {
		return e
	}
	return err
}
