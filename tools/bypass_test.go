package tools

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/pgtest"
)

// Regression tests for issue 12's bypasses on the stateless paths: limits tied to a command tag or
// to a setting the agent can change. Sessions and pg_transaction have theirs in tools/session.

// newBigBundle is a write bundle with a table big of n rows and an empty table log.
func newBigBundle(t *testing.T, policy Policy, n int) *bundle {
	t.Helper()
	b, _ := newWriteBundle(t, policy)
	role := quoteIdent(b.db.RoleName("agent"))
	b.db.Exec(t, fmt.Sprintf(`CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL DEFAULT 0);
		INSERT INTO big SELECT i FROM generate_series(1, %d) i;
		CREATE TABLE log (id int);
		GRANT SELECT, INSERT, UPDATE, DELETE ON big, log TO %s`, n, role))
	return b
}

func TestAffectedRowsCapByEffect(t *testing.T) {
	t.Parallel()
	b := newBigBundle(t, Policy{}, 1500)
	for _, sql := range []string{
		"WITH d AS (DELETE FROM big RETURNING 1) SELECT count(*) FROM d",
		"WITH u AS (UPDATE big SET v = v + 1 RETURNING id) INSERT INTO log SELECT id FROM u",
		"WITH u AS (UPDATE big SET v = v + 1 RETURNING id) SELECT 1",
		"INSERT INTO big SELECT i FROM generate_series(1, 1500) i ON CONFLICT (id) DO UPDATE SET v = 9",
	} {
		t.Run(sql, func(t *testing.T) {
			e := b.mustFail(t, ErrTooManyRows, "execute_sql", argsJSON(t, map[string]any{"sql": sql, "mode": "write", "autocommit": true}))
			if !strings.Contains(e.Message, "1500 rows") || !strings.Contains(e.Message, "rolled back") {
				t.Fatalf("message: %s", e.Message)
			}
			if n := b.db.QueryInt(t, "select count(*) from big where v = 0"); n != 1500 {
				t.Fatalf("%d untouched rows of 1500 after a refused statement", n)
			}
			if n := b.db.QueryInt(t, "select count(*) from log"); n != 0 {
				t.Fatalf("log has %d rows", n)
			}
		})
	}
	// Inserts are not what max_affected_rows caps, wrapped or not; a cap within the limit passes.
	b.mustCall(t, "execute_sql", argsJSON(t, map[string]any{"sql": "INSERT INTO log SELECT i FROM generate_series(1, 1500) i", "mode": "write", "autocommit": true}))
	out := b.mustCall(t, "execute_sql", argsJSON(t, map[string]any{"sql": "WITH d AS (DELETE FROM big WHERE id <= 10 RETURNING 1) SELECT count(*) AS n FROM d", "mode": "write", "autocommit": true}))
	if rs := rows(t, out); len(rs) != 1 || fmt.Sprint(rs[0]["n"]) != "10" {
		t.Fatalf("answer: %v", out)
	}
	if n := b.db.QueryInt(t, "select count(*) from big"); n != 1490 {
		t.Fatalf("%d rows left, want 1490", n)
	}
}

