package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/preflight"
	"github.com/pgtools/pgtools/runner/state"
	"github.com/pgtools/pgtools/tools"
)

// cmdCheckConfig validates what serve would run with (config file, environment and flags) and
// prints the effective configuration with every secret redacted.
func cmdCheckConfig(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.SetOutput(stderr)
	settings := register(fs, getenv, serveSettings, true)
	database := fs.Bool("database", false, "also connect to the databases as serve would and print, instead of the effective configuration, the SQL (GRANT, REVOKE, ALTER) that makes them match it: the roles callers act as, the table lists as grants, statement text hidden between subjects of one role, temp_file_limit; exit 1 while there is any")
	noSecrets := fs.Bool("no-secrets", false, "check the config file's structure without reading the files it names for secrets and TLS (token_file, password_file, url_file, n8n.token_file, sslrootcert, sslcert, sslkey): placeholders stand in, e.g. in CI where they are not mounted")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: pgtools check-config [--no-secrets] [--config FILE] [serve flags]

Checks the configuration pgtools serve would run with — the config file, environment
(DATABASE_URL, PGTOOLS_TOKENS, …) and flags — and prints it with every default filled in.
Secrets are never printed: tokens show as [REDACTED], connection strings as host, port,
database, user and TLS mode; custom tools with the JSON Schema of their arguments.
Every problem is reported on its own line; the exit code is 1 when there is one, so it
fits in CI and container entrypoints. It does not connect to the databases, so custom
tools' statements are checked when pgtools serve or pgtools mcp starts.

With --database it connects, runs the checks pgtools serve runs at start, and prints the
SQL that makes the databases keep the configuration's promises (run it as a superuser),
or "-- nothing to change".

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	restore := func(s string) string { return s }
	if *noSecrets && settings.configFile != "" {
		dir, err := os.MkdirTemp("", "pgtools-check-config-")
		if err != nil {
			fmt.Fprintf(stderr, "pgtools check-config: %v\n", err)
			return 1
		}
		defer os.RemoveAll(dir)
		ws, err := configWithoutSecrets(settings.configFile, dir)
		if err != nil {
			fmt.Fprintf(stderr, "pgtools check-config: %v\n", err)
			return 1
		}
		settings.configFile, restore = ws.Path, ws.Restore
		for _, s := range ws.Skipped {
			fmt.Fprintf(stderr, "pgtools check-config: --no-secrets: not read: %s\n", s)
		}
	}
	cfg, err := settings.load()
	if err != nil {
		fmt.Fprintf(stderr, "pgtools check-config: %v\n", restore(err.Error()))
		return 1
	}
	if *database {
		return checkDatabases(ctx, cfg, stdout, stderr)
	}
	out, err := cfg.EffectiveJSON()
	if err != nil {
		fmt.Fprintf(stderr, "pgtools check-config: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "pgtools check-config: the configuration is valid (%d database(s), %d token(s))\n", len(cfg.Databases), len(cfg.Tokens))
	for _, note := range cfg.SharedRoleNotes() {
		fmt.Fprintf(stderr, "pgtools check-config: note: %s\n", note)
	}
	if note := cfg.CustomToolsNote(); note != "" {
		fmt.Fprintf(stderr, "pgtools check-config: note: %s\n", note)
	}
	if note := cfg.ApprovalsNote(); note != "" {
		fmt.Fprintf(stderr, "pgtools check-config: note: %s\n", note)
	}
	fmt.Fprintf(stdout, "%s\n", restore(string(out)))
	return 0
}

// checkDatabases is check-config --database: the start-up checks of serve, as SQL on stdout.
func checkDatabases(ctx context.Context, cfg *config.Config, stdout, stderr io.Writer) int {
	dbs, closeDBs, err := runner.OpenDatabases(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "pgtools check-config: %v\n", err)
		return 1
	}
	defer closeDBs()
	byName := map[string]*tools.Database{}
	for _, d := range dbs {
		byName[d.Name] = d
		srv, err := tools.Server(ctx, d)
		if err != nil {
			fmt.Fprintf(stderr, "pgtools check-config: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "pgtools check-config: database %q: PostgreSQL %s\n", d.Name, srv.Version)
		for _, l := range srv.Lacks() {
			fmt.Fprintf(stderr, "pgtools check-config: database %q: %s\n", d.Name, l)
		}
	}
	rep, err := preflight.CheckSetup(ctx, cfg.ActingRoles(), func(name string) (*tools.Database, bool) {
		d, ok := byName[name]
		return d, ok
	})
	if err != nil {
		fmt.Fprintf(stderr, "pgtools check-config: %v\n", err)
		return 1
	}
	for _, line := range rep.WarningLines() {
		fmt.Fprintf(stderr, "pgtools check-config: warning: %s\n", line)
	}
	sql := rep.SQL()
	stateRefused := false
	if cfg.State != "" {
		stateSQL, err := checkState(ctx, cfg)
		if err != nil {
			fmt.Fprintf(stderr, "pgtools check-config: %v\n", err)
			return 1
		}
		if stateSQL != "" {
			sql += "-- state database " + cfg.State + ": pgtools' fleet state schema " + cfg.StateSchema + " (run in that database)\n" + stateSQL
			stateRefused = true
		}
	}
	if sql == "" {
		fmt.Fprintf(stderr, "pgtools check-config: the databases match the configuration (%d database(s))\n", len(dbs))
		fmt.Fprintln(stdout, "-- nothing to change")
		return 0
	}
	fmt.Fprint(stdout, sql)
	if len(rep.Refusals) == 0 && !stateRefused {
		// Warnings only: pgtools serve starts; the SQL is advice.
		return 0
	}
	n := len(rep.Refusals)
	if stateRefused {
		n++
	}
	fmt.Fprintf(stderr, "pgtools check-config: pgtools serve would refuse to start (%d problem(s)); the SQL on stdout fixes them when run as a superuser\n", n)
	return 1
}

// checkState is the SQL an administrator runs for serve to use the state schema, "" when none.
func checkState(ctx context.Context, cfg *config.Config) (string, error) {
	pool, err := runner.StatePool(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer pool.Close()
	sql, err := state.Check(ctx, pool, cfg.StateSchema)
	if err != nil {
		return "", fmt.Errorf("state (database %q): %w", cfg.State, err)
	}
	return sql, nil
}

// cmdHealthcheck asks a running server whether it is alive (or ready), for container health
// checks in images that have no curl.
func cmdHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "", "host:port of the server (default: PGTOOLS_LISTEN with a wildcard host as 127.0.0.1, else 127.0.0.1:8080)")
	ready := fs.Bool("ready", false, "check /readyz (databases reachable, not draining) instead of /healthz (process alive)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: pgtools healthcheck [--ready] [--addr host:port]

Exits 0 when the server at addr answers /healthz (or /readyz with --ready) with 200, else 1.
For container health checks, e.g. in a Dockerfile: HEALTHCHECK CMD ["pgtools", "healthcheck"].

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	target := *addr
	if target == "" {
		target = localAddr(cmp.Or(getenv("PGTOOLS_LISTEN"), config.DefaultListen))
	}
	path := "/healthz"
	if *ready {
		path = "/readyz"
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+target+path, nil)
	if err != nil {
		fmt.Fprintf(stderr, "pgtools healthcheck: %v\n", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintf(stderr, "pgtools healthcheck: %s%s: %v\n", target, path, errors.Unwrap(err))
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Fprintf(stdout, "%s%s: %d %s\n", target, path, resp.StatusCode, strings.TrimSpace(string(body)))
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}

// localAddr turns a listen address into one to dial from the same host: a wildcard host (":8080",
// "0.0.0.0:8080", "[::]:8080") becomes 127.0.0.1.
func localAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
