package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// recorder is an Auditor that keeps events in memory.
type recorder struct {
	mu     sync.Mutex
	events []AuditEvent
}

func (r *recorder) Audit(ev AuditEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) all() []AuditEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]AuditEvent(nil), r.events...)
}

// newWriteBundle is newBundle with a role that may also write the fixture tables.
func newWriteBundle(t *testing.T, policy Policy) (*bundle, *recorder) {
	t.Helper()
	b := newBundle(t, policy)
	role := quoteIdent(b.db.RoleName("agent"))
	b.db.Exec(t, "GRANT INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "+role)
	b.db.Exec(t, `CREATE TABLE items (id serial PRIMARY KEY, sku text UNIQUE NOT NULL, qty int CHECK (qty >= 0),
		price numeric(20,2), tags text[], attrs jsonb, seen_at timestamptz, customer_id bigint REFERENCES customers(id))`)
	b.db.Exec(t, "GRANT SELECT, INSERT, UPDATE, DELETE ON items TO "+role+"; GRANT USAGE ON SEQUENCE items_id_seq TO "+role)
	rec := &recorder{}
	b.reg.setAuditor(rec)
	return b, rec
}

func TestWriteNeedsIntent(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{})
	before := b.db.QueryInt(t, "select count(*) from orders")
	cases := []struct{ tool, args string }{
		{"insert_data", `{"table":"items","row":{"sku":"a"}}`},
		{"update_data", `{"table":"orders","set":{"status":"x"},"where":"id = $1","params":[1]}`},
		{"delete_data", `{"table":"orders","where":"id = 1"}`},
		{"execute_sql", `{"sql":"delete from orders","mode":"write"}`},
	}
	for _, c := range cases {
		e := b.mustFail(t, ErrWriteIntentRequired, c.tool, c.args)
		if !strings.Contains(e.Message, "autocommit") || !strings.Contains(e.Suggestion, `"autocommit": true`) || !strings.Contains(e.Suggestion, "pg_tx") {
			t.Errorf("%s: the refusal does not show both ways: %+v", c.tool, e)
		}
	}
	if got := b.db.QueryInt(t, "select count(*) from orders"); got != before {
		t.Fatalf("orders changed: %d → %d", before, got)
	}
	if got := b.db.QueryInt(t, "select count(*) from items"); got != 0 {
		t.Fatalf("items written: %d", got)
	}
}

