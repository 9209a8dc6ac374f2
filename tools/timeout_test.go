package tools

import (
	"context"
	"testing"
	"time"
)

// sleepersActive counts backends of this test's database that are running a statement
// containing pg_sleep(5), as the superuser sees them in pg_stat_activity.
func sleepersActive(t testing.TB, b *bundle) int64 {
	t.Helper()
	return b.db.QueryInt(t, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()
		  AND state = 'active' AND query LIKE '%pg_sleep(5)%'`)
}

// waitNoSleepers polls pg_stat_activity until no backend runs the sleep, failing after within.
func waitNoSleepers(t testing.TB, b *bundle, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := sleepersActive(t, b)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends still run pg_sleep(5) %v after the call returned", n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStatementTimeout: the policy's statement timeout stops the statement on the server and is
// reported as timeout.
func TestStatementTimeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, tool, args string }{
		{"execute_sql", "execute_sql", `{"sql":"select pg_sleep(5)"}`},
		{"select_query where", "select_query", `{"table":"orders","where":"pg_sleep(5) IS NOT NULL","limit":1}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBundle(t, Policy{StatementTimeout: 300 * time.Millisecond})
			start := time.Now()
			e := b.mustFail(t, ErrTimeout, c.tool, c.args)
			if d := time.Since(start); d < 250*time.Millisecond || d > 2*time.Second {
				t.Fatalf("timed out after %v, want about 300ms", d)
			}
			if e.SQLState != "57014" {
				t.Fatalf("sqlState %q: %s", e.SQLState, errorJSON(t, e))
			}
			waitNoSleepers(t, b, time.Second)
			// The pool is still usable.
			b.mustCall(t, "execute_sql", `{"sql":"select 1 AS one"}`)
		})
	}
}

// TestContextCancellationCancelsOnServer: a caller that goes away (client disconnect, shutdown)
// cancels the statement on the server, not only in the client.
func TestContextCancellationCancelsOnServer(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		cancel func() (context.Context, context.CancelFunc)
	}{
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(200*time.Millisecond, cancel)
			return ctx, cancel
		}},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 200*time.Millisecond)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBundle(t, Policy{})
			ctx, cancel := c.cancel()
			defer cancel()
			start := time.Now()
			res, _, e := b.reg.Call(ctx, testPrincipal, "execute_sql", []byte(`{"sql":"select pg_sleep(5)"}`))
			if e == nil {
				t.Fatalf("succeeded: %+v", res)
			}
			if e.Type != ErrTimeout || e.Suggestion == "" {
				t.Fatalf("got %s", errorJSON(t, e))
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("returned after %v", d)
			}
			waitNoSleepers(t, b, time.Second)
			b.mustCall(t, "execute_sql", `{"sql":"select 1 AS one"}`)
		})
	}
}
