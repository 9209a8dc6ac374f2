package tools

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/session"
)

// countingConn counts the client's writes on a connection: pgtools flushes once per round trip
// (a message group ending in Sync, or one simple-protocol Query), so the writes of one call are
// its round trips.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// appBundle is a database with a pool of one connection (a leak from one caller to the next
// would show), sessions without spares, a table whose writes sleep (trigger), and writes counted.
type appBundle struct {
	*bundle
	writes *atomic.Int64
}

func newAppBundle(t *testing.T) *appBundle {
	t.Helper()
	b, _ := newWriteBundle(t, Policy{})
	role := quoteIdent(b.db.RoleName("agent"))
	b.db.Exec(t, `CREATE TABLE slow (id int PRIMARY KEY, note text);
		CREATE FUNCTION slow_nap() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_sleep(coalesce(nullif(current_setting('pgtools_test.nap', true), ''), '0.3')::float8); RETURN coalesce(NEW, OLD); END $$;
		CREATE TRIGGER slow_nap BEFORE INSERT OR UPDATE OR DELETE ON slow FOR EACH ROW EXECUTE FUNCTION slow_nap();
		INSERT INTO slow SELECT i, 'n' || i FROM generate_series(1, 3) i;
		CREATE VIEW napping AS SELECT s.id FROM slow s, pg_sleep(0.3);
		-- IMMUTABLE on purpose: the planner folds it, so EXPLAIN (which executes nothing) sleeps.
		CREATE FUNCTION plan_nap(float8) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN PERFORM pg_sleep($1); RETURN 1; END $$;
		GRANT SELECT, INSERT, UPDATE, DELETE ON slow TO `+role+`; GRANT SELECT ON napping TO `+role)
	writes := &atomic.Int64{}
	cfg, err := PoolConfig(b.db.RoleDSN(t, "agent"), Policy{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{KeepAlive: 5 * time.Minute}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, n: writes}, nil
	}
	// No liveness ping on acquire: it would be a round trip the call does not make.
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	tdb := NewDatabase("default", pgtest.OpenPool(t, cfg), Policy{})
	sessions := session.New(session.Config{TTL: time.Minute, Spares: -1})
	t.Cleanup(func() { sessions.Close(context.Background()) })
	approvals := approval.NewStore(approval.Options{TTL: time.Minute})
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{tdb}, Sessions: sessions, Approvals: approvals})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.addCustomTools(context.Background(), []CustomTool{
		{Name: "nap", Description: "Sleep, then answer one row.", SQL: "SELECT pg_sleep($1::float8) AS slept",
			Parameters: []CustomParam{{Name: "seconds", Type: "number", Required: true}}},
		{Name: "touch_slow", Description: "Rewrite one note of the slow table.", Mode: "write",
			SQL: "UPDATE slow SET note = note WHERE id = $1", Parameters: []CustomParam{{Name: "id", Type: "integer", Required: true}}},
	}); err != nil {
		t.Fatal(err)
	}
	b.reg, b.tdb = reg, tdb
	return &appBundle{bundle: b, writes: writes}
}

// roundTrips is what each call path costs in round trips once warm (statements cached, catalog
// loaded). begin is run before the counted call when the path needs a session; the session's
// dedicated connection is counted too.
var roundTripCases = []struct {
	name, tool, args string
	session          bool
	want             int64
}{
	{"select_query", "select_query", `{"table":"orders","where":"id = $1","params":[1]}`, false, 1},
	{"execute_sql read", "execute_sql", `{"sql":"select 1"}`, false, 1},
	{"explain_query", "explain_query", `{"sql":"select * from orders where id = 1"}`, false, 1},
	{"describe_schema table", "describe_schema", `{"table":"orders"}`, false, 3},
	{"custom read", "nap", `{"seconds":0}`, false, 1},
	{"insert_data", "insert_data", `{"table":"items","row":{"sku":"rt-%d"},"autocommit":true}`, false, 3},
	{"execute_sql write", "execute_sql", `{"sql":"update orders set total = total where id = 1","mode":"write","autocommit":true}`, false, 4},
	{"custom write", "touch_slow", `{"id":1,"autocommit":true}`, false, 4},
	{"pg_transaction", "pg_transaction", `{"operations":[{"sql":"update orders set total = total where id = 1"},{"sql":"select 1"}]}`, false, 4},
	{"select_query in session", "select_query", `{"table":"orders","where":"id = $1","params":[1],"session_id":"%s"}`, true, 1},
	{"update_data in session", "update_data", `{"table":"orders","set":{"status":"paid"},"where":"id = $1","params":[2],"session_id":"%s"}`, true, 3},
}

