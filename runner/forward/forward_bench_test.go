package forward_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/runnertest"
)

// BenchmarkForwardedSessionCall measures what forwarding adds to a session call, in one run: a
// primary-key read in a session on replica A, sent to A itself (direct) and to B, which
// forwards it to A, alternately, so both see the same machine and database state. It reports
// both latencies and their ratio (go test ./runner/forward -run X -bench Forwarded -benchtime
// 2000x).
func BenchmarkForwardedSessionCall(b *testing.B) {
	_, dsn := runnertest.SetupDB(b)
	fl := newFleetB(b, dsn)
	a, via := fl[0], fl[1]
	st, out := callB(b, a, `{"action":"begin"}`, "pg_tx")
	if st != 200 {
		b.Fatalf("begin: %d %v", st, out)
	}
	id := out["session_id"].(string)
	body := `{"table":"orders","where":"id = 3","session_id":"` + id + `"}`
	client := &http.Client{}
	one := func(r *replica) time.Duration {
		start := time.Now()
		resp, err := client.Do(apitest.Request(http.MethodPost, r.srv.URL+"/v1/tools/select_query", runnertest.AgentToken, body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(start)
	}
	for range 50 { // warm both paths: connections, prepared statements
		one(a)
		one(via)
	}
	var direct, forwarded time.Duration
	b.ResetTimer()
	for range b.N {
		direct += one(a)
		forwarded += one(via)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(direct.Microseconds())/n, "µs-direct/op")
	b.ReportMetric(float64(forwarded.Microseconds())/n, "µs-forwarded/op")
	b.ReportMetric(float64(forwarded)/float64(direct), "forwarded/direct")
}
