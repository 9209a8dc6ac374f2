package plan

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// updateWithBitmap is EXPLAIN (FORMAT JSON, VERBOSE) of an UPDATE of shop.orders reached by a
// BitmapOr of two indexes, joined to public.big by a sequential scan.
const updateWithBitmap = `[{"Plan": {"Node Type": "ModifyTable", "Operation": "Update", "Relation Name": "orders",
 "Schema": "shop", "Total Cost": 1234.567, "Plan Rows": 0, "Plans": [
  {"Node Type": "Hash Join", "Total Cost": 1200, "Plan Rows": 41.6, "Plans": [
   {"Node Type": "Bitmap Heap Scan", "Relation Name": "orders", "Schema": "shop", "Plan Rows": 40,
    "Recheck Cond": "((id = 1) OR (id = 2))", "Plans": [
     {"Node Type": "BitmapOr", "Plans": [
      {"Node Type": "Bitmap Index Scan", "Index Name": "orders_pkey"},
      {"Node Type": "Bitmap Index Scan", "Index Name": "orders_ref_idx"}]}]},
   {"Node Type": "Seq Scan", "Relation Name": "big", "Schema": "public", "Plan Rows": 20000,
    "Filter": "(n > 0)"}]}]}}]`

func TestSummarize(t *testing.T) {
	t.Parallel()
	top, err := Parse([]byte(updateWithBitmap))
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(top, func(schema, name string) (int64, bool) { return 50000, schema == "public" && name == "big" })
	want := &Summary{Cost: ptr(1234.57), Rows: ptr[int64](0),
		Scans: []Scan{
			{Table: "shop.orders", Method: "Bitmap Heap Scan", Index: "orders_pkey, orders_ref_idx", Filter: "((id = 1) OR (id = 2))", Rows: ptr[int64](40)},
			{Table: "big", Method: "Seq Scan", Filter: "(n > 0)", Rows: ptr[int64](20000)}},
		Writes:   []Write{{Operation: "update", Table: "shop.orders", Rows: ptr[int64](42)}},
		Warnings: []string{"Seq Scan reads all of big (about 50000 rows) to apply (n > 0): an index on the filtered columns, or a where on indexed ones, avoids it"}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("summary\n%+v\nwant\n%+v", s, want)
	}
	if _, err := Parse([]byte(`[]`)); err == nil {
		t.Error("Parse accepted EXPLAIN output without a plan")
	}
}

func ptr[T any](v T) *T { return &v }

// TestWithhold: a plan that reads a table under row-level security is summed up as the tables it
// reads and writes, and nothing the planner derived from statistics; one that does not is not.
func TestWithhold(t *testing.T) {
	t.Parallel()
	top, err := Parse([]byte(updateWithBitmap))
	if err != nil {
		t.Fatal(err)
	}
	hidden := func(schema, name string) bool { return schema == "shop" && name == "orders" }
	if !Reads(top, hidden) || Reads(top, func(string, string) bool { return false }) {
		t.Fatal("Reads misses or invents a hidden relation")
	}
	s := Withhold(top, hidden)
	want := &Summary{Scans: []Scan{{Table: "big"}, {Table: "shop.orders"}},
		Writes:   []Write{{Operation: "update", Table: "shop.orders"}},
		Withheld: fmt.Sprintf(withheldNote, "shop.orders")}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("withheld summary\n%+v\nwant\n%+v", s, want)
	}
	raw, _ := json.Marshal(s)
	for _, leak := range []string{"estimatedRows", "estimatedCost", `"rows"`, "id = 1", "n > 0", "Scan\"", "orders_pkey"} {
		if strings.Contains(string(raw), leak) {
			t.Errorf("withheld summary shows %q: %s", leak, raw)
		}
	}
}

func TestShiftPosition(t *testing.T) {
	t.Parallel()
	err := ShiftPosition(&pgconn.PgError{Position: int32(len(ExplainPrefix)) + 8})
	if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Position != 8 {
		t.Errorf("position %+v, want 8: the agent's statement's own", err)
	}
}