// TestRoundTripsPerCall pins what each call path costs in round trips: attributing a call to
// its principal and tool rides in the round trips the call already makes.
func TestRoundTripsPerCall(t *testing.T) {
	t.Parallel()
	ab := newAppBundle(t)
	p := Principal{Name: "counter", Scopes: []string{"read", "write"}}
	n := 0
	for _, c := range roundTripCases {
		var sid string
		if c.session {
			out := ab.mustCallAs(t, p, "pg_tx", `{"action":"begin"}`)
			sid = out["session_id"].(string)
		}
		var got []int64
		for range 3 {
			n++
			args := c.args
			switch {
			case c.session:
				args = fmt.Sprintf(args, sid)
			case strings.Contains(args, "%d"):
				args = fmt.Sprintf(args, n)
			}
			before := ab.writes.Load()
			ab.mustCallAs(t, p, c.tool, args)
			got = append(got, ab.writes.Load()-before)
		}
		if c.session {
			ab.mustCallAs(t, p, "pg_tx", `{"action":"rollback","session_id":"`+sid+`"}`)
		}
		// The first call warms the statement cache and the catalog; the later ones are the cost.
		if got[1] != c.want || got[2] != c.want {
			t.Errorf("%s: %v round trips (first call warming), want %d", c.name, got, c.want)
		}
	}
}

