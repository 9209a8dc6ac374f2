package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools"
)

// errRefused marks a call the runner answered 429 (rate_limited, session_limit_reached): counted
// apart, not a failure of the bench.
var errRefused = errors.New("refused (429)")

// txSQL is each insert of the transaction rows.
const txSQL = "INSERT INTO bench_tx (n, note) VALUES ($1, 'bench')"

// txFigures are one contender's figures in the transaction table.
type txFigures struct {
	p50, p99         float64 // ms, at concurrency 1
	p50c, p99c, tput float64 // at concurrency c: ms, ms, completed calls/s
	refused          float64 // share of calls at concurrency c refused with 429
}

// benchTransactions measures writes side by side at concurrency 1 and c: an autocommit
// insert_data, a pg_transaction of three inserts, and a session (pg_tx begin, insert_data,
// pg_tx commit: three calls), against a runner with a single token (so its share is every
// slot), plus raw pgx for the floor. It then reports where a call's time goes (the phases).
func benchTransactions(ctx context.Context, o options, out io.Writer, dbAdmin, appDSN, role string) error {
	say := func(format string, a ...any) { fmt.Fprintf(out, "# "+format+"\n", a...) }
	if err := adminExec(ctx, dbAdmin, "CREATE TABLE IF NOT EXISTS bench_tx (id bigserial PRIMARY KEY, n int NOT NULL, note text NOT NULL); "+
		"GRANT SELECT, INSERT ON bench_tx TO "+role+"; GRANT USAGE ON SEQUENCE bench_tx_id_seq TO "+role); err != nil {
		return err
	}
	const token = "bench-tx-token-0123456789abcdef"
	cfg := &config.Config{Listen: "127.0.0.1:0", Tokens: []auth.Token{{Secret: token, Name: "writer", Scopes: []string{"read", "write"}}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: appDSN, MaxConns: int32(o.concurrency)}}}
	if err := cfg.Validate(); err != nil {
		return err
	}
	rt, err := runner.Build(ctx, cfg, zerolog.New(io.Discard), runner.BuildOptions{})
	if err != nil {
		return err
	}
	defer rt.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go rt.Run(sctx, ln, nil)
	base := "http://" + ln.Addr().String() + "/v1/tools/"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	post := func(ctx context.Context, tool string, body []byte) ([]byte, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+tool, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			return nil, errRefused
		case resp.StatusCode != 200:
			return nil, fmt.Errorf("%s: status %d: %s", tool, resp.StatusCode, b)
		}
		return b, nil
	}
	insertBody := func(id int) []byte {
		return []byte(`{"table":"bench_tx","row":{"n":` + strconv.Itoa(id) + `,"note":"bench"},"returning":"id","autocommit":true}`)
	}
	batchBody := func(id int) []byte {
		op := `{"sql":"` + txSQL + `","params":[` + strconv.Itoa(id) + `]}`
		return []byte(`{"operations":[` + op + `,` + op + `,` + op + `]}`)
	}
	insert := func(ctx context.Context, id int) error {
		_, err := post(ctx, "insert_data", insertBody(id))
		return err
	}
	batch := func(ctx context.Context, id int) error {
		_, err := post(ctx, "pg_transaction", batchBody(id))
		return err
	}
	sessionCall := func(ctx context.Context, id int) error {
		b, err := post(ctx, "pg_tx", []byte(`{"action":"begin"}`))
		if err != nil {
			return err
		}
		var began struct {
			ID string `json:"session_id"`
		}
		if err := json.Unmarshal(b, &began); err != nil {
			return err
		}
		body := `{"table":"bench_tx","row":{"n":` + strconv.Itoa(id) + `,"note":"bench"},"returning":"id","session_id":"` + began.ID + `"}`
		if _, err := post(ctx, "insert_data", []byte(body)); err != nil {
			return err
		}
		_, err = post(ctx, "pg_tx", []byte(`{"action":"commit","session_id":"`+began.ID+`"}`))
		return err
	}

	pcfg, err := pgxpool.ParseConfig(appDSN)
	if err != nil {
		return err
	}
	pcfg.MaxConns = int32(o.concurrency)
	raw, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return err
	}
	defer raw.Close()
	rawTx := func(reset bool) caller {
		return func(ctx context.Context, id int) error {
			b := &pgx.Batch{}
			b.Queue("BEGIN")
			for range 3 {
				b.Queue(txSQL, id)
			}
			if reset { // in the same pipeline, one statement per query as pgx batches need
				for _, st := range strings.Split(tools.CommitCleanSQL, "; ") {
					b.Queue(st)
				}
			} else {
				b.Queue("COMMIT")
			}
			return raw.SendBatch(ctx, b).Close()
		}
	}
	connCfg, err := pgx.ParseConfig(appDSN)
	if err != nil {
		return err
	}
	rawConnect := func(ctx context.Context, _ int) error {
		conn, err := pgx.ConnectConfig(ctx, connCfg)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "SELECT 1")
		return err
	}

	contenders := []struct {
		name string
		fn   caller
		c1   bool          // measured at concurrency 1 only
		gap  time.Duration // pause between calls at concurrency 1, not timed
	}{
		{"raw pgx: connect, SELECT 1, close (what a new connection costs)", rawConnect, true, 0},
		{"raw pgx: BEGIN, 3 INSERT, COMMIT pipelined", rawTx(false), false, 0},
		{"raw pgx: the same with pgtools' reset before COMMIT", rawTx(true), false, 0},
		{"pgtools insert_data autocommit", insert, false, 0},
		{"pgtools pg_transaction (3 inserts)", batch, false, 0},
		{"pgtools pg_tx begin → insert_data → commit (3 calls)", sessionCall, false, 0},
		// Back to back, sessions come faster than new connections can be set up (the row above);
		// an agent's sessions are seconds apart: this is the same with 100 ms between sessions.
		{"pgtools the same, one session every 100 ms (c=1 only)", sessionCall, true, 100 * time.Millisecond},
	}
	for _, c := range contenders { // warm up pools, caches, the spare connections
		if err := drive(ctx, c.fn, 1, 50); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	rounds := max(1, o.rounds)
	n := max(1, o.txN/rounds)
	d := time.Duration(o.duration * float64(time.Second))
	say("writes: %d rounds of %d calls at concurrency 1 and %s at concurrency %d per contender (a single-token runner: sessions.max_sessions 10, max_transactions 10, max_conns %d); medians over rounds",
		rounds, n, d, o.concurrency, o.concurrency)
	samples := map[string][]txFigures{}
	for r := 0; r < rounds; r++ {
		for k := range contenders {
			c := contenders[(k+r)%len(contenders)]
			calls := n
			if c.gap > 0 {
				calls = max(10, int(2*time.Second/c.gap)) // a couple of seconds per round
			}
			lat, err := pacedLatencies(ctx, c.fn, calls, c.gap)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			f := txFigures{p50: pct(lat, 50), p99: pct(lat, 99)}
			if !c.c1 {
				ok, refused, latC, took, err := loadCounting(ctx, c.fn, o.concurrency, d)
				if err != nil {
					return fmt.Errorf("%s at c=%d: %w", c.name, o.concurrency, err)
				}
				f.p50c, f.p99c, f.tput = pct(latC, 50), pct(latC, 99), float64(ok)/took.Seconds()
				f.refused = float64(refused) / float64(max(1, ok+refused))
			}
			samples[c.name] = append(samples[c.name], f)
		}
	}
	res := map[string]txFigures{}
	cs := strconv.Itoa(o.concurrency)
	fmt.Fprintf(out, "\n%-62s %8s %8s %10s %10s %11s %9s\n", "writes", "p50 ms", "p99 ms", "p50 @c"+cs, "p99 @c"+cs, "calls/s @c"+cs, "429 @c"+cs)
	for _, c := range contenders {
		f := medianFigures(samples[c.name])
		res[c.name] = f
		if c.c1 {
			fmt.Fprintf(out, "%-62s %8.3f %8.3f %10s %10s %11s %9s\n", c.name, f.p50, f.p99, "-", "-", "-", "-")
			continue
		}
		fmt.Fprintf(out, "%-62s %8.3f %8.3f %10.2f %10.2f %11.0f %8.1f%%\n", c.name, f.p50, f.p99, f.p50c, f.p99c, f.tput, 100*f.refused)
	}
	ins, bat, ses, paced := res[contenders[3].name], res[contenders[4].name], res[contenders[5].name], res[contenders[6].name]
	fmt.Fprintf(out, "\nratio p50 pg_transaction / insert_data: %.2f at c=1, %.2f at c=%s  (target ≤ 3)\n", bat.p50/ins.p50, bat.p50c/ins.p50c, cs)
	fmt.Fprintf(out, "ratio p50 begin → insert → commit / insert_data: %.2f at c=1 (target ≤ 4), %.2f at c=%s with %.1f%% of the begins refused: %d clients for 10 session slots\n",
		ses.p50/ins.p50, ses.p50c/ins.p50c, cs, 100*ses.refused, o.concurrency)
	fmt.Fprintf(out, "ratio p50 begin → insert → commit, one session every 100 ms / insert_data: %.2f at c=1  (target ≤ 4: each begin finds a spare)\n", paced.p50/ins.p50)
	return printPhases(ctx, out, rt.Registry(), n)
}

