package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/demodata"
	"github.com/pgtools/pgtools/tools/localpg"
)

const customers = 2000

// pkSQL is what select_query generates for {"table":"customers","where":"id = $1"}.
const pkSQL = `SELECT * FROM "public"."customers" WHERE (
id = $1
) LIMIT 1001`

type caller func(ctx context.Context, id int) error

// figures are one contender's measurements.
// p50 and p99 are at concurrency 1, p99c at the throughput run's concurrency.
type figures struct{ p50, p99, tput, serverUS, benchUS, p99c float64 }

func bench(ctx context.Context, o options, out io.Writer) error {
	say := func(format string, a ...any) { fmt.Fprintf(out, "# "+format+"\n", a...) }
	admin := o.adminDSN
	if admin == "" {
		bin, err := localpg.FindBinDir()
		if err != nil {
			return err
		}
		say("starting a throwaway PostgreSQL")
		cl, err := localpg.Start(ctx, localpg.Options{BinDir: bin})
		if err != nil {
			return err
		}
		defer cl.Stop()
		admin = cl.DSN("postgres")
	}
	sizes, err := discoverySizes(o.discovery)
	if err != nil {
		return err
	}
	if o.discoveryOnly {
		return benchDiscovery(ctx, out, admin, sizes)
	}
	dbName := fmt.Sprintf("pgtools_bench_%d", time.Now().UnixNano()%1e9)
	if err := adminExec(ctx, admin, "CREATE DATABASE "+dbName); err != nil {
		return err
	}
	defer adminExec(context.Background(), admin, "DROP DATABASE "+dbName+" WITH (FORCE)")
	dbAdmin := withDB(admin, dbName)
	if o.txOnly {
		o.events = min(o.events, 1000) // the writes need none of the large table
	}
	say("loading demo data (%d events rows)", o.events)
	t0 := time.Now()
	if err := demodata.Load(ctx, dbAdmin, demodata.Options{EventRows: o.events}); err != nil {
		return err
	}
	// A second, 10× smaller copy of the large table shows whether the capped read depends on size.
	if err := adminExec(ctx, dbAdmin, fmt.Sprintf("CREATE TABLE events_small AS SELECT * FROM events LIMIT %d; ANALYZE events_small", o.events/10)); err != nil {
		return err
	}
	say("loaded in %s", time.Since(t0).Round(time.Millisecond))
	const role, password = "pgtools_bench", "bench-password-not-secret"
	if err := demodata.CreateAppRole(ctx, dbAdmin, role, password); err != nil {
		return err
	}
	if err := adminExec(ctx, dbAdmin, "GRANT SELECT ON events_small TO "+role); err != nil {
		return err
	}
	// The tenant role of the identity row: set up as docs/identity.md prescribes (set_config and plpgsql
	// taken from PUBLIC), allowed to read customers.
	if err := demodata.CreateTenantRole(ctx, dbAdmin, role); err != nil {
		return err
	}
	if err := adminExec(ctx, dbAdmin, "GRANT SELECT ON customers TO "+demodata.TenantRole); err != nil {
		return err
	}
	appDSN := withUser(dbAdmin, role, password)
	if o.txOnly {
		return benchTransactions(ctx, o, out, dbAdmin, appDSN, role)
	}
	maxConns := int32(o.concurrency)

	// The runner, in-process, over real HTTP on loopback.
	const token, tenantToken = "bench-token-0123456789abcdef", "bench-tenant-token-0123456789ab"
	cfg := &config.Config{Listen: "127.0.0.1:0", Tokens: []auth.Token{{Secret: token, Name: "bench", Scopes: []string{"read"}},
		{Secret: catalogToken, Name: "catalog", Scopes: []string{"read", "write", "ddl"}},
		{Secret: tenantToken, Name: "tenants", Scopes: []string{"read"}, Role: demodata.TenantRole, ActAs: true}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: appDSN, MaxConns: maxConns}}}
	if err := cfg.Validate(); err != nil {
		return err
	}
	// Built as pgtools serve builds it: sessions, the pg_transaction bound, custom tools and
	// metrics observing every call; the access log is written (to nowhere).
	rt, err := runner.Build(ctx, cfg, zerolog.New(io.Discard).Level(zerolog.InfoLevel), runner.BuildOptions{})
	if err != nil {
		return err
	}
	defer rt.Close()
	reg := rt.Registry()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stopServer := context.WithCancel(ctx)
	defer stopServer()
	go rt.Run(sctx, ln, nil)
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	// httpCallAtAs posts body to url with bearer tok and, when actAs is set, the end user the call
	// is for (X-PgTools-Act-As: user-N).
	// header, when set, is sent with every call ("name: value").
	var header [2]string
	httpCallAtAs := func(url string, body func(id int) []byte, tok string, actAs bool) caller {
		hdr := header
		return func(ctx context.Context, id int) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body(id)))
			req.Header.Set("Authorization", "Bearer "+tok)
			if actAs {
				req.Header.Set("X-PgTools-Act-As", "user-"+strconv.Itoa(id%10))
			}
			if hdr[0] != "" {
				req.Header.Set(hdr[0], hdr[1])
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d: %s", resp.StatusCode, b)
			}
			return nil
		}
	}
	httpCallAt := func(url string, body func(id int) []byte) caller { return httpCallAtAs(url, body, token, false) }
	httpCall := func(tool string, body func(id int) []byte) caller { return httpCallAt(base+"/v1/tools/"+tool, body) }
	pkBody := func(id int) []byte {
		return []byte(`{"table":"customers","where":"id = $1","params":[` + strconv.Itoa(id) + `]}`)
	}
	selectPK := httpCall("select_query", pkBody)
	// The same read acting for an end user: SET LOCAL ROLE and request.jwt.claims in the read's
	// one round trip.
	selectAsRole := httpCallAtAs(base+"/v1/tools/select_query", pkBody, tenantToken, true)
	// The same read under a plan budget the call sets: one EXPLAIN round trip before the read.
	header = [2]string{"X-PgTools-Max-Estimated-Cost", "1000000"}
	selectBudget := httpCall("select_query", pkBody)
	header = [2]string{}
	selectMCP := map[string]caller{}
	for _, v := range mcpVersions {
		if selectMCP[v], err = mcpCaller(ctx, client, base+"/mcp", token, v); err != nil {
			return err
		}
	}
	structuredBase, stopStructured, err := serveStructured(reg, cfg.Tokens)
	if err != nil {
		return err
	}
	defer stopStructured()
	if err := printTokens(ctx, out, tokenEndpoints{client: client, token: token, base: base, structured: structuredBase}); err != nil {
		return fmt.Errorf("token figures: %w", err)
	}
	if o.tokensOnly {
		return nil
	}

	// Raw pgx on its own pool of the same size and role.
	pcfg, err := pgxpool.ParseConfig(appDSN)
	if err != nil {
		return err
	}
	pcfg.MaxConns = maxConns
	raw, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer raw.Close()
	scan := func(rows pgx.Rows) error {
		for rows.Next() {
			if _, err := rows.Values(); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	rawBare := func(ctx context.Context, id int) error {
		rows, err := raw.Query(ctx, pkSQL, id)
		if err != nil {
			return err
		}
		return scan(rows)
	}
	rawTx := func(ctx context.Context, id int) error {
		tx, err := raw.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
		if err != nil {
			return err
		}
		rows, err := tx.Query(ctx, pkSQL, id)
		if err == nil {
			err = scan(rows)
		}
		if err != nil {
			tx.Rollback(ctx)
			return err
		}
		return tx.Commit(ctx)
	}
	rawPipe := func(ctx context.Context, id int) error {
		b := &pgx.Batch{}
		b.Queue("BEGIN READ ONLY")
		b.Queue(pkSQL, id)
		b.Queue("COMMIT")
		br := raw.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
		rows, err := br.Query()
		if err == nil {
			err = scan(rows)
		}
		if err != nil {
			br.Close()
			return err
		}
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
		return br.Close()
	}

	// The floor of any HTTP tool: the thinnest handler around the raw pipelined read (JSON in, rows
	// out as JSON, no validation, no catalog, no safety checks), loaded by wrk like pgtools.
	floorLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	floorSrv := &http.Server{Handler: floorHandler(raw, token)}
	go floorSrv.Serve(floorLn)
	defer floorSrv.Close()
	floorURL := "http://" + floorLn.Addr().String() + "/v1/tools/select_query"

	contenders := []struct {
		name string
		fn   caller
	}{
		{"raw pgx, bare query", rawBare},
		{"raw pgx, BEGIN READ ONLY/query/COMMIT (3 round trips)", rawTx},
		{"raw pgx, BEGIN READ ONLY/query/COMMIT pipelined", rawPipe},
		{"pgtools select_query over HTTP", selectPK},
		{"pgtools select_query over HTTP, as a role with claims", selectAsRole},
		{"pgtools select_query over HTTP, with a plan budget", selectBudget},
		{"floor: bare net/http handler + raw pipelined", httpCallAt(floorURL, pkBody)},
	}
	for _, v := range mcpVersions {
		contenders = append(contenders, struct {
			name string
			fn   caller
		}{mcpName(v), selectMCP[v]})
	}
	for _, c := range contenders { // warm up pools, caches and plans
		if err := drive(ctx, c.fn, 1, 300); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	rounds := max(1, o.rounds)
	d := time.Duration(o.duration * float64(time.Second))
	say("%d interleaved rounds; each: %d calls at concurrency 1 and %s at concurrency %d per contender; medians over rounds; GOMAXPROCS=%d",
		rounds, o.latencyN/rounds, d, o.concurrency, runtime.GOMAXPROCS(0))
	_, wrkErr := exec.LookPath("wrk")
	const wrkName = "pgtools select_query over HTTP, load from wrk"
	const floorName = "floor: bare net/http handler + raw pipelined, load from wrk"
	wrkScripts := map[string]string{} // the MCP contenders wrk loads, by name
	for _, v := range mcpVersions {
		wrkScripts[mcpWrkName(v)] = wrkMCPScript(v)
	}
	names := make([]string, 0, len(contenders)+2)
	for _, c := range contenders {
		names = append(names, c.name)
	}
	if wrkErr == nil {
		names = append(names, wrkName, floorName)
		for _, v := range mcpVersions {
			names = append(names, mcpWrkName(v))
		}
	}
	samples := map[string]*[6][]float64{} // p50, p99, calls/s, server µs, bench µs, p99 at c
	for _, n := range names {
		samples[n] = &[6][]float64{}
	}
	add := func(name string, f figures) {
		s := samples[name]
		for i, v := range []float64{f.p50, f.p99, f.tput, f.serverUS, f.benchUS, f.p99c} {
			s[i] = append(s[i], v)
		}
	}
	for r := 0; r < rounds; r++ {
		// Rotate the order each round so no contender always runs right after another.
		for k := range names {
			name := names[(k+r)%len(names)]
			if mcpScript, isMCP := wrkScripts[name]; name == wrkName || name == floorName || isMCP {
				url, script := base+"/v1/tools/select_query", wrkScript
				switch {
				case name == floorName:
					url = floorURL
				case isMCP:
					url, script = base+"/mcp", mcpScript
				}
				w1, err := runWrk(ctx, script, url, token, 1, d)
				if err != nil {
					return err
				}
				srv0, self0 := backendCPU(ctx, dbAdmin), selfCPU()
				w32, err := runWrk(ctx, script, url, token, o.concurrency, d)
				if err != nil {
					return err
				}
				if w1.errors != "" || w32.errors != "" {
					return fmt.Errorf("wrk saw errors: %s %s", w1.errors, w32.errors)
				}
				add(name, figures{p50: w1.p50, p99: w1.p99, tput: w32.rps,
					serverUS: (backendCPU(ctx, dbAdmin) - srv0) / float64(w32.requests) * 1e6,
					benchUS:  (selfCPU() - self0) / float64(w32.requests) * 1e6, p99c: w32.p99})
				continue
			}
			var fn caller
			for _, c := range contenders {
				if c.name == name {
					fn = c.fn
				}
			}
			lat, err := latencies(ctx, fn, o.latencyN/rounds)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			var n atomic.Int64
			if o.cpuProfile != "" && name == o.profile && r == 0 {
				f, err := os.Create(o.cpuProfile)
				if err != nil {
					return err
				}
				_ = pprof.StartCPUProfile(f)
				defer func() { pprof.StopCPUProfile(); f.Close() }()
			}
			start := time.Now()
			srv0, self0 := backendCPU(ctx, dbAdmin), selfCPU()
			latC, err := driveCount(ctx, fn, o.concurrency, d, &n)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if o.cpuProfile != "" && name == o.profile && r == 0 {
				pprof.StopCPUProfile()
			}
			add(name, figures{p50: pct(lat, 50), p99: pct(lat, 99), tput: float64(n.Load()) / time.Since(start).Seconds(),
				serverUS: (backendCPU(ctx, dbAdmin) - srv0) / float64(n.Load()) * 1e6,
				benchUS:  (selfCPU() - self0) / float64(n.Load()) * 1e6, p99c: pct(latC, 99)})
		}
	}
	res := map[string]figures{}
	for _, n := range names {
		s := samples[n]
		res[n] = figures{p50: pct(s[0], 50), p99: pct(s[1], 50), tput: pct(s[2], 50), serverUS: pct(s[3], 50), benchUS: pct(s[4], 50), p99c: pct(s[5], 50)}
	}
	cs := strconv.Itoa(o.concurrency)
	fmt.Fprintf(out, "\n%-58s %9s %9s %13s %11s %13s %13s\n", "primary-key read", "p50 ms", "p99 ms", "calls/s @c"+cs, "p99 ms @c"+cs, "server µs/call", "bench µs/call")
	for _, n := range names {
		f := res[n]
		fmt.Fprintf(out, "%-58s %9.3f %9.3f %13.0f %11.2f %13.1f %13.1f\n", n, f.p50, f.p99, f.tput, f.p99c, f.serverUS, f.benchUS)
	}
	if wrkErr != nil {
		fmt.Fprintln(out, "(wrk not found: apt-get install wrk for the separate-process HTTP load; make bench installs it)")
	}
	pgLat := res["pgtools select_query over HTTP"]
	pgTput, tputName := pgLat, "pgtools (Go HTTP client in this process)"
	if wrkErr == nil {
		// The Go HTTP client in this process costs about as much CPU as the runner itself; wrk,
		// a separate C process, is how HTTP servers are usually loaded.
		pgTput, tputName = res[wrkName], "pgtools (load from wrk)"
	}
	tx := res["raw pgx, BEGIN READ ONLY/query/COMMIT (3 round trips)"]
	pp := res["raw pgx, BEGIN READ ONLY/query/COMMIT pipelined"]
	fmt.Fprintf(out, "\nratio p50 pgtools over HTTP (in-process Go client, like raw pgx) / raw 3-round-trip READ ONLY: %.2f  (target ≤ 1.50)\n", pgLat.p50/tx.p50)
	fmt.Fprintf(out, "ratio p50 floor over HTTP (in-process Go client) / raw 3-round-trip READ ONLY: %.2f  (what HTTP alone allows)\n", res["floor: bare net/http handler + raw pipelined"].p50/tx.p50)
	fmt.Fprintf(out, "ratio throughput %s / raw pipelined READ ONLY: %.2f  (target ≥ 0.65)\n", tputName, pgTput.tput/pp.tput)
	if wrkErr == nil {
		fl := res[floorName]
		fmt.Fprintf(out, "ratio throughput floor (bare net/http + raw pipelined, load from wrk) / raw pipelined READ ONLY: %.2f  (what HTTP alone allows)\n", fl.tput/pp.tput)
		fmt.Fprintf(out, "ratio throughput pgtools (load from wrk) / floor: %.2f\n", pgTput.tput/fl.tput)
	}
	fmt.Fprintf(out, "CPU per call, PostgreSQL + client/runner process: pgtools %.0f µs vs raw pipelined %.0f µs\n",
		pgTput.serverUS+pgTput.benchUS, pp.serverUS+pp.benchUS)
	for _, v := range mcpVersions {
		mcpLat, mcpTput := res[mcpName(v)], res[mcpName(v)]
		if wrkErr == nil {
			mcpTput = res[mcpWrkName(v)]
		}
		printMCPRatios(out, v, o.concurrency, res["pgtools select_query over HTTP"], mcpLat, pgTput, mcpTput, wrkErr == nil)
	}

	// The capped read of a large table.
	fmt.Fprintf(out, "\n%-58s %10s %14s %16s\n", "capped read (default limit 1000)", "ms/call", "runner KB/call", "backend peak MB")
	for _, tbl := range []string{"events_small", "events"} {
		rowsN := o.events
		if tbl == "events_small" {
			rowsN = o.events / 10
		}
		table := tbl
		capped := httpCall("select_query", func(int) []byte { return []byte(`{"table":"` + table + `"}`) })
		free := httpCall("execute_sql", func(int) []byte { return []byte(`{"sql":"select * from ` + table + `"}`) })
		rawLimit := func(ctx context.Context, _ int) error {
			rows, err := raw.Query(ctx, "SELECT * FROM "+table+" LIMIT 1001")
			if err != nil {
				return err
			}
			return scan(rows)
		}
		for _, c := range []struct {
			name string
			fn   caller
		}{
			{fmt.Sprintf("raw pgx LIMIT 1001 on %s (%d rows)", table, rowsN), rawLimit},
			{fmt.Sprintf("select_query on %s", table), capped},
			{fmt.Sprintf("execute_sql select * from %s", table), free},
		} {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.TotalAlloc
			start := time.Now()
			if err := drive(ctx, c.fn, 1, o.bigN); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			per := time.Since(start) / time.Duration(o.bigN)
			runtime.ReadMemStats(&ms)
			peak := backendPeakMB(ctx, dbAdmin)
			fmt.Fprintf(out, "%-58s %10.2f %14.0f %16s\n", c.name, float64(per.Microseconds())/1000,
				float64(ms.TotalAlloc-before)/float64(o.bigN)/1024, peak)
		}
	}
	fmt.Fprintln(out, "\n(runner KB/call counts the bench process: HTTP client and server together; backend peak is the largest VmHWM among this database's backends)")
	if err := benchTransactions(ctx, o, out, dbAdmin, appDSN, role); err != nil {
		return err
	}
	if len(sizes) == 0 {
		return nil
	}
	return benchDiscovery(ctx, out, admin, sizes)
}

// discoverySizes reads --discovery: catalog sizes, each at least 20 (one table per schema).
func discoverySizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(strings.ReplaceAll(f, "_", ""))
		if err != nil || n < 20 {
			return nil, fmt.Errorf("--discovery: %q is not a number of tables of 20 or more", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// latencies runs n sequential calls and returns their durations in ms.
func latencies(ctx context.Context, fn caller, n int) ([]float64, error) {
	out := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := fn(ctx, 1+rand.IntN(customers)); err != nil {
			return nil, err
		}
		out = append(out, float64(time.Since(start).Microseconds())/1000)
	}
	return out, nil
}

func pct(v []float64, p float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// drive runs n calls spread over c workers.
func drive(ctx context.Context, fn caller, c, n int) error {
	var wg sync.WaitGroup
	var next atomic.Int64
	errc := make(chan error, c)
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := fn(ctx, 1+rand.IntN(customers)); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	return <-errc
}

// driveCount runs c workers for d, counting calls in n, and returns the calls' durations in ms.
func driveCount(ctx context.Context, fn caller, c int, d time.Duration, n *atomic.Int64) ([]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, c)
	lats := make([][]float64, c)
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				start := time.Now()
				if err := fn(context.Background(), 1+rand.IntN(customers)); err != nil {
					errc <- err
					return
				}
				lats[w] = append(lats[w], float64(time.Since(start).Microseconds())/1000)
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errc)
	var all []float64
	for _, l := range lats {
		all = append(all, l...)
	}
	if len(all) == 0 {
		all = []float64{0}
	}
	return all, <-errc
}

// backendPeakMB reads the peak resident size of the database's backends from /proc (the server
// runs on this machine). It answers "n/a" when it cannot.
func backendPeakMB(ctx context.Context, admin string) string {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "n/a"
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	if err != nil {
		return "n/a"
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return "n/a"
	}
	best := 0
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return "n/a"
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "VmHWM:") {
				kb, _ := strconv.Atoi(strings.Fields(line)[1])
				best = max(best, kb)
			}
		}
	}
	return fmt.Sprintf("%.1f", float64(best)/1024)
}

