package tools

import (
	"strings"
	"testing"
)

// TestTypedArguments: arguments are decoded exactly into each tool's struct once validated. A
// whole number written as 1e1 or 10.0 is the integer the schema says it is; one too large for Go
// is refused by name instead of silently becoming the default (an offset of 1e30 used to read as 0).
func TestTypedArguments(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	for _, args := range []string{`{"table":"orders","limit":1e1,"order_by":"id"}`, `{"table":"orders","limit":10.0,"order_by":"id"}`} {
		out := b.mustCall(t, "select_query", args)
		if n := len(rows(t, out)); n != 10 {
			t.Fatalf("%s: %d rows", args, n)
		}
	}
	out := b.mustCall(t, "select_query", `{"table":"orders","limit":2,"offset":2e0,"order_by":"id","columns":["id"]}`)
	if rs := rows(t, out); len(rs) != 2 || rs[0]["id"].(float64) != 3 {
		t.Fatalf("offset 2e0: %v", rs)
	}
	for _, c := range []struct{ tool, args, want string }{
		{"select_query", `{"table":"orders","offset":1e30}`, "offset: "},
		{"select_query", `{"table":"orders","limit":99999999999999999999}`, "limit: "},
		{"update_data", `{"table":"orders","set":{"status":"x"},"where":"id = 1","max_affected_rows":1e40,"dry_run":true}`, "max_affected_rows: "},
	} {
		e := b.mustFail(t, ErrInvalidArguments, c.tool, c.args)
		if !strings.Contains(e.Message, c.want) || !strings.Contains(e.Message, "too large") {
			t.Fatalf("%s %s: %s", c.tool, c.args, errorJSON(t, e))
		}
	}
}
