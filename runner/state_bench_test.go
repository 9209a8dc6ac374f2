package runner_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// BenchmarkStatelessReadWithState: a stateless select_query over HTTP on a runner without
// state and on one whose fleet state (approvals, replica registry, sign-ins) is in the same
// database, alternating call by call in one run so that both see the same machine. The state
// is touched by approvals, sessions' forwarding and the heartbeat, never by a stateless read:
// the two figures should agree within noise. Run:
//
//	go test ./runner -run '^$' -bench StatelessReadWithState -benchtime 4000x -count 3
func BenchmarkStatelessReadWithState(b *testing.B) {
	db := pgtest.New(b)
	db.Exec(b, `CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL);
		INSERT INTO items SELECT i, 'item ' || i FROM generate_series(1, 1000) i`)
	dsn := db.RoleDSN(b, "bench")
	db.Exec(b, `GRANT CREATE ON DATABASE "`+db.Name+`" TO "`+db.RoleName("bench")+`"`)
	const token = "bench-token-0123456789abcdef"
	serve := func(state bool) string {
		doc := `{"tokens":[{"name":"agent","token":"` + token + `","scopes":["read"]}],"databases":{"default":{"url":"` + dsn + `"}}`
		if state {
			doc += `,"state":"default","replica_id":"bench-state"`
		}
		path := apitest.WriteFile(b, b.TempDir(), "config.json", doc+"}")
		cfg, err := config.LoadConfigFile(path)
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			b.Fatal(err)
		}
		rt, err := runner.Build(context.Background(), cfg, zerolog.Nop(), runner.BuildOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(rt.Close)
		srv := httptest.NewServer(rt.Handler())
		b.Cleanup(srv.Close)
		return srv.URL
	}
	urls := [2]string{serve(false), serve(true)}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	call := func(url string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/tools/select_query", strings.NewReader(`{"table":"items","where":"id = 7"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("select_query: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	for range 200 { // warm both
		call(urls[0])
		call(urls[1])
	}
	var spent [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		k := i % 2
		start := time.Now()
		call(urls[k])
		spent[k] += time.Since(start)
	}
	b.StopTimer()
	half := float64(max(b.N/2, 1))
	without, with := float64(spent[0].Microseconds())/half, float64(spent[1].Microseconds())/half
	b.ReportMetric(without, "µs/read-without-state")
	b.ReportMetric(with, "µs/read-with-state")
	b.ReportMetric(with/without, "ratio")
}
