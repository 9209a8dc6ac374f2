package tools

import (
	"strings"
	"testing"
)

// TestSuggestionsFixTheCallInOneStep: the holes found when trying pgtools as a new user would;
// each suggestion alone must make the next call work.
func TestSuggestionsFixTheCallInOneStep(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{})
	cases := []struct {
		name, tool, args string
		want             ErrorType
		message, suggest []string // substrings
	}{
		{"unknown column in where", "select_query", `{"table":"orders","where":"statu = 'paid'"}`, ErrInvalidColumn,
			nil, []string{`Did you mean "status"`, "customer_id", "placed_at"}},
		{"unknown column in a delete's where", "delete_data", `{"table":"orders","where":"totl > 5","autocommit":true}`, ErrInvalidColumn,
			nil, []string{`"total"`}},
		{"double-quoted text", "select_query", `{"table":"orders","where":"status = \"paid\""}`, ErrInvalidColumn,
			nil, []string{"single quotes ('paid')", "$1"}},
		{"double-quoted text in execute_sql", "execute_sql", `{"sql":"select id from orders where status = \"paid\""}`, ErrInvalidColumn,
			nil, []string{"single quotes ('paid')"}},
		{"value that does not fit its column", "insert_data", `{"table":"items","row":{"sku":"s-1","qty":"twenty"},"autocommit":true}`, ErrSyntax,
			[]string{`column "qty"`, "$2"}, []string{`column "qty"'s type`}},
		{"value in set", "update_data", `{"table":"items","set":{"qty":"many"},"where":"sku = $1","params":["x"],"autocommit":true}`, ErrSyntax,
			[]string{`column "qty"`, "$2"}, nil},
		{"where param that does not fit", "select_query", `{"table":"orders","where":"id = $1","params":["abc"]}`, ErrSyntax,
			[]string{"$1"}, []string{"$1::text"}},
		{"check rule", "insert_data", `{"table":"items","row":{"sku":"s-2","qty":-1},"autocommit":true}`, ErrConstraint,
			nil, []string{"CHECK ((qty >= 0))", "items_qty_check"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := b.mustFail(t, c.want, c.tool, c.args)
			assertErrorSays(t, e, c.message, c.suggest)
			if strings.Contains(e.Message+e.Suggestion, "twenty") || strings.Contains(e.Message+e.Suggestion, "many") {
				t.Errorf("a bound value is echoed: %s", errorJSON(t, e))
			}
		})
	}
}
