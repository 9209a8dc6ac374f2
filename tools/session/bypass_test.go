package session_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
)

// Regression tests for issue 12's bypasses inside sessions and pg_transaction: limits that an
// earlier statement of the same transaction could switch off, and checks tied to the top-level
// transaction where statements run under a savepoint.

func execArgs(t *testing.T, sql, session string) string {
	t.Helper()
	if session == "" {
		return fmt.Sprintf(`{"sql":%q,"mode":"write","autocommit":true}`, sql)
	}
	return fmt.Sprintf(`{"sql":%q,"mode":"write","session_id":%q}`, sql, session)
}

func TestSessionDDLRefusedWithoutScope(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	f.db.Exec(t, `GRANT CREATE ON SCHEMA public TO "`+f.role+`"`)
	id := f.begin(t, alice, "")
	for _, sql := range []string{"CREATE TABLE t1 AS SELECT 1 AS x", "SELECT 1 AS x INTO t2", "CREATE TABLE t3 (i int)",
		"CREATE TEMP TABLE t4 AS SELECT 1"} {
		e := f.fail(t, tools.ErrNotAllowed, alice, "execute_sql", execArgs(t, sql, id))
		if !strings.Contains(e.Message, "DDL") || !strings.Contains(e.Suggestion, "still open") {
			t.Fatalf("%s: %+v", sql, e)
		}
	}
	f.must(t, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":7},"where":"id = 1","session_id":%q}`, id))
	f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))
	if n := f.db.QueryInt(t, "select count(*) from pg_class where relname in ('t1','t2','t3','t4')"); n != 0 {
		t.Fatalf("%d tables created by a token without the ddl scope", n)
	}
	if f.balance(t, 1) != 7 {
		t.Fatal("the session's allowed write was lost")
	}
	// With allow_ddl and the ddl scope the same statement is kept: the check is by effect, not a ban.
	g := newFixture(t, session.Config{}, tools.Policy{AllowDDL: true})
	g.db.Exec(t, `GRANT CREATE ON SCHEMA public TO "`+g.role+`"`)
	admin := tools.Principal{Name: "admin", Scopes: []string{"read", "write", "ddl"}}
	id = g.begin(t, admin, "")
	g.must(t, admin, "execute_sql", execArgs(t, "CREATE TABLE t1 AS SELECT 1 AS x", id))
	g.must(t, admin, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))
	if n := g.db.QueryInt(t, "select count(*) from t1"); n != 1 {
		t.Fatalf("t1 has %d rows", n)
	}
}

func TestAffectedRowsCapInSessionsAndBatches(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	f.db.Exec(t, `CREATE TABLE big (id int PRIMARY KEY, v int NOT NULL DEFAULT 0); INSERT INTO big SELECT generate_series(1, 1500);
		CREATE TABLE log (id int); GRANT SELECT, INSERT, UPDATE, DELETE ON big, log TO "`+f.role+`"`)
	untouched := func() int64 { return f.db.QueryInt(t, "select count(*) from big where v = 0") }
	id := f.begin(t, alice, "")
	for _, sql := range []string{"WITH d AS (DELETE FROM big RETURNING 1) SELECT count(*) FROM d",
		"WITH u AS (UPDATE big SET v = 1 RETURNING id) INSERT INTO log SELECT id FROM u"} {
		e := f.fail(t, tools.ErrTooManyRows, alice, "execute_sql", execArgs(t, sql, id))
		if !strings.Contains(e.Message, "1500 rows") || !strings.Contains(e.Suggestion, "still open") {
			t.Fatalf("%s: %+v", sql, e)
		}
	}
	f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))
	if n := untouched(); n != 1500 {
		t.Fatalf("%d of 1500 rows untouched after refused statements in a session", n)
	}
	e := f.fail(t, tools.ErrTooManyRows, alice, "pg_transaction",
		`{"operations":[{"sql":"insert into log values (1)"},{"sql":"WITH d AS (DELETE FROM big RETURNING 1) SELECT count(*) FROM d"}]}`)
	if e.FailedOperation == nil || *e.FailedOperation != 1 {
		t.Fatalf("failed operation: %+v", e)
	}
	if n := untouched(); n != 1500 || f.db.QueryInt(t, "select count(*) from log") != 0 {
		t.Fatal("a refused batch left changes")
	}
}

