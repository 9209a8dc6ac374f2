package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/approval"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/session"
)

// approvalFixture is a registry over the bundle's database under rules, with an approval store
// whose clock the test moves.
type approvalFixture struct {
	b     *bundle
	reg   *Registry
	store *approval.Store
	mu    sync.Mutex
	now   time.Time
	audit *auditRecorder
}

type auditRecorder struct {
	mu  sync.Mutex
	evs []AuditEvent
}

func (a *auditRecorder) Audit(ev AuditEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, ev)
}

func (a *auditRecorder) outcomes(id string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, ev := range a.evs {
		if ev.ApprovalID == id {
			o := ev.Outcome
			if ev.ErrorType != "" {
				o += ":" + string(ev.ErrorType)
			}
			out = append(out, o)
		}
	}
	return out
}

func newApprovalFixture(t *testing.T, rules ...approval.Rule) *approvalFixture {
	t.Helper()
	f := &approvalFixture{b: newBundle(t, Policy{RequireApproval: rules}), now: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC), audit: &auditRecorder{}}
	f.store = approval.NewStore(approval.Options{TTL: 10 * time.Minute, Audit: AuditApprovals(f.audit), Now: func() time.Time {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.now
	}})
	f.b.tdb.Policy.RequireApproval = rules
	f.b.db.Exec(t, "GRANT INSERT, UPDATE, DELETE ON customers, orders TO "+quoteIdent(f.b.db.RoleName("agent")))
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{f.b.tdb}, Approvals: f.store, Auditor: f.audit})
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	return f
}

func (f *approvalFixture) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

var (
	approvalCaller   = Principal{Name: "agent", Scopes: []string{"read", "write"}}
	approvalApprover = Principal{Name: "boss", Scopes: []string{"approve"}}
)

func (f *approvalFixture) call(t *testing.T, p Principal, tool, args string) (map[string]any, *Error) {
	t.Helper()
	res, _, e := f.reg.Call(context.Background(), p, tool, []byte(args))
	if e != nil {
		return nil, e
	}
	return decodeResult(t, res), nil
}

// pending makes the call, which must answer approval_required, and returns the request's id and
// the approval the caller was shown.
func (f *approvalFixture) pending(t *testing.T, p Principal, tool, args string) (string, map[string]any) {
	t.Helper()
	out, e := f.call(t, p, tool, args)
	if e == nil || e.Type != ErrApprovalRequired {
		t.Fatalf("%s %s: want approval_required, got %v %v", tool, args, out, e)
	}
	var ap map[string]any
	if err := json.Unmarshal(e.Approval, &ap); err != nil {
		t.Fatalf("approval: %v in %s", err, e.Approval)
	}
	id, _ := ap["id"].(string)
	if !strings.HasPrefix(id, "apr_") || !strings.Contains(e.Suggestion, `approval_id: "`+id+`"`) {
		t.Fatalf("approval_required names no usable id: %+v", e)
	}
	return id, ap
}

func withID(args, id string) string {
	return strings.TrimSuffix(strings.TrimSpace(args), "}") + fmt.Sprintf(`, "approval_id": %q}`, id)
}

