package session_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
)

// TestSessionCallEndsAtItsBound: a call inside a session is bounded by
// policy.transaction_timeout_ms (1 s here, under a 5 s statement timeout). A read past it and a
// write that locked row 1 and then kept running are cancelled on the server at the bound and
// rolled back to the savepoint before them: the write's lock is released then (another
// connection waiting for row 1 gets it), the answers are timeouts that name the setting and say
// the session stays open, and the session keeps its earlier change and commits it.
func TestSessionCallEndsAtItsBound(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{StatementTimeout: 5 * time.Second, TransactionTimeout: time.Second})
	f.db.Exec(t, `CREATE TABLE lockme (id int PRIMARY KEY, v int NOT NULL, note text NOT NULL);
		INSERT INTO lockme VALUES (1, 0, 'orig'), (2, 0, 'orig');
		GRANT SELECT, UPDATE ON lockme TO "`+f.role+`"`)
	id := f.begin(t, alice, "")
	f.must(t, alice, "update_data", fmt.Sprintf(`{"table":"lockme","set":{"note":"kept"},"where":"id = 2","session_id":%q}`, id))
	check := func(e *tools.Error, took time.Duration) {
		t.Helper()
		if took > 3*time.Second {
			t.Errorf("the call ended after %s, want near its 1 s bound (its statement alone takes 3 s)", took)
		}
		if !strings.Contains(e.Message, "policy.transaction_timeout_ms") || !strings.Contains(e.Message, "rolled back to the savepoint") ||
			!strings.Contains(e.Suggestion, id) || !strings.Contains(e.Suggestion, "stays open") {
			t.Errorf("the timeout does not say what happened: %s / %s", e.Message, e.Suggestion)
		}
	}

	start := time.Now()
	e := f.fail(t, tools.ErrTimeout, alice, "execute_sql", fmt.Sprintf(`{"sql":"select pg_sleep(3)","session_id":%q}`, id))
	check(e, time.Since(start))
	checkGolden(t, "timeout-session-call", e)

	write := fmt.Sprintf(`{"sql":"with u as (update lockme set note = 'call' where id = 1 returning id) select pg_sleep(3) from u","mode":"write","session_id":%q}`, id)
	done := make(chan *tools.Error, 1)
	start = time.Now()
	go func() {
		_, e := f.call(t, alice, "execute_sql", write)
		done <- e
	}()
	deadline := time.Now().Add(10 * time.Second)
	for f.db.QueryInt(t, `select count(*) from pg_stat_activity where datname = current_database()
		and application_name like 'pgtools-session/%' and state = 'active' and query like '%pg_sleep%'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the session call never reached its pg_sleep")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx := context.Background()
	other, err := pgx.Connect(ctx, f.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, "SET lock_timeout = '15s'"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(ctx, "update lockme set v = 100 where id = 1"); err != nil {
		t.Fatalf("the other connection's update: %v", err)
	}
	freed := time.Since(start)
	e = <-done
	if e == nil || e.Type != tools.ErrTimeout {
		t.Fatalf("the write past its bound: %+v, want timeout", e)
	}
	check(e, time.Since(start))
	if freed > 3*time.Second {
		t.Errorf("the other connection got row 1 after %s: the call held its lock past its 1 s bound", freed)
	}

	// The session is still open, with its earlier change and without the cancelled one.
	out := f.must(t, alice, "select_query", fmt.Sprintf(`{"table":"lockme","order_by":"id","session_id":%q}`, id))
	if got := fmt.Sprint(out["data"]); !strings.Contains(got, "note:orig") || !strings.Contains(got, "note:kept") || strings.Contains(got, "note:call") {
		t.Fatalf("the session sees %s", got)
	}
	f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))
	if n := f.db.QueryInt(t, `select count(*) from lockme where (id = 1 and v = 100 and note = 'orig') or (id = 2 and note = 'kept')`); n != 2 {
		t.Error("after commit, the rows are not the session's earlier change plus the other connection's update")
	}
}
