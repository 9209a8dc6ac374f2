package invoke_test

import (
	"context"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools"
)

func benchRegistry(b *testing.B) *tools.Registry {
	b.Helper()
	reg, err := tools.NewRegistry(context.Background(), tools.Options{Databases: []*tools.Database{tools.NewDatabase("default", nil, tools.Policy{}), tools.NewDatabase("reports", nil, tools.Policy{})}})
	if err != nil {
		b.Fatal(err)
	}
	return reg
}

// BenchmarkObserveCall is the metrics cost a successful call adds to the hot path: a map lookup
// and atomic adds on pre-resolved children, no allocation.
func BenchmarkObserveCall(b *testing.B) {
	m := invoke.NewMetrics(benchRegistry(b), nil)
	ev := tools.CallEvent{Tool: "select_query", Database: "default", Duration: 420 * time.Microsecond, Rows: 3}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveCall(ev)
		}
	})
}

// BenchmarkObserveCallError is the same for a failed call, whose outcome label is resolved per call.
func BenchmarkObserveCallError(b *testing.B) {
	m := invoke.NewMetrics(benchRegistry(b), nil)
	ev := tools.CallEvent{Tool: "select_query", Database: "default", Duration: 420 * time.Microsecond, ErrorType: tools.ErrInvalidColumn}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.ObserveCall(ev)
		}
	})
}

// BenchmarkLimiterAdmit is the cost of the per-token limits on an admitted call.
func BenchmarkLimiterAdmit(b *testing.B) {
	l := invoke.NewLimiter(invoke.Limits{RatePerSecond: 1e9, Burst: 1 << 30, MaxConcurrentPerToken: 1 << 20}, []string{"ops"}, nil)
	p := tools.Principal{Name: "ops"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			pl, _, err := l.Admit(p)
			if err != nil {
				b.Fatal(err)
			}
			l.Done(pl)
		}
	})
}