// TestApprovalLargeDelete is the walk: a delete of 120 rows waits for approval and
// changes nothing; the caller's own credential (its approve scope, or another subject of its
// act-as token) cannot approve; an approver's approval commits exactly once; an approval of 120
// rows does not commit when 121 would change.
func TestApprovalLargeDelete(t *testing.T) {
	f := newApprovalFixture(t, approval.Rule{When: approval.WhenRowsOver, Rows: 100})
	const del = `{"table": "orders", "where": "total <= $1", "params": [180], "autocommit": true}`
	id, ap := f.pending(t, approvalCaller, "delete_data", del)
	if n := f.b.db.QueryInt(t, "SELECT count(*) FROM orders"); n != 300 {
		t.Fatalf("the dry run changed rows: %d left", n)
	}
	eff := ap["effect"].(map[string]any)
	if eff["total"] != 120.0 || fmt.Sprint(eff["tables"]) != "[map[name:orders rows:120 schema:public]]" || ap["status"] != "pending" {
		t.Fatalf("measured effect: %v", ap)
	}

	// The caller's own credential, however it is dressed, cannot approve.
	selfApprove := approvalCaller
	selfApprove.Scopes = []string{"read", "write", "approve"}
	subject := Principal{Name: "agent:someone-else", Credential: "agent", Scopes: []string{"approve"}}
	for _, p := range []Principal{selfApprove, subject} {
		if _, e := f.store.Decide(p.Party(), id, true); e == nil || e.Type != ErrNotAllowed {
			t.Fatalf("%s approved its own request: %v", p.Name, e)
		}
		if len(f.store.Pending(p.Party())) != 0 {
			t.Fatalf("%s is shown its own request", p.Name)
		}
	}
	if _, e := f.store.Decide(approvalCaller.Party(), id, true); e == nil || e.Type != ErrPermissionDenied && e.Type != ErrNotAllowed {
		t.Fatalf("a token without the approve scope decided: %v", e)
	}
	// Before a decision the id runs nothing.
	if _, e := f.call(t, approvalCaller, "delete_data", withID(del, id)); e == nil || e.Type != ErrApprovalRequired {
		t.Fatalf("pending approval ran: %v", e)
	}
	if list := f.store.Pending(approvalApprover.Party()); len(list) != 1 || list[0].ID != id || !strings.Contains(string(list[0].Arguments), `"total <= $1"`) {
		t.Fatalf("approver's list: %+v", list)
	}
	if _, e := f.store.Decide(approvalApprover.Party(), id, true); e != nil {
		t.Fatal(e)
	}
	// Another call's arguments, or another principal, cannot use it.
	if _, e := f.call(t, approvalCaller, "delete_data", withID(strings.Replace(del, "180", "181", 1), id)); e == nil || e.Type != ErrInvalidArguments {
		t.Fatalf("approval used for other arguments: %v", e)
	}
	other := Principal{Name: "other", Scopes: []string{"read", "write"}}
	if _, e := f.call(t, other, "delete_data", withID(del, id)); e == nil || e.Type != ErrInvalidArguments {
		t.Fatalf("approval used by another principal: %v", e)
	}

	// 121 rows would change now: nothing commits, and the approval is used up.
	f.b.db.Exec(t, "INSERT INTO orders (customer_id, total) VALUES (1, 1)")
	_, e := f.call(t, approvalCaller, "delete_data", withID(del, id))
	if e == nil || e.Type != ErrApprovalMismatch || !strings.Contains(e.Message, "120 rows of public.orders") || !strings.Contains(e.Message, "121 rows of public.orders") {
		t.Fatalf("121 rows under an approval of 120: %v", e)
	}
	if n := f.b.db.QueryInt(t, "SELECT count(*) FROM orders"); n != 301 {
		t.Fatalf("a mismatched approval changed rows: %d", n)
	}
	if _, e := f.call(t, approvalCaller, "delete_data", withID(del, id)); e == nil || e.Type != ErrInvalidArguments || !strings.Contains(e.Message, "mismatched") {
		t.Fatalf("a mismatched approval was usable again: %v", e)
	}

	// A new request for the 121 rows, approved, commits once.
	id2, _ := f.pending(t, approvalCaller, "delete_data", del)
	if _, e := f.store.Decide(approvalApprover.Party(), id2, true); e != nil {
		t.Fatal(e)
	}
	out, e := f.call(t, approvalCaller, "delete_data", withID(del, id2))
	if e != nil || out["rowCount"] != 121.0 {
		t.Fatalf("approved delete: %v %v", out, e)
	}
	if n := f.b.db.QueryInt(t, "SELECT count(*) FROM orders"); n != 180 {
		t.Fatalf("after the approved delete: %d rows", n)
	}
	if _, e := f.call(t, approvalCaller, "delete_data", withID(del, id2)); e == nil || e.Type != ErrInvalidArguments || !strings.Contains(e.Message, "used") {
		t.Fatalf("an approval ran twice: %v", e)
	}
	if got := strings.Join(f.audit.outcomes(id2), " "); got != "approval_requested error:approval_required approval_approved approval_used committed error:invalid_arguments" {
		t.Fatalf("audit of %s: %s", id2, got)
	}
	c := f.store.Counts()
	if c.Events["requested"] != 2 || c.Events["approved"] != 2 || c.Events["mismatched"] != 1 || c.Events["used"] != 1 || c.Pending != 0 {
		t.Fatalf("counts: %+v", c)
	}
}

