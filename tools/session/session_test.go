package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/session"
	"github.com/pgtools/pgtools/tools/toolstest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// fakeClock is a settable clock for TTL tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type fixture struct {
	db    *pgtest.DB
	reg   *tools.Registry
	mgr   *session.Manager
	clock *fakeClock
	app   string // application_name prefix of this test's role, to count its backends
	role  string
}

var (
	alice = tools.Principal{Name: "alice", Scopes: []string{"read", "write"}}
	bob   = tools.Principal{Name: "bob", Scopes: []string{"read", "write"}}
)

func newFixture(t *testing.T, cfg session.Config, policy tools.Policy) *fixture {
	t.Helper()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance numeric NOT NULL CHECK (balance >= 0));
		INSERT INTO accounts VALUES (1, 'ann', 100), (2, 'ben', 50), (3, 'cat', 0)`)
	dsn := db.RoleDSN(t, "sess")
	role := db.RoleName("sess")
	db.Exec(t, `GRANT INSERT, UPDATE, DELETE ON accounts TO "`+role+`"`)
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	cfg.Clock = clock.Now
	mgr := session.New(cfg)
	t.Cleanup(func() { mgr.Close(context.Background()) })
	reg := toolstest.RegistryWith(t, dsn, policy, 4, tools.Options{Sessions: mgr})
	return &fixture{db: db, reg: reg, mgr: mgr, clock: clock, role: role}
}

func (f *fixture) call(t *testing.T, p tools.Principal, tool, args string) (map[string]any, *tools.Error) {
	t.Helper()
	res, _, e := f.reg.Call(context.Background(), p, tool, []byte(args))
	if e != nil {
		return nil, e
	}
	raw, err := res.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("invalid JSON %s: %v", raw, err)
	}
	return out, nil
}

func (f *fixture) must(t *testing.T, p tools.Principal, tool, args string) map[string]any {
	t.Helper()
	out, e := f.call(t, p, tool, args)
	if e != nil {
		t.Fatalf("%s %s: %s: %s (%s)", tool, args, e.Type, e.Message, e.Suggestion)
	}
	return out
}

func (f *fixture) fail(t *testing.T, want tools.ErrorType, p tools.Principal, tool, args string) *tools.Error {
	t.Helper()
	out, e := f.call(t, p, tool, args)
	if e == nil {
		t.Fatalf("%s %s succeeded (%v), want %s", tool, args, out, want)
	}
	if e.Type != want {
		t.Fatalf("%s %s: got %s (%s), want %s", tool, args, e.Type, e.Message, want)
	}
	return e
}

func (f *fixture) begin(t *testing.T, p tools.Principal, extra string) string {
	t.Helper()
	out := f.must(t, p, "pg_tx", `{"action":"begin"`+extra+`}`)
	id, _ := out["session_id"].(string)
	if len(id) != 36 || out["expires_in"] == nil || !strings.Contains(out["hint"].(string), id) {
		t.Fatalf("begin answer: %v", out)
	}
	return id
}

func (f *fixture) balance(t *testing.T, id int) int64 {
	return f.db.QueryInt(t, "select balance::int from accounts where id = $1", id)
}

// sessionBackends counts this database's session connections in pg_stat_activity.
func (f *fixture) sessionBackends(t *testing.T) int64 { return f.backends(t, "pgtools-session") }

// backends counts this database's backends with the given application_name.
// backends counts this database's backends named app, or app followed by a caller's name
// ("pgtools-session/<principal>/<tool>").
func (f *fixture) backends(t *testing.T, app string) int64 {
	return f.db.QueryInt(t, "select count(*) from pg_stat_activity where datname = current_database() and (application_name = $1 or application_name like $1 || '/%')", app)
}

// waitBackends waits briefly for session backends to exit (PostgreSQL ends them asynchronously).
func (f *fixture) waitBackends(t *testing.T, want int64) { f.waitApp(t, "pgtools-session", want) }

// killSessionBackend terminates the one session backend, as a crash or an administrator would,
// and fails the test unless there was exactly one.
func (f *fixture) killSessionBackend(t *testing.T) {
	t.Helper()
	if n := f.db.QueryInt(t, "select count(pg_terminate_backend(pid)) from pg_stat_activity where datname = current_database() and application_name like 'pgtools-session/%'"); n != 1 {
		t.Fatalf("terminated %d backends", n)
	}
}

// waitApp waits up to a second for the backends of app to number want.
func (f *fixture) waitApp(t *testing.T, app string, want int64) {
	t.Helper()
	var n int64
	for i := 0; i < 50; i++ {
		if n = f.backends(t, app); n == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d %s backends, want %d", n, app, want)
}

func TestSessionCommitAndRollback(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	id := f.begin(t, alice, "")
	out := f.must(t, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":70},"where":"id = 1","session_id":%q}`, id))
	as, _ := out["active_session"].(map[string]any)
	if out["affectedRows"].(float64) != 1 || as["id"] != id || !strings.Contains(as["hint"].(string), id) {
		t.Fatalf("write in session lacks active_session: %v", out)
	}
	f.must(t, alice, "insert_data", fmt.Sprintf(`{"table":"accounts","row":{"id":4,"owner":"dan","balance":5},"session_id":%q}`, id))
	// Inside the session the change is visible; outside it is not.
	in := f.must(t, alice, "select_query", fmt.Sprintf(`{"table":"accounts","where":"id = 1","session_id":%q}`, id))
	if in["data"].([]any)[0].(map[string]any)["balance"] != "70" {
		t.Fatalf("session does not see its own write: %v", in)
	}
	if f.balance(t, 1) != 100 || f.db.QueryInt(t, "select count(*) from accounts") != 3 {
		t.Fatal("uncommitted session writes are visible to other connections")
	}
	out = f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))
	if out["status"] != "committed" {
		t.Fatalf("commit: %v", out)
	}
	if f.balance(t, 1) != 70 || f.db.QueryInt(t, "select count(*) from accounts") != 4 {
		t.Fatal("commit did not apply")
	}
	f.fail(t, tools.ErrSessionNotFound, alice, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, id))

	id = f.begin(t, alice, "")
	f.must(t, alice, "delete_data", fmt.Sprintf(`{"table":"accounts","where":"id = 4","session_id":%q}`, id))
	f.must(t, alice, "execute_sql", fmt.Sprintf(`{"sql":"update accounts set balance = balance + 1","mode":"write","session_id":%q}`, id))
	f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"rollback","session_id":%q}`, id))
	if f.balance(t, 1) != 70 || f.db.QueryInt(t, "select count(*) from accounts") != 4 {
		t.Fatal("rollback left a trace")
	}
	f.waitBackends(t, 0)
}

func TestSessionStatementFailureKeepsSessionUsable(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	id := f.begin(t, alice, "")
	f.must(t, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":1},"where":"id = 2","session_id":%q}`, id))
	e := f.fail(t, tools.ErrConstraint, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":-1},"where":"id = 3","session_id":%q}`, id))
	if !strings.Contains(e.Suggestion, "still open and usable") {
		t.Fatalf("failure does not say the session is usable: %+v", e)
	}
	f.fail(t, tools.ErrSyntax, alice, "execute_sql", fmt.Sprintf(`{"sql":"selec 1","session_id":%q}`, id))
	// A read in a read-write session is still read-only.
	f.fail(t, tools.ErrReadOnlyViolation, alice, "execute_sql", fmt.Sprintf(`{"sql":"delete from accounts","session_id":%q}`, id))
	f.fail(t, tools.ErrNotAllowed, alice, "execute_sql", fmt.Sprintf(`{"sql":"commit","mode":"write","session_id":%q}`, id))
	f.fail(t, tools.ErrNotAllowed, alice, "execute_sql", fmt.Sprintf(`{"sql":"ROLLBACK","session_id":%q}`, id))
	f.must(t, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":2},"where":"id = 3","session_id":%q}`, id))
	f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))
	if f.balance(t, 2) != 1 || f.balance(t, 3) != 2 || f.db.QueryInt(t, "select count(*) from accounts") != 3 {
		t.Fatal("the session's good statements did not all commit")
	}
}

