// Command pgtools-bench measures pgtools' overhead against raw pgx on the same database, in one
// run, and prints the ratios the targets are stated in. It starts a throwaway PostgreSQL (or uses
// --admin-dsn), loads the demo data, and runs the runner in-process on 127.0.0.1.
//
//	go run ./cmd/pgtools-bench            # or: make bench
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "pgtools-bench: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	adminDSN    string
	latencyN    int
	duration    float64
	concurrency int
	events      int
	bigN        int
	cpuProfile  string
	profile     string
	rounds      int
	only        string
	tokensOnly  bool
	txN         int
	txOnly      bool
	// discovery is the catalog sizes describe_schema is measured at ("" skips it);
	// discoveryOnly runs that section alone.
	discovery     string
	discoveryOnly bool
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pgtools-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.adminDSN, "admin-dsn", os.Getenv("PG_TEST_DSN"), "superuser DSN of an existing server to use instead of a throwaway cluster; env PG_TEST_DSN")
	fs.IntVar(&o.latencyN, "n", 5000, "calls per contender at concurrency 1, spread over the rounds")
	fs.Float64Var(&o.duration, "seconds", 1, "seconds per throughput measurement (one per contender and round)")
	fs.IntVar(&o.rounds, "rounds", 5, "interleaved rounds; figures are medians over rounds")
	fs.IntVar(&o.concurrency, "c", 32, "concurrency of the throughput measurement")
	fs.IntVar(&o.events, "events", 1_000_000, "rows of the large table")
	fs.IntVar(&o.bigN, "big-n", 20, "calls per large-table measurement")
	fs.IntVar(&o.txN, "tx-n", 1000, "calls per write contender at concurrency 1, spread over the rounds")
	fs.BoolVar(&o.txOnly, "tx-only", false, "run only the writes table (autocommit insert, pg_transaction, a session) and its phases, on a small demo data set")
	fs.StringVar(&o.discovery, "discovery", "5000,50000", "catalog sizes (tables, comma-separated) to measure describe_schema at; empty skips it")
	fs.BoolVar(&o.discoveryOnly, "discovery-only", false, "run only the describe_schema section (first call, cached call, search, a 1,600-column table, did-you-mean, answer bytes, memory)")
	fs.BoolVar(&o.tokensOnly, "tokens-only", false, "print the o200k token figures (catalog, 100-row results per format over HTTP and MCP) and stop")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of one contender's first throughput run (--profile) to this file")
	fs.StringVar(&o.profile, "profile", "pgtools select_query over HTTP", "the contender --cpuprofile profiles (in-process load), e.g. \""+mcpName("2026-07-28")+"\"")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: pgtools-bench [flags]\n\nCompares a primary-key select_query through HTTP with raw pgx (bare, BEGIN READ ONLY as three\nround trips, and pipelined) and with the floor of any HTTP tool (a bare net/http handler around\nthe raw pipelined read), the same read as an MCP tools/call on /mcp beside the HTTP API, and a\ncapped read of a large table with raw LIMIT 1001; then writes: an autocommit insert_data, a\npg_transaction of three inserts and a session (begin, insert, commit) at concurrency 1 and -c;\nthen describe_schema on catalogs of 5,000 and 50,000 tables (--discovery).\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return err
	}
	return bench(ctx, o, stdout)
}