// TestApprovalExpiryAndDenial: a request nobody decides expires; an approval not used in time
// expires; a denied request never runs.
func TestApprovalExpiryAndDenial(t *testing.T) {
	f := newApprovalFixture(t, approval.Rule{When: approval.WhenRowsOver, Rows: 10})
	const upd = `{"table": "orders", "set": {"status": "void"}, "where": "id <= $1", "params": [50], "autocommit": true}`
	id, _ := f.pending(t, approvalCaller, "update_data", upd)
	f.advance(11 * time.Minute)
	if _, e := f.store.Decide(approvalApprover.Party(), id, true); e == nil || !strings.Contains(e.Message, "expired") {
		t.Fatalf("an expired request was decided: %v", e)
	}
	id, _ = f.pending(t, approvalCaller, "update_data", upd)
	if _, e := f.store.Decide(approvalApprover.Party(), id, true); e != nil {
		t.Fatal(e)
	}
	f.advance(11 * time.Minute)
	if _, e := f.call(t, approvalCaller, "update_data", withID(upd, id)); e == nil || !strings.Contains(e.Message, "expired") {
		t.Fatalf("an expired approval ran: %v", e)
	}
	id, _ = f.pending(t, approvalCaller, "update_data", upd)
	if _, e := f.store.Decide(approvalApprover.Party(), id, false); e != nil {
		t.Fatal(e)
	}
	if _, e := f.call(t, approvalCaller, "update_data", withID(upd, id)); e == nil || e.Type != ErrNotAllowed || !strings.Contains(e.Message, "denied") {
		t.Fatalf("a denied request ran: %v", e)
	}
	if n := f.b.db.QueryInt(t, "SELECT count(*) FROM orders WHERE status = 'void'"); n != 0 {
		t.Fatalf("%d rows changed without approval", n)
	}
	if c := f.store.Counts(); c.Events["expired"] != 2 || c.Events["denied"] != 1 {
		t.Fatalf("counts: %+v", c)
	}
}

