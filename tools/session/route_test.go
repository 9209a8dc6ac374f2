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
	reg, err := tools.NewRegistry(context.Background(), tools.Options{Databases: []*tools.Database{open, strict}, Sessions: f.mgr})
	if err != nil {
		t.Fatal(err)
	}
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

// TestOutcomeAndPreviewNameTheRoute: Call's Outcome and Preview name the database route chose
// — the session's for a call in a session that names no database, the argument's otherwise —
// and the session; a call refused before routing names none. Preview runs nothing and says
// what a confirmation sends on.
func TestOutcomeAndPreviewNameTheRoute(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	dsn := f.db.RoleDSN(t, "sess")
	reports := toolstest.Database(t, dsn, tools.Policy{}, 2)
	reports.Name = "reports"
	reg, err := tools.NewRegistry(context.Background(), tools.Options{Databases: []*tools.Database{toolstest.Database(t, dsn, tools.Policy{}, 2), reports}, Sessions: f.mgr})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, out, e := reg.Call(ctx, alice, "pg_tx", []byte(`{"action":"begin","database":"reports"}`))
	if e != nil {
		t.Fatal(e)
	}
	id := res.(*tools.TxResult).SessionID
	if out != (tools.Outcome{Database: "reports"}) {
		t.Errorf("begin: %+v", out)
	}
	del := fmt.Sprintf(`{"table":"accounts","where":"id > $1","params":[0],"session_id":%q}`, id)
	pv, e := reg.Preview(ctx, alice, "delete_data", []byte(del))
	if e != nil {
		t.Fatal(e)
	}
	if pv.Database != "reports" || pv.Session != id || pv.Table != "accounts" || pv.CountArgs == nil || pv.ConfirmedArgs != nil ||
		!strings.Contains(string(pv.CountArgs), `"dry_run":true`) || !strings.Contains(pv.AskRows(3, "accounts", 2), "delete 3 rows of table accounts in database reports") {
		t.Errorf("preview of a delete in the session: %+v", pv)
	}
	if f.balance(t, 1) != 100 {
		t.Fatal("Preview changed data")
	}
	if _, out, e = reg.Call(ctx, alice, "delete_data", []byte(del)); e != nil || out != (tools.Outcome{Database: "reports", Session: id}) {
		t.Errorf("delete in the session: %+v, %v", out, e)
	}
	if _, out, e = reg.Call(ctx, alice, "select_query", []byte(`{"table":"accounts","database":"nowhere"}`)); e == nil || out != (tools.Outcome{}) {
		t.Errorf("call refused before routing: %+v, %v", out, e)
	}
	pv, e = reg.Preview(ctx, alice, "execute_sql", []byte(fmt.Sprintf(`{"sql":"DROP TABLE accounts","mode":"write","session_id":%q}`, id)))
	if e != nil || pv.Database != "reports" || pv.Statement != "DROP TABLE accounts" || pv.CountArgs != nil ||
		!strings.Contains(string(pv.ConfirmedArgs), `"confirm_destructive":true`) || !strings.Contains(pv.AskDestructive("r"), "on database reports") {
		t.Errorf("preview of a DROP in the session: %+v, %v", pv, e)
	}
	if pv, e = reg.Preview(ctx, alice, "select_query", []byte(`{"table":"accounts"}`)); e != nil || pv.Database != "default" || pv.CountArgs != nil || pv.ConfirmedArgs != nil {
		t.Errorf("preview of a read: %+v, %v", pv, e)
	}
	if _, e = reg.Preview(ctx, alice, "delete_data", []byte(`{"table":"accounts"}`)); e == nil || e.Type != tools.ErrInvalidArguments {
		t.Errorf("preview of an invalid call: %v", e)
	}
	if _, _, e = reg.Call(ctx, alice, "pg_tx", []byte(fmt.Sprintf(`{"action":"rollback","session_id":%q}`, id))); e != nil {
		t.Fatal(e)
	}
}