func TestSavepoints(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	id := f.begin(t, alice, "")
	upd := func(v int) {
		f.must(t, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":%d},"where":"id = 1","session_id":%q}`, v, id))
	}
	tx := func(action, name string) (map[string]any, *tools.Error) {
		return f.call(t, alice, "pg_tx", fmt.Sprintf(`{"action":%q,"name":%q,"session_id":%q}`, action, name, id))
	}
	upd(10)
	tx("savepoint", "a")
	upd(20)
	tx("savepoint", "b")
	upd(30)
	if _, e := tx("rollback_to", "a"); e != nil {
		t.Fatal(e)
	}
	// b went with the rollback to a; a is still there.
	if _, e := tx("release", "b"); e == nil || e.Type != tools.ErrInvalidArguments {
		t.Fatalf("release of a rolled-back savepoint: %+v", e)
	}
	if _, e := tx("rollback_to", "nope"); e == nil || e.Type != tools.ErrInvalidArguments {
		t.Fatalf("unknown savepoint: %+v", e)
	}
	if _, e := f.call(t, alice, "pg_tx", fmt.Sprintf(`{"action":"savepoint","session_id":%q}`, id)); e == nil || e.Type != tools.ErrInvalidArguments || !strings.Contains(e.Message, "name is required") {
		t.Fatalf("savepoint without a name: %+v", e)
	}
	if _, e := f.call(t, alice, "pg_tx", `{"action":"commit"}`); e == nil || e.Type != tools.ErrInvalidArguments || !strings.Contains(e.Message, "session_id is required") {
		t.Fatalf("commit without a session: %+v", e)
	}
	if _, e := tx("savepoint", "pgtools_stmt"); e == nil || e.Type != tools.ErrInvalidArguments {
		t.Fatalf("reserved savepoint name: %+v", e)
	}
	if _, e := tx("release", "a"); e != nil {
		t.Fatal(e)
	}
	f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))
	if got := f.balance(t, 1); got != 10 {
		t.Fatalf("balance %d after savepoints, want 10", got)
	}
}