func TestInsertData(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{})
	out := b.mustCall(t, "insert_data", `{"table":"items","autocommit":true,"row":{"sku":"A-1","qty":3,"price":12345678901.25,
		"tags":["red","with \"quote\"",null],"attrs":{"size":"L","dims":[1,2]},"seen_at":"2026-01-02T03:04:05Z"}}`)
	rs := rows(t, out)
	if out["affectedRows"].(float64) != 1 || len(rs) != 1 || rs[0]["id"].(float64) != 1 || rs[0]["price"] != "12345678901.25" {
		t.Fatalf("insert result: %v", out)
	}
	// Committed: another connection sees it, with every type bound exactly.
	if n := b.db.QueryInt(t, `select count(*) from items where sku = 'A-1' and tags = array['red','with "quote"',null]
		and attrs = '{"size":"L","dims":[1,2]}'::jsonb and seen_at = '2026-01-02 03:04:05+00' and price = 12345678901.25`); n != 1 {
		t.Fatal("inserted row is not as sent")
	}

	// Many rows in one statement, missing keys take defaults, generated keys come back.
	var sb strings.Builder
	sb.WriteString(`{"table":"items","autocommit":true,"returning":"id,sku","rows":[`)
	for i := 0; i < 1000; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		if i%2 == 0 {
			fmt.Fprintf(&sb, `{"sku":"bulk-%d","qty":%d}`, i, i)
		} else {
			fmt.Fprintf(&sb, `{"sku":"bulk-%d"}`, i)
		}
	}
	sb.WriteString(`]}`)
	out = b.mustCall(t, "insert_data", sb.String())
	rs = rows(t, out)
	if out["affectedRows"].(float64) != 1000 || len(rs) != 1000 || rs[0]["id"] == nil || len(rs[0]) != 2 {
		t.Fatalf("bulk insert: affected %v, %d rows, first %v", out["affectedRows"], len(rs), rs[0])
	}
	if n := b.db.QueryInt(t, "select count(*) from items where sku like 'bulk-%' and qty is null"); n != 500 {
		t.Fatalf("missing keys did not take defaults: %d", n)
	}

	// Upsert: nothing, then update.
	out = b.mustCall(t, "insert_data", `{"table":"items","autocommit":true,"row":{"sku":"A-1","qty":9},"on_conflict":{"columns":"sku","action":"nothing"}}`)
	if out["affectedRows"].(float64) != 0 || b.db.QueryInt(t, "select qty from items where sku = 'A-1'") != 3 {
		t.Fatalf("on_conflict nothing: %v", out)
	}
	out = b.mustCall(t, "insert_data", `{"table":"items","autocommit":true,"row":{"sku":"A-1","qty":9},"on_conflict":{"columns":["sku"],"action":"update"}}`)
	if out["affectedRows"].(float64) != 1 || b.db.QueryInt(t, "select qty from items where sku = 'A-1'") != 9 {
		t.Fatalf("on_conflict update: %v", out)
	}
	if n := b.db.QueryInt(t, "select count(*) from items where sku = 'A-1'"); n != 1 {
		t.Fatalf("upsert duplicated the row: %d", n)
	}

	// Bad input: unknown column, a value of the wrong type; nothing is written.
	before := b.db.QueryInt(t, "select count(*) from items")
	b.mustFail(t, ErrInvalidColumn, "insert_data", `{"table":"items","autocommit":true,"rows":[{"sku":"x"},{"skew":"y"}]}`)
	b.mustFail(t, ErrSyntax, "insert_data", `{"table":"items","autocommit":true,"rows":[{"sku":"x1","qty":1},{"sku":"x2","qty":1.5}]}`)
	b.mustFail(t, ErrInvalidArguments, "insert_data", `{"table":"items","autocommit":true,"row":{"sku":"x"},"rows":[{"sku":"y"}]}`)
	if e := b.mustFail(t, ErrInvalidArguments, "insert_data", `{"table":"items","autocommit":true}`); !strings.Contains(e.Message, "neither row nor rows") {
		t.Fatalf("insert without rows: %+v", e)
	}
	if got := b.db.QueryInt(t, "select count(*) from items"); got != before {
		t.Fatalf("a refused insert wrote rows: %d → %d", before, got)
	}
}

func TestConstraintViolationsAreMasked(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{})
	b.mustCall(t, "insert_data", `{"table":"items","autocommit":true,"row":{"sku":"SECRET-SKU-1"}}`)
	cases := []struct {
		name, args, constraint string
	}{
		{"unique", `{"table":"items","autocommit":true,"row":{"sku":"SECRET-SKU-1"}}`, "items_sku_key"},
		{"foreign key", `{"table":"items","autocommit":true,"row":{"sku":"SECRET-SKU-2","customer_id":987654}}`, "items_customer_id_fkey"},
		{"not null", `{"table":"items","autocommit":true,"row":{"qty":1}}`, "sku"},
		{"check", `{"table":"items","autocommit":true,"row":{"sku":"SECRET-SKU-3","qty":-5}}`, "items_qty_check"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := b.mustFail(t, ErrConstraint, "insert_data", c.args)
			raw, _ := json.Marshal(e)
			if bytes.Contains(raw, []byte("SECRET-SKU")) || bytes.Contains(raw, []byte("987654")) || strings.Contains(string(raw), "-5") {
				t.Fatalf("error echoes a value: %s", raw)
			}
			if !strings.Contains(string(raw), c.constraint) || e.SQLState[:2] != "23" {
				t.Fatalf("error does not name %s: %s", c.constraint, raw)
			}
		})
	}
	if n := b.db.QueryInt(t, "select count(*) from items"); n != 1 {
		t.Fatalf("violations wrote rows: %d", n)
	}
}