// pacedLatencies runs n sequential calls, pausing gap between them (not timed), and returns
// their durations in ms.
func pacedLatencies(ctx context.Context, fn caller, n int, gap time.Duration) ([]float64, error) {
	if gap <= 0 {
		return latencies(ctx, fn, n)
	}
	out := make([]float64, 0, n)
	for i := 0; i < n; i++ {
		time.Sleep(gap)
		start := time.Now()
		if err := fn(ctx, 1+i); err != nil {
			return nil, err
		}
		out = append(out, float64(time.Since(start).Microseconds())/1000)
	}
	return out, nil
}

// loadCounting runs c workers for d and returns the calls that succeeded, those refused (429,
// which wait 1 ms before the worker's next call), and the successful calls' durations in ms.
func loadCounting(ctx context.Context, fn caller, c int, d time.Duration) (ok, refused int64, lat []float64, took time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	errc := make(chan error, c)
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []float64
			var no int64
			for ctx.Err() == nil {
				began := time.Now()
				err := fn(context.Background(), 1+w)
				switch {
				case errors.Is(err, errRefused):
					no++
					time.Sleep(time.Millisecond)
				case err != nil:
					errc <- err
					return
				default:
					mine = append(mine, float64(time.Since(began).Microseconds())/1000)
				}
			}
			mu.Lock()
			lat, refused, ok = append(lat, mine...), refused+no, ok+int64(len(mine))
			mu.Unlock()
		}()
	}
	wg.Wait()
	took = time.Since(start)
	close(errc)
	if len(lat) == 0 {
		lat = []float64{0}
	}
	return ok, refused, lat, took, <-errc
}