func TestCopyRefusedOnEveryPath(t *testing.T) {
	t.Parallel()
	b := newBigBundle(t, Policy{PoolWait: time.Second}, 3)
	calls := []struct{ tool, args string }{
		{"execute_sql", `{"sql":"COPY log(id) FROM STDIN","mode":"write","autocommit":true}`},
		{"execute_sql", `{"sql":"copy log from stdin with (format csv)","mode":"write","autocommit":true}`},
		{"execute_sql", `{"sql":"/* load */ COPY big TO STDOUT"}`},
		{"execute_sql", `{"sql":"COPY (select 1) TO '/tmp/pgtools-should-not-exist'"}`},
		{"pg_transaction", `{"operations":[{"sql":"select 1"},{"sql":"COPY log FROM STDIN"}]}`},
	}
	for _, c := range calls {
		start := time.Now()
		e := b.mustFail(t, ErrNotAllowed, c.tool, c.args)
		if time.Since(start) > time.Second || !strings.Contains(e.Message, "COPY") || !strings.Contains(e.Suggestion, "insert_data") && !strings.Contains(e.Suggestion, "SELECT") {
			t.Fatalf("%s %s: %s after %s", c.tool, c.args, errorJSON(t, e), time.Since(start))
		}
	}
	// Eleven at once against a pool of four: every one is answered, and the pool still serves.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var refused atomic.Int32
	for range 11 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, e := b.reg.Call(ctx, testPrincipal, "execute_sql", []byte(calls[0].args)); e != nil && e.Type == ErrNotAllowed {
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	if refused.Load() != 11 || ctx.Err() != nil {
		t.Fatalf("%d of 11 COPY attempts refused (ctx %v)", refused.Load(), ctx.Err())
	}
	if rs := rows(t, b.mustCall(t, "select_query", `{"table":"big","limit":2}`)); len(rs) != 2 {
		t.Fatalf("pool not serving: %v", rs)
	}
}

func TestReadPathRefusesLocksAndSessionState(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	for _, sql := range []string{
		"DO $$ BEGIN LOCK TABLE orders IN ACCESS EXCLUSIVE MODE; PERFORM pg_sleep(7); END $$",
		"LOCK TABLE orders IN ACCESS EXCLUSIVE MODE",
		"do $$ begin perform pg_sleep(7); end $$",
		"LISTEN x", "PREPARE p AS SELECT 1", "DISCARD PLANS", "SET statement_timeout = 0", "RESET ALL", "CALL p()",
		"DECLARE c CURSOR FOR SELECT 1", "LOAD 'auto_explain'",
	} {
		t.Run(sql, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			e := b.mustFail(t, ErrNotAllowed, "execute_sql", argsJSON(t, map[string]any{"sql": sql}))
			if time.Since(start) > time.Second || !strings.Contains(e.Message, "nothing was run") {
				t.Fatalf("%s after %s", errorJSON(t, e), time.Since(start))
			}
		})
	}
	// A query still runs, and so does a statement PostgreSQL itself must refuse as a write.
	b.mustCall(t, "execute_sql", `{"sql":"(select 1 as one)"}`)
	b.mustFail(t, ErrReadOnlyViolation, "execute_sql", `{"sql":"delete from orders"}`)
	b.mustFail(t, ErrSyntax, "execute_sql", `{"sql":"selec 1"}`)
}

func TestDryRunHasNoEffects(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{})
	seq := func() string {
		var last int64
		var called bool
		if err := b.db.Pool(t).QueryRow(context.Background(), "select last_value, is_called from counter").Scan(&last, &called); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(last, called)
	}
	before := seq()
	for _, tool := range []string{"update_data", "delete_data"} {
		args := map[string]any{"table": "orders", "where": "id = 1 AND nextval('counter') > 0", "dry_run": true}
		if tool == "update_data" {
			args["set"] = map[string]any{"status": "x"}
		}
		e := b.mustFail(t, ErrReadOnlyViolation, tool, argsJSON(t, args))
		if !strings.Contains(e.Message, "dry run") || !strings.Contains(e.Suggestion, "session") {
			t.Fatalf("%s: %s", tool, errorJSON(t, e))
		}
	}
	if after := seq(); after != before {
		t.Fatalf("the sequence moved from %s to %s during dry runs", before, after)
	}
	// A where without effects previews as before, with counts that say what they count.
	out := b.mustCall(t, "update_data", `{"table":"orders","set":{"status":"x"},"where":"status = 'paid'","dry_run":true}`)
	if out["affectedRows"].(float64) != 100 || out["rowCount"].(float64) != previewRows || out["truncated"] != true ||
		!strings.Contains(out["hint"].(string), "data shows 10 of them (rowCount) as they would be after the change") {
		t.Fatalf("dry run answer: %v", out)
	}
}