func TestUpdateDeleteGuards(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{MaxAffectedRows: 100})
	total := b.db.QueryInt(t, "select count(*) from orders")
	paid := b.db.QueryInt(t, "select count(*) from orders where status = 'paid'")

	b.mustFail(t, ErrInvalidArguments, "update_data", `{"table":"orders","set":{"status":"x"},"autocommit":true}`)
	b.mustFail(t, ErrInvalidArguments, "update_data", `{"table":"orders","set":{"status":"x"},"where":" ","autocommit":true}`)
	b.mustFail(t, ErrInvalidArguments, "delete_data", `{"table":"orders","where":"\n\t","autocommit":true}`)
	e := b.mustFail(t, ErrTooManyRows, "update_data", `{"table":"orders","set":{"status":"x"},"where":"true","autocommit":true}`)
	if !strings.Contains(e.Message, fmt.Sprint(total)) || !strings.Contains(e.Suggestion, "dry_run") {
		t.Fatalf("too_many_rows lacks the real count or the narrower call: %+v", e)
	}
	b.mustFail(t, ErrTooManyRows, "delete_data", `{"table":"orders","where":"true","autocommit":true}`)
	// The call may lower the cap, never raise it.
	b.mustFail(t, ErrTooManyRows, "delete_data", `{"table":"orders","where":"id <= 5","max_affected_rows":4,"autocommit":true}`)
	b.mustFail(t, ErrTooManyRows, "delete_data", `{"table":"orders","where":"id <= 101","max_affected_rows":5000,"autocommit":true}`)
	if got := b.db.QueryInt(t, "select count(*) from orders where status = 'x'"); got != 0 {
		t.Fatal("a refused update changed rows")
	}
	if got := b.db.QueryInt(t, "select count(*) from orders"); got != total {
		t.Fatal("a refused delete removed rows")
	}

	// dry_run counts exactly and changes nothing (no intent needed: it cannot change anything).
	out := b.mustCall(t, "update_data", `{"table":"orders","set":{"status":"x"},"where":"status = $1","params":["paid"],"dry_run":true}`)
	if out["affectedRows"].(float64) != float64(paid) || len(rows(t, out)) != previewRows || out["dryRun"] != true {
		t.Fatalf("dry run: %v", out)
	}
	if got := b.db.QueryInt(t, "select count(*) from orders where status = 'x'"); got != 0 {
		t.Fatal("dry run changed rows")
	}

	// where params keep their numbers; set values bind after them.
	out = b.mustCall(t, "update_data", `{"table":"orders","set":{"status":"shipped","total":"99.99"},"where":"id = $1 AND status = $2","params":[3,"paid"],"autocommit":true,"returning":"id,status,total"}`)
	rs := rows(t, out)
	if out["affectedRows"].(float64) != 1 || rs[0]["status"] != "shipped" || rs[0]["total"] != "99.99" {
		t.Fatalf("update: %v", out)
	}
	out = b.mustCall(t, "delete_data", `{"table":"orders","where":"id = ANY($1)","params":[[4,5,6]],"autocommit":true}`)
	if out["affectedRows"].(float64) != 3 || b.db.QueryInt(t, "select count(*) from orders where id in (4,5,6)") != 0 {
		t.Fatalf("delete: %v", out)
	}
}

