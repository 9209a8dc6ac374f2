package tools

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCancelledCallsNeverPoisonTheNextOne cancels calls at every moment of their life on a small
// pool, waits past the read deadline a cancel arms on its connection, then checks every later call
// succeeds. A connection whose cancel had started used to go back to the pool and, once that
// deadline passed, fail the next call on it with a spurious connection_error.
func TestCancelledCallsNeverPoisonTheNextOne(t *testing.T) {
	t.Parallel()
	b := newBundleConns(t, Policy{}, 2)
	args := []byte(`{"table":"orders","where":"id = $1 AND pg_sleep(0.0005) IS NOT NULL","params":[7]}`)
	var cancelled atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration((i*7+w)%80)*20*time.Microsecond)
				if _, _, e := b.reg.Call(ctx, testPrincipal, "select_query", args); e != nil {
					if e.Type != ErrTimeout {
						t.Errorf("a cancelled call answered %s: %s", e.Type, e.Message)
					}
					cancelled.Add(1)
				}
				cancel()
			}
		}(w)
	}
	wg.Wait()
	if cancelled.Load() == 0 {
		t.Fatal("no call was cancelled; the test did not test anything")
	}
	// A cancel arms a read deadline 3 s ahead on its connection. Keep both connections busy past
	// it (an idle connection would be pinged, and replaced, by the pool): every call must succeed.
	end := time.Now().Add(3500 * time.Millisecond)
	var calls atomic.Int64
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				if _, _, e := b.reg.Call(context.Background(), testPrincipal, "select_query", args); e != nil {
					t.Errorf("a call after the cancelled ones failed: %s (%s)", e.Type, e.Message)
					return
				}
				calls.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d of 400 calls were cancelled; %d calls followed", cancelled.Load(), calls.Load())
}
