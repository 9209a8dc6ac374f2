package tools

import (
	"testing"
)

func TestSelectQueryBasics(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	out := b.mustCall(t, "select_query", `{"table":"orders","columns":"id, status,total","where":"status = $1 AND total > $2","params":["paid", 100],"order_by":"total desc, id","limit":3}`)
	rs := rows(t, out)
	if len(rs) != 3 || out["truncated"] != true || out["rowCount"].(float64) != 3 {
		t.Fatalf("unexpected result: %v", out)
	}
	if rs[0]["total"] != "450.00" || rs[0]["status"] != "paid" {
		t.Fatalf("first row: %v", rs[0])
	}
	if len(rs[0]) != 3 {
		t.Fatalf("columns not limited: %v", rs[0])
	}
}