func TestExecuteSQLWrite(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{MaxAffectedRows: 100})
	role := quoteIdent(b.db.RoleName("agent"))
	b.db.Exec(t, "GRANT CREATE ON SCHEMA public TO "+role+"; CREATE TABLE scratch (i int); ALTER TABLE scratch OWNER TO "+role)

	out := b.mustCall(t, "execute_sql", `{"sql":"update orders set status = $1 where id = $2 returning id","params":["done",7],"mode":"write","autocommit":true}`)
	if out["affectedRows"].(float64) != 1 || out["command"] != "UPDATE" || b.db.QueryInt(t, "select count(*) from orders where status = 'done'") != 1 {
		t.Fatalf("execute_sql write: %v", out)
	}
	// DDL is recognised after it ran and rolled back, by tag and by catalog changes.
	for _, sql := range []string{"create table made_here (i int)", "create table made_as as select 1 as x", "select 1 as x into made_into",
		"alter table scratch add column j int", "comment on table scratch is 'x'", "create index on scratch (i)"} {
		b.mustFail(t, ErrNotAllowed, "execute_sql", fmt.Sprintf(`{"sql":%q,"mode":"write","autocommit":true}`, sql))
	}
	if n := b.db.QueryInt(t, "select count(*) from pg_class where relname in ('made_here','made_as','made_into')"); n != 0 {
		t.Fatalf("refused DDL left %d relations", n)
	}
	if n := b.db.QueryInt(t, "select count(*) from pg_attribute where attrelid = 'scratch'::regclass and attname = 'j'"); n != 0 {
		t.Fatal("refused ALTER TABLE stuck")
	}
	for _, sql := range []string{"COMMIT", "BEGIN", "/* x */ rollback", "SET TRANSACTION READ WRITE", "savepoint a"} {
		e := b.mustFail(t, ErrNotAllowed, "execute_sql", fmt.Sprintf(`{"sql":%q,"mode":"write","autocommit":true}`, sql))
		if !strings.Contains(e.Message, "nothing was run") {
			t.Errorf("%s: %+v", sql, e)
		}
	}
	b.mustFail(t, ErrNotAllowed, "execute_sql", `{"sql":"vacuum orders","mode":"write","autocommit":true}`)
	b.mustFail(t, ErrSyntax, "execute_sql", `{"sql":"update orders set status = 'a'; delete from orders","mode":"write","autocommit":true}`)
	b.mustFail(t, ErrTooManyRows, "execute_sql", `{"sql":"update orders set status = 'all'","mode":"write","autocommit":true,"confirm_destructive":true}`)
	if n := b.db.QueryInt(t, "select count(*) from orders where status = 'all'"); n != 0 {
		t.Fatal("execute_sql update beyond the cap stuck")
	}

	// A committed write does not leak session state into the next call on the connection.
	for i := 0; i < 4; i++ {
		b.mustCall(t, "execute_sql", `{"sql":"select set_config('search_path', 'pg_catalog', false)","mode":"write","autocommit":true}`)
	}
	for i := 0; i < 4; i++ {
		out = b.mustCall(t, "execute_sql", `{"sql":"show search_path"}`)
		if sp := rows(t, out)[0]["search_path"]; sp != `"$user", public` {
			t.Fatalf("search_path leaked: %v", sp)
		}
	}
}

func TestDDLPolicy(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{AllowDDL: true})
	role := quoteIdent(b.db.RoleName("agent"))
	b.db.Exec(t, "GRANT CREATE ON SCHEMA public TO "+role+"; CREATE TABLE scratch (i int); ALTER TABLE scratch OWNER TO "+role)
	ddl := Principal{Name: "dba", Scopes: []string{"read", "write", "ddl"}}

	// Without the ddl scope, the policy alone is not enough.
	b.mustFail(t, ErrNotAllowed, "execute_sql", `{"sql":"create table t2 (i int)","mode":"write","autocommit":true}`)
	if _, e := b.callAs(t, ddl, "execute_sql", `{"sql":"create table t2 (i int)","mode":"write","autocommit":true}`); e != nil {
		t.Fatalf("DDL with policy and scope: %+v", e)
	}
	if b.db.QueryInt(t, "select count(*) from pg_class where relname = 't2'") != 1 {
		t.Fatal("allowed DDL did not commit")
	}
	_, e := b.callAs(t, ddl, "execute_sql", `{"sql":"drop table scratch","mode":"write","autocommit":true}`)
	if e == nil || e.Type != ErrConfirmationRequired {
		t.Fatalf("DROP without confirmation: %+v", e)
	}
	_, e = b.callAs(t, ddl, "execute_sql", `{"sql":"truncate scratch","mode":"write","autocommit":true}`)
	if e == nil || e.Type != ErrConfirmationRequired {
		t.Fatalf("TRUNCATE without confirmation: %+v", e)
	}
	if b.db.QueryInt(t, "select count(*) from pg_class where relname = 'scratch'") != 1 {
		t.Fatal("unconfirmed DROP removed the table")
	}
	if _, e = b.callAs(t, ddl, "execute_sql", `{"sql":"drop table scratch","mode":"write","autocommit":true,"confirm_destructive":true}`); e != nil {
		t.Fatalf("confirmed DROP: %+v", e)
	}
	if b.db.QueryInt(t, "select count(*) from pg_class where relname = 'scratch'") != 0 {
		t.Fatal("confirmed DROP did not drop")
	}
}

