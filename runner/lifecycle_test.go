package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools/localpg"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// running is a Server started with Run on real listeners, as pgtools serve runs it.
type running struct {
	base, metricsBase string
	stop              context.CancelFunc
	done              chan error
	log               *pgtest.SyncBuffer
}

// runServer starts cfg's server with Run on loopback listeners (and a metrics listener when
// cfg.MetricsListen is set) and stops it at cleanup.
func runServer(t *testing.T, cfg *config.Config) *running {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	srv, _, logs, closeAll := runnertest.BuildServer(t, cfg)
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	r := &running{base: "http://" + ln.Addr().String(), done: make(chan error, 1), log: logs}
	var mln net.Listener
	if cfg.MetricsListen != "" {
		if mln, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			t.Fatal(err)
		}
		r.metricsBase = "http://" + mln.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- srv.Run(ctx, ln, mln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(20 * time.Second):
			t.Error("server did not stop")
		}
		closeAll()
	})
	return r
}

// client has a short timeout so a refused or hung connection fails the call, not the test.
var client = &http.Client{Timeout: 10 * time.Second}

// result is one HTTP exchange: a status and error type, or a transport error.
type result struct {
	status    int
	errorType string
	body      map[string]any
	err       error
	at        time.Time
}

func (r *running) call(token, tool, body string) result {
	req, _ := http.NewRequest(http.MethodPost, r.base+"/v1/tools/"+tool, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	return exchange(req)
}

func get(url string) result {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	return exchange(req)
}

func exchange(req *http.Request) result {
	resp, err := client.Do(req)
	if err != nil {
		return result{err: err, at: time.Now()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := result{status: resp.StatusCode, at: time.Now()}
	if json.Unmarshal(raw, &out.body) == nil {
		out.errorType, _ = out.body["errorType"].(string)
	} else {
		out.body = map[string]any{"raw": string(raw)}
	}
	return out
}

// TestDrainingAndMetricsListener checks the shutdown sequence of Server.Run: /readyz answers 503
// at once while calls are still served during the drain delay, a call in flight finishes, a call
// longer than the grace period is cancelled on the server, and the metrics listener serves
// /metrics while the API listener does not.
func TestDrainingAndMetricsListener(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE t (id int); INSERT INTO t VALUES (1)`)
	dsn := db.RoleDSN(t, "drain")
	role := db.RoleName("drain")
	cfg := &config.Config{Tokens: []auth.Token{{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read"}}},
		Databases:     map[string]config.DatabaseConfig{"default": {URL: dsn}},
		MetricsListen: "127.0.0.1:0", Shutdown: config.Shutdown{DrainDelaySeconds: 0.7, GraceSeconds: ptr(0.5)}}
	r := runServer(t, cfg)

	if res := get(r.base + "/readyz"); res.status != 200 {
		t.Fatalf("/readyz before shutdown: %+v", res)
	}
	if res := get(r.metricsBase + "/metrics"); res.status != 200 {
		t.Fatalf("/metrics on metrics_listen: %+v", res)
	}
	if res := get(r.metricsBase + "/readyz"); res.status != 200 {
		t.Fatalf("/readyz on metrics_listen: %+v", res)
	}
	if res := get(r.base + "/metrics"); res.status != 404 {
		t.Fatalf("/metrics on the API listener with metrics_listen set: %+v", res)
	}

	var wg sync.WaitGroup
	var short, long result
	wg.Add(2)
	go func() {
		defer wg.Done()
		short = r.call(runnertest.AllToken, "execute_sql", `{"sql":"select pg_sleep(0.9), 1 as one"}`)
	}()
	go func() {
		defer wg.Done()
		long = r.call(runnertest.AllToken, "execute_sql", `{"sql":"select pg_sleep(20)"}`)
	}()
	runnertest.WaitFor(t, 5*time.Second, "both calls running", func() bool {
		return db.QueryInt(t, "select count(*) from pg_stat_activity where usename = $1 and query like '%pg_sleep%'", role) == 2
	})
	stopped := time.Now()
	r.stop()
	time.Sleep(100 * time.Millisecond)
	if res := get(r.base + "/readyz"); res.status != 503 || res.body["status"] != "draining" {
		t.Fatalf("/readyz while draining: %+v", res)
	}
	if res := get(r.metricsBase + "/readyz"); res.status != 503 {
		t.Fatalf("/readyz on metrics_listen while draining: %+v", res)
	}
	if res := r.call(runnertest.AllToken, "select_query", `{"table":"t"}`); res.status != 200 {
		t.Fatalf("call during the drain delay: %+v", res)
	}
	wg.Wait()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		r.done <- nil // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
	if short.status != 200 {
		t.Errorf("call in flight at the signal, shorter than drain+grace: %+v", short)
	}
	if long.err == nil && long.status != 504 {
		t.Errorf("call longer than the grace period: want it cancelled (504 timeout or a closed connection), got %+v", long)
	}
	if took := time.Since(stopped); took > 5*time.Second {
		t.Errorf("shutdown took %s with a drain delay of 0.7s and a grace of 0.5s", took)
	}
	runnertest.WaitFor(t, 5*time.Second, "the cancelled statement to end on the server", func() bool {
		return db.QueryInt(t, "select count(*) from pg_stat_activity where usename = $1 and query like '%pg_sleep(20)%' and state = 'active'", role) == 0
	})
	if res := get(r.base + "/healthz"); res.err == nil {
		t.Errorf("the API listener still answers after Run returned: %+v", res)
	}
}

// startLocalPG starts a throwaway cluster on port, skipping the test when PostgreSQL's binaries
// are missing (failing under CI, like pgtest).
func startLocalPG(t *testing.T, port int) *localpg.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := localpg.Start(ctx, localpg.Options{Port: port})
	if errors.Is(err, localpg.ErrNotFound) && os.Getenv("CI") == "" {
		t.Skipf("SKIPPED, needs PostgreSQL's server binaries: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestDatabaseDownAtStart starts the runner against a port where no PostgreSQL runs yet: it is
// alive, not ready, and answers calls with connection_error; once PostgreSQL starts there, it
// becomes ready and serves calls, without a restart.
func TestDatabaseDownAtStart(t *testing.T) {
	t.Parallel()
	if _, err := localpg.FindBinDir(); errors.Is(err, localpg.ErrNotFound) && os.Getenv("CI") == "" {
		t.Skipf("SKIPPED, needs PostgreSQL's server binaries: %v", err)
	}
	port := freePort(t)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", port)
	r := runServer(t, &config.Config{Tokens: []auth.Token{{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read"}}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: dsn}}})

	if res := get(r.base + "/healthz"); res.status != 200 {
		t.Fatalf("/healthz with the database down: %+v", res)
	}
	if res := get(r.base + "/readyz"); res.status != 503 || res.body["status"] != "unavailable" || res.body["reason"] != "the database is not reachable" {
		t.Fatalf("/readyz with the database down: %+v", res)
	}
	if res := r.call(runnertest.AllToken, "execute_sql", `{"sql":"select 1 as one"}`); res.status != 503 || res.errorType != "connection_error" {
		t.Fatalf("call with the database down: %+v", res)
	}

	startLocalPG(t, port)
	runnertest.WaitFor(t, 15*time.Second, "/readyz to answer 200 once PostgreSQL is up", func() bool {
		return get(r.base+"/readyz").status == 200
	})
	if res := r.call(runnertest.AllToken, "execute_sql", `{"sql":"select 1 as one"}`); res.status != 200 {
		t.Fatalf("call once PostgreSQL is up: %+v", res)
	}
	if !strings.Contains(r.log.String(), "database is reachable again") {
		t.Errorf("the log does not record the database coming up:\n%s", r.log.String())
	}
}

// TestPostgresRestartUnderLoad stops PostgreSQL while calls run and starts it again on the same
// port: meanwhile every failed call is a connection_error (never internal_error or a hang), and
// afterwards calls succeed again on the same runner.
func TestPostgresRestartUnderLoad(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	first := startLocalPG(t, port)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", port)
	r := runServer(t, &config.Config{Tokens: []auth.Token{{Secret: runnertest.AllToken, Name: "ops", Scopes: []string{"read"}}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: dsn, MaxConns: 4}}})

	var mu sync.Mutex
	var results []result
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				res := r.call(runnertest.AllToken, "execute_sql", `{"sql":"select count(*) from pg_class, pg_sleep(0.005)"}`)
				mu.Lock()
				results = append(results, res)
				mu.Unlock()
				if res.status != 200 {
					time.Sleep(20 * time.Millisecond) // as a client backing off would
				}
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
	stoppedAt := time.Now()
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	downReady := get(r.base + "/readyz")
	startLocalPG(t, port)
	upAt := time.Now()
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	wg.Wait()

	var before, during, after, failed int
	kinds := map[string]int{}
	for _, res := range results {
		switch {
		case res.at.Before(stoppedAt):
			before++
			if res.status != 200 {
				t.Errorf("call failed before the restart: %+v", res)
			}
		case res.at.Before(upAt.Add(500 * time.Millisecond)):
			during++
		default:
			after++
			if res.status != 200 {
				t.Errorf("call failed after PostgreSQL was back: %+v", res)
			}
		}
		if res.status != 200 {
			failed++
			kind := res.errorType
			if res.err != nil {
				kind = "transport: " + res.err.Error()
			}
			kinds[kind]++
			if res.status != 503 || res.errorType != "connection_error" {
				t.Errorf("failure other than connection_error: %+v", res)
			}
		}
	}
	t.Logf("calls: %d before the stop, %d while down or restarting, %d after; failures by type: %v", before, during, after, kinds)
	if before == 0 || after == 0 || failed == 0 {
		t.Fatalf("the load did not span the restart: %d before, %d after, %d failures", before, after, failed)
	}
	if downReady.status != 503 {
		t.Errorf("/readyz while PostgreSQL was down: %+v", downReady)
	}
	if res := get(r.base + "/readyz"); res.status != 200 {
		t.Errorf("/readyz after the restart: %+v", res)
	}
}

func ptr[T any](v T) *T { return &v }
