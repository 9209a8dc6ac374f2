package tools

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestCustomToolPages: an operator-defined read tool that declares order_by pages like
// select_query: with rows inserted before and after the read position and deleted ahead of it
// between pages, every row that existed throughout is read once, none twice; its page_token is
// bound to its own arguments; and the tool's schema offers page_token.
func TestCustomToolPages(t *testing.T) {
	t.Parallel()
	pb := newPagingBundle(t, `
CREATE TABLE ledger (id int PRIMARY KEY, account int NOT NULL, booked date, amount numeric);
INSERT INTO ledger SELECT i, i % 3, CASE WHEN i % 7 = 0 THEN NULL ELSE date '2026-01-01' + (i % 40) END, i
FROM generate_series(1, 500) i;`)
	pb.tdb.Policy.DefaultLimit = 40
	if err := pb.reg.addCustomTools(context.Background(), []CustomTool{{
		Name: "bookings", Description: "An account's bookings, newest first.",
		SQL:        "SELECT id, booked, amount FROM ledger WHERE account = $1 -- a trailing comment",
		Parameters: []CustomParam{{Name: "account", Type: "integer", Required: true}},
		OrderBy:    "booked desc nulls last, id",
	}}); err != nil {
		t.Fatal(err)
	}
	for _, info := range pb.reg.Tools() {
		if info.Name == "bookings" && !strings.Contains(string(info.InputSchema), `"page_token"`) {
			t.Fatalf("the schema offers no page_token: %s", info.InputSchema)
		}
	}
	want := queryStrings(t, pb.bundle, `SELECT id::text FROM ledger WHERE account = 1`)
	next := 1000
	deleted := map[string]bool{}
	all, pages := readPages(t, pb.reg, testPrincipal, "bookings", `{"account":1}`, 100, func() {
		next++
		pb.db.Exec(t, fmt.Sprintf(`INSERT INTO ledger VALUES (%d, 1, '2026-01-20', 0), (%d, 1, NULL, 0), (%d, 1, '2030-01-01', 0)`, next, next+5000, next+9000))
		// Two rows of the account, anywhere in the order: read already or still ahead.
		for _, id := range queryStrings(t, pb.bundle, `DELETE FROM ledger WHERE id IN (SELECT id FROM ledger WHERE account = 1 AND id < 1000 ORDER BY random() LIMIT 2) RETURNING id::text`) {
			deleted[id] = true
		}
	})
	missing := readOnce(t, all, want, deleted)
	if len(deleted) == 0 {
		t.Fatal("nothing was deleted between pages")
	}
	if pages < 4 || missing > 0 {
		t.Fatalf("%d pages, %d rows of account 1 missing", pages, missing)
	}

	res, _, e := pb.reg.Call(context.Background(), testPrincipal, "bookings", []byte(`{"account":2}`))
	if e != nil {
		t.Fatal(errorJSON(t, e))
	}
	tok := res.(*RowsResult).NextPage
	if _, _, e := pb.reg.Call(context.Background(), testPrincipal, "bookings", []byte(`{"account":1,"page_token":"`+tok+`"}`)); e == nil || e.Type != ErrInvalidArguments || !strings.Contains(e.Message, "account") {
		t.Fatalf("a token sent with another account: %v", e)
	}
	if _, _, e := pb.reg.Call(context.Background(), testPrincipal, "select_query", []byte(`{"page_token":"`+tok+`"}`)); e == nil || e.Type != ErrInvalidArguments {
		t.Fatalf("a bookings token sent to select_query: %v", e)
	}
}

// TestCustomToolOrderRefusedAtStart: order_by names columns of the result, pages reads only, and
// the statement must wrap as a subquery; each mistake stops the start naming the tool.
func TestCustomToolOrderRefusedAtStart(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	for _, c := range []struct {
		tool CustomTool
		want string
	}{
		{CustomTool{Name: "o1", Description: "x", SQL: "select id from orders", OrderBy: "total"}, "order_by"},
		{CustomTool{Name: "o2", Description: "x", SQL: "select id from orders", OrderBy: "id sideways"}, "order_by"},
		{CustomTool{Name: "o3", Description: "x", SQL: "update orders set total = total where false", Mode: "write", OrderBy: "id"}, "write tool"},
		{CustomTool{Name: "o4", Description: "x", SQL: "select id, id from orders", OrderBy: "id"}, "subquery"},
	} {
		err := b.reg.addCustomTools(context.Background(), []CustomTool{c.tool})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.tool.Name) {
			t.Errorf("%s: %v, want an error containing %q", c.tool.Name, err, c.want)
		}
	}
}