// TestApprovalRuleKinds walks every kind of rule over the write paths that reach it: each
// matching call waits and changes nothing, the same call under the bound or elsewhere runs.
func TestApprovalRuleKinds(t *testing.T) {
	type step struct {
		tool, args string
		wait       bool
	}
	cases := map[string]struct {
		rule  approval.Rule
		ddl   bool
		steps []step
	}{
		approval.WhenRowsOver: {rule: approval.Rule{When: approval.WhenRowsOver, Rows: 2}, steps: []step{
			{"update_data", `{"table": "customers", "set": {"country": "IT"}, "where": "id <= 3", "autocommit": true}`, true},
			{"update_data", `{"table": "customers", "set": {"country": "IT"}, "where": "id <= 2", "autocommit": true}`, false},
			{"pg_transaction", `{"operations": [{"sql": "UPDATE customers SET country = 'ES' WHERE id = 10"}, {"sql": "UPDATE orders SET status = 'x' WHERE id <= 2"}]}`, true},
			{"execute_sql", `{"sql": "INSERT INTO customers (name) SELECT 'n' || g FROM generate_series(1, 3) g", "mode": "write", "autocommit": true}`, true},
			{"insert_data", `{"table": "customers", "rows": [{"name": "a"}, {"name": "b"}], "autocommit": true}`, false},
		}},
		approval.WhenTable: {rule: approval.Rule{When: approval.WhenTable, Table: "public.orders"}, steps: []step{
			{"update_data", `{"table": "orders", "set": {"status": "x"}, "where": "id = 1", "autocommit": true}`, true},
			{"update_data", `{"table": "customers", "set": {"country": "IT"}, "where": "id = 1", "autocommit": true}`, false},
			{"execute_sql", `{"sql": "WITH d AS (UPDATE orders SET status = 'y' WHERE id = 2 RETURNING 1) SELECT count(*) FROM d", "mode": "write", "autocommit": true}`, true},
		}},
		approval.WhenTool: {rule: approval.Rule{When: approval.WhenTool, Tool: "insert_data"}, steps: []step{
			{"insert_data", `{"table": "customers", "row": {"name": "a"}, "autocommit": true}`, true},
			{"update_data", `{"table": "customers", "set": {"country": "IT"}, "where": "id = 1", "autocommit": true}`, false},
		}},
		approval.WhenDDL: {rule: approval.Rule{When: approval.WhenDDL}, ddl: true, steps: []step{
			{"execute_sql", `{"sql": "CREATE TABLE t_new (id int)", "mode": "write", "autocommit": true}`, true},
			{"update_data", `{"table": "customers", "set": {"country": "IT"}, "where": "id <= 20", "autocommit": true}`, false},
		}},
		approval.WhenDestructive: {rule: approval.Rule{When: approval.WhenDestructive}, ddl: true, steps: []step{
			{"execute_sql", `{"sql": "TRUNCATE orders", "mode": "write", "autocommit": true, "confirm_destructive": true}`, true},
			{"execute_sql", `{"sql": "CREATE TABLE t_other (id int)", "mode": "write", "autocommit": true}`, false},
		}},
	}
	for _, kind := range approval.Kinds() {
		c, ok := cases[kind]
		if !ok {
			t.Fatalf("rule kind %s has no case", kind)
		}
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			if err := c.rule.Validate(); err != nil {
				t.Fatal(err)
			}
			f := newApprovalFixture(t, c.rule)
			p := approvalCaller
			if c.ddl {
				f.b.tdb.Policy.AllowDDL = true
				f.b.db.Exec(t, "GRANT CREATE ON SCHEMA public TO "+quoteIdent(f.b.db.RoleName("agent"))+"; ALTER TABLE orders OWNER TO "+quoteIdent(f.b.db.RoleName("agent")))
				p.Scopes = append(p.Scopes, "ddl")
			}
			for i, s := range c.steps {
				before := f.b.db.QueryInt(t, "SELECT count(*) FROM orders") + 1000*f.b.db.QueryInt(t, "SELECT count(*) FROM customers WHERE country IN ('IT', 'ES') OR name LIKE 'n%' OR name IN ('a', 'b')")
				out, e := f.call(t, p, s.tool, s.args)
				after := f.b.db.QueryInt(t, "SELECT count(*) FROM orders") + 1000*f.b.db.QueryInt(t, "SELECT count(*) FROM customers WHERE country IN ('IT', 'ES') OR name LIKE 'n%' OR name IN ('a', 'b')")
				if s.wait {
					if e == nil || e.Type != ErrApprovalRequired {
						t.Fatalf("step %d %s: want approval_required, got %v %v", i, s.tool, out, e)
					}
					if before != after || f.b.db.QueryInt(t, "SELECT count(*) FROM pg_class WHERE relname IN ('t_new', 't_other')") != 0 {
						t.Fatalf("step %d: a call waiting for approval changed something", i)
					}
					continue
				}
				if e != nil {
					t.Fatalf("step %d %s: %v", i, s.tool, e)
				}
			}
		})
	}
}

// TestApprovalInsideASession: a session write a rule stops is rolled back to its savepoint (the
// session goes on), and with the approval it is kept in the session.
func TestApprovalInsideASession(t *testing.T) {
	f := newApprovalFixture(t, approval.Rule{When: approval.WhenRowsOver, Rows: 5})
	sessions := session.New(session.Config{TTL: time.Minute})
	t.Cleanup(func() { sessions.Close(context.Background()) })
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{f.b.tdb}, Approvals: f.store, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	out, e := f.call(t, approvalCaller, "pg_tx", `{"action": "begin"}`)
	if e != nil {
		t.Fatal(e)
	}
	sid := out["session_id"].(string)
	if _, e := f.call(t, approvalCaller, "update_data", fmt.Sprintf(`{"table": "customers", "set": {"country": "IT"}, "where": "id <= 3", "session_id": %q}`, sid)); e != nil {
		t.Fatal(e)
	}
	del := fmt.Sprintf(`{"table": "orders", "where": "id <= 10", "session_id": %q}`, sid)
	id, ap := f.pending(t, approvalCaller, "delete_data", del)
	if ap["effect"].(map[string]any)["total"] != 13.0 {
		t.Fatalf("a session statement's request carries the session's whole effect (3 updated, 10 deleted): %v", ap)
	}
	if _, e := f.store.Decide(approvalApprover.Party(), id, true); e != nil {
		t.Fatal(e)
	}
	if out, e := f.call(t, approvalCaller, "delete_data", withID(del, id)); e != nil || out["rowCount"] != 10.0 {
		t.Fatalf("approved delete in the session: %v %v", out, e)
	}
	if _, e := f.call(t, approvalCaller, "pg_tx", fmt.Sprintf(`{"action": "commit", "session_id": %q}`, sid)); e != nil {
		t.Fatal(e)
	}
	if n := f.b.db.QueryInt(t, "SELECT count(*) FROM orders"); n != 290 {
		t.Fatalf("orders after the session: %d", n)
	}
	if n := f.b.db.QueryInt(t, "SELECT count(*) FROM customers WHERE country = 'IT'"); n != 3 {
		t.Fatalf("the session's earlier write: %d", n)
	}
}