// seenDuring runs the call as p and returns the application_names of the agent role's backends
// that a second connection (the superuser's) saw while it ran, and the call's error.
func (ab *appBundle) seenDuring(t *testing.T, p Principal, tool, args string) (map[string]bool, *Error) {
	t.Helper()
	ctx := context.Background()
	seen := map[string]bool{}
	done := make(chan *Error, 1)
	go func() {
		_, _, e := ab.reg.Call(ctx, p, tool, []byte(args))
		done <- e
	}()
	watch := ab.db.Pool(t)
	for {
		rows, err := watch.Query(ctx, "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() AND usename = $1", ab.db.RoleName("agent"))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			seen[name] = true
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		select {
		case e := <-done:
			return seen, e
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestApplicationNameNamesTheCaller: while a call runs, pg_stat_activity shows its backend as
// pgtools/<principal>/<tool>, on every path that runs SQL for a caller; afterwards the pooled
// connection shows its own name again.
func TestApplicationNameNamesTheCaller(t *testing.T) {
	t.Parallel()
	ab := newAppBundle(t)
	// An act-as subject's principal, as the runner names it: "<token>:<subject>".
	p := Principal{Name: "crm:alice@example.com", Quota: "crm", Scopes: []string{"read", "write"}}
	approver := p
	approver.Name, approver.RequireApproval = "crm:bob", []approval.Rule{{When: approval.WhenTable, Table: "slow"}}
	cases := []struct {
		name, tool, args string
		who              Principal
		fails            ErrorType // the call's expected refusal ("" for success)
	}{
		{"select_query", "select_query", `{"table":"napping"}`, p, ""},
		{"execute_sql read", "execute_sql", `{"sql":"select pg_sleep(0.3)"}`, p, ""},
		{"explain_query", "explain_query", `{"sql":"select * from orders where id = plan_nap(0.3)"}`, p, ""},
		{"custom read", "nap", `{"seconds":0.3}`, p, ""},
		{"insert_data", "insert_data", `{"table":"slow","row":{"id":10,"note":"x"},"autocommit":true}`, p, ""},
		{"update_data", "update_data", `{"table":"slow","set":{"note":"y"},"where":"id = 10","autocommit":true}`, p, ""},
		{"delete_data", "delete_data", `{"table":"slow","where":"id = 10","autocommit":true}`, p, ""},
		{"execute_sql write", "execute_sql", `{"sql":"update slow set note = note where id = 1","mode":"write","autocommit":true}`, p, ""},
		{"custom write", "touch_slow", `{"id":1,"autocommit":true}`, p, ""},
		{"pg_transaction", "pg_transaction", `{"operations":[{"sql":"select 1"},{"sql":"update slow set note = note where id = 2"}]}`, p, ""},
		// The measuring transaction of a write that needs approval: run, measured, rolled back.
		{"approval measuring", "update_data", `{"table":"slow","set":{"note":"z"},"where":"id = 3","autocommit":true}`, approver, ErrApprovalRequired},
	}
	for _, c := range cases {
		seen, e := ab.seenDuring(t, c.who, c.tool, c.args)
		switch {
		case c.fails == "" && e != nil:
			t.Errorf("%s: %s (%s)", c.name, e.Message, e.Type)
		case c.fails != "" && (e == nil || e.Type != c.fails):
			t.Errorf("%s: got %v, want %s", c.name, e, c.fails)
		}
		if want := "pgtools/" + c.who.Name + "/" + c.tool; !seen[want] {
			t.Errorf("%s: pg_stat_activity showed %v during the call, not %q", c.name, seen, want)
		}
	}

	// A session: its connection says so; begun as pg_tx, each statement named for its own tool.
	out := ab.mustCallAs(t, p, "pg_tx", `{"action":"begin"}`)
	sid := out["session_id"].(string)
	if got := ab.db.QueryInt(t, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgtools-session/crm:alice@example.com/pg_tx' AND state = 'idle in transaction'"); got != 1 {
		t.Errorf("after begin, %d backends show the session as pg_tx's", got)
	}
	for _, c := range []struct{ tool, args string }{
		{"update_data", `{"table":"slow","set":{"note":"s"},"where":"id = 1","session_id":"` + sid + `"}`},
		{"select_query", `{"table":"napping","session_id":"` + sid + `"}`},
		{"execute_sql", `{"sql":"select pg_sleep(0.3)","session_id":"` + sid + `"}`},
	} {
		seen, e := ab.seenDuring(t, p, c.tool, c.args)
		if e != nil {
			t.Fatalf("%s in the session: %s", c.tool, e.Message)
		}
		if want := "pgtools-session/" + p.Name + "/" + c.tool; !seen[want] {
			t.Errorf("%s in the session: pg_stat_activity showed %v, not %q", c.tool, seen, want)
		}
	}
	ab.mustCallAs(t, p, "pg_tx", `{"action":"rollback","session_id":"`+sid+`"}`)

	// Between calls the pooled connection (the only one) is back to its own name.
	var name string
	var pid int
	if err := ab.tdb.Pool.QueryRow(context.Background(), "SELECT current_setting('application_name'), pg_backend_pid()").Scan(&name, &pid); err != nil {
		t.Fatal(err)
	}
	if name != "pgtools" {
		t.Errorf("between calls the pooled connection is named %q, want pgtools", name)
	}
	if n := ab.db.QueryInt(t, fmt.Sprintf("SELECT count(*) FROM pg_stat_activity WHERE usename = '%s' AND application_name <> 'pgtools'", ab.db.RoleName("agent"))); n != 0 {
		t.Errorf("%d backends of the agent role still carry a caller's name after every call ended", n)
	}
}

// TestApplicationNameDoesNotCrossCallers: two callers on a pool of one connection each see their
// own name, on the same backend, and nothing of the first reaches the second.
func TestApplicationNameDoesNotCrossCallers(t *testing.T) {
	t.Parallel()
	ab := newAppBundle(t)
	a := Principal{Name: "alpha", Scopes: []string{"read", "write"}}
	b := Principal{Name: "beta", Scopes: []string{"read", "write"}}
	read := `{"sql":"select current_setting('application_name') as v, pg_backend_pid() as pid"}`
	write := `{"sql":"select current_setting('application_name') as v, pg_backend_pid() as pid","mode":"write","autocommit":true}`
	batch := `{"operations":[{"sql":"select 1"},{"sql":"select current_setting('application_name') as v, pg_backend_pid() as pid"}]}`
	var pids []any
	for _, c := range []struct {
		who        Principal
		tool, args string
	}{{a, "execute_sql", read}, {b, "execute_sql", read}, {a, "execute_sql", write}, {b, "execute_sql", write},
		{a, "pg_transaction", batch}, {b, "execute_sql", read}, {b, "pg_transaction", batch}, {a, "execute_sql", read}} {
		out := ab.mustCallAs(t, c.who, c.tool, c.args)
		var r map[string]any
		if c.tool == "pg_transaction" {
			res := out["results"].([]any)
			r = res[len(res)-1].(map[string]any)["rows"].([]any)[0].(map[string]any)
		} else {
			r = rows(t, out)[0]
		}
		if want := "pgtools/" + c.who.Name + "/" + c.tool; r["v"] != want {
			t.Errorf("%s by %s ran as %v, want %s", c.tool, c.who.Name, r["v"], want)
		}
		pids = append(pids, r["pid"])
	}
	for _, pid := range pids[1:] {
		if pid != pids[0] {
			t.Fatalf("the calls ran on backends %v: the check proves nothing", pids)
		}
	}
}

func TestAppName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 200)
	cases := []struct{ principal, tool, want string }{
		{"support-bot", "select_query", "pgtools/support-bot/select_query"},
		{"crm:alice@example.com", "pg_transaction", "pgtools/crm:alice@example.com/pg_transaction"},
		{"crm:ålice\n", "execute_sql", "pgtools/crm:?lice?/execute_sql"},
		{"bad\xffutf8", "nap", "pgtools/bad?utf8/nap"},
		{"o'brien\\", "nap", `pgtools/o'brien\/nap`},
		{long, "execute_sql", "pgtools/" + long[:63-8-1-len("execute_sql")-1] + "~/execute_sql"},
		{"p", strings.Repeat("t", 40), "pgtools/p/" + strings.Repeat("t", appToolMax)},
		{long, strings.Repeat("t", 40), "pgtools/" + long[:63-8-1-appToolMax-1] + "~/" + strings.Repeat("t", appToolMax)},
	}
	if got, want := appName(appSession, long, "pg_tx"), "pgtools-session/"+long[:63-16-1-5-1]+"~/pg_tx"; got != want {
		t.Errorf("a session's: %q, want %q", got, want)
	}
	for _, c := range cases {
		got := appName(appPooled, c.principal, c.tool)
		if got != c.want {
			t.Errorf("appName(%q, %q) = %q, want %q", c.principal, c.tool, got, c.want)
		}
		if len(got) > appNameMax {
			t.Errorf("appName(%q, %q) is %d bytes", c.principal, c.tool, len(got))
		}
	}
}

// TestApplicationNameOfHostileNames: a principal name made to break out (quotes, a backslash, a
// newline, 200 bytes, non-ASCII, SQL) is shown clipped and printable, and runs nothing, on the
// bound path (reads), the quoted path (writes, pg_transaction) and in a session.
func TestApplicationNameOfHostileNames(t *testing.T) {
	t.Parallel()
	ab := newAppBundle(t)
	names := []string{
		`tok:x'); DROP TABLE slow; --`,
		`tok:\'; DROP TABLE slow; --`,
		"tok:line\nbreak\r\x00nul",
		"tok:" + strings.Repeat("é", 100),
		"tok:" + strings.Repeat("a", 196),
		`tok:$$; DROP TABLE slow; $$ %a %u`,
	}
	const probe = "select current_setting('application_name') as v"
	for _, name := range names {
		p := Principal{Name: name, Scopes: []string{"read", "write"}}
		for _, c := range []struct{ tool, args string }{
			{"execute_sql", `{"sql":"` + probe + `"}`},
			{"execute_sql", `{"sql":"` + probe + `","mode":"write","autocommit":true}`},
			{"pg_transaction", `{"operations":[{"sql":"select 1"},{"sql":"` + probe + `"}]}`},
		} {
			out := ab.mustCallAs(t, p, c.tool, c.args)
			var v any
			if c.tool == "pg_transaction" {
				res := out["results"].([]any)
				v = res[1].(map[string]any)["rows"].([]any)[0].(map[string]any)["v"]
			} else {
				v = rows(t, out)[0]["v"]
			}
			got, _ := v.(string)
			if want := appName(appPooled, name, c.tool); got != want {
				t.Errorf("%s %s as %q: application_name %q, want %q", c.tool, c.args, name, got, want)
			}
			if len(got) > appNameMax || strings.IndexFunc(got, func(r rune) bool { return r < ' ' || r > '~' }) >= 0 {
				t.Errorf("%s as %q: application_name %q is not clipped printable ASCII", c.tool, name, got)
			}
		}
		sid := ab.mustCallAs(t, p, "pg_tx", `{"action":"begin"}`)["session_id"].(string)
		got := rows(t, ab.mustCallAs(t, p, "execute_sql", `{"sql":"`+probe+`","session_id":"`+sid+`"}`))[0]["v"]
		if want := appName(appSession, name, "execute_sql"); got != want {
			t.Errorf("in a session as %q: application_name %q, want %q", name, got, want)
		}
		ab.mustCallAs(t, p, "pg_tx", `{"action":"rollback","session_id":"`+sid+`"}`)
	}
	if n := ab.db.QueryInt(t, "SELECT count(*) FROM slow"); n != 3 {
		t.Fatalf("the slow table has %d rows, want its 3", n)
	}
}
