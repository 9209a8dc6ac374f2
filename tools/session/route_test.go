package session_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// TestPolicyOfTheSessionsDatabase: a call with session_id runs on the session's database, and that
// database's policy — disabled tools, read-only, the principal's database list — applies to it,
// whether or not the call names the database. (Before calls were routed once, a call naming no
// database was checked against "default" and then run on the session's.)
func TestPolicyOfTheSessionsDatabase(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	dsn := f.db.RoleDSN(t, "sess")
	open := toolstest.Database(t, dsn, tools.Policy{}, 2)
	strict := toolstest.Database(t, dsn, tools.Policy{DisabledTools: []string{"execute_sql", "delete_data"}}, 2)
	strict.Name = "reports"
	reg, err := tools.NewRegistry([]*tools.Database{open, strict})
	if err != nil {
		t.Fatal(err)
	}
	reg.SetSessions(f.mgr)
	call := func(p tools.Principal, tool, args string) *tools.Error {
		_, _, e := reg.Call(context.Background(), p, tool, []byte(args))
		return e
	}
	out, _, e := reg.Call(context.Background(), alice, "pg_tx", []byte(`{"action":"begin","database":"reports"}`))
	if e != nil {
		t.Fatal(e)
	}
	id := out.(*tools.TxResult).SessionID
	for _, c := range []struct{ tool, args string }{
		{"execute_sql", fmt.Sprintf(`{"sql":"select 1","session_id":%q}`, id)},
		{"execute_sql", fmt.Sprintf(`{"sql":"delete from accounts","mode":"write","session_id":%q}`, id)},
		{"delete_data", fmt.Sprintf(`{"table":"accounts","where":"id = 1","session_id":%q}`, id)},
		{"execute_sql", fmt.Sprintf(`{"sql":"select 1","session_id":%q,"database":"reports"}`, id)},
	} {
		e := call(alice, c.tool, c.args)
		if e == nil || e.Type != tools.ErrNotAllowed || !strings.Contains(e.Message, `disabled on database "reports"`) {
			t.Fatalf("%s %s: %v", c.tool, c.args, e)
		}
	}
	// Naming another database than the session's is refused, not silently rerouted.
	if e := call(alice, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q,"database":"default"}`, id)); e == nil || e.Type != tools.ErrInvalidArguments {
		t.Fatalf("database disagreeing with the session: %v", e)
	}
	// The tools the database allows still run in the session, and the session is intact.
	if e := call(alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":1},"where":"id = 1","session_id":%q}`, id)); e != nil {
		t.Fatal(e)
	}
	if e := call(alice, "pg_tx", fmt.Sprintf(`{"action":"rollback","session_id":%q}`, id)); e != nil {
		t.Fatal(e)
	}
	if f.balance(t, 1) != 100 {
		t.Fatal("rolled back change survived")
	}
	// A principal limited to the default database cannot use a session on another one, even its own.
	limited := tools.Principal{Name: "carol", Scopes: []string{"read", "write"}}
	out, _, e = reg.Call(context.Background(), limited, "pg_tx", []byte(`{"action":"begin","database":"reports"}`))
	if e != nil {
		t.Fatal(e)
	}
	limited.Databases = []string{"default"}
	if e := call(limited, "select_query", fmt.Sprintf(`{"table":"accounts","session_id":%q}`, out.(*tools.TxResult).SessionID)); e == nil || e.Type != tools.ErrNotAllowed {
		t.Fatalf("session on a database the principal may not use: %v", e)
	}
}

// TestWriteInReadOnlySessionSuggestsTheSessionFix: a write refused in a read-only session tells
// the model how to continue with a session, not to leave it for autocommit.
func TestWriteInReadOnlySessionSuggestsTheSessionFix(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	id := f.begin(t, alice, `,"read_only":true`)
	e := f.fail(t, tools.ErrReadOnlyViolation, alice, "update_data", fmt.Sprintf(`{"table":"accounts","set":{"balance":1},"where":"id = 1","session_id":%q}`, id))
	if !strings.Contains(e.Suggestion, "is read-only") || !strings.Contains(e.Suggestion, `"action":"begin"`) || strings.Contains(e.Suggestion, "autocommit") {
		t.Fatalf("suggestion: %s", e.Suggestion)
	}
}
