package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/demodata"
	"github.com/pgtools/pgtools/tools/localpg"
)

func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP listen address (loopback)")
	events := fs.Int("events", 1_000_000, "rows in the events table (the large table for cap tests)")
	dbURL := fs.String("database-url", "", "load the sample data into this existing, empty database (superuser or owner) instead of starting a throwaway PostgreSQL")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: pgtools demo [flags]

Starts a throwaway PostgreSQL (needs its server binaries: apt-get install -y postgresql),
loads sample data (customers, products, orders, order_items, events), creates a
least-privilege role for the runner, serves the tools on 127.0.0.1 and prints a token and
curl examples. Ctrl-C stops everything and deletes the throwaway database.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	say := func(format string, a ...any) { fmt.Fprintf(stdout, "==> "+format+"\n", a...) }
	// The port is checked before PostgreSQL starts and the data loads, so a taken port costs a
	// second, not a minute, and the message names the flag that fixes it.
	if err := checkListen(*listen); err != nil {
		fmt.Fprintf(stderr, "pgtools demo: %v\n", err)
		return 1
	}

	adminDSN := *dbURL
	runnerDSN := *dbURL
	if adminDSN == "" {
		bin, err := localpg.FindBinDir()
		if err != nil {
			fmt.Fprintf(stderr, "pgtools demo: %v\n\nTo use a PostgreSQL you already run instead, give the demo an empty database it may fill:\n  pgtools demo --database-url 'postgres://user:password@host:5432/empty_db'\n", err)
			return 1
		}
		say("starting a throwaway PostgreSQL (%s)", bin)
		t0 := time.Now()
		cluster, err := localpg.Start(ctx, localpg.Options{BinDir: bin})
		if err != nil {
			fmt.Fprintf(stderr, "pgtools demo: starting PostgreSQL: %v\n", err)
			return 1
		}
		defer func() {
			say("stopping PostgreSQL and deleting its data")
			_ = cluster.Stop()
		}()
		say("PostgreSQL is up on 127.0.0.1:%d (%s)", cluster.Port(), time.Since(t0).Round(time.Millisecond))
		if err := createDatabase(ctx, cluster.DSN("postgres"), "pgtools_demo"); err != nil {
			fmt.Fprintf(stderr, "pgtools demo: %v\n", err)
			return 1
		}
		adminDSN = cluster.DSN("pgtools_demo")
	}
	say("loading sample data (%d events rows; takes a little while)", *events)
	t0 := time.Now()
	if err := demodata.Load(ctx, adminDSN, demodata.Options{EventRows: *events, Progress: prefixWriter{stdout}}); err != nil {
		fmt.Fprintf(stderr, "pgtools demo: loading sample data: %v\n", err)
		return 1
	}
	say("sample data loaded (%s)", time.Since(t0).Round(time.Millisecond))
	printedDSN := "" // the demo role's URL; not the caller's own --database-url, which may be a superuser's
	if runnerDSN == "" {
		password := randomHex(16)
		if err := demodata.CreateAppRole(ctx, adminDSN, "pgtools_demo", password); err != nil {
			fmt.Fprintf(stderr, "pgtools demo: creating the runner's role: %v\n", err)
			return 1
		}
		u, _ := url.Parse(adminDSN)
		u.User = url.UserPassword("pgtools_demo", password)
		runnerDSN = u.String()
		printedDSN = runnerDSN
		say("the runner connects as role pgtools_demo (SELECT/INSERT/UPDATE/DELETE on public tables, nothing else)")
		if err := demodata.CreateTenantRole(ctx, adminDSN, "pgtools_demo"); err != nil {
			fmt.Fprintf(stderr, "pgtools demo: %v\n", err)
			return 1
		}
		say("token \"tenants\" acts for end users as role %s: table tenant_notes is under row-level security", demodata.TenantRole)
		if err := demodata.CreateAgentRole(ctx, adminDSN, "pgtools_demo"); err != nil {
			fmt.Fprintf(stderr, "pgtools demo: %v\n", err)
			return 1
		}
		say("token \"demo\" runs as role %s (a role per token: SELECT/INSERT/UPDATE/DELETE on the shop's tables)", demodata.AgentRole)
	}

	token, tenantToken := randomHex(24), ""
	if printedDSN != "" {
		tenantToken = randomHex(24)
	}
	cfg := demoConfig(*listen, runnerDSN, token, tenantToken)
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "pgtools demo: %v\n", err)
		return 1
	}
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	log := newLogger(io.Discard, "info")
	go func() { errc <- serve(ctx, cfg, log, ready, reloader{}) }()
	select {
	case addr := <-ready:
		printDemoHelp(stdout, demoHelp{addr: addr, token: token, tenantToken: tenantToken, dsn: printedDSN, cmd: invokedAs(), abs: executablePath()})
	case err := <-errc:
		fmt.Fprintf(stderr, "pgtools demo: %v\n", err)
		return 1
	}
	if err := <-errc; err != nil {
		fmt.Fprintf(stderr, "pgtools demo: %v\n", err)
		return 1
	}
	return 0
}

// demoConfig is the demo's configuration. With tenantToken set (the demo made its own roles) each
// token runs as a role of its own, as docs/identity.md advises: "demo" as demodata.AgentRole,
// "tenants" for end users as demodata.TenantRole; without, "demo" runs as the login role of the
// caller's --database-url.
func demoConfig(listen, dsn, token, tenantToken string) *config.Config {
	tokens := []auth.Token{{Secret: token, Name: "demo", Scopes: []string{"read", "write"}}}
	if tenantToken != "" {
		tokens[0].Role = demodata.AgentRole
		tokens = append(tokens, auth.Token{Secret: tenantToken, Name: "tenants", Scopes: []string{"read", "write"}, Role: demodata.TenantRole, ActAs: true})
	}
	return &config.Config{Listen: listen, Tokens: tokens, Databases: map[string]config.DatabaseConfig{"default": {URL: dsn}}}
}

// prefixWriter indents progress lines from the data loader.
type prefixWriter struct{ w io.Writer }

func (p prefixWriter) Write(b []byte) (int, error) {
	if _, err := fmt.Fprintf(p.w, "    %s", b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func createDatabase(ctx context.Context, adminDSN, name string) error {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return fmt.Errorf("connecting to the throwaway PostgreSQL failed")
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("creating database %s: %w", name, err)
	}
	return nil
}
