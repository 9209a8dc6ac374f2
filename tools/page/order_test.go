package page

import (
	"fmt"
	"testing"
)

func str(s string) *string { return &s }

// TestOrderAfter pins the condition a keyset page continues by: a row comparison when every
// term has one direction and no NULL can occur, else term by term, minding where NULLs sort.
func TestOrderAfter(t *testing.T) {
	t.Parallel()
	id := Term{Col: "id", NotNull: true}
	for _, c := range []struct {
		name       string
		order      Order
		after      []*string
		first      int
		want       string
		wantParams string
	}{
		{"one direction, not null", Order{{Col: "a", NotNull: true}, id}, []*string{str("1"), str("2")}, 3,
			`("a", "id") > ($3, $4)`, "[1 2]"},
		{"descending", Order{{Col: "a", Desc: true, NullsFirst: true, NotNull: true}, {Col: "id", Desc: true, NullsFirst: true, NotNull: true}}, []*string{str("1"), str("2")}, 1,
			`("a", "id") < ($1, $2)`, "[1 2]"},
		{"nullable, nulls last", Order{{Col: "a"}, id}, []*string{str("x"), str("2")}, 1,
			`((("a" > $1 OR "a" IS NULL)) OR ("a" = $1 AND "id" > $2))`, "[x 2]"},
		{"after a NULL, nulls first", Order{{Col: "a", NullsFirst: true}, id}, []*string{nil, str("2")}, 1,
			`(("a" IS NOT NULL) OR ("a" IS NULL AND "id" > $1))`, "[2]"},
		{"after a NULL, nulls last", Order{{Col: "a"}, id}, []*string{nil, str("2")}, 1,
			`(("a" IS NULL AND "id" > $1))`, "[2]"},
		{"mixed directions", Order{{Col: "a", Desc: true, NullsFirst: true, NotNull: true}, id}, []*string{str("1"), str("2")}, 1,
			`(("a" < $1) OR ("a" = $1 AND "id" > $2))`, "[1 2]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, params, err := c.order.After(c.after, c.first)
			if err != nil || got != c.want || fmt.Sprint(params) != c.wantParams {
				t.Fatalf("got %s %v (%v)\nwant %s %s", got, params, err, c.want, c.wantParams)
			}
		})
	}
	if _, _, err := (Order{id}).After(nil, 1); err == nil {
		t.Fatal("no values for one term accepted")
	}
}

// TestOrderTotal: the key's columns the order lacks are added in the first term's direction;
// without a key the order stays as it is and is not total.
func TestOrderTotal(t *testing.T) {
	t.Parallel()
	o := Order{{Col: "placed_at", Desc: true, NullsFirst: true}, {Col: "b"}}
	total, ok := o.Total([]string{"b", "id"})
	if !ok || total.SQL() != `"placed_at" DESC, "b", "id" DESC` {
		t.Fatalf("%v %s", ok, total.SQL())
	}
	if same, ok := o.Total(nil); ok || len(same) != 2 {
		t.Fatalf("without a key: %v %v", ok, same)
	}
	if got := (Order{{Col: "a", NullsFirst: true}, {Col: "B", Desc: true}}).SQL(); got != `"a" NULLS FIRST, "B" DESC NULLS LAST` {
		t.Fatal(got)
	}
}
