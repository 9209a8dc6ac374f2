package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func ptr(f float64) *float64 { return &f }

// TestCustomTools: operator-defined tools run their statement with the arguments bound in order,
// under the same rules as the built-ins.
func TestCustomTools(t *testing.T) {
	t.Parallel()
	b, rec := newWriteBundle(t, Policy{MaxAffectedRows: 50})
	err := b.reg.addCustomTools(context.Background(), []CustomTool{
		{Name: "orders_of_customer", Description: "The orders of one customer, newest first.",
			SQL: "SELECT id, status, total FROM orders WHERE customer_id = $1 AND status = ANY($2) ORDER BY id DESC",
			Parameters: []CustomParam{{Name: "customer_id", Type: "integer", Required: true, Minimum: ptr(1)},
				{Name: "statuses", Type: "array", Items: "string", Default: []any{"paid", "pending"}}}},
		{Name: "mark_paid", Description: "Mark one order paid.", Mode: "write",
			SQL:        "UPDATE orders SET status = 'paid' WHERE id = $1 RETURNING id, status",
			Parameters: []CustomParam{{Name: "order_id", Type: "integer", Required: true}}},
		{Name: "reprice", Description: "Set the total of every order of a status.", Mode: "write",
			SQL:        "UPDATE orders SET total = $2 WHERE status = $1",
			Parameters: []CustomParam{{Name: "status", Type: "string", Required: true, Enum: []any{"paid", "pending"}}, {Name: "total", Type: "number", Required: true}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ti := range b.reg.Tools() {
		names = append(names, ti.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "orders_of_customer,mark_paid,reprice") {
		t.Fatalf("tools: %v", names)
	}
	out := b.mustCall(t, "orders_of_customer", `{"customer_id": 2}`)
	if n := len(rows(t, out)); n != 6 { // orders i with 1 + i % 50 = 2: i = 1, 51, …, 251
		t.Fatalf("%d orders of customer 2: %v", n, out)
	}
	out = b.mustCall(t, "orders_of_customer", `{"customer_id": 2, "statuses": ["paid"], "format": "columns"}`)
	if out["columns"] == nil {
		t.Fatalf("format ignored: %v", out)
	}
	// Arguments are checked against the declared parameters before anything runs.
	b.mustFail(t, ErrInvalidArguments, "orders_of_customer", `{}`)
	b.mustFail(t, ErrInvalidArguments, "orders_of_customer", `{"customer_id": 0}`)
	b.mustFail(t, ErrInvalidArguments, "orders_of_customer", `{"customer_id": 2, "sql": "drop table orders"}`)
	b.mustFail(t, ErrInvalidArguments, "reprice", `{"status": "lost", "total": 1, "autocommit": true}`)
	// A read tool cannot write: its statement runs READ ONLY, whatever the values.
	// A write tool needs intent, and respects max_affected_rows.
	b.mustFail(t, ErrWriteIntentRequired, "mark_paid", `{"order_id": 1}`)
	out = b.mustCall(t, "mark_paid", `{"order_id": 1, "autocommit": true}`)
	if out["affectedRows"].(float64) != 1 {
		t.Fatalf("mark_paid: %v", out)
	}
	if status := b.db.QueryInt(t, "select count(*) from orders where id = 1 and status = 'paid'"); status != 1 {
		t.Fatal("mark_paid did not commit")
	}
	e := b.mustFail(t, ErrTooManyRows, "reprice", `{"status": "pending", "total": 777.77, "autocommit": true}`)
	if !strings.Contains(e.Message, "rolled back") || b.db.QueryInt(t, "select count(*) from orders where total = 777.77") != 0 {
		t.Fatalf("cap: %v", e)
	}
	dry := b.mustCall(t, "reprice", `{"status": "paid", "total": 888.88, "dry_run": true}`)
	if dry["dryRun"] != true || b.db.QueryInt(t, "select count(*) from orders where total = 888.88") != 0 {
		t.Fatalf("dry run: %v", dry)
	}
	// Writes are audited under the tool's name; a read token cannot call a write tool.
	found := false
	for _, ev := range rec.events {
		found = found || ev.Tool == "mark_paid" && ev.Outcome == "committed"
	}
	if !found {
		t.Fatalf("no audit event for mark_paid: %+v", rec.events)
	}
	_, terr := b.callAs(t, Principal{Name: "reader", Scopes: []string{"read"}}, "mark_paid", `{"order_id": 2, "autocommit": true}`)
	if terr == nil || terr.Type != ErrNotAllowed {
		t.Fatalf("read token on a write tool: %v", terr)
	}
	// Values are bound, never spliced.
	out = b.mustCall(t, "orders_of_customer", `{"customer_id": 2, "statuses": ["x' OR '1'='1"]}`)
	if len(rows(t, out)) != 0 {
		t.Fatalf("a value changed the statement: %v", out)
	}
	var schema map[string]any
	for _, ti := range b.reg.Tools() {
		if ti.Name == "mark_paid" {
			_ = json.Unmarshal(ti.InputSchema, &schema)
		}
	}
	props, _ := schema["properties"].(map[string]any)
	if props["order_id"] == nil || props["autocommit"] == nil || schema["additionalProperties"] != false {
		t.Fatalf("mark_paid's schema: %v", schema)
	}
}

// TestCustomToolsRefusedAtStart: a broken tool is a configuration error naming it and the fix.
func TestCustomToolsRefusedAtStart(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	for _, c := range []struct {
		tool CustomTool
		want string
	}{
		{CustomTool{Name: "Bad-Name", Description: "x", SQL: "select 1"}, "lower-case"},
		{CustomTool{Name: "select_query", Description: "x", SQL: "select 1"}, "taken"},
		{CustomTool{Name: "t1", Description: "x", SQL: "select * from nowhere"}, "does not accept"},
		{CustomTool{Name: "t2", Description: "x", SQL: "select 1; select 2"}, "does not accept"},
		{CustomTool{Name: "t3", Description: "x", SQL: "select * from orders where id = $1"}, "1 parameters"},
		{CustomTool{Name: "t4", Description: "x", SQL: "select * from orders where id = $1",
			Parameters: []CustomParam{{Name: "id", Type: "boolean"}}}, `parameter 1 ("id") is declared boolean`},
		{CustomTool{Name: "t5", Description: "x", SQL: "select 1", Database: "nope"}, "not configured"},
		{CustomTool{Name: "t6", Description: "x", SQL: "DO $$ BEGIN END $$"}, "refused"},
		{CustomTool{Name: "t7", Description: "x", SQL: "select $1::int", Parameters: []CustomParam{{Name: "autocommit", Type: "integer"}}}, "reserved"},
	} {
		err := b.reg.addCustomTools(context.Background(), []CustomTool{c.tool})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.tool.Name) {
			t.Errorf("%s: %v, want an error containing %q", c.tool.Name, err, c.want)
		}
	}
}
