package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/session"
	"github.com/pgtools/pgtools/tools"
)

// multiFlag collects a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// dbFlags are the settings serve and mcp share: the databases, logging and the audit log.
type dbFlags struct {
	configFile  string
	databaseURL string
	logLevel    string
	auditLog    string
}

func (f *dbFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.configFile, "config", os.Getenv("PGTOOLS_CONFIG"), "JSON config file (schemas/config.schema.json); env PGTOOLS_CONFIG")
	fs.StringVar(&f.databaseURL, "database-url", "", "PostgreSQL URL of the \"default\" database; env DATABASE_URL")
	fs.StringVar(&f.logLevel, "log-level", "", "debug, info (default), warn or error; env PGTOOLS_LOG_LEVEL")
	fs.StringVar(&f.auditLog, "audit-log", "", "audit log of write attempts: a file (appended) or - for stderr; env PGTOOLS_AUDIT_LOG")
}

// load merges file, environment and flags: flags win over environment, which wins over the file.
// The caller adds its own settings and validates.
func (f *dbFlags) load() (*runner.Config, error) {
	cfg := &runner.Config{Databases: map[string]runner.DatabaseConfig{}}
	if f.configFile != "" {
		c, err := runner.LoadConfigFile(f.configFile)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	url := firstNonEmpty(f.databaseURL, os.Getenv("DATABASE_URL"))
	if url != "" {
		d := cfg.Databases["default"]
		d.URL = url
		cfg.Databases["default"] = d
	}
	if lvl := firstNonEmpty(f.logLevel, os.Getenv("PGTOOLS_LOG_LEVEL")); lvl != "" {
		cfg.LogLevel = lvl
	}
	if a := firstNonEmpty(f.auditLog, os.Getenv("PGTOOLS_AUDIT_LOG")); a != "" {
		cfg.AuditLog = a
	}
	return cfg, nil
}

// serveFlags are serve's flags: the shared ones plus where and to whom the HTTP API listens.
type serveFlags struct {
	dbFlags
	brokers brokerFlags
	listen  string
	tokens  multiFlag
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	f.dbFlags.register(fs)
	f.brokers.register(fs)
	fs.StringVar(&f.listen, "listen", "", "HTTP listen address (default 127.0.0.1:8080); env PGTOOLS_LISTEN")
	fs.Var(&f.tokens, "token", "API token as SECRET:SCOPES, e.g. s3cret-value-0123456:read,write (repeatable); env PGTOOLS_TOKENS=\"a:read;b:read,write\"")
}

// config merges file, environment and flags: flags win over environment, which wins over the file.
func (f *serveFlags) config() (*runner.Config, error) {
	cfg, err := f.load()
	if err != nil {
		return nil, err
	}
	if l := firstNonEmpty(f.listen, os.Getenv("PGTOOLS_LISTEN")); l != "" {
		cfg.Listen = l
	}
	specs := []string(f.tokens)
	if env := os.Getenv("PGTOOLS_TOKENS"); env != "" {
		specs = append(specs, env)
	}
	toks, err := runner.ParseTokens(specs, len(cfg.Tokens))
	if err != nil {
		return nil, err
	}
	cfg.Tokens = append(cfg.Tokens, toks...)
	return cfg, cfg.Validate()
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func newLogger(w io.Writer, level string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	f.register(fs)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: pgtools serve [flags]\n\nServes the tools over HTTP (POST /v1/tools/{name}) and MCP (Streamable HTTP at /mcp). Needs a database:\n  DATABASE_URL=postgres://app@localhost/app pgtools serve --token \"$(openssl rand -hex 24):read\"\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	cfg, err := f.config()
	if err != nil {
		fmt.Fprintf(stderr, "pgtools serve: %v\n", err)
		return 2
	}
	brokers, err := f.brokers.config(cfg.Tokens)
	if err != nil {
		fmt.Fprintf(stderr, "pgtools serve: %v\n", err)
		return 2
	}
	log := newLogger(stderr, cfg.LogLevel)
	if err := serve(ctx, cfg, brokers, log, nil); err != nil {
		log.Error().Err(err).Msg("serve failed")
		return 1
	}
	return 0
}

// serve opens the databases and runs the HTTP API, and beside it a task-runner client per n8n
// broker, until ctx ends. When ready is set, it receives the bound address once the listener is
// up.
func serve(ctx context.Context, cfg *runner.Config, brokers brokerConfig, log zerolog.Logger, ready chan<- string) error {
	reg, closeReg, err := openRegistry(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeReg()
	// Deferred after closeReg, so it runs first: broker tasks finish before sessions and pools close.
	stopBrokers, err := startBrokers(ctx, brokers, reg, cfg.MaxBodyBytes, 10*time.Second, log)
	if err != nil {
		return err
	}
	defer stopBrokers()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", cfg.Listen, err)
	}
	log.Info().Str("listen", ln.Addr().String()).Strs("databases", reg.Databases()).Int("tokens", len(cfg.Tokens)).
		Str("version", runner.Version).Msg("pgtools serving")
	if ready != nil {
		ready <- ln.Addr().String()
	}
	return runner.Serve(ctx, ln, runner.NewHandler(reg, cfg.Tokens, log, cfg.MaxBodyBytes), log, 10*time.Second)
}

// openRegistry opens the configured databases, the session manager and the audit log and builds
// the registry over them. closeAll rolls back every open session, then releases the rest, the
// pools last.
func openRegistry(ctx context.Context, cfg *runner.Config, log zerolog.Logger) (reg *tools.Registry, closeAll func(), err error) {
	dbs, closeDBs, err := runner.OpenDatabases(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	reg, err = tools.NewRegistry(dbs)
	if err != nil {
		closeDBs()
		return nil, nil, err
	}
	audit, closeAudit, err := runner.OpenAuditLog(cfg.AuditLog)
	if err != nil {
		closeDBs()
		return nil, nil, err
	}
	if audit != nil {
		reg.SetAuditor(audit)
	}
	sessions := session.New(session.Config{MaxSessions: cfg.MaxSessions, TTL: cfg.SessionTTL, Log: log})
	reg.SetSessions(sessions)
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	go sessions.Run(sweepCtx, 0)
	return reg, func() {
		stopSweep()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if n := sessions.Open(); n > 0 {
			log.Info().Int("sessions", n).Msg("rolling back open sessions")
		}
		sessions.Close(cctx)
		_ = closeAudit()
		closeDBs()
	}, nil
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
	fmt.Fprintf(stdout, "pgtools %s\n", runner.Version)
	return 0
}