// TestApprovalSessionCannotBeSplit: rows_over judges a session's whole effect, so a 120-row
// delete split into six statements of 20 under rows_over 100 waits for approval at the
// statement that crosses the bound, with all 120 rows in the request; approved, the statement is
// kept and the commit commits all 120. Denied, the statement stays rolled back and the session
// open with what it kept.
func TestApprovalSessionCannotBeSplit(t *testing.T) {
	f := newApprovalFixture(t, approval.Rule{When: approval.WhenRowsOver, Rows: 100})
	sessions := session.New(session.Config{TTL: time.Minute})
	t.Cleanup(func() { sessions.Close(context.Background()) })
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{f.b.tdb}, Approvals: f.store, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	begin := func() string {
		out, e := f.call(t, approvalCaller, "pg_tx", `{"action": "begin"}`)
		if e != nil {
			t.Fatal(e)
		}
		return out["session_id"].(string)
	}
	part := func(sid string, i int) string {
		return fmt.Sprintf(`{"table": "orders", "where": "id > %d AND id <= %d", "session_id": %q}`, 20*i, 20*(i+1), sid)
	}
	sid := begin()
	for i := 0; i < 5; i++ {
		if _, e := f.call(t, approvalCaller, "delete_data", part(sid, i)); e != nil {
			t.Fatalf("part %d: %v", i, e)
		}
	}
	id, ap := f.pending(t, approvalCaller, "delete_data", part(sid, 5))
	if ap["effect"].(map[string]any)["total"] != 120.0 {
		t.Fatalf("the request does not carry the session's whole effect: %v", ap)
	}
	// The session is open: a read in it sees the 100 rows its kept statements deleted.
	if out, e := f.call(t, approvalCaller, "execute_sql", fmt.Sprintf(`{"sql": "select count(*) as n from orders", "session_id": %q}`, sid)); e != nil || rows(t, out)[0]["n"] != 200.0 {
		t.Fatalf("session after the request: %v %v", out, e)
	}
	if _, e := f.store.Decide(approvalApprover.Party(), id, true); e != nil {
		t.Fatal(e)
	}
	if _, e := f.call(t, approvalCaller, "delete_data", withID(part(sid, 5), id)); e != nil {
		t.Fatalf("approved part: %v", e)
	}
	if _, e := f.call(t, approvalCaller, "pg_tx", fmt.Sprintf(`{"action": "commit", "session_id": %q}`, sid)); e != nil {
		t.Fatal(e)
	}
	if n := f.b.db.QueryInt(t, "SELECT count(*) FROM orders"); n != 180 {
		t.Fatalf("orders after the approved session: %d, want 180", n)
	}

	// Denied: the crossing statement is not kept; the session stays open with its 100 rows.
	sid = begin()
	for i := 6; i < 11; i++ {
		if _, e := f.call(t, approvalCaller, "delete_data", part(sid, i)); e != nil {
			t.Fatalf("part %d: %v", i, e)
		}
	}
	id, _ = f.pending(t, approvalCaller, "delete_data", part(sid, 11))
	if _, e := f.store.Decide(approvalApprover.Party(), id, false); e != nil {
		t.Fatal(e)
	}
	if _, e := f.call(t, approvalCaller, "delete_data", withID(part(sid, 11), id)); e == nil {
		t.Fatal("a denied part was kept")
	}
	if _, e := f.call(t, approvalCaller, "pg_tx", fmt.Sprintf(`{"action": "rollback", "session_id": %q}`, sid)); e != nil {
		t.Fatalf("the session did not stay open: %v", e)
	}
	if n := f.b.db.QueryInt(t, "SELECT count(*) FROM orders"); n != 180 {
		t.Fatalf("orders after the rolled-back session: %d, want 180", n)
	}
}