// TestCallDeadlineBackstop: the context deadline per call cancels a statement on the server
// even when PostgreSQL's own statement_timeout does not fire (here the pool's sessions were
// configured without one).
func TestCallDeadlineBackstop(t *testing.T) {
	t.Parallel()
	db := newBundle(t, Policy{}).db
	cfg, err := PoolConfig(db.RoleDSN(t, "agent"), Policy{StatementTimeout: time.Hour}, 2)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{NewDatabase("default", pgtest.OpenPool(t, cfg), Policy{StatementTimeout: time.Second})}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, e := reg.Call(context.Background(), testPrincipal, "execute_sql", []byte(`{"sql":"select pg_sleep(6)"}`))
	if e == nil || e.Type != ErrTimeout || time.Since(start) > 5*time.Second {
		t.Fatalf("after %s: %v", time.Since(start), e)
	}
}

// cutProxy forwards TCP connections to a PostgreSQL server and, the first time a client sends a
// COMMIT, passes it on and then cuts the connection before the server's answer reaches the client:
// the fault "COMMIT sent, answer lost".
type cutProxy struct {
	ln      net.Listener
	target  string
	cut     atomic.Bool
	waitCut chan struct{}
}

func newCutProxy(t *testing.T, dsn string) (*cutProxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: u.Host, waitCut: make(chan struct{})}
	t.Cleanup(func() { ln.Close() })
	go p.serve()
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		var cutHere atomic.Bool
		closeBoth := func() { c.Close(); s.Close() }
		go func() { // server → client, silenced once this connection's COMMIT is in flight
			buf := make([]byte, 32<<10)
			for {
				n, err := s.Read(buf)
				if cutHere.Load() {
					return
				}
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						closeBoth()
						return
					}
				}
				if err != nil {
					closeBoth()
					return
				}
			}
		}()
		go func() { // client → server
			buf := make([]byte, 32<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if strings.Contains(string(buf[:n]), "COMMIT\x00") && p.cut.CompareAndSwap(false, true) {
						cutHere.Store(true)
						_, _ = s.Write(buf[:n])
						time.Sleep(200 * time.Millisecond) // the server commits; its answer goes nowhere
						closeBoth()
						close(p.waitCut)
						return
					}
					if _, werr := s.Write(buf[:n]); werr != nil {
						closeBoth()
						return
					}
				}
				if err != nil {
					if err != io.EOF {
						closeBoth()
					}
					s.Close()
					return
				}
			}
		}()
	}
}

// TestLostCommitOfAutocommitWrite: a write whose COMMIT answer is lost may have committed, so the
// answer is commit_outcome_unknown (check before retrying), never "retry the call".
func TestLostCommitOfAutocommitWrite(t *testing.T) {
	t.Parallel()
	b := newBigBundle(t, Policy{}, 0)
	for i, c := range []struct{ tool, args string }{
		{"insert_data", `{"table":"log","row":{"id":1},"autocommit":true}`},
		{"execute_sql", `{"sql":"insert into log values (2)","mode":"write","autocommit":true}`},
		{"update_data", `{"table":"log","set":{"id":3},"where":"id = 1","autocommit":true}`},
		{"delete_data", `{"table":"log","where":"id = 2","autocommit":true}`},
	} {
		p, dsn := newCutProxy(t, b.db.RoleDSN(t, "agent"))
		reg, _ := registryOver(t, dsn, Policy{}, 2)
		_, _, e := reg.Call(context.Background(), testPrincipal, c.tool, []byte(c.args))
		select {
		case <-p.waitCut:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the proxy never saw a COMMIT", c.tool)
		}
		if e == nil || e.Type != ErrCommitOutcomeUnknown || strings.Contains(strings.ToLower(e.Suggestion), "retry the call") {
			t.Fatalf("%s: %v", c.tool, e)
		}
		// It did commit: the answer was right not to say "retry".
		want := map[int]string{0: "1", 1: "1,2", 2: "2,3", 3: "3"}[i]
		var got string
		if err := b.db.Pool(t).QueryRow(context.Background(), "select coalesce(string_agg(id::text, ',' order by id), '') from log").Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%s: log holds %q, want %q", c.tool, got, want)
		}
	}
}