func TestTimeoutsCannotBeLiftedBySQL(t *testing.T) {
	t.Parallel()
	// allow_ddl and the ddl scope let SET itself run, so what is tested is that it does not hold.
	// The call bound is far above the statement timeout, so only statement_timeout can end the
	// sleep early; the margins are wide, so a busy machine does not blur the two.
	f := newFixture(t, session.Config{}, tools.Policy{StatementTimeout: time.Second, TransactionTimeout: time.Minute, AllowDDL: true})
	alice := tools.Principal{Name: "alice", Scopes: []string{"read", "write", "ddl"}}
	const sleep = "select pg_sleep(30)"
	timedOut := func(what string, start time.Time, e *tools.Error) {
		t.Helper()
		if e == nil || e.Type != tools.ErrTimeout || time.Since(start) > 15*time.Second {
			t.Fatalf("%s: %v after %s, want a timeout at the 1 s statement_timeout", what, e, time.Since(start))
		}
	}
	for _, lift := range []string{"select set_config('statement_timeout', '0', false)", "SET statement_timeout = 0",
		"select set_config('statement_timeout', '0', true)"} {
		id := f.begin(t, alice, "")
		f.must(t, alice, "execute_sql", execArgs(t, lift, id))
		start := time.Now()
		_, e := f.call(t, alice, "execute_sql", fmt.Sprintf(`{"sql":%q,"session_id":%q}`, sleep, id))
		timedOut(lift+" then a read in the session", start, e)
		start = time.Now()
		_, e = f.call(t, alice, "execute_sql", execArgs(t, sleep, id))
		timedOut(lift+" then a write in the session", start, e)
		f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"rollback","session_id":%q}`, id))

		start = time.Now()
		_, e = f.call(t, alice, "pg_transaction", fmt.Sprintf(`{"operations":[{"sql":%q},{"sql":%q}]}`, lift, sleep))
		timedOut(lift+" then a statement of the same batch", start, e)
	}
	// Read-only sessions too: a read cannot change the next read's limit.
	id := f.begin(t, bob, `,"read_only":true`)
	f.must(t, bob, "execute_sql", fmt.Sprintf(`{"sql":"select set_config('lock_timeout', '0', false), set_config('statement_timeout', '0', false)","session_id":%q}`, id))
	start := time.Now()
	_, e := f.call(t, bob, "execute_sql", fmt.Sprintf(`{"sql":%q,"session_id":%q}`, sleep, id))
	timedOut("a read after a read that lifted the timeout", start, e)
}

func TestSessionAdvisoryLocksReleasedAfterEachStatement(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	free := func(key int) bool {
		var ok bool
		if err := f.db.Pool(t).QueryRow(context.Background(), "select pg_try_advisory_lock($1::bigint) and pg_advisory_unlock($1::bigint)", key).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	ro := f.begin(t, alice, `,"read_only":true`)
	f.must(t, alice, "execute_sql", fmt.Sprintf(`{"sql":"select pg_advisory_lock(7001), pg_advisory_lock_shared(7002)","session_id":%q}`, ro))
	rw := f.begin(t, bob, "")
	f.must(t, bob, "execute_sql", execArgs(t, "select pg_advisory_lock(7003)", rw))
	for _, key := range []int{7001, 7002, 7003} {
		if !free(key) {
			t.Fatalf("advisory lock %d is still held after the session's statement", key)
		}
	}
	// Both sessions stay usable.
	f.must(t, alice, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, ro))
	f.must(t, bob, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, rw))
}

func TestCommitOnKilledSessionIsLost(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	id := f.begin(t, alice, "")
	f.must(t, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":5},"where":"id = 1","session_id":%q}`, id))
	f.killSessionBackend(t)
	f.waitBackends(t, 0)
	e := f.fail(t, tools.ErrConnection, alice, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))
	if !strings.Contains(e.Message, "was lost") || strings.Contains(strings.ToLower(e.Suggestion), "retry") {
		t.Fatalf("commit on a killed session: %+v", e)
	}
	if f.balance(t, 1) != 100 {
		t.Fatal("a lost session's write survived")
	}
	f.fail(t, tools.ErrSessionNotFound, alice, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))
}

func TestCopyRefusedInSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	id := f.begin(t, alice, "")
	for _, args := range []string{execArgs(t, "COPY accounts FROM STDIN", id), fmt.Sprintf(`{"sql":"COPY accounts TO STDOUT","session_id":%q}`, id)} {
		start := time.Now()
		e := f.fail(t, tools.ErrNotAllowed, alice, "execute_sql", args)
		if time.Since(start) > time.Second || !strings.Contains(e.Message, "COPY") {
			t.Fatalf("%s: %+v after %s", args, e, time.Since(start))
		}
	}
	f.must(t, alice, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, id))
}

// TestSessionStalePlanIsReadAgain: in a session, a read whose cached plan went stale because the
// session itself changed the table (DDL with the ddl scope) is run once more, freshly parsed,
// and sees the new column; the session stays usable.
func TestSessionStalePlanIsReadAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{AllowDDL: true})
	f.db.Exec(t, `GRANT CREATE ON SCHEMA public TO "`+f.role+`"`)
	admin := tools.Principal{Name: "admin", Scopes: []string{"read", "write", "ddl"}}
	id := f.begin(t, admin, "")
	f.must(t, admin, "execute_sql", execArgs(t, "CREATE TABLE shape AS SELECT 1 AS a", id))
	read := fmt.Sprintf(`{"sql":"SELECT * FROM shape","session_id":%q}`, id)
	f.must(t, admin, "execute_sql", read)
	f.must(t, admin, "execute_sql", execArgs(t, "ALTER TABLE shape ADD COLUMN b int DEFAULT 2", id))
	out := f.must(t, admin, "execute_sql", read)
	if data, _ := out["data"].([]any); len(data) != 1 || data[0].(map[string]any)["b"] != float64(2) {
		t.Fatalf("after the session changed the table: %v", out)
	}
	f.must(t, admin, "pg_tx", fmt.Sprintf(`{"action":"rollback","session_id":%q}`, id))
}
