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
		GRANT SELECT, INSERT, UPDATE, DELETE ON slow TO `+role)
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
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{tdb}, Sessions: sessions})
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
