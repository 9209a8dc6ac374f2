package tools

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/session"
)

// leftStateSQL leaves every kind of session-level state an agent's write can leave: settings
// changed with set_config(…, false), a session-level advisory lock and a sequence's currval.
// Temp tables and held cursors take statements of their own (poolerPaths).
const leftStateSQL = "SELECT set_config('search_path', 'inventory, public', false) AS sp, set_config('app.x', '1', false) AS x, " +
	"pg_advisory_lock(42)::text AS lock, nextval('counter') AS n"

// stateCheckSQL is what the next caller sees of the connection it is handed: the settings, the
// advisory locks held in this database, temp tables, held cursors, and which customers table an
// unqualified name reaches (inventory.customers has the one row with id 1001).
const stateCheckSQL = `SELECT current_setting('search_path') AS search_path,
  coalesce(current_setting('app.x', true), '') AS app_x,
  (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS advisory_locks,
  (SELECT count(*) FROM pg_class WHERE relpersistence = 't') AS temp_tables,
  (SELECT count(*) FROM pg_cursors WHERE is_holdable) AS held_cursors,
  (SELECT count(*) FROM customers WHERE id = 1001) AS inventory_rows,
  pg_backend_pid() AS pid`

// cleanState is stateCheckSQL's row on a connection nobody left anything on.
var cleanState = map[string]any{"search_path": `"$user", public`, "app_x": "", "advisory_locks": float64(0),
	"temp_tables": float64(0), "held_cursors": float64(0), "inventory_rows": float64(0)}

// poolerFixture is a database with a second customers table (in schema inventory, which a
// search_path left behind would put first), a writer and a reader registry over the same
// connection target, and the writer's session manager.
type poolerFixture struct {
	*bundle
	writer, reader *Registry
	mgr            *session.Manager
	clock          *fakeNow
}

// fakeNow is a settable clock for session expiry.
type fakeNow struct{ now time.Time }

func (c *fakeNow) Now() time.Time { return c.now }

var (
	poolWriter    = Principal{Name: "writer", Scopes: []string{"read", "write", "ddl"}}
	poolWriterDML = Principal{Name: "writer-dml", Scopes: []string{"read", "write"}}
	poolReader    = Principal{Name: "reader", Scopes: []string{"read"}}
)

