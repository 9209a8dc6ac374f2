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

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/demodata"
	"github.com/pgtools/pgtools/tools/pgtest/localpg"
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
	if runnerDSN == "" {
		password := randomHex(16)
		if err := demodata.CreateAppRole(ctx, adminDSN, "pgtools_demo", password); err != nil {
			fmt.Fprintf(stderr, "pgtools demo: creating the runner's role: %v\n", err)
			return 1
		}
		u, _ := url.Parse(adminDSN)
		u.User = url.UserPassword("pgtools_demo", password)
		runnerDSN = u.String()
		say("the runner connects as role pgtools_demo (SELECT/INSERT/UPDATE/DELETE on public tables, nothing else)")
	}

	token := randomHex(24)
	cfg := &runner.Config{
		Listen:    *listen,
		Tokens:    []runner.Token{{Secret: token, Name: "demo", Scopes: []string{"read", "write"}}},
		Databases: map[string]runner.DatabaseConfig{"default": {URL: runnerDSN}},
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "pgtools demo: %v\n", err)
		return 1
	}
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	log := newLogger(io.Discard, "info")
	go func() { errc <- serve(ctx, cfg, brokerConfig{}, log, ready) }()
	select {
	case addr := <-ready:
		printDemoHelp(stdout, addr, token)
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

func printDemoHelp(w io.Writer, addr, token string) {
	base := "http://" + addr
	fmt.Fprintf(w, `
pgtools demo is running on %[1]s — press Ctrl-C to stop and clean up.

  export PGTOOLS_URL=%[1]s PGTOOLS_TOKEN=%[2]s

  # list the tables
  curl -s -H "Authorization: Bearer $PGTOOLS_TOKEN" -X POST $PGTOOLS_URL/v1/tools/describe_schema -d '{}'

  # describe one table
  curl -s -H "Authorization: Bearer $PGTOOLS_TOKEN" -X POST $PGTOOLS_URL/v1/tools/describe_schema -d '{"table":"orders"}'

  # read with a bound parameter, sorted and paged
  curl -s -H "Authorization: Bearer $PGTOOLS_TOKEN" -X POST $PGTOOLS_URL/v1/tools/select_query \
    -d '{"table":"orders","columns":"id,status,total","where":"status = $1","params":["paid"],"order_by":"total desc","limit":5}'

  # free SQL, read only: aggregates and joins
  curl -s -H "Authorization: Bearer $PGTOOLS_TOKEN" -X POST $PGTOOLS_URL/v1/tools/execute_sql \
    -d '{"sql":"select c.country, count(*) as orders, sum(o.total) as revenue from orders o join customers c on c.id = o.customer_id group by 1 order by 3 desc limit 5"}'

  # a write inside a read is refused by PostgreSQL (read_only_violation)
  curl -s -H "Authorization: Bearer $PGTOOLS_TOKEN" -X POST $PGTOOLS_URL/v1/tools/execute_sql \
    -d '{"sql":"with d as (delete from orders returning 1) select count(*) from d"}'

  # a mistake and the suggestion that fixes it (invalid_column)
  curl -s -H "Authorization: Bearer $PGTOOLS_TOKEN" -X POST $PGTOOLS_URL/v1/tools/select_query -d '{"table":"orders","columns":"id,totl"}'

  # the 1,000,000-row table: capped at the default limit, truncated: true
  curl -s -H "Authorization: Bearer $PGTOOLS_TOKEN" -X POST $PGTOOLS_URL/v1/tools/execute_sql -d '{"sql":"select * from events"}' | head -c 300; echo

  # or with the CLI
  pgtools call select_query '{"table":"customers","limit":3}'

`, base, token)
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
