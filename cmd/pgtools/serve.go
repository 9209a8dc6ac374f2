package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/runner/version"
	"github.com/pgtools/pgtools/schemas"
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
	policy      policyFlags
	fs          *flag.FlagSet           // to tell which policy flags were given
	getenv      func(key string) string // the environment (os.Getenv in main)
}

// policyFlags set the "default" database's policy from the command line; set flags override the
// config file's values.
type policyFlags struct {
	readOnly, allowDDL       bool
	preparedStatements       bool
	maxAffectedRows          int
	allowTables, denyTables  string
	tableLists               string
	disabledTools            string
	statementTimeout, locked time.Duration
}

func (f *dbFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	f.fs, f.getenv = fs, getenv
	fs.StringVar(&f.configFile, "config", getenv("PGTOOLS_CONFIG"), "JSON config file (schemas/config.schema.json); env PGTOOLS_CONFIG")
	fs.StringVar(&f.databaseURL, "database-url", "", "PostgreSQL URL of the \"default\" database; env DATABASE_URL")
	fs.StringVar(&f.logLevel, "log-level", "", "debug, info (default), warn or error; env PGTOOLS_LOG_LEVEL")
	fs.StringVar(&f.auditLog, "audit-log", "", "audit log of write attempts: a file (appended) or - for stderr; env PGTOOLS_AUDIT_LOG")
	fs.BoolVar(&f.policy.readOnly, "read-only", false, "policy of the default database: refuse every write")
	fs.BoolVar(&f.policy.allowDDL, "allow-ddl", false, "policy of the default database: let execute_sql write run DDL for tokens with the ddl scope")
	fs.IntVar(&f.policy.maxAffectedRows, "max-affected-rows", 0, "policy of the default database: most rows one update/delete may change (default 1000)")
	fs.StringVar(&f.policy.allowTables, "allow-tables", "", "policy of the default database: the only tables agents may name, comma-separated (name or schema.name)")
	fs.StringVar(&f.policy.denyTables, "deny-tables", "", "policy of the default database: tables agents may not name, comma-separated")
	fs.StringVar(&f.policy.tableLists, "table-lists", "", "policy of the default database: enforced (default: --allow-tables/--deny-tables must hold as grants, checked at start) or advisory (they check the table argument only)")
	fs.StringVar(&f.policy.disabledTools, "disable-tools", "", "policy of the default database: tools to refuse, comma-separated wire names (e.g. execute_sql)")
	fs.DurationVar(&f.policy.statementTimeout, "statement-timeout", 0, "policy of the default database: statement timeout (default 30s)")
	fs.DurationVar(&f.policy.locked, "lock-timeout", 0, "policy of the default database: lock wait timeout (default 5s)")
	fs.BoolVar(&f.policy.preparedStatements, "prepared-statements", true, "policy of the default database: prepare each read statement once per connection; --prepared-statements=false behind a transaction-mode pooler that cannot track named prepared statements")
}

// apply sets the flags that were given on the default database's policy.
func (p policyFlags) apply(fs *flag.FlagSet, cfg *config.Config) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	names := []string{"read-only", "allow-ddl", "max-affected-rows", "allow-tables", "deny-tables", "table-lists", "disable-tools", "statement-timeout", "lock-timeout", "prepared-statements"}
	any := false
	for _, n := range names {
		any = any || set[n]
	}
	if !any {
		return nil
	}
	d, ok := cfg.Databases["default"]
	if !ok {
		return errors.New("policy flags (--read-only, --deny-tables, …) apply to the \"default\" database: configure it with --database-url, DATABASE_URL or the config file")
	}
	pol := &d.Policy
	list := func(s string) []string {
		var out []string
		for _, x := range strings.Split(s, ",") {
			if x = strings.TrimSpace(x); x != "" {
				out = append(out, x)
			}
		}
		return out
	}
	if set["read-only"] {
		pol.ReadOnly = p.readOnly
	}
	if set["allow-ddl"] {
		pol.AllowDDL = p.allowDDL
	}
	if set["max-affected-rows"] {
		if p.maxAffectedRows < 1 {
			return errors.New("--max-affected-rows must be at least 1")
		}
		pol.MaxAffectedRows = p.maxAffectedRows
	}
	if set["allow-tables"] {
		pol.AllowTables = list(p.allowTables)
	}
	if set["deny-tables"] {
		pol.DenyTables = list(p.denyTables)
	}
	if set["table-lists"] {
		if p.tableLists != tools.TableListsEnforced && p.tableLists != tools.TableListsAdvisory {
			return fmt.Errorf("--table-lists: %q is neither %s nor %s", p.tableLists, tools.TableListsEnforced, tools.TableListsAdvisory)
		}
		pol.TableLists = p.tableLists
	}
	if set["disable-tools"] {
		pol.DisabledTools = list(p.disabledTools)
		for _, t := range pol.DisabledTools {
			if _, ok := schemas.Tool(t); !ok {
				return fmt.Errorf("--disable-tools: unknown tool %q; tools are %s", t, strings.Join(schemas.ToolNames(), ", "))
			}
		}
	}
	if set["statement-timeout"] {
		pol.StatementTimeout = p.statementTimeout
	}
	if set["lock-timeout"] {
		pol.LockTimeout = p.locked
	}
	if set["prepared-statements"] {
		pol.PreparedStatements = &p.preparedStatements
	}
	cfg.Databases["default"] = d
	return nil
}