// TestApprovalHidesTablesTheRoleCannotRead: rows a trigger writes into a table the caller's
// role holds no privilege on count in the effect (the approver sees the table), but the caller
// is told only how many.
func TestApprovalHidesTablesTheRoleCannotRead(t *testing.T) {
	f := newApprovalFixture(t, approval.Rule{When: approval.WhenRowsOver, Rows: 0})
	f.b.db.Exec(t, `CREATE TABLE secret_audit (n int); REVOKE ALL ON secret_audit FROM `+quoteIdent(f.b.db.RoleName("agent"))+`;
CREATE FUNCTION log_it() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$BEGIN INSERT INTO secret_audit VALUES (1); RETURN NEW; END$$;
CREATE TRIGGER t AFTER UPDATE ON customers FOR EACH ROW EXECUTE FUNCTION log_it();`)
	_, e := f.call(t, approvalCaller, "update_data", `{"table": "customers", "set": {"country": "IT"}, "where": "id <= 2", "autocommit": true}`)
	if e == nil || e.Type != ErrApprovalRequired {
		t.Fatalf("want approval_required: %v", e)
	}
	if strings.Contains(e.Message+e.Suggestion+string(e.Approval), "secret_audit") || !strings.Contains(string(e.Approval), "tables your role cannot read") {
		t.Fatalf("the caller was shown a table it cannot read: %s / %s", e.Message, e.Approval)
	}
	list := f.store.Pending(approvalApprover.Party())
	if len(list) != 1 || list[0].Effect.Total != 4 || !strings.Contains(fmt.Sprint(list[0].Effect.Tables), "secret_audit") {
		t.Fatalf("the approver's view: %+v", list)
	}
}

// TestApprovalOfABatchAndACustomTool: a pg_transaction waits for the effect of all its
// operations together and commits with its approval; an operator-defined write tool named by a
// tool rule waits on every call.
func TestApprovalOfABatchAndACustomTool(t *testing.T) {
	f := newApprovalFixture(t, approval.Rule{When: approval.WhenRowsOver, Rows: 3}, approval.Rule{When: approval.WhenTool, Tool: "mark_paid"})
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{f.b.tdb}, Approvals: f.store,
		CustomTools: []CustomTool{{Name: "mark_paid", Description: "Mark one order paid.", Mode: "write", Database: "default",
			SQL: "UPDATE orders SET status = 'paid' WHERE id = $1 RETURNING id, status", Parameters: []CustomParam{{Name: "order_id", Type: "integer", Required: true}}}}})
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	const batch = `{"operations": [{"sql": "UPDATE orders SET status = 'b' WHERE id <= 2"}, {"sql": "UPDATE customers SET country = 'ES' WHERE id <= 2"}]}`
	id, ap := f.pending(t, approvalCaller, "pg_transaction", batch)
	if eff := ap["effect"].(map[string]any); eff["total"] != 4.0 || fmt.Sprint(eff["commands"]) != "[UPDATE UPDATE]" {
		t.Fatalf("a batch's effect: %v", eff)
	}
	if _, e := f.store.Decide(approvalApprover.Party(), id, true); e != nil {
		t.Fatal(e)
	}
	if out, e := f.call(t, approvalCaller, "pg_transaction", withID(batch, id)); e != nil || out["status"] != "committed" {
		t.Fatalf("approved batch: %v %v", out, e)
	}
	if n := f.b.db.QueryInt(t, "SELECT count(*) FROM orders WHERE status = 'b'") + f.b.db.QueryInt(t, "SELECT count(*) FROM customers WHERE country = 'ES'"); n != 4 {
		t.Fatalf("the approved batch changed %d rows", n)
	}
	const one = `{"order_id": 7, "autocommit": true}`
	id, _ = f.pending(t, approvalCaller, "mark_paid", one)
	if _, e := f.store.Decide(approvalApprover.Party(), id, true); e != nil {
		t.Fatal(e)
	}
	if _, e := f.call(t, approvalCaller, "mark_paid", withID(one, id)); e != nil {
		t.Fatal(e)
	}
	if n := f.b.db.QueryInt(t, "SELECT count(*) FROM orders WHERE id = 7 AND status = 'paid'"); n != 1 {
		t.Fatalf("order 7 not paid: %d", n)
	}
}

