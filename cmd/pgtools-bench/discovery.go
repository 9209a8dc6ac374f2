package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
)

// discoveryRole is the login role the discovery runner connects as: it reads every table
// through default privileges, as an application role would.
const discoveryRole, discoveryPassword = "pgtools_bench_disc", "bench-disc-password-not-secret"

// discoveryTimeout bounds the discovery section: building 50,000 tables takes 15 to 40 s.
const discoveryTimeout = 10 * time.Minute

// discoveryFigures are describe_schema's figures at one catalog size.
type discoveryFigures struct {
	tables                     int
	build                      time.Duration
	firstMS, firstKB           float64 // the first call without arguments: reads the catalog
	cachedMS, cachedKB         float64 // the same call again, p50
	firstSearchMS              float64 // the first search: folds the search text
	searchMS, searchKB         float64 // p50 of cached searches
	tableMS, tableKB           float64 // the 1,600-column table's first page, p50
	suggestMS                  float64 // p50 of a select_query naming a table that is not there
	heapMB, rssMB, rssBeforeMB float64 // after the calls: Go heap in use after GC, process RSS; RSS before the runner
}

// benchDiscovery measures describe_schema on catalogs of each size in sizes (tables in 20
// schemas, a comment each, and a 1,600-column table): the first call (which reads the catalog),
// the same call cached, searches, one wide table, a did-you-mean, answer bytes, and what the
// runner holds in memory.
func benchDiscovery(ctx context.Context, out io.Writer, admin string, sizes []int) error {
	ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	say := func(format string, a ...any) { fmt.Fprintf(out, "# "+format+"\n", a...) }
	if err := adminExec(ctx, admin, fmt.Sprintf(`DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '%[1]s') THEN CREATE ROLE %[1]s LOGIN PASSWORD '%[2]s'; END IF;
END $$`, discoveryRole, discoveryPassword)); err != nil {
		return err
	}
	var rows []discoveryFigures
	for _, n := range sizes {
		f, err := discoveryAt(ctx, say, admin, n)
		if err != nil {
			return fmt.Errorf("describe_schema at %d tables: %w", n, err)
		}
		rows = append(rows, f)
	}
	fmt.Fprintf(out, "\n%-54s", "describe_schema")
	for _, f := range rows {
		fmt.Fprintf(out, " %16s", strconv.Itoa(f.tables)+" tables")
	}
	fmt.Fprintln(out)
	line := func(name string, v func(f discoveryFigures) string) {
		fmt.Fprintf(out, "%-54s", name)
		for _, f := range rows {
			fmt.Fprintf(out, " %16s", v(f))
		}
		fmt.Fprintln(out)
	}
	ms := func(x float64) string { return fmt.Sprintf("%.1f ms", x) }
	kb := func(x float64) string { return fmt.Sprintf("%.1f KB", x) }
	line("catalog built in (setup)", func(f discoveryFigures) string { return f.build.Round(time.Second).String() })
	line("first call {} (reads the catalog), median of 3 runners", func(f discoveryFigures) string { return ms(f.firstMS) })
	line("  answer", func(f discoveryFigures) string { return kb(f.firstKB) })
	line("cached call {}, p50", func(f discoveryFigures) string { return ms(f.cachedMS) })
	line("  answer", func(f discoveryFigures) string { return kb(f.cachedKB) })
	line("first search (builds its text)", func(f discoveryFigures) string { return ms(f.firstSearchMS) })
	line("cached search, p50", func(f discoveryFigures) string { return ms(f.searchMS) })
	line("  answer, p50", func(f discoveryFigures) string { return kb(f.searchKB) })
	line("1,600-column table, first page, p50", func(f discoveryFigures) string { return ms(f.tableMS) })
	line("  answer", func(f discoveryFigures) string { return kb(f.tableKB) })
	line("did-you-mean (invalid_table), p50", func(f discoveryFigures) string { return ms(f.suggestMS) })
	line("runner Go heap after GC", func(f discoveryFigures) string { return fmt.Sprintf("%.0f MB", f.heapMB) })
	line("process RSS (runner + bench client)", func(f discoveryFigures) string {
		return fmt.Sprintf("%.0f MB", f.rssMB)
	})
	line("  RSS before the runner was built", func(f discoveryFigures) string { return fmt.Sprintf("%.0f MB", f.rssBeforeMB) })
	fmt.Fprintln(out, "(targets at 50,000 tables: first call ≤ 1 s, cached search p50 ≤ 50 ms, did-you-mean < 10 ms, every answer without limit < 16 KB)")
	return nil
}