// load merges file, environment and flags: flags win over environment, which wins over the file.
// The caller adds its own settings and validates.
func (f *dbFlags) load() (*config.Config, error) {
	cfg := &config.Config{Databases: map[string]config.DatabaseConfig{}}
	if f.configFile != "" {
		c, err := config.LoadConfigFile(f.configFile)
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	url, origin := f.databaseURL, "--database-url"
	if url == "" {
		url, origin = f.getenv("DATABASE_URL"), "env DATABASE_URL"
	}
	if url == "" {
		if file := f.getenv("DATABASE_URL_FILE"); file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				return nil, fmt.Errorf("DATABASE_URL_FILE: cannot read %s: %w", file, errors.Unwrap(err))
			}
			url, origin = strings.TrimSpace(string(b)), "env DATABASE_URL_FILE"
		}
	}
	if url != "" {
		d := cfg.Databases["default"]
		d.URL, d.Origin = url, origin
		cfg.Databases["default"] = d
	}
	if lvl := cmp.Or(f.logLevel, f.getenv("PGTOOLS_LOG_LEVEL")); lvl != "" {
		cfg.LogLevel = lvl
	}
	if a := cmp.Or(f.auditLog, f.getenv("PGTOOLS_AUDIT_LOG")); a != "" {
		cfg.AuditLog = a
	}
	if f.fs != nil {
		if err := f.policy.apply(f.fs, cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// serveFlags are serve's flags: the shared ones plus where and to whom the HTTP API listens.
type serveFlags struct {
	dbFlags
	brokers       brokerFlags
	listen        string
	metricsListen string
	replicaID     string
	tokens        multiFlag
}

func (f *serveFlags) register(fs *flag.FlagSet, getenv func(string) string) {
	f.dbFlags.register(fs, getenv)
	f.brokers.register(fs, getenv)
	fs.StringVar(&f.listen, "listen", "", "HTTP listen address (default 127.0.0.1:8080); env PGTOOLS_LISTEN")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "separate address for /metrics, /healthz and /readyz only (default: /metrics on --listen); env PGTOOLS_METRICS_LISTEN")
	fs.StringVar(&f.replicaID, "replica-id", "", "name of this replica, whose tag starts every session id (default: the host name); env PGTOOLS_REPLICA_ID")
	fs.Var(&f.tokens, "token", "API token as SECRET:SCOPES[:ROLE], e.g. s3cret-value-0123456:read,write or s3cret-value-0123456:read:tenant_agent to run its calls as PostgreSQL role tenant_agent (repeatable); env PGTOOLS_TOKENS=\"a:read;b:read,write:role\"")
}

// config merges file, environment and flags: flags win over environment, which wins over the file.
// Tokens add up: the file's, then --token, then PGTOOLS_TOKENS and PGTOOLS_TOKENS_FILE.
func (f *serveFlags) config() (*config.Config, error) {
	cfg, err := f.load()
	if err != nil {
		return nil, err
	}
	if l := cmp.Or(f.listen, f.getenv("PGTOOLS_LISTEN")); l != "" {
		cfg.Listen = l
	}
	if l := cmp.Or(f.metricsListen, f.getenv("PGTOOLS_METRICS_LISTEN")); l != "" {
		cfg.MetricsListen = l
	}
	if id := cmp.Or(f.replicaID, f.getenv("PGTOOLS_REPLICA_ID")); id != "" {
		cfg.ReplicaID = id
	}
	sources := []struct{ origin, spec string }{}
	for _, spec := range f.tokens {
		sources = append(sources, struct{ origin, spec string }{"--token", spec})
	}
	if env := f.getenv("PGTOOLS_TOKENS"); env != "" {
		sources = append(sources, struct{ origin, spec string }{"env PGTOOLS_TOKENS", env})
	}
	if file := f.getenv("PGTOOLS_TOKENS_FILE"); file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("PGTOOLS_TOKENS_FILE: cannot read %s: %w", file, errors.Unwrap(err))
		}
		// One token per line or separated by ";", as in PGTOOLS_TOKENS.
		spec := strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", ";")
		sources = append(sources, struct{ origin, spec string }{"env PGTOOLS_TOKENS_FILE", spec})
	}
	for _, src := range sources {
		toks, err := config.ParseTokens([]string{src.spec}, len(cfg.Tokens))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.origin, err)
		}
		for i := range toks {
			toks[i].Origin = src.origin
		}
		cfg.Tokens = append(cfg.Tokens, toks...)
	}
	return cfg, cfg.Validate()
}

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
	var f serveFlags
	f.register(fs, getenv)
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
	brokers, err := f.brokers.config(cfg)
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
	reload := reloader{trigger: trigger, load: func() (*config.Config, error) {
		c, err := f.config()
		if err != nil {
			return nil, err
		}
		c.Tracer = cfg.Tracer
		return c, nil
	}}
	if err := serve(ctx, cfg, brokers, log, nil, reload); err != nil {
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
// broker, until ctx ends. When ready is set, it receives the bound address once the listener is
// up. Each trigger of reload re-reads the configuration and applies it to new calls, or refuses
// it (runner.Runtime.Reload).
//
// The databases need not be up: pools connect on first use, /readyz answers 503 until every
// database answers, and calls meanwhile fail with connection_error.
func serve(ctx context.Context, cfg *config.Config, brokers brokerConfig, log zerolog.Logger, ready chan<- string, reload reloader) error {
	prepare := func(cfg *config.Config) {
		cfg.ExtraPrincipals = 0
		if len(brokers.urls) > 0 {
			cfg.ExtraPrincipals = 1 // the broker principal shares the session and transaction limits
		}
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
	prepare(cfg)
	rt, err := runner.Build(ctx, cfg, log, runner.BuildOptions{Check: func(ctx context.Context, cfg *config.Config, reg *tools.Registry) error {
		return serveChecks(ctx, cfg, brokers, reg, log)
	}})
	if err != nil {
		return err
	}
	defer rt.Close()
	// Deferred after rt.Close, so it runs first: broker tasks finish before sessions and pools
	// close. The brokers call the runtime, so they follow reloads too.
	stopBrokers, err := startBrokers(ctx, brokers, rt, cfg.Limits.MaxBodyBytes, 10*time.Second, cfg.Tracer, log)
	if err != nil {
		return err
	}
	defer stopBrokers()
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
	ev.Msg("pgtools serving")
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
						cfg, err := reload.load()
						if err == nil {
							prepare(cfg)
						}
						return cfg, err
					}) // Reload logs and counts the outcome
				}
			}
		}()
	}
	return rt.Run(ctx, ln, metricsLn)
}