func TestWritePolicyRefusals(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{DenyTables: []string{"customers"}})
	reader := Principal{Name: "reader", Scopes: []string{"read"}}
	if _, e := b.callAs(t, reader, "insert_data", `{"table":"items","row":{"sku":"r"},"autocommit":true}`); e == nil || e.Type != ErrNotAllowed {
		t.Fatalf("read-only token wrote: %+v", e)
	}
	if _, e := b.callAs(t, reader, "execute_sql", `{"sql":"delete from items","mode":"write","autocommit":true}`); e == nil || e.Type != ErrNotAllowed {
		t.Fatalf("read-only token ran execute_sql write: %+v", e)
	}
	b.mustFail(t, ErrNotAllowed, "delete_data", `{"table":"customers","where":"id = 1","autocommit":true}`)
	b.mustFail(t, ErrNotAllowed, "select_query", `{"table":"customers"}`)

	ro, _ := newWriteBundle(t, Policy{ReadOnly: true})
	ro.mustFail(t, ErrNotAllowed, "insert_data", `{"table":"items","row":{"sku":"r"},"autocommit":true}`)
	if n := ro.db.QueryInt(t, "select count(*) from items"); n != 0 {
		t.Fatal("read_only database accepted a write")
	}
}

func TestAuditLogsEveryWriteAttempt(t *testing.T) {
	t.Parallel()
	b, rec := newWriteBundle(t, Policy{MaxAffectedRows: 10})
	calls := []struct {
		tool, args, outcome string
		errType             ErrorType
	}{
		{"insert_data", `{"table":"items","row":{"sku":"AUDIT-VALUE-1"},"autocommit":true}`, "committed", ""},
		{"insert_data", `{"table":"items","row":{"sku":"AUDIT-VALUE-2"}}`, "error", ErrWriteIntentRequired},
		{"update_data", `{"table":"orders","set":{"status":"AUDIT-VALUE-3"},"where":"true","autocommit":true}`, "error", ErrTooManyRows},
		{"delete_data", `{"table":"orders","where":"id = 1","dry_run":true}`, "dry_run", ""},
		{"execute_sql", `{"sql":"delete from orders where id = 2","mode":"write","autocommit":true}`, "committed", ""},
		{"insert_data", `{"table":"items","row":{"nope":1},"autocommit":true}`, "error", ErrInvalidColumn},
		{"select_query", `{"table":"orders","limit":1}`, "", ""},
		{"execute_sql", `{"sql":"select 1"}`, "", ""},
	}
	for _, c := range calls {
		_, _ = b.call(t, c.tool, c.args)
	}
	evs := rec.all()
	want := 0
	for _, c := range calls {
		if c.outcome != "" {
			want++
		}
	}
	if len(evs) != want {
		t.Fatalf("got %d audit events, want %d: %+v", len(evs), want, evs)
	}
	i := 0
	for _, c := range calls {
		if c.outcome == "" {
			continue
		}
		ev := evs[i]
		i++
		if ev.Tool != c.tool || ev.Outcome != c.outcome || ev.ErrorType != c.errType || ev.Principal != "tester" || ev.Database != "default" {
			t.Errorf("%s %s: event %+v", c.tool, c.args, ev)
		}
		if raw, _ := json.Marshal(ev); bytes.Contains(raw, []byte("AUDIT-VALUE")) {
			t.Errorf("audit event holds a value: %s", raw)
		}
	}
	if evs[0].Table != "items" || evs[0].AffectedRows == nil || *evs[0].AffectedRows != 1 {
		t.Errorf("first event lacks table or count: %+v", evs[0])
	}
}