func discoveryAt(ctx context.Context, say func(string, ...any), admin string, n int) (discoveryFigures, error) {
	f := discoveryFigures{tables: n}
	dbName := fmt.Sprintf("pgtools_bench_disc_%d_%d", n, time.Now().UnixNano()%1e6)
	if err := adminExec(ctx, admin, "CREATE DATABASE "+dbName); err != nil {
		return f, err
	}
	defer adminExec(context.Background(), admin, "DROP DATABASE "+dbName+" WITH (FORCE)")
	dbAdmin := withDB(admin, dbName)
	say("describe_schema at %d tables: building %d schemas of %d tables", n, 20, n/20)
	start := time.Now()
	per := n / 20
	for s := 1; s <= 20; s++ {
		// One DO block per schema, committing every 500 tables: a transaction holds a lock per
		// table it creates.
		// (alone in its query: COMMIT inside DO needs it at top level).
		if err := adminExec(ctx, dbAdmin, fmt.Sprintf(`CREATE SCHEMA s%02[1]d; GRANT USAGE ON SCHEMA s%02[1]d TO %[2]s;
ALTER DEFAULT PRIVILEGES IN SCHEMA s%02[1]d GRANT SELECT ON TABLES TO %[2]s`, s, discoveryRole)); err != nil {
			return f, err
		}
		if err := adminExec(ctx, dbAdmin, fmt.Sprintf(`DO $$ BEGIN FOR i IN 1..%[2]d LOOP
  EXECUTE format('CREATE TABLE s%02[1]d.ledger_%%s (id int8 PRIMARY KEY, account_id int8, amount_cents int8, booked_on date)', i);
  EXECUTE format('COMMENT ON TABLE s%02[1]d.ledger_%%s IS %%L', i, format('Ledger entries of branch %%s in region %[1]d', i));
  IF i %% 500 = 0 THEN COMMIT; END IF;
END LOOP; END $$`, s, per)); err != nil {
			return f, err
		}
		if s%5 == 0 {
			say("  %d of %d tables built (%s)", s*per, n, time.Since(start).Round(time.Second))
		}
	}
	if err := adminExec(ctx, dbAdmin, `DO $$ BEGIN
  EXECUTE 'CREATE TABLE s03.wide (' || (SELECT string_agg(format('c%s int', i), ', ') FROM generate_series(1, 1600) i) || ')';
END $$`); err != nil {
		return f, err
	}
	f.build = time.Since(start)

	// What a database that has been running a while has: statistics on its catalog, and no
	// autovacuum of the new catalog rows competing with the first call.
	say("  settling: VACUUM ANALYZE of the catalog tables, CHECKPOINT")
	if err := adminExec(ctx, dbAdmin, "VACUUM ANALYZE pg_catalog.pg_class, pg_catalog.pg_attribute, pg_catalog.pg_index, pg_catalog.pg_description, "+
		"pg_catalog.pg_namespace, pg_catalog.pg_type, pg_catalog.pg_constraint, pg_catalog.pg_depend"); err != nil {
		return f, err
	}
	if err := adminExec(ctx, dbAdmin, "CHECKPOINT"); err != nil {
		return f, err
	}
	const token = "bench-disc-token-0123456789abcdef"
	runtime.GC()
	f.rssBeforeMB = rssMB()
	cfg := &config.Config{Listen: "127.0.0.1:0", Tokens: []auth.Token{{Secret: token, Name: "disc", Scopes: []string{"read"}}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: withUser(dbAdmin, discoveryRole, discoveryPassword), MaxConns: 4}}}
	if err := cfg.Validate(); err != nil {
		return f, err
	}
	client := &http.Client{}
	var base string
	call := func(tool, body string) (time.Duration, int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+tool, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, 0, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		took := time.Since(start)
		if (resp.StatusCode != 200) != (tool == "select_query") {
			return took, len(b), fmt.Errorf("%s %s: %d %.300s", tool, body, resp.StatusCode, b)
		}
		return took, len(b), nil
	}
	// The first call of three runners, each reading the catalog afresh: their median. The
	// third serves the rest.
	var firsts []float64
	for i := 0; i < 3; i++ {
		rt, err := runner.Build(ctx, cfg, zerolog.New(io.Discard), runner.BuildOptions{NoSessions: true})
		if err != nil {
			return f, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			rt.Close()
			return f, err
		}
		sctx, stop := context.WithCancel(ctx)
		go rt.Run(sctx, ln, nil)
		closeRunner := func() { stop(); rt.Close() }
		base = "http://" + ln.Addr().String() + "/v1/tools/"
		d, size, err := call("describe_schema", `{}`)
		if err != nil || i == 2 {
			defer closeRunner()
		} else {
			closeRunner()
		}
		if err != nil {
			return f, err
		}
		firsts, f.firstKB = append(firsts, float64(d.Microseconds())/1000), float64(size)/1024
	}
	sort.Float64s(firsts)
	f.firstMS = firsts[1]
	p50 := func(tool string, bodies []string) (ms, kb float64, err error) {
		var lat, size []float64
		for _, b := range bodies {
			d, n, err := call(tool, b)
			if err != nil {
				return 0, 0, err
			}
			lat, size = append(lat, float64(d.Microseconds())/1000), append(size, float64(n)/1024)
		}
		sort.Float64s(lat)
		sort.Float64s(size)
		return lat[len(lat)/2], size[len(size)/2], nil
	}
	say("  measuring")
	var err error
	if f.cachedMS, f.cachedKB, err = p50("describe_schema", slices20(`{}`)); err != nil {
		return f, err
	}
	d, _, err := call("describe_schema", `{"search":"ledger_1"}`)
	if err != nil {
		return f, err
	}
	f.firstSearchMS = float64(d.Microseconds()) / 1000
	var searches []string
	for i := 0; i < 30; i++ {
		searches = append(searches, []string{
			fmt.Sprintf(`{"search":"ledger_%d"}`, 1+i*37%per),
			fmt.Sprintf(`{"search":"branch %d region %d"}`, 1+i*53%per, 1+i%20),
			fmt.Sprintf(`{"search":"s%02d.ledger_%d"}`, 1+i%20, 1+i*11%per),
			`{"search":"amount cents","limit":20}`,
			`{"search":"no_table_is_named_like_this"}`,
		}[i%5])
	}
	if f.searchMS, f.searchKB, err = p50("describe_schema", searches); err != nil {
		return f, err
	}
	if f.tableMS, f.tableKB, err = p50("describe_schema", slices20(`{"table":"s03.wide"}`)); err != nil {
		return f, err
	}
	var typos []string
	for i := 0; i < 20; i++ {
		typos = append(typos, fmt.Sprintf(`{"table":"s%02d.ledgr_%d"}`, 1+i%20, 1+i*7%per))
	}
	if f.suggestMS, _, err = p50("select_query", typos); err != nil {
		return f, err
	}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	f.heapMB, f.rssMB = float64(m.HeapInuse)/(1<<20), rssMB()
	return f, nil
}

func slices20(body string) []string {
	out := make([]string, 20)
	for i := range out {
		out[i] = body
	}
	return out
}

// rssMB is this process's resident set size, from /proc (0 where there is none).
func rssMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("VmRSS:")); ok {
			kb, _ := strconv.Atoi(strings.Fields(string(rest))[0])
			return float64(kb) / 1024
		}
	}
	return 0
}