// TestApprovalSurvivesAFailedRun: an approved call that fails before its effect is compared
// (here a constraint) hands its approval back; one approval runs one call at a time; a
// credential's pending requests are bounded.
func TestApprovalSurvivesAFailedRun(t *testing.T) {
	f := newApprovalFixture(t, approval.Rule{When: approval.WhenTable, Table: "customers"})
	const ins = `{"table": "customers", "row": {"name": "dup", "email": "c1@example.com"}, "autocommit": true}`
	f.b.db.Exec(t, "UPDATE customers SET email = 'moved@example.com' WHERE id = 1")
	id, _ := f.pending(t, approvalCaller, "insert_data", ins)
	if _, e := f.store.Decide(approvalApprover.Party(), id, true); e != nil {
		t.Fatal(e)
	}
	f.b.db.Exec(t, "UPDATE customers SET email = 'c1@example.com' WHERE id = 1")
	if _, e := f.call(t, approvalCaller, "insert_data", withID(ins, id)); e == nil || e.Type != ErrConstraint {
		t.Fatalf("want the constraint error: %v", e)
	}
	f.b.db.Exec(t, "UPDATE customers SET email = 'moved@example.com' WHERE id = 1")
	if _, e := f.call(t, approvalCaller, "insert_data", withID(ins, id)); e != nil {
		t.Fatalf("the approval was lost to a failed run: %v", e)
	}
	// Claimed twice at once: the second claim is refused while the first holds it.
	const ins2 = `{"table": "customers", "row": {"name": "dup2"}, "autocommit": true}`
	id, _ = f.pending(t, approvalCaller, "insert_data", ins2)
	if _, e := f.store.Decide(approvalApprover.Party(), id, true); e != nil {
		t.Fatal(e)
	}
	in, given := typedArgs(t, f.reg, "insert_data", withID(ins2, id))
	g1, e := newApprovalGate(f.store, approvalCaller, f.b.tdb, "insert_data", in, given)
	if e != nil {
		t.Fatal(e)
	}
	if _, e := newApprovalGate(f.store, approvalCaller, f.b.tdb, "insert_data", in, given); e == nil || !strings.Contains(e.Message, "being used") {
		t.Fatalf("one approval claimed twice: %v", e)
	}
	g1.release()
	if _, e := newApprovalGate(f.store, approvalCaller, f.b.tdb, "insert_data", in, given); e != nil {
		t.Fatalf("released approval: %v", e)
	}
	// The bound on pending requests.
	small := approval.NewStore(approval.Options{MaxPending: 2})
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{f.b.tdb}, Approvals: small})
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	for i := range 3 {
		_, e := f.call(t, approvalCaller, "insert_data", fmt.Sprintf(`{"table": "customers", "row": {"name": "n%d"}, "autocommit": true}`, i))
		if want := map[bool]ErrorType{true: ErrApprovalRequired, false: ErrRateLimited}[i < 2]; e == nil || e.Type != want {
			t.Fatalf("request %d: want %s, got %v", i, want, e)
		}
	}
}

// typedArgs decodes args, a valid call of tool, as Call does: its typed arguments and the names
// of the arguments it gave.
func typedArgs(t testing.TB, reg *Registry, tool, args string) (toolArgs, []string) {
	t.Helper()
	dc, e := reg.decodeCall(testPrincipal, reg.tools[tool], []byte(args))
	if e != nil {
		t.Fatalf("%s %s: %v", tool, args, e)
	}
	return dc.in, dc.given
}