func TestSessionsAreIsolatedAndOwned(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	a := f.begin(t, alice, "")
	b := f.begin(t, bob, "")
	f.must(t, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":1},"where":"id = 1","session_id":%q}`, a))
	out := f.must(t, bob, "select_query", fmt.Sprintf(`{"table":"accounts","where":"id = 1","session_id":%q}`, b))
	if out["data"].([]any)[0].(map[string]any)["balance"] != "100" {
		t.Fatal("one session sees another's uncommitted write")
	}
	// Bob cannot use, commit or even learn of Alice's session.
	e := f.fail(t, tools.ErrSessionNotFound, bob, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, a))
	if strings.Contains(e.Suggestion, a) {
		t.Fatal("another principal's error reveals the session")
	}
	f.fail(t, tools.ErrSessionNotFound, bob, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, a))
	list := f.must(t, alice, "pg_tx", `{"action":"list"}`)
	sessions := list["sessions"].([]any)
	if len(sessions) != 1 || sessions[0].(map[string]any)["id"] != a || sessions[0].(map[string]any)["age"] == nil || sessions[0].(map[string]any)["expires_in"] == nil {
		t.Fatalf("alice's list: %v", list)
	}
	// A write refused for missing intent lists the caller's open sessions.
	e = f.fail(t, tools.ErrWriteIntentRequired, alice, "delete_data", `{"table":"accounts","where":"id = 3"}`)
	if !strings.Contains(e.Suggestion, a) || strings.Contains(e.Suggestion, b) {
		t.Fatalf("intent refusal does not list (only) alice's sessions: %s", e.Suggestion)
	}
}

