package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/runner/preflight"
	"github.com/pgtools/pgtools/runner/version"
	"github.com/pgtools/pgtools/tools"
)

func newLogger(w io.Writer, level string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	settings := register(fs, getenv, serveSettings, true)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: pgtools serve [flags]\n\nServes the tools over HTTP (POST /v1/tools/{name}) and MCP (Streamable HTTP at /mcp). Needs a database:\n  DATABASE_URL=postgres://app@localhost/app pgtools serve --token \"$(openssl rand -hex 24):read\"\n\nEach flag gives the config file key it names and wins over it (docs/configuration.md).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	cfg, err := settings.load()
	if err != nil {
		fmt.Fprintf(stderr, "pgtools serve: %v\n", err)
		return 2
	}
	log := newLogger(stderr, cfg.LogLevel)
	if invoke.TracingEnabled(getenv) {
		// The exporter reads the OTEL_* variables itself (endpoint, headers, sampler, batching).
		tp, shutdown, err := invoke.NewTracerProvider(ctx, cfg.ReplicaID)
		if err != nil {
			fmt.Fprintf(stderr, "pgtools serve: %v\n", err)
			return 2
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = shutdown(sctx) // flushes the last spans
		}()
		cfg.Tracer = tp
		log.Info().Msg("OpenTelemetry tracing on (OTLP/HTTP)")
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	trigger := make(chan struct{}, 1)
	go func() {
		for range hup {
			select {
			case trigger <- struct{}{}:
			default: // a reload is already pending: it reads the newest file
			}
		}
	}()
	if err := serve(ctx, cfg, log, nil, reloader{trigger: trigger, load: settings.load}); err != nil {
		log.Error().Err(err).Msg("serve failed")
		return 1
	}
	return 0
}

// reloader is where serve reloads its configuration from: a trigger (SIGHUP in cmdServe, a
// channel in tests, so no test signals its own process) and how to read the configuration
// again, the way the start read it (file, environment, flags). The zero reloader never fires.
type reloader struct {
	trigger <-chan struct{}
	load    func() (*config.Config, error)
}

// serve opens the databases and runs the HTTP API, and beside it a task-runner client per n8n
// broker (runner.Build joins them), until ctx ends. When ready is set, it receives the bound
// address once the listener is up. Each trigger of reload re-reads the configuration and applies
// it to new calls, or refuses it (runner.Runtime.Reload).
//
// The databases need not be up: pools connect on first use, /readyz answers 503 until every
// database answers, and calls meanwhile fail with connection_error.
func serve(ctx context.Context, cfg *config.Config, log zerolog.Logger, ready chan<- string, reload reloader) error {
	notes(cfg, log)
	rt, err := runner.Build(ctx, cfg, log, runner.BuildOptions{Check: func(ctx context.Context, cfg *config.Config, reg *tools.Registry) error {
		return serveChecks(ctx, cfg, reg, log)
	}})
	if err != nil {
		return err
	}
	defer rt.Close() // stops the brokers first: their tasks finish before sessions and pools close
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	var metricsLn net.Listener
	if cfg.MetricsListen != "" {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			ln.Close()
			return fmt.Errorf("listening on %s (metrics_listen): %w", cfg.MetricsListen, err)
		}
	}
	ev := log.Info().Str("listen", ln.Addr().String()).Strs("databases", rt.Registry().Databases()).Int("tokens", len(cfg.Tokens)).
		Str("version", version.Version).Str("replica", cfg.ReplicaID).Str("session_prefix", rt.Sessions().Tag())
	if metricsLn != nil {
		ev = ev.Str("metrics_listen", metricsLn.Addr().String())
	}
	if cfg.Fleet.Forwards() {
		// Where the peers come from, never the secret.
		ev = ev.Int("fleet_peers", len(cfg.Fleet.Peers)).Str("fleet_peers_dns", cfg.Fleet.PeersDNS)
	}
	ev.Msg("pgtools serving")
	if rt.State() == nil {
		log.Info().Msg("approvals live in this process's memory: a restart forgets pending and approved requests, and they hold only on this replica; set state to keep them in PostgreSQL for a fleet (docs/approvals.md)")
	}
	if ready != nil {
		ready <- ln.Addr().String()
	}
	if reload.trigger != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-reload.trigger:
					log.Info().Msg("reloading the configuration")
					_ = rt.Reload(ctx, func() (*config.Config, error) {
						c, err := reload.load()
						if err == nil {
							notes(c, log)
						}
						return c, err
					}) // Reload logs and counts the outcome
				}
			}
		}()
	}
	return rt.Run(ctx, ln, metricsLn)
}

// notes logs what serve says about a configuration it is about to run: roles shared by several
// principals, page tokens without a shared key, approvals kept in memory.
func notes(cfg *config.Config, log zerolog.Logger) {
	for _, note := range cfg.SharedRoleNotes() {
		log.Warn().Msg(note)
	}
	if note := cfg.PageTokensNote(); note != "" {
		log.Info().Msg(note)
	}
	if note := cfg.ApprovalsNote(); note != "" {
		log.Warn().Msg(note)
	}
}

// serveChecks are the checks serve runs on a registry before it serves, at start and at each
// reload: a mapped role (the n8n broker's too) that could change its role or claims voids
// row-level security, and the table lists must hold as grants for every role a caller acts as.
func serveChecks(ctx context.Context, cfg *config.Config, reg *tools.Registry, log zerolog.Logger) error {
	if err := preflight.CheckRoles(ctx, cfg, reg.Database); err != nil {
		return err
	}
	return checkGrants(ctx, cfg.ActingRoles(), reg, log)
}

// checkGrants runs the start-up check of grants (preflight.CheckGrants) for the roles in uses,
// logs its warnings and returns its refusal, which stops the start.
func checkGrants(ctx context.Context, uses map[string][]config.RoleUse, reg *tools.Registry, log zerolog.Logger) error {
	rep, err := preflight.CheckGrants(ctx, uses, reg.Database)
	if err != nil {
		return err
	}
	for _, line := range rep.WarningLines() {
		log.Warn().Msg(line)
	}
	return rep.Err()
}

func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}

func cmdVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, "Usage: pgtools version\n\nPrints the pgtools version.") }
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	fmt.Fprintf(stdout, "pgtools %s\n", version.Version)
	return 0
}
