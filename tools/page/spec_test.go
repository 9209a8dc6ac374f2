package page

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestSpecMerge: a call with a token may repeat the bound arguments (as normalized), change the
// carried ones and leave any out, which the token then fills in; it may not change a bound one
// nor send offset.
func TestSpecMerge(t *testing.T) {
	t.Parallel()
	trim := func(_ string, v any) (any, bool) {
		switch x := v.(type) {
		case string:
			return strings.TrimSpace(x), true
		case json.Number, nil:
			return x, true
		}
		return nil, false
	}
	s := &Spec{Bound: []string{"table", "where"}, Carried: []string{"limit"}, Short: map[string]string{"table": "t"}, Norm: trim}
	st := &State{Args: s.Args(map[string]any{"table": "orders", "where": " x > 1 ", "limit": json.Number("5"), "other": "dropped"})}
	if want := map[string]any{"t": "orders", "where": "x > 1", "limit": json.Number("5")}; !reflect.DeepEqual(st.Args, want) {
		t.Fatalf("args %v, want %v", st.Args, want)
	}
	for _, c := range []struct {
		name string
		call map[string]any
		want map[string]any // nil: refused
		in   string         // in the refusal
	}{
		{"alone", map[string]any{}, map[string]any{"table": "orders", "where": "x > 1", "limit": json.Number("5")}, ""},
		{"repeated, another limit", map[string]any{"table": "orders", "where": "x > 1  ", "limit": json.Number("2")},
			map[string]any{"table": "orders", "where": "x > 1  ", "limit": json.Number("2")}, ""},
		{"another table", map[string]any{"table": "customers"}, nil, "other table"},
		{"two changed", map[string]any{"table": "customers", "where": "y"}, nil, "other table, where"},
		{"a type the schema refuses", map[string]any{"where": 3}, nil, "other where"},
		{"offset", map[string]any{"offset": json.Number("5")}, nil, "offset cannot be combined"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := s.Merge(c.call, st)
			if c.want == nil {
				if e == nil || !strings.Contains(e.Message, c.in) {
					t.Fatalf("got %v, want a refusal naming %q", e, c.in)
				}
				return
			}
			if e != nil || !reflect.DeepEqual(c.call, c.want) {
				t.Fatalf("got %v (%v), want %v", c.call, e, c.want)
			}
		})
	}
}

// TestSpecWithoutNorm: a spec without Norm carries values as given.
func TestSpecWithoutNorm(t *testing.T) {
	t.Parallel()
	s := &Spec{Bound: []string{"id"}, Carried: []string{"format"}}
	st := &State{Args: s.Args(map[string]any{"id": json.Number("7"), "format": "csv"})}
	m := map[string]any{"id": json.Number("7")}
	if e := s.Merge(m, st); e != nil || m["format"] != "csv" || s.Key("id") != "id" {
		t.Fatalf("merged %v (%v)", m, e)
	}
	if e := s.Merge(map[string]any{"id": json.Number("8")}, st); e == nil {
		t.Fatal("another id accepted")
	}
}