func TestSessionTTL(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{TTL: 10 * time.Minute}, tools.Policy{})
	id := f.begin(t, alice, "")
	f.must(t, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":0},"where":"id = 1","session_id":%q}`, id))
	// Activity slides the TTL: 3 minutes, a call (7 minutes were left: no echo on a read).
	f.clock.Add(3 * time.Minute)
	f.mgr.Sweep()
	out := f.must(t, alice, "select_query", fmt.Sprintf(`{"table":"accounts","where":"id = 1","session_id":%q}`, id))
	if out["active_session"] != nil {
		t.Fatalf("a read with 7 minutes left should not echo the session: %v", out)
	}
	// 8 more minutes: past the original expiry, alive thanks to the call; 2 minutes were left,
	// so even a read echoes the session.
	f.clock.Add(8 * time.Minute)
	f.mgr.Sweep()
	out = f.must(t, alice, "select_query", fmt.Sprintf(`{"table":"accounts","where":"id = 1","session_id":%q}`, id))
	if out["active_session"] == nil {
		t.Fatalf("no active_session with under five minutes left: %v", out)
	}
	f.clock.Add(11 * time.Minute)
	f.mgr.Sweep()
	f.fail(t, tools.ErrSessionExpired, alice, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, id))
	f.fail(t, tools.ErrSessionNotFound, bob, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, id))
	if f.balance(t, 1) != 100 {
		t.Fatal("an expired session's write survived")
	}
	f.waitBackends(t, 0)
}

func TestSessionLimitAndNoLeaks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{MaxSessions: 10}, tools.Policy{})
	baseline := f.db.QueryInt(t, "select count(*) from pg_stat_activity where datname = current_database()")
	for i := 0; i < 100; i++ {
		id := f.begin(t, alice, "")
		f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))
	}
	f.waitBackends(t, 0)
	// The spare connections opened ahead of begins are no leak, but they are bounded.
	if now := f.db.QueryInt(t, "select count(*) from pg_stat_activity where datname = current_database() and application_name <> 'pgtools-spare'"); now > baseline {
		t.Fatalf("backends grew from %d to %d", baseline, now)
	}
	// A session's backend shows its connection's application_name, pgtools-spare, from its
	// COMMIT until it has exited (asynchronously, after the close): count again for a while
	// before calling a surplus a leak.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		spares := f.backends(t, "pgtools-spare")
		if spares <= session.DefaultSpares {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spare connections, more than the %d a database keeps", spares, session.DefaultSpares)
		}
	}
	var ids []string
	for i := 0; i < 10; i++ {
		ids = append(ids, f.begin(t, alice, ""))
	}
	e := f.fail(t, tools.ErrSessionLimitReached, alice, "pg_tx", `{"action":"begin"}`)
	if !strings.Contains(e.Suggestion, ids[0]) || !strings.Contains(e.Suggestion, "idle") {
		t.Fatalf("limit error does not list the open sessions: %s", e.Suggestion)
	}
	// Stateless calls still work while every slot is taken.
	for i := 0; i < 20; i++ {
		f.must(t, bob, "select_query", `{"table":"accounts"}`)
		f.must(t, bob, "insert_data", fmt.Sprintf(`{"table":"accounts","row":{"id":%d,"owner":"x","balance":1},"autocommit":true}`, 100+i))
	}
	if n := f.sessionBackends(t); n != 10 {
		t.Fatalf("%d session backends, want 10", n)
	}
	f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"rollback","session_id":%q}`, ids[0]))
	f.begin(t, alice, "")
}

func TestSessionLostWhenBackendDies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	id := f.begin(t, alice, "")
	f.must(t, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":5},"where":"id = 1","session_id":%q}`, id))
	f.killSessionBackend(t)
	e := f.fail(t, tools.ErrConnection, alice, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, id))
	if !strings.Contains(e.Message, "rolled back by the database") {
		t.Fatalf("lost session error: %+v", e)
	}
	f.fail(t, tools.ErrSessionNotFound, alice, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, id))
	if f.balance(t, 1) != 100 {
		t.Fatal("a lost session's write survived")
	}
}

func TestReadOnlySessionAndClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	ro := f.begin(t, alice, `,"read_only":true,"isolation_level":"repeatable read"`)
	f.fail(t, tools.ErrReadOnlyViolation, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":5},"where":"id = 1","session_id":%q}`, ro))
	f.must(t, alice, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, ro))
	rw := f.begin(t, bob, "")
	f.must(t, bob, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":5},"where":"id = 1","session_id":%q}`, rw))
	// Shutdown rolls every session back; nothing is half-committed.
	f.mgr.Close(context.Background())
	if f.balance(t, 1) != 100 {
		t.Fatal("shutdown committed a session")
	}
	f.waitBackends(t, 0)
	f.fail(t, tools.ErrConnection, alice, "pg_tx", `{"action":"begin"}`)
}

func TestPgTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{MaxSessions: 1}, tools.Policy{})
	// It never uses a session slot: works while the only slot is taken.
	f.begin(t, bob, "")
	out := f.must(t, alice, "pg_transaction", `{"operations":[
		{"sql":"update accounts set balance = balance - $1 where id = $2","params":[30,1]},
		{"sql":"update accounts set balance = balance + $1 where id = $2","params":[30,2]},
		{"sql":"select id, balance from accounts where id in (1,2) order by id"}]}`)
	res := out["results"].([]any)
	if out["status"] != "committed" || len(res) != 3 || res[0].(map[string]any)["command"] != "UPDATE" ||
		res[2].(map[string]any)["rowCount"].(float64) != 2 || len(res[2].(map[string]any)["rows"].([]any)) != 2 {
		t.Fatalf("pg_transaction: %v", out)
	}
	if f.balance(t, 1) != 70 || f.balance(t, 2) != 80 {
		t.Fatal("pg_transaction did not commit")
	}
	// A failure at operation 2 rolls back 0 and 1 and names 2.
	e := f.fail(t, tools.ErrConstraint, alice, "pg_transaction", `{"operations":[
		{"sql":"update accounts set balance = balance + 1 where id = 1"},
		{"sql":"insert into accounts values (9, 'x', 1)"},
		{"sql":"update accounts set balance = -1 where id = 2"}]}`)
	if e.FailedOperation == nil || *e.FailedOperation != 2 || !strings.Contains(e.Message, "Operation 2") {
		t.Fatalf("failure does not name operation 2: %+v", e)
	}
	if f.balance(t, 1) != 70 || f.db.QueryInt(t, "select count(*) from accounts where id = 9") != 0 {
		t.Fatal("operations before the failure were not rolled back")
	}
	e = f.fail(t, tools.ErrNotAllowed, alice, "pg_transaction", `{"operations":[{"sql":"update accounts set balance = 0"},{"sql":"COMMIT"}]}`)
	if e.FailedOperation == nil || *e.FailedOperation != 1 || f.balance(t, 1) != 70 {
		t.Fatalf("transaction control: %+v", e)
	}
	f.db.Exec(t, `GRANT CREATE ON SCHEMA public TO "`+f.role+`"`)
	f.fail(t, tools.ErrNotAllowed, alice, "pg_transaction", `{"operations":[{"sql":"create table t9 (i int)"}]}`)
	if f.db.QueryInt(t, "select count(*) from pg_class where relname = 't9'") != 0 {
		t.Fatal("refused DDL in pg_transaction stuck")
	}
	f.fail(t, tools.ErrInvalidArguments, alice, "pg_transaction", `{"operations":[]}`)
	reader := tools.Principal{Name: "r", Scopes: []string{"read"}}
	f.fail(t, tools.ErrNotAllowed, reader, "pg_transaction", `{"operations":[{"sql":"delete from accounts"}]}`)
	// Each pg_transaction's connection is closed afterwards (its backend exits asynchronously).
	f.waitApp(t, "pgtools/alice/pg_transaction", 0)
}