// TestApprovalArgumentsAreTheCallsOwn: what an approver is shown, and the digest binds, is the
// call's arguments as it gave them but approval_id, keys sorted, numbers as written, no HTML
// escapes, whatever the typed struct holds beside them (absent fields stay absent, inside
// on_conflict and operations too). The same arguments written otherwise give the same text;
// a different value gives another.
func TestApprovalArgumentsAreTheCallsOwn(t *testing.T) {
	t.Parallel()
	reg := closedPortRegistry(t)
	text := func(tool, args string) string {
		t.Helper()
		in, given := typedArgs(t, reg, tool, args)
		raw, err := approvalArguments(in, given)
		if err != nil {
			t.Fatalf("%s %s: %v", tool, args, err)
		}
		return string(raw)
	}
	for _, c := range []struct{ tool, args string }{
		{"insert_data", `{"table":"items","row":{"sku":"a<b>&","qty":1.50,"z":null,"n":{"b":1,"a":[1e3,"x"]}},"autocommit":true,"approval_id":"x"}`},
		{"insert_data", `{"table":"items","rows":[{"sku":"a"},{"qty":10000000000000000000000}],"on_conflict":{"columns":"sku","action":"nothing"},"returning":["id"],"format":"csv"}`},
		{"insert_data", `{"table":"items","rows":[{"sku":"a"}],"on_conflict":{"update_columns":"","action":"update","columns":["sku"]},"returning":"id, sku","autocommit":false,"database":"default"}`},
		{"update_data", `{"table":"orders","set":{"status":"p\u00e9\u2028"},"where":"id = $1","params":"[1, \"x\"]","dry_run":false,"max_affected_rows":1e2}`},
		{"delete_data", `{"table":"orders","where":"id = $1","params":[1,2.0,-0,"s",null,true,{"k":[]}],"max_affected_rows":10.0,"session_id":"00000000-0000-4000-8000-000000000000"}`},
		{"execute_sql", `{"sql":"select $1","params":[],"mode":"read","confirm_destructive":false,"autocommit":true}`},
		{"pg_transaction", `{"operations":[{"sql":"select 1"},{"sql":"select $1","params":[1]},{"params":"[2]","sql":"x"}],"action":"transaction","format":"objects"}`},
	} {
		var m map[string]any
		if err := wire.Unmarshal([]byte(c.args), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "approval_id")
		want, _ := wire.Marshal(m)
		if got := text(c.tool, c.args); got != string(want) {
			t.Errorf("%s %s:\n got %s\nwant %s", c.tool, c.args, got, want)
		}
	}
	const call = `{"table":"orders","where":"id = $1","params":[1],"autocommit":true}`
	same := text("delete_data", call)
	if got := text("delete_data", ` { "params" : [1], "autocommit":true, "where":"id = $1", "table":"orders", "approval_id":"a1"}`); got != same {
		t.Errorf("the same call written otherwise: %s, want %s", got, same)
	}
	for _, other := range []string{
		`{"table":"orders","where":"id = $1","params":[1.0],"autocommit":true}`,
		`{"table":"orders","where":"id = $1","params":[1],"autocommit":true,"dry_run":false}`,
		`{"table":"orders","where":"id = $1","params":"[1]","autocommit":true}`,
		`{"table":"orders","where":"id = $1 ","params":[1],"autocommit":true}`,
	} {
		if text("delete_data", other) == same {
			t.Errorf("%s reads as %s", other, call)
		}
	}
}

// TestApprovalIDListedWhereRulesApply: the write tools list approval_id to a principal only
// where an approval rule (the database's or its own) applies to it; the rest of the schema is
// the same text either way, and validation accepts approval_id for every write tool.
func TestApprovalIDListedWhereRulesApply(t *testing.T) {
	b := newBundle(t, Policy{})
	listed := func(p Principal) map[string]bool {
		out := map[string]bool{}
		for _, info := range b.reg.ToolsFor(p) {
			var s struct {
				Properties map[string]json.RawMessage `json:"properties"`
			}
			if err := json.Unmarshal(info.InputSchema, &s); err != nil {
				t.Fatalf("%s: %v", info.Name, err)
			}
			out[info.Name] = s.Properties["approval_id"] != nil
		}
		return out
	}
	writeTools := []string{"insert_data", "update_data", "delete_data", "execute_sql", "pg_transaction"}
	for name, has := range listed(approvalCaller) {
		if has {
			t.Errorf("%s lists approval_id without a rule", name)
		}
	}
	ruled := approvalCaller
	ruled.RequireApproval = []approval.Rule{{When: approval.WhenDDL}}
	got := listed(ruled)
	for _, name := range writeTools {
		if !got[name] {
			t.Errorf("%s does not list approval_id under the principal's rule", name)
		}
		full := b.reg.tools[name].info.InputSchema
		if plain := withoutApprovalID(full); plain == nil || len(full)-len(plain) > 80 || bytes.Contains(plain, []byte("approval_id")) {
			t.Errorf("%s without approval_id: %s", name, plain)
		}
	}
	for _, name := range []string{"select_query", "describe_schema", "explain_query", "pg_tx"} {
		if got[name] {
			t.Errorf("read tool %s lists approval_id", name)
		}
	}
	b.tdb.Policy.RequireApproval = []approval.Rule{{When: approval.WhenDDL}}
	if !listed(approvalCaller)["delete_data"] {
		t.Error("the database's rule does not list approval_id")
	}
}