// serveChecks are the checks serve runs on a registry before it serves, at start and at each
// reload: a mapped role that could change its role or claims voids row-level security, the
// broker's role must be usable, and the table lists must hold as grants.
func serveChecks(ctx context.Context, cfg *config.Config, brokers brokerConfig, reg *tools.Registry, log zerolog.Logger) error {
	if err := config.CheckRoles(ctx, cfg, reg.Database); err != nil {
		return err
	}
	if role := brokers.principal.Role; role != "" && len(brokers.urls) > 0 {
		for _, name := range reg.Databases() {
			if db, ok := reg.Database(name); ok {
				if err := tools.CheckRole(ctx, db, role); err != nil {
					return fmt.Errorf("--n8n-role: database %q: %w", name, err)
				}
			}
		}
	}
	return checkGrants(ctx, cfg, cfg.ActingRoles(brokers.callers()...), reg, log)
}

// callers are the broker principal's roles for the start-up check of grants: none without a
// broker; with --n8n-act-as its role is shared by the subjects tasks name.
func (b brokerConfig) callers() []config.ExtraCaller {
	if len(b.urls) == 0 {
		return nil
	}
	by := "n8n broker principal " + b.principal.Name
	out := []config.ExtraCaller{{Name: by, Role: b.principal.Role}}
	if b.actAs != nil {
		out = append(out, config.ExtraCaller{Name: by + " (--n8n-act-as)", Role: b.principal.Role, Shared: true})
	}
	return out
}

// checkGrants runs the start-up check of grants (config.CheckGrants) for the roles in uses, logs
// its warnings and returns its refusal, which stops the start.
func checkGrants(ctx context.Context, cfg *config.Config, uses map[string][]config.RoleUse, reg *tools.Registry, log zerolog.Logger) error {
	rep, err := config.CheckGrants(ctx, cfg, uses, reg.Database)
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