// backendCPU sums the CPU seconds (user+system) of the database's backends, from /proc.
func backendCPU(ctx context.Context, admin string) float64 {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return 0
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	if err != nil {
		return 0
	}
	pids, _ := pgx.CollectRows(rows, pgx.RowTo[int32])
	total := 0.0
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces) start after the last ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		total += (ut + st) / 100 // USER_HZ
	}
	return total
}

// selfCPU is this process's CPU seconds (user+system): the runner and the bench's HTTP client.
func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func adminExec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func withDB(dsn, db string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.Path = "/" + db
	return u.String()
}

func withUser(dsn, user, password string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return dsn
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// floorHandler is the least an HTTP tool can do for the primary-key read: check the token, decode
// {"params":[id]}, run BEGIN READ ONLY/query/COMMIT pipelined on raw pgx and answer the rows as
// JSON. It has none of pgtools' checks; it shows what HTTP itself costs on this machine.
func floorHandler(pool *pgxpool.Pool, token string) http.Handler {
	want := "Bearer " + token
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		var in struct {
			Params []int64 `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || len(in.Params) != 1 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		b := &pgx.Batch{}
		b.Queue("BEGIN READ ONLY")
		b.Queue(pkSQL, in.Params[0])
		b.Queue("COMMIT")
		br := pool.SendBatch(r.Context(), b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		rows, err := br.Query()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out, err := pgx.CollectRows(rows, pgx.RowToMap)
		if err == nil {
			_, err = br.Exec()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"rows": out, "row_count": len(out)})
	})
}
