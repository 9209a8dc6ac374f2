package tools

import (
	"context"
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
	reg.SetSessions(mgr)

	read := []byte(`{"table":"customers","columns":"id","where":"id = $1","params":[1]}`)
	// The stateless read prepares the first statement name on the server connection and loads
	// the catalog, which the session's reads then need no pooled connection for (the open
	// session holds the only server connection).
	if _, e := reg.Call(ctx, testPrincipal, "select_query", read); e != nil {
		t.Fatalf("the stateless read: %s: %s", e.Type, e.Message)
	}
	res, e := reg.Call(ctx, testPrincipal, "pg_tx", []byte(`{"action":"begin"}`))
	if e != nil {
		t.Fatalf("pg_tx begin: %s: %s", e.Type, e.Message)
	}
	id := res.(*TxResult).SessionID
	_, e = reg.Call(ctx, testPrincipal, "select_query", []byte(`{"table":"customers","columns":"id","where":"id = $1","params":[1],"session_id":"`+id+`"}`))
	if e == nil {
		t.Fatal("the session read worked: the statement names did not collide, so this test shows nothing")
	}
	// The collision aborted the session's transaction: the answer says so, and names the fix.
	if e.Type != ErrConnection || !strings.Contains(e.Suggestion, "prepared_statements: false") || !strings.Contains(e.Message, "rolled back") {
		t.Fatalf("the session read failed as %s: %s (%s), want connection_error saying the session was rolled back and naming prepared_statements: false", e.Type, e.Message, e.Suggestion)
	}
	t.Logf("%s: %s (%s)", e.Type, e.Message, e.Suggestion)
}
