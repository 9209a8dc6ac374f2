package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// backendPID is the backend the next stateless call of b runs on.
func backendPID(t testing.TB, b *bundle) any {
	t.Helper()
	return rows(t, b.mustCall(t, "execute_sql", `{"sql":"SELECT pg_backend_pid() AS pid"}`))[0]["pid"]
}

// batchArgs builds pg_transaction arguments from SQL texts.
func batchOf(t testing.TB, sqls ...string) string {
	t.Helper()
	ops := make([]map[string]any, len(sqls))
	for i, s := range sqls {
		ops[i] = map[string]any{"sql": s}
	}
	return argsJSON(t, map[string]any{"operations": ops})
}

// TestBatchLeavesNoStateOnPooledConnection: pg_transaction runs on the pool (of one connection
// here), and whatever session-level state its statements set, committed or rolled back, is gone
// for the next call on the same backend. The batch writes its backend's pid into a sequence
// (setval survives a rollback), so the test knows it ran on the pooled connection the next call
// uses, and the check means something.
func TestBatchLeavesNoStateOnPooledConnection(t *testing.T) {
	t.Parallel()
	const advisoryLocks = "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())"
	cases := []struct {
		name      string
		ops       []string
		ddl       bool      // the caller has the ddl scope and the policy allows DDL
		batchErr  ErrorType // the batch fails with it (rolled back), "" when it commits
		notRun    bool      // the batch is refused before it reaches the database
		next      string    // execute_sql read run next
		want      string    // its one row as JSON
		nextState string    // or the SQLSTATE it fails with
	}{
		{name: "set_config search_path", ops: []string{"SELECT set_config('search_path', 'pg_catalog', false)"},
			next: "SELECT current_setting('search_path') AS v", want: `{"v":"\"$user\", public"}`},
		{name: "set_config application_name", ops: []string{"SELECT set_config('application_name', 'hijacked', false)"},
			// The next call's transaction names its own caller and tool, not the batch's value.
			next: "SELECT current_setting('application_name') AS v", want: `{"v":"pgtools/tester/execute_sql"}`},
		{name: "set_config statement_timeout", ops: []string{"SELECT set_config('statement_timeout', '123s', false)"},
			next: "SELECT current_setting('statement_timeout') AS v", want: `{"v":"30s"}`},
		{name: "custom setting", ops: []string{"SELECT set_config('pgtools_test.leak', 'secret', false)"},
			next: "SELECT coalesce(current_setting('pgtools_test.leak', true), '') AS v", want: `{"v":""}`},
		{name: "advisory locks", ops: []string{"SELECT pg_advisory_lock(42)", "SELECT pg_advisory_lock_shared(43)"},
			next: "SELECT " + advisoryLocks + " AS v", want: `{"v":0}`},
		{name: "temp table through SELECT INTO", ops: []string{"SELECT 1 AS x INTO TEMP leak_tt"}, ddl: true,
			next: "SELECT count(*) AS v FROM pg_class WHERE relpersistence = 't'", want: `{"v":0}`},
		{name: "sequence currval", ops: []string{"SELECT nextval('counter')"},
			next: "SELECT currval('counter') AS v", nextState: "55000"},
		{name: "lastval", ops: []string{"SELECT nextval('counter')"},
			next: "SELECT lastval() AS v", nextState: "55000"},
		{name: "rolled back: advisory lock and settings", ops: []string{
			"SELECT set_config('search_path', 'pg_catalog', false), pg_advisory_lock(7), nextval('counter')", "SELECT 1/0"},
			batchErr: ErrSyntax,
			next:     "SELECT current_setting('search_path') AS v, " + advisoryLocks + " AS n", want: `{"v":"\"$user\", public","n":0}`},
		{name: "rolled back: currval", ops: []string{"SELECT nextval('counter')", "SELECT 1/0"}, batchErr: ErrSyntax,
			next: "SELECT currval('counter') AS v", nextState: "55000"},
		{name: "listen", ops: []string{"LISTEN pgtools_leak"}, batchErr: ErrNotAllowed, notRun: true,
			next: "SELECT count(*) AS v FROM pg_listening_channels()", want: `{"v":0}`},
		{name: "prepared statement", ops: []string{"PREPARE leak AS SELECT 1"}, batchErr: ErrNotAllowed, notRun: true,
			next: "SELECT count(*) AS v FROM pg_prepared_statements WHERE name = 'leak'", want: `{"v":0}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBundleConns(t, Policy{AllowDDL: c.ddl}, 1)
			p := testPrincipal
			if c.ddl {
				p.Scopes = []string{"read", "write", "ddl"}
			}
			b.db.Exec(t, "CREATE SEQUENCE pidseq; GRANT UPDATE ON pidseq TO "+quoteIdent(b.db.RoleName("agent")))
			pid := backendPID(t, b)
			ops := append([]string{"SELECT setval('pidseq', pg_backend_pid())"}, c.ops...)
			if c.notRun {
				ops = c.ops
			}
			out, e := b.callAs(t, p, "pg_transaction", batchOf(t, ops...))
			switch {
			case c.batchErr == "" && e != nil:
				t.Fatalf("batch: %s: %s", e.Type, e.Message)
			case c.batchErr != "" && e == nil:
				t.Fatalf("batch committed, want %s: %v", c.batchErr, out)
			case c.batchErr != "" && e.Type != c.batchErr:
				t.Fatalf("batch: %s (%s), want %s", e.Type, e.Message, c.batchErr)
			}
			if ran := b.db.QueryInt(t, "SELECT last_value FROM pidseq"); !c.notRun && fmt.Sprint(ran) != fmt.Sprint(pid) {
				t.Fatalf("the batch ran on backend %d, not on the pool's %v", ran, pid)
			}
			next := argsJSON(t, map[string]any{"sql": c.next})
			if c.nextState != "" {
				if e := b.mustFail(t, b.refusedType(t, next), "execute_sql", next); e.SQLState != c.nextState {
					t.Fatalf("next call: %s %s (%s), want SQLSTATE %s", e.Type, e.SQLState, e.Message, c.nextState)
				}
			} else {
				rs := rows(t, b.mustCall(t, "execute_sql", next))
				var want map[string]any
				if err := json.Unmarshal([]byte(c.want), &want); err != nil {
					t.Fatal(err)
				}
				assertJSONEqual(t, rs[0], want)
			}
			if after := backendPID(t, b); after != pid {
				t.Fatalf("the batch's connection (backend %v) was replaced by %v: the check proves nothing", pid, after)
			}
		})
	}
}

// refusedType is the error type of a call expected to fail, for mustFail.
func (b *bundle) refusedType(t testing.TB, args string) ErrorType {
	t.Helper()
	_, e := b.call(t, "execute_sql", args)
	if e == nil {
		t.Fatalf("execute_sql %s succeeded", args)
	}
	return e.Type
}

// TestBatchIdentityDoesNotOutliveIt: a batch of a caller with a role and claims leaves neither on
// the pooled connection: the next caller, without one, runs as the login role with no claims,
// on the same backend.
func TestBatchIdentityDoesNotOutliveIt(t *testing.T) {
	t.Parallel()
	ib := newIdentityBundle(t) // a pool of one connection
	login := ib.db.RoleName("agent")
	pid := backendPID(t, ib.bundle)
	out, e := ib.callAs(t, ib.tenant(1), "pg_transaction", batchOf(t,
		"INSERT INTO docs VALUES (100, 1, 'batch')", "SELECT current_user AS u, current_setting('request.jwt.claims', true) AS c"))
	if e != nil {
		t.Fatalf("tenant batch: %s: %s", e.Type, e.Message)
	}
	var res struct {
		Results []struct {
			Rows []map[string]any `json:"rows"`
		} `json:"results"`
	}
	raw, _ := json.Marshal(out)
	if err := json.Unmarshal(raw, &res); err != nil || len(res.Results) != 2 || len(res.Results[1].Rows) != 1 ||
		res.Results[1].Rows[0]["u"] != ib.role {
		t.Fatalf("the batch did not run as the tenant role: %s", raw)
	}
	rs := rows(t, ib.mustCall(t, "execute_sql", `{"sql":"SELECT current_user AS u, coalesce(current_setting('request.jwt.claims', true), '') AS c, pg_backend_pid() AS pid"}`))
	if rs[0]["u"] != login || rs[0]["c"] != "" {
		t.Fatalf("after the tenant's batch the next caller runs as %v with claims %q, want %s and none", rs[0]["u"], rs[0]["c"], login)
	}
	if rs[0]["pid"] != pid {
		t.Fatalf("the batch's connection (backend %v) was replaced by %v: the check proves nothing", pid, rs[0]["pid"])
	}
}

// TestBatchConnectionDestroyedWhenUnsure: a batch that ran past its bound and one whose caller
// went away may leave a cancel request in flight: they do not hand their connection back. The
// next call runs on another backend, and the old one is not busy.
func TestBatchConnectionDestroyedWhenUnsure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		policy Policy
		args   string
		cancel time.Duration // cancel the call's context after this long
	}{
		{name: "transaction bound", policy: Policy{StatementTimeout: 2 * time.Second, TransactionTimeout: 300 * time.Millisecond},
			args: `{"operations":[{"sql":"select 1"},{"sql":"select pg_sleep(5)"}]}`},
		{name: "caller went away", args: `{"operations":[{"sql":"select pg_sleep(5)"}]}`, cancel: 300 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBundleConns(t, c.policy, 1)
			pid := backendPID(t, b)
			ctx := context.Background()
			if c.cancel > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, c.cancel)
				defer cancel()
			}
			if _, _, e := b.reg.Call(ctx, testPrincipal, "pg_transaction", []byte(c.args)); e == nil {
				t.Fatal("the batch succeeded")
			}
			if after := backendPID(t, b); after == pid {
				t.Fatalf("the next call ran on the batch's backend %v: its connection went back to the pool", pid)
			}
			if n := b.db.QueryInt(t, "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND state <> 'idle'", pid); n != 0 {
				t.Fatalf("the batch's backend %v is still busy", pid)
			}
		})
	}
}

// TestOneTokenRunsTwentyBatchesAtOnce: with the limits one token gets by default (the whole
// total), 20 concurrent pg_transaction calls are not refused while slots free up in time: the
// calls beyond the 10 slots wait for one instead of being answered rate_limited.
func TestOneTokenRunsTwentyBatchesAtOnce(t *testing.T) {
	t.Parallel()
	b := newBundleConns(t, Policy{}, 12)
	b.reg.setTxLimiter(NewTxLimiter(10, 10, 5)) // runner.Config.ConnLimits for a single token
	b.db.Exec(t, "CREATE TABLE hits (id int); GRANT INSERT, SELECT ON hits TO "+quoteIdent(b.db.RoleName("agent")))
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	start := make(chan struct{})
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			args := fmt.Sprintf(`{"operations":[{"sql":"insert into hits values (%d)"},{"sql":"select pg_sleep(0.2)"},{"sql":"insert into hits values (%d)"}]}`, i, i)
			if _, _, e := b.reg.Call(context.Background(), testPrincipal, "pg_transaction", []byte(args)); e != nil {
				errs <- fmt.Sprintf("%s: %s", e.Type, e.Message)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	var got []string
	for e := range errs {
		got = append(got, e)
	}
	if len(got) > 0 {
		t.Fatalf("%d of 20 calls failed: %s", len(got), strings.Join(got, "; "))
	}
	if n := b.db.QueryInt(t, "SELECT count(*) FROM hits"); n != 40 {
		t.Fatalf("%d rows, want 40", n)
	}
}
