package tools

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/pgtools/pgtools/tools/pgtest"
)

// answerMasks replace what changes from run to run in an answer: its execution time, a page
// token (dated, signed with a key made per registry), and the planner's row estimates, which
// follow autovacuum.
var answerMasks = []pgtest.Mask{
	{Re: regexp.MustCompile(`"executionTime":"[^"]*"`), With: `"executionTime":"<time>"`},
	{Re: regexp.MustCompile(`"next_page":"[A-Za-z0-9_-]+"`), With: `"next_page":"<token>"`},
	{Re: regexp.MustCompile(`"estimatedRows":-?[0-9]+`), With: `"estimatedRows":"<estimate>"`},
	{Re: regexp.MustCompile(`"estimatedCost":[0-9.e+]+`), With: `"estimatedCost":"<estimate>"`},
	{Re: regexp.MustCompile(`"rows":[0-9]+`), With: `"rows":"<estimate>"`},
}

// TestAnswerGolden pins the success answer of every stateless tool and shape — rows in each format,
// cut rows, free SQL, writes with and without rows, dry runs, operator-defined tools, both
// describe_schema answers, batches —
// key order included, byte for byte as a transport sends it (only the masks above applied).
// The calls run in order on one database, so each sees the changes before it. Answers in a session
// are pinned in runner/session (TestSessionAnswerGolden). Rewrite with
// go test ./tools -run TestAnswerGolden -update and review the diff.
func TestAnswerGolden(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{})
	if err := b.reg.addCustomTools(context.Background(), []CustomTool{
		{Name: "order_status", Description: "One order's status.", SQL: "SELECT id, status FROM orders WHERE id = $1",
			Parameters: []CustomParam{{Name: "order_id", Type: "integer", Required: true}}},
		{Name: "set_qty", Description: "Set the quantity of item A-1.", Mode: "write", SQL: "UPDATE items SET qty = $1 WHERE sku = 'A-1' RETURNING sku, qty",
			Parameters: []CustomParam{{Name: "qty", Type: "integer", Required: true}}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, tool, args string }{
		{"select_query", "select_query", `{"table":"orders","columns":"id,status,total","where":"id <= $1","params":[2],"order_by":"id"}`},
		{"select_query-columns", "select_query", `{"table":"orders","columns":"id,status","where":"id <= 2","order_by":"id","format":"columns"}`},
		{"select_query-csv", "select_query", `{"table":"orders","columns":"id,status","where":"id <= 2","order_by":"id","format":"csv"}`},
		{"select_query-truncated", "select_query", `{"table":"orders","columns":"id","order_by":"id","limit":2,"offset":4}`},
		{"execute_sql-read", "execute_sql", `{"sql":"select id, placed_at from orders where id = $1","params":[1]}`},
		{"execute_sql-read-columns", "execute_sql", `{"sql":"select id, total from orders where id = 1","format":"columns"}`},
		{"execute_sql-write", "execute_sql", `{"sql":"update orders set status = 'paid' where id = 3 returning id, status","mode":"write","autocommit":true}`},
		{"execute_sql-write-no-rows", "execute_sql", `{"sql":"update orders set status = 'paid' where id in (4, 5)","mode":"write","autocommit":true}`},
		{"insert_data", "insert_data", `{"table":"items","row":{"sku":"A-1","qty":2,"tags":["x"]},"returning":"id,sku,qty,tags","autocommit":true}`},
		{"insert_data-columns", "insert_data", `{"table":"items","rows":[{"sku":"B-1"},{"sku":"B-2"}],"returning":"id,sku","autocommit":true,"format":"columns"}`},
		{"update_data", "update_data", `{"table":"items","set":{"qty":5},"where":"sku = $1","params":["A-1"],"returning":"sku,qty","autocommit":true}`},
		{"update_data-dry_run", "update_data", `{"table":"orders","set":{"status":"x"},"where":"id <= 12","returning":"status","dry_run":true}`},
		{"delete_data", "delete_data", `{"table":"items","where":"sku = 'B-2'","autocommit":true}`},
		{"delete_data-dry_run", "delete_data", `{"table":"items","where":"sku = 'B-1'","returning":"sku","dry_run":true}`},
		{"custom-read", "order_status", `{"order_id":1}`},
		{"custom-write-dry_run", "set_qty", `{"qty":7,"dry_run":true}`},
		{"custom-write", "set_qty", `{"qty":7,"autocommit":true}`},
		{"explain_query", "explain_query", `{"sql":"select o.id, c.name from orders o join customers c on c.id = o.customer_id where o.status = $1","params":["paid"]}`},
		{"explain_query-write", "explain_query", `{"sql":"update orders set status = 'x' where id = $1","params":[9]}`},
		{"describe_schema", "describe_schema", `{}`},
		{"describe_schema-table", "describe_schema", `{"table":"items"}`},
		{"pg_transaction", "pg_transaction", `{"operations":[{"sql":"update orders set status = 'x' where id = 6"},{"sql":"select id, status from orders where id = 6"}]}`},
		{"pg_transaction-columns", "pg_transaction", `{"format":"columns","operations":[{"sql":"select id, status from orders where id in (6, 7) order by id"}]}`},
	} {
		res, _, e := b.reg.Call(context.Background(), testPrincipal, c.tool, []byte(c.args))
		if e != nil {
			t.Fatalf("%s: %s (%s) — %s", c.name, e.Message, e.Type, e.Suggestion)
		}
		raw, err := res.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		pgtest.GoldenAnswer(t, filepath.Join("testdata", "answers", c.name+".golden"), raw, *update, answerMasks...)
	}
}
