package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/pgtest"
)

// sleepTx is a pg_transaction call that holds its connection for d.
func sleepTx(d time.Duration) string {
	return fmt.Sprintf(`{"operations":[{"sql":"select pg_sleep(%g)"}]}`, d.Seconds())
}

// txBackends counts this database's pg_transaction backends inside a transaction. A backend that
// was closed but has not exited yet (PostgreSQL ends it asynchronously) is out of its transaction,
// so it is not counted: the limiter frees a slot only after the COMMIT and the close.
func txBackends(t testing.TB, b *bundle) int64 {
	return b.db.QueryInt(t, `select count(*) from pg_stat_activity where datname = current_database()
		and application_name like 'pgtools/%/pg_transaction' and xact_start is not null`)
}

// sampleMax polls count every 10 ms until stop is closed and returns the largest value seen.
func sampleMax(t testing.TB, count func() int64, stop <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		var most int64
		for {
			if n := count(); n > most {
				most = n
			}
			select {
			case <-stop:
				out <- most
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return out
}

type txOutcome struct {
	principal string
	err       *Error
	took      time.Duration
}

// burst runs one pg_transaction call per entry of principals, all released at once.
func burst(t *testing.T, b *bundle, principals []string, args string) []txOutcome {
	t.Helper()
	out := make([]txOutcome, len(principals))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, name := range principals {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			began := time.Now()
			_, _, e := b.reg.Call(context.Background(), Principal{Name: name, Scopes: []string{"read", "write"}}, "pg_transaction", []byte(args))
			out[i] = txOutcome{principal: name, err: e, took: time.Since(began)}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// TestTxLimiterCapsConnections sends 40 concurrent pg_transaction calls from four principals:
// pg_stat_activity never shows more than the cap of 10, each principal gets its share of 5 (the
// rest are refused at once), and the calls over the total wait for a slot and succeed. The pool
// has room for more than 10, so the cap seen is the limiter's.
func TestTxLimiterCapsConnections(t *testing.T) {
	t.Parallel()
	b := newBundleConns(t, Policy{}, 12)
	b.reg.setTxLimiter(NewTxLimiter(10, 5, 0))
	var principals []string
	for i := 0; i < 40; i++ {
		principals = append(principals, fmt.Sprintf("p%d", i%4))
	}
	stop := make(chan struct{})
	most := sampleMax(t, func() int64 { return txBackends(t, b) }, stop)
	outcomes := burst(t, b, principals, sleepTx(500*time.Millisecond))
	close(stop)
	if m := <-most; m != 10 {
		t.Errorf("at most %d pg_transaction backends at once, want exactly the cap of 10", m)
	}
	ok := map[string]int{}
	var waited int
	for _, o := range outcomes {
		switch {
		case o.err == nil:
			ok[o.principal]++
			if o.took >= 900*time.Millisecond {
				waited++
			}
		case o.err.Type == ErrRateLimited && strings.Contains(o.err.Message, "the most one caller may have at once"):
		default:
			t.Fatalf("%s: %s: %s", o.principal, o.err.Type, o.err.Message)
		}
	}
	for _, p := range []string{"p0", "p1", "p2", "p3"} {
		if ok[p] != 5 {
			t.Errorf("%s: %d calls succeeded, want its share of 5 (%v)", p, ok[p], ok)
		}
	}
	if waited < 10 {
		t.Errorf("%d calls succeeded after waiting for a slot, want 10", waited)
	}
}

// TestTxLimiterShareLeavesRoomForOthers: one principal flooding pg_transaction holds at most its
// share, so another principal's call runs at once instead of queueing behind the flood.
func TestTxLimiterShareLeavesRoomForOthers(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	b.reg.setTxLimiter(NewTxLimiter(4, 2, 0))
	var refused atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, o := range burst(t, b, []string{"flood", "flood", "flood", "flood", "flood", "flood"}, sleepTx(time.Second)) {
			if o.err != nil && o.err.Type == ErrRateLimited {
				refused.Add(1)
			}
		}
	}()
	// Wait until the flood holds its connections.
	deadline := time.Now().Add(5 * time.Second)
	for txBackends(t, b) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	began := time.Now()
	if _, e := b.callAs(t, Principal{Name: "other", Scopes: []string{"read", "write"}}, "pg_transaction", `{"operations":[{"sql":"select 1"}]}`); e != nil {
		t.Fatalf("other principal: %s: %s", e.Type, e.Message)
	}
	if took := time.Since(began); took > 500*time.Millisecond {
		t.Errorf("the other principal's call took %s: it waited behind the flood", took)
	}
	<-done
	if n := refused.Load(); n != 4 {
		t.Errorf("%d of the flood's 6 calls were refused, want 4 (share 2)", n)
	}
}

// TestTxLimiterWaitIsBounded: when every connection is busy, a call waits the database's
// pool_wait, then gets rate_limited naming the wait and the fix.
func TestTxLimiterWaitIsBounded(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{PoolWait: 200 * time.Millisecond})
	b.reg.setTxLimiter(NewTxLimiter(2, 2, 0))
	done := make(chan []txOutcome)
	go func() { done <- burst(t, b, []string{"busy", "busy"}, sleepTx(1500*time.Millisecond)) }()
	deadline := time.Now().Add(5 * time.Second)
	for txBackends(t, b) < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	began := time.Now()
	_, e := b.callAs(t, Principal{Name: "late", Scopes: []string{"read", "write"}}, "pg_transaction", `{"operations":[{"sql":"select 1"}]}`)
	took := time.Since(began)
	if e == nil || e.Type != ErrRateLimited {
		t.Fatalf("got %+v, want rate_limited", e)
	}
	if took < 200*time.Millisecond || took > time.Second {
		t.Errorf("refused after %s, want after the pool_wait of 200ms", took)
	}
	checkErrorGolden(t, "rate_limited-transactions-busy", e)
	for _, o := range <-done {
		if o.err != nil {
			t.Errorf("busy call: %s: %s", o.err.Type, o.err.Message)
		}
	}
	// Over one's own share the refusal comes at once, and says so.
	b.reg.setTxLimiter(NewTxLimiter(2, 1, 0))
	// The busy call holds its slot for 2 s: a refusal well before that did not wait for it.
	outcomes := burst(t, b, []string{"busy", "busy"}, sleepTx(2*time.Second))
	var share *Error
	for _, o := range outcomes {
		if o.err != nil {
			share = o.err
			if o.took > time.Second {
				t.Errorf("refused over the share after %s, want at once (without waiting for the busy call)", o.took)
			}
		}
	}
	if share == nil || share.Type != ErrRateLimited {
		t.Fatalf("two calls with a share of 1: %+v", outcomes)
	}
	checkErrorGolden(t, "rate_limited-transactions-share", share)
}

// checkErrorGolden compares e with testdata/errors/name.golden (rewritten with -update), like
// TestErrorGolden does for its cases.
func checkErrorGolden(t *testing.T, name string, e *Error) {
	t.Helper()
	raw, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := json.Indent(&got, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	got.WriteByte('\n')
	assertReadsWell(t, got.String())
	pgtest.Golden(t, filepath.Join("testdata", "errors", name+".golden"), got.Bytes(), *update)
}

// TestTxLimiterSharesPerOwnerAndSubject: the end users of one act-as token count against the
// token's share together (seven of them run at most 3 calls of a share of 3) and each within a
// subject share (1): spreading calls over subjects does not lift the token's bound. Both
// refusals come at once and name the share that is full and the setting that raises it.
func TestTxLimiterSharesPerOwnerAndSubject(t *testing.T) {
	t.Parallel()
	// The shares refuse at once, before any pool; the calls they admit may wait for connections
	// the pool is still opening, which on a busy machine took over 200 ms (a timeout, not the
	// refusal under test), so their wait is long.
	b := newBundle(t, Policy{PoolWait: 10 * time.Second})
	b.reg.setTxLimiter(NewTxLimiter(6, 3, 1))
	subject := func(i int) Principal {
		return Principal{Name: fmt.Sprintf("hub:s%d", i), Quota: "hub", Scopes: []string{"read", "write"}}
	}
	run := func(ps []Principal, args string) []txOutcome {
		out := make([]txOutcome, len(ps))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				began := time.Now()
				_, _, e := b.reg.Call(context.Background(), p, "pg_transaction", []byte(args))
				out[i] = txOutcome{principal: p.Name, err: e, took: time.Since(began)}
			}()
		}
		close(start)
		wg.Wait()
		return out
	}
	refusal := func(outcomes []txOutcome, want string) *Error {
		t.Helper()
		var got *Error
		for _, o := range outcomes {
			if o.err == nil {
				continue
			}
			if o.err.Type != ErrRateLimited || !strings.Contains(o.err.Message, want) {
				t.Fatalf("%s: %s: %s, want rate_limited naming %q", o.principal, o.err.Type, o.err.Message, want)
			}
			if o.took > 150*time.Millisecond {
				t.Errorf("refused over a share after %s, want at once", o.took)
			}
			got = o.err
		}
		return got
	}
	// One subject, two calls: its share of 1 refuses the second.
	e := refusal(run([]Principal{subject(0), subject(0)}, sleepTx(300*time.Millisecond)), `the most one user of "hub" may have at once`)
	if e == nil {
		t.Fatal("a subject ran two calls at once with a share of 1")
	}
	checkErrorGolden(t, "rate_limited-transactions-subject-share", e)
	// Seven subjects: the token's share of 3 runs, the others are refused.
	var seven []Principal
	for i := 0; i < 7; i++ {
		seven = append(seven, subject(i))
	}
	stop := make(chan struct{})
	most := sampleMax(t, func() int64 { return txBackends(t, b) }, stop)
	outcomes := run(seven, sleepTx(500*time.Millisecond))
	close(stop)
	if m := <-most; m > 3 {
		t.Errorf("%d pg_transaction backends of one token's subjects at once, over its share of 3", m)
	}
	e = refusal(outcomes, `All 3 pg_transaction calls "hub" may run at once`)
	if e == nil {
		t.Fatal("seven subjects of one token were all admitted")
	}
	checkErrorGolden(t, "rate_limited-transactions-owner-share", e)
}
