package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

type objectInner struct {
	Mid string `json:"mid,omitempty"`
}

type objectTail struct {
	Last *string `json:"last,omitempty"`
}

// objectSample has a field of every kind ObjectEncoder writes itself but Rows (which
// encoding/json does not know), and some it hands to Marshal, embedded structs between them.
type objectSample struct {
	Name    string          `json:"name"`
	Opt     string          `json:"opt,omitempty"`
	Flag    bool            `json:"flag"`
	OptFlag bool            `json:"optFlag,omitempty"`
	N       int             `json:"n"`
	OptN    int64           `json:"optN,omitempty"`
	Count   *int            `json:"count,omitempty"`
	Always  *int            `json:"always"`
	Cut     *bool           `json:"cut,omitempty"`
	Raw     json.RawMessage `json:"raw,omitempty"`
	NilRaw  json.RawMessage `json:"nilRaw"`
	objectInner
	Dur     time.Duration     `json:"dur,omitempty"`
	When    time.Time         `json:"when"`
	Map     map[string]int    `json:"map,omitempty"`
	List    []string          `json:"list,omitempty"`
	Nested  *objectInner      `json:"nested,omitempty"`
	skipped string            // unexported: never written
	Dash    string            `json:"-"`
	NoTag   string            // no tag: written under its Go name
	Escaped map[string]string `json:"escaped,omitempty"`
	objectTail
}

// TestObjectEncoderMatchesEncodingJSON: for values without raw JSON, the encoder writes what
// encoding/json (without HTML escaping) writes, key order included.
func TestObjectEncoderMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	enc := NewObjectEncoder[objectSample]("")
	one, yes, last := 1, true, "é\u2028<&>\x01\"\\"
	for _, v := range []objectSample{
		{},
		{Name: "a\"b\n\t<tag>", Opt: "x", Flag: true, OptFlag: true, N: -3, OptN: 1 << 60, Count: &one, Always: &one, Cut: &yes,
			objectInner: objectInner{Mid: "m"}, Dur: time.Second, When: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
			Map: map[string]int{"b": 2, "a": 1}, List: []string{"x", "y"}, Nested: &objectInner{Mid: "n"},
			skipped: "s", Dash: "d", NoTag: "t", Escaped: map[string]string{"k": "<v>"}, objectTail: objectTail{Last: &last}},
		{Name: "\xff invalid utf-8", List: []string{}, Map: map[string]int{}},
	} {
		got, err := enc.Marshal(&v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Marshal(&v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("encoder:       %s\nencoding/json: %s", got, want)
		}
	}
}

// TestObjectEncoderRawAndRows: raw JSON is copied as it is (never re-encoded), a prefix comes
// first, and Rows writes "data" or, with columns, "columns" then "rows".
func TestObjectEncoderRawAndRows(t *testing.T) {
	t.Parallel()
	type answer struct {
		Op   string          `json:"operation"`
		Rows Rows            `json:"data,omitempty"`
		Raw  json.RawMessage `json:"raw,omitempty"`
		Hint string          `json:"hint,omitempty"`
	}
	enc := NewObjectEncoder[answer](`"success":true`)
	// Spacing and key order in raw JSON stay as they are: encoding/json would compact and check it.
	raw := json.RawMessage(`[{"b":1, "a":"<x>"}]`)
	for _, c := range []struct {
		v    answer
		want string
	}{
		{answer{Op: "select"}, `{"success":true,"operation":"select"}`},
		{answer{Op: "select", Rows: Rows{Data: raw}}, `{"success":true,"operation":"select","data":[{"b":1, "a":"<x>"}]}`},
		{answer{Op: "select", Rows: Rows{Columns: json.RawMessage(`["a"]`), Data: json.RawMessage(`[[1]]`)}, Hint: "h"},
			`{"success":true,"operation":"select","columns":["a"],"rows":[[1]],"hint":"h"}`},
		{answer{Op: "select", Rows: Rows{Data: json.RawMessage(`"a,b\r\n"`)}, Raw: raw},
			`{"success":true,"operation":"select","data":"a,b\r\n","raw":[{"b":1, "a":"<x>"}]}`},
	} {
		got, err := enc.Marshal(&c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
	// Without a prefix and with every field empty, the object is empty.
	type empty struct {
		A string `json:"a,omitempty"`
		R Rows   `json:"data,omitempty"`
	}
	if got, _ := NewObjectEncoder[empty]("").Marshal(&empty{}); string(got) != "{}" {
		t.Errorf("empty: %s", got)
	}
	// Rows without omitempty writes null for no rows, as encoding/json writes a nil RawMessage.
	type bare struct {
		R Rows `json:"data"`
	}
	if got, _ := NewObjectEncoder[bare]("").Marshal(&bare{}); string(got) != `{"data":null}` {
		t.Errorf("bare: %s", got)
	}
}

// TestObjectEncoderRefusesAtPlan: what the encoder does not implement is refused when the plan is
// made, not mis-encoded at run time.
func TestObjectEncoderRefusesAtPlan(t *testing.T) {
	t.Parallel()
	type stringOpt struct {
		N int `json:"n,string"`
	}
	type twice struct {
		objectInner
		Mid string `json:"mid"`
	}
	type embedsPointer struct {
		*objectInner
	}
	type prefixRepeated struct {
		S bool `json:"success"`
	}
	type rowsClash struct {
		R    Rows     `json:"data"`
		Rows []string `json:"rows"`
	}
	for name, plan := range map[string]func(){
		"tag option":       func() { NewObjectEncoder[stringOpt]("") },
		"repeated member":  func() { NewObjectEncoder[twice]("") },
		"embedded pointer": func() { NewObjectEncoder[embedsPointer]("") },
		"prefix member":    func() { NewObjectEncoder[prefixRepeated](`"success":true`) },
		"rows clash":       func() { NewObjectEncoder[rowsClash]("") },
		"bad prefix":       func() { NewObjectEncoder[objectInner](`"success":`) },
		"not a struct":     func() { NewObjectEncoder[int]("") },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(r.(string), "wire.NewObjectEncoder") {
					t.Errorf("%s: recovered %v, want a plan panic", name, r)
				}
			}()
			plan()
		}()
	}
}

// BenchmarkObjectEncoder measures the encoder's own cost on a small answer (no rows).
func BenchmarkObjectEncoder(b *testing.B) {
	type answer struct {
		Op        string          `json:"operation"`
		Table     string          `json:"table,omitempty"`
		RowCount  int             `json:"rowCount"`
		Rows      Rows            `json:"data,omitempty"`
		Truncated bool            `json:"truncated"`
		Time      string          `json:"executionTime,omitempty"`
		Hint      string          `json:"hint,omitempty"`
		Sessions  json.RawMessage `json:"sessions,omitempty"`
	}
	enc := NewObjectEncoder[answer](`"success":true`)
	v := &answer{Op: "select", Table: "orders", RowCount: 1, Rows: Rows{Data: json.RawMessage(`[{"id":1}]`)}, Time: "0.31ms"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := enc.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}
