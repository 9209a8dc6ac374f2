package tools

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools/session"
)

// TestSessionThroughPoolerNamesPreparedStatementsFix: behind a transaction pooler that keeps no
// prepared statements (PgBouncer 1.18), with the statement cache on, a session's read meets the
// named statement a stateless read left on the one server connection. The session answers as a
// stateless call does: connection_error naming prepared_statements: false, not a syntax error the
// model would try to fix.
func TestSessionThroughPoolerNamesPreparedStatementsFix(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	bouncer := b.db.PgBouncer(t, b.db.RoleDSN(t, "agent"), 1)
	ctx := context.Background()
	reg, _ := registryOver(t, bouncer, Policy{}, 1)
	mgr := session.New(session.Config{})
	t.Cleanup(func() { mgr.Close(context.Background()) })
	reg.setSessions(mgr)

	read := []byte(`{"table":"customers","columns":"id","where":"id = $1","params":[1]}`)
	// The stateless read prepares the first statement name on the server connection and loads
	// the catalog, which the session's reads then need no pooled connection for (the open
	// session holds the only server connection).
	if _, _, e := reg.Call(ctx, testPrincipal, "select_query", read); e != nil {
		t.Fatalf("the stateless read: %s: %s", e.Type, e.Message)
	}
	res, _, e := reg.Call(ctx, testPrincipal, "pg_tx", []byte(`{"action":"begin"}`))
	if e != nil {
		t.Fatalf("pg_tx begin: %s: %s", e.Type, e.Message)
	}
	id := res.(*TxResult).SessionID
	_, _, e = reg.Call(ctx, testPrincipal, "select_query", []byte(`{"table":"customers","columns":"id","where":"id = $1","params":[1],"session_id":"`+id+`"}`))
	if e == nil {
		t.Fatal("the session read worked: the statement names did not collide, so this test shows nothing")
	}
	// The collision aborted the session's transaction: the answer says so, and names the fix.
	if e.Type != ErrConnection || !strings.Contains(e.Suggestion, "prepared_statements: false") || !strings.Contains(e.Message, "rolled back") {
		t.Fatalf("the session read failed as %s: %s (%s), want connection_error saying the session was rolled back and naming prepared_statements: false", e.Type, e.Message, e.Suggestion)
	}
	t.Logf("%s: %s (%s)", e.Type, e.Message, e.Suggestion)
}

// TestSessionClosedMidTransactionThroughPooler: a session still busy at shutdown has its
// connection closed without a ROLLBACK (session.Manager.Close). Behind PgBouncer in transaction
// mode the server connection is then in a transaction the client left, which PgBouncer closes
// rather than hand on: the next client finds none of the session's state.
func TestSessionClosedMidTransactionThroughPooler(t *testing.T) {
	t.Parallel()
	f := newPoolerFixture(t, func(b *bundle) string { return b.db.PgBouncer(t, b.db.RoleDSN(t, "agent"), 1) })
	inSession(t, f, sessionStmts...)
	list := f.mgr.List(poolWriter.Name)
	if len(list) != 1 {
		t.Fatalf("%d open sessions, want 1", len(list))
	}
	list[0].Close(context.Background())
	out, e := f.read(t, stateCheckSQL)
	if e != nil {
		t.Fatalf("the next caller's check: %s: %s", e.Type, e.Message)
	}
	row := rows(t, out)[0]
	for k, want := range cleanState {
		if fmt.Sprint(row[k]) != fmt.Sprint(want) {
			t.Errorf("the next caller sees %s = %v, want %v", k, row[k], want)
		}
	}
	if _, e := f.read(t, "SELECT currval('counter') AS v"); e == nil || e.SQLState != "55000" {
		t.Errorf("currval('counter') on the next call: %v, want SQLSTATE 55000 (not yet defined in this session)", e)
	}
}