func medianFigures(s []txFigures) txFigures {
	pick := func(get func(txFigures) float64) float64 {
		v := make([]float64, len(s))
		for i, f := range s {
			v[i] = get(f)
		}
		return pct(v, 50)
	}
	return txFigures{p50: pick(func(f txFigures) float64 { return f.p50 }), p99: pick(func(f txFigures) float64 { return f.p99 }),
		p50c: pick(func(f txFigures) float64 { return f.p50c }), p99c: pick(func(f txFigures) float64 { return f.p99c }),
		tput: pick(func(f txFigures) float64 { return f.tput }), refused: pick(func(f txFigures) float64 { return f.refused })}
}

// printPhases runs n calls of each write in process (no HTTP) at concurrency 1 and prints the
// mean time of each phase the tools report (tools.WithPhases), so the table above can be read
// as: waiting for a pooled connection, connecting, BEGIN, statements, reset + COMMIT. Means,
// not medians, so that the columns add up to the call even when some calls connect and most do
// not. Sessions run twice: back to back, and one every 100 ms (the pause is not timed).
func printPhases(ctx context.Context, out io.Writer, reg *tools.Registry, n int) error {
	p := tools.Principal{Name: "writer", Scopes: []string{"read", "write"}}
	call := func(ctx context.Context, tool, args string) ([]byte, error) {
		res, _, e := reg.Call(ctx, p, tool, []byte(args))
		if e != nil {
			return nil, fmt.Errorf("%s: %s: %s", tool, e.Type, e.Message)
		}
		return res.MarshalJSON()
	}
	session := func(ctx context.Context, id int) error {
		b, err := call(ctx, "pg_tx", `{"action":"begin"}`)
		if err != nil {
			return err
		}
		var began struct {
			ID string `json:"session_id"`
		}
		if err := json.Unmarshal(b, &began); err != nil {
			return err
		}
		if _, err := call(ctx, "insert_data", `{"table":"bench_tx","row":{"n":`+strconv.Itoa(id)+`,"note":"bench"},"returning":"id","session_id":"`+began.ID+`"}`); err != nil {
			return err
		}
		_, err = call(ctx, "pg_tx", `{"action":"commit","session_id":"`+began.ID+`"}`)
		return err
	}
	flows := []struct {
		name string
		gap  time.Duration
		run  func(ctx context.Context, id int) error
	}{
		{"insert_data autocommit", 0, func(ctx context.Context, id int) error {
			_, err := call(ctx, "insert_data", `{"table":"bench_tx","row":{"n":`+strconv.Itoa(id)+`,"note":"bench"},"returning":"id","autocommit":true}`)
			return err
		}},
		{"pg_transaction (3 inserts)", 0, func(ctx context.Context, id int) error {
			op := `{"sql":"` + txSQL + `","params":[` + strconv.Itoa(id) + `]}`
			_, err := call(ctx, "pg_transaction", `{"operations":[`+op+`,`+op+`,`+op+`]}`)
			return err
		}},
		{"pg_tx begin → insert_data → commit", 0, session},
		{"the same, one session every 100 ms", 100 * time.Millisecond, session},
	}
	names := []string{"pool_wait", "connect", "begin", "statement", "commit"}
	fmt.Fprintf(out, "\nwhere a write's time goes, in process at concurrency 1 (mean ms per call; a phase a call has several times is summed)\n")
	fmt.Fprintf(out, "%-40s %9s %9s %9s %9s %9s %9s %9s\n", "", "call", "pool_wait", "connect", "begin", "statement", "commit", "other")
	for _, f := range flows {
		calls := n
		if f.gap > 0 {
			calls = max(10, int(2*time.Second/f.gap))
		}
		sums := map[string]float64{}
		total := 0.0
		for i := 0; i < calls; i++ {
			time.Sleep(f.gap)
			pctx := tools.WithPhases(ctx, func(name string, _ time.Time, d time.Duration) { sums[name] += float64(d.Microseconds()) / 1000 })
			start := time.Now()
			if err := f.run(pctx, i); err != nil {
				return fmt.Errorf("%s: %w", f.name, err)
			}
			total += float64(time.Since(start).Microseconds()) / 1000
		}
		fmt.Fprintf(out, "%-40s %9.3f", f.name, total/float64(calls))
		known := 0.0
		for _, k := range names {
			known += sums[k]
			fmt.Fprintf(out, " %9.3f", sums[k]/float64(calls))
		}
		fmt.Fprintf(out, " %9.3f\n", (total-known)/float64(calls))
	}
	fmt.Fprintln(out, "(other: validation, catalog, encoding, the session manager, and a session's begin and commit; connect: begins that found no spare; commit: pg_transaction's reset + COMMIT round trip)")
	return nil
}