// newPoolerFixture builds the fixture over dsn(b), the DSN the registries connect to (directly,
// or through a pooler the function starts).
func newPoolerFixture(t *testing.T, dsn func(b *bundle) string) *poolerFixture {
	t.Helper()
	b := newBundle(t, Policy{})
	agent := quoteIdent(b.db.RoleName("agent"))
	b.db.Exec(t, `CREATE SCHEMA inventory; CREATE TABLE inventory.customers (id bigint PRIMARY KEY, name text NOT NULL, email text, country text);
		INSERT INTO inventory.customers VALUES (1001, 'inventory row', NULL, 'XX');
		GRANT USAGE ON SCHEMA inventory TO `+agent+`; GRANT SELECT ON inventory.customers TO `+agent)
	target := dsn(b)
	writer, _ := registryOver(t, target, Policy{PreparedStatements: new(bool), AllowDDL: true}, 1)
	reader, _ := registryOver(t, target, Policy{PreparedStatements: new(bool)}, 1)
	clock := &fakeNow{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	mgr := session.New(session.Config{TTL: time.Minute, Clock: clock.Now})
	t.Cleanup(func() { mgr.Close(context.Background()) })
	writer.setSessions(mgr)
	return &poolerFixture{bundle: b, writer: writer, reader: reader, mgr: mgr, clock: clock}
}

func (f *poolerFixture) write(t *testing.T, p Principal, tool string, args map[string]any) (map[string]any, *Error) {
	t.Helper()
	res, _, e := f.writer.Call(context.Background(), p, tool, []byte(argsJSON(t, args)))
	if e != nil {
		return nil, e
	}
	return decodeResult(t, res), nil
}

func (f *poolerFixture) read(t *testing.T, sql string) (map[string]any, *Error) {
	t.Helper()
	res, _, e := f.reader.Call(context.Background(), poolReader, "execute_sql", []byte(argsJSON(t, map[string]any{"sql": sql})))
	if e != nil {
		return nil, e
	}
	return decodeResult(t, res), nil
}

// poolerPath is one way an agent's free SQL runs and ends. hold starts it and returns once its
// transaction holds the server connection (a single call is started in the background and still
// runs); end finishes it: the commit, rollback or expiry the next caller is queued behind.
type poolerPath struct {
	name string
	hold func(t *testing.T, f *poolerFixture) (end func())
}

// inBackground runs one writer call that holds its transaction open for a while (its SQL
// sleeps), and returns once its statement sleeps, holding the server connection. want is the error type
// the call must end with ("" for success, anyError for any).
func inBackground(t *testing.T, f *poolerFixture, p Principal, tool string, args map[string]any, want ErrorType) func() {
	done := make(chan *Error, 1)
	raw := []byte(argsJSON(t, args))
	go func() {
		_, _, e := f.writer.Call(context.Background(), p, tool, raw)
		done <- e
	}()
	// The call holds the server connection once its statement sleeps.
	deadline := time.Now().Add(10 * time.Second)
	for f.db.QueryInt(t, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND wait_event = 'PgSleep'") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start its statement within 10s", tool)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return func() {
		e := <-done
		switch {
		case want == "" && e != nil:
			t.Errorf("%s: %s: %s", tool, e.Type, e.Message)
		case want != "" && (e == nil || (e.Type != want && want != anyError)):
			t.Errorf("%s: got %v, want %s", tool, e, want)
		}
	}
}

// anyError accepts any failure in inBackground.
const anyError ErrorType = "any"

// sleepSQL keeps a transaction open long enough for the next caller to queue behind it.
const sleepSQL = "SELECT 1 FROM pg_sleep(1)"

// failSQL fails at run time (not at plan time, as a constant 1/0 would).
const failSQL = "1 / (pg_backend_pid() - pg_backend_pid())"

// inSession begins a session and runs statements in it.
func inSession(t *testing.T, f *poolerFixture, stmts ...string) string {
	t.Helper()
	out, e := f.write(t, poolWriter, "pg_tx", map[string]any{"action": "begin"})
	if e != nil {
		t.Fatalf("pg_tx begin: %s: %s", e.Type, e.Message)
	}
	id := out["session_id"].(string)
	for _, sql := range stmts {
		if _, e := f.write(t, poolWriter, "execute_sql", map[string]any{"sql": sql, "mode": "write", "session_id": id}); e != nil {
			t.Fatalf("execute_sql %q in the session: %s: %s", sql, e.Type, e.Message)
		}
	}
	return id
}

// sessionStmts leave every kind of state from inside a session. The advisory lock of
// leftStateSQL is released after each statement already; the other kinds stay until the end.
var sessionStmts = []string{leftStateSQL, "CREATE TEMP TABLE tt (i int)", "DECLARE c CURSOR WITH HOLD FOR SELECT 1"}

func poolerPaths() []poolerPath {
	tempTableSQL := "CREATE TEMP TABLE tt AS SELECT set_config('search_path', 'inventory, public', false) AS sp, set_config('app.x', '1', false) AS x, " +
		"pg_advisory_lock(42)::text AS lock, nextval('counter') AS n, (" + sleepSQL + ") AS s"
	batch := []any{map[string]any{"sql": leftStateSQL}, map[string]any{"sql": "CREATE TEMP TABLE tt (i int)"},
		map[string]any{"sql": "DECLARE c CURSOR WITH HOLD FOR SELECT 1"}, map[string]any{"sql": sleepSQL}}
	return []poolerPath{
		{name: "autocommit write", hold: func(t *testing.T, f *poolerFixture) func() {
			return inBackground(t, f, poolWriter, "execute_sql", map[string]any{"sql": tempTableSQL, "mode": "write", "autocommit": true}, "")
		}},
		{name: "autocommit write that fails", hold: func(t *testing.T, f *poolerFixture) func() {
			sql := leftStateSQL + ", (" + sleepSQL + ") AS s, " + failSQL + " AS boom"
			return inBackground(t, f, poolWriter, "execute_sql", map[string]any{"sql": sql, "mode": "write", "autocommit": true}, anyError)
		}},
		{name: "autocommit write refused by a check", hold: func(t *testing.T, f *poolerFixture) func() {
			// Without the ddl scope the temp table is refused after it ran, and rolled back.
			return inBackground(t, f, poolWriterDML, "execute_sql", map[string]any{"sql": tempTableSQL, "mode": "write", "autocommit": true}, ErrNotAllowed)
		}},
		{name: "execute_sql read", hold: func(t *testing.T, f *poolerFixture) func() {
			// Reads were already safe (they roll back and release advisory locks in the same
			// round trip); kept here so every path that runs agent SQL is walked.
			sql := "SELECT set_config('search_path', 'inventory, public', false) AS sp, set_config('app.x', '1', false) AS x, " +
				"pg_advisory_lock(42)::text AS lock, (" + sleepSQL + ") AS s"
			return inBackground(t, f, poolWriter, "execute_sql", map[string]any{"sql": sql}, "")
		}},
		{name: "pg_transaction", hold: func(t *testing.T, f *poolerFixture) func() {
			return inBackground(t, f, poolWriter, "pg_transaction", map[string]any{"operations": batch}, "")
		}},
		{name: "pg_transaction that fails", hold: func(t *testing.T, f *poolerFixture) func() {
			failing := append(append([]any{}, batch...), map[string]any{"sql": "SELECT " + failSQL})
			return inBackground(t, f, poolWriter, "pg_transaction", map[string]any{"operations": failing}, anyError)
		}},
		{name: "session commit", hold: func(t *testing.T, f *poolerFixture) func() {
			id := inSession(t, f, sessionStmts...)
			return func() {
				if _, e := f.write(t, poolWriter, "pg_tx", map[string]any{"action": "commit", "session_id": id}); e != nil {
					t.Errorf("pg_tx commit: %s: %s", e.Type, e.Message)
				}
			}
		}},
		{name: "session rollback", hold: func(t *testing.T, f *poolerFixture) func() {
			id := inSession(t, f, sessionStmts...)
			return func() {
				if _, e := f.write(t, poolWriter, "pg_tx", map[string]any{"action": "rollback", "session_id": id}); e != nil {
					t.Errorf("pg_tx rollback: %s: %s", e.Type, e.Message)
				}
			}
		}},
		{name: "session expiry", hold: func(t *testing.T, f *poolerFixture) func() {
			inSession(t, f, sessionStmts...)
			return func() {
				f.clock.now = f.clock.now.Add(2 * time.Minute)
				f.mgr.Sweep()
				if f.mgr.Open() != 0 {
					t.Error("the session did not expire")
				}
			}
		}},
	}
}

// checkNextCaller runs path with the reader's check queued behind its transaction, then asserts
// that the reader saw a clean connection (on the same backend, so the check means something),
// and that neither currval nor select_query of customers shows what the writer left. queued
// requires the check to have waited for the writer (it shares the one server connection).
func checkNextCaller(t *testing.T, f *poolerFixture, path poolerPath, queued bool) {
	first, e := f.read(t, "SELECT pg_backend_pid() AS pid")
	if e != nil {
		t.Fatalf("reader: %s: %s", e.Type, e.Message)
	}
	pid := rows(t, first)[0]["pid"]
	end := path.hold(t, f)
	type answer struct {
		res  Result
		e    *Error
		took time.Duration
	}
	got := make(chan answer, 1)
	checkArgs := []byte(argsJSON(t, map[string]any{"sql": stateCheckSQL}))
	check := func() { // no t.Fatal in here: it may run on its own goroutine
		start := time.Now()
		res, _, e := f.reader.Call(context.Background(), poolReader, "execute_sql", checkArgs)
		got <- answer{res, e, time.Since(start)}
	}
	if queued {
		go check()
		time.Sleep(300 * time.Millisecond) // the reader queues for the one server connection
		end()
	} else {
		// Without a pooler the next call of the pool comes after the writer's is done; run
		// alongside, the check would see a batch's or a session's own connection mid-transaction.
		end()
		check()
	}
	a := <-got
	if a.e != nil {
		t.Fatalf("the next caller's check: %s: %s", a.e.Type, a.e.Message)
	}
	if queued && a.took < 200*time.Millisecond {
		t.Fatalf("the next caller's check took %s: it did not wait for the writer's transaction, so it proves nothing", a.took)
	}
	row := rows(t, decodeResult(t, a.res))[0]
	if row["pid"] != pid {
		t.Fatalf("the next caller ran on backend %v, not %v: the check proves nothing", row["pid"], pid)
	}
	delete(row, "pid")
	for k, want := range cleanState {
		if fmt.Sprint(row[k]) != fmt.Sprint(want) {
			t.Errorf("the next caller sees %s = %v, want %v", k, row[k], want)
		}
	}
	if _, e := f.read(t, "SELECT currval('counter') AS v"); e == nil || e.SQLState != "55000" {
		t.Errorf("currval('counter') on the next call: %v, want SQLSTATE 55000 (not yet defined in this session)", e)
	}
	res, _, qe := f.reader.Call(context.Background(), poolReader, "select_query", []byte(`{"table":"customers","columns":"id","where":"id = 1001"}`))
	if qe != nil {
		t.Fatalf("select_query: %s: %s", qe.Type, qe.Message)
	}
	if n := res.(*RowsResult).RowCount; n != 0 {
		t.Errorf("select_query customers returned inventory.customers' row (%d rows with id 1001)", n)
	}
}

// TestNothingCrossesCallersThroughAPooler: behind PgBouncer in transaction mode with one server
// connection, the next client is handed the server connection at COMMIT (or ROLLBACK). Whatever
// session-level state the agent's SQL left — settings, advisory locks, temp tables, held cursors,
// sequence state — must be gone by then, on every path that runs free SQL.
func TestNothingCrossesCallersThroughAPooler(t *testing.T) {
	t.Parallel()
	for _, path := range poolerPaths() {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			f := newPoolerFixture(t, func(b *bundle) string { return b.db.PgBouncer(t, b.db.RoleDSN(t, "agent"), 1) })
			checkNextCaller(t, f, path, true)
		})
	}
}

// TestNothingCrossesCallersOnAPooledConnection is the same without a pooler: the reader calls
// through the writer's own pool of one connection, so it is handed the connection the writer's
// autocommit writes and pg_transaction batches ran on (sessions have connections of their own).
func TestNothingCrossesCallersOnAPooledConnection(t *testing.T) {
	t.Parallel()
	for _, path := range poolerPaths() {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			f := newPoolerFixture(t, func(b *bundle) string { return b.db.RoleDSN(t, "agent") })
			f.reader = f.writer // one pool: the next call is handed the writer's connection
			checkNextCaller(t, f, path, false)
		})
	}
}
