package wire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestUnmarshalRefusesDuplicateKeys: a key named twice in one object is refused at any depth,
// spelled plainly, with escapes or as bytes encoding/json reads alike, in objects of few keys
// and of many, naming the key and where it is; the same key in different objects is not a
// duplicate, and no valid JSON without duplicates is refused.
func TestUnmarshalRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	many := func(dup bool) string {
		var b strings.Builder
		b.WriteString(`{`)
		for i := range 40 {
			b.WriteString(`"k` + strings.Repeat("x", i) + `":1,`)
		}
		if dup {
			b.WriteString(`"kxxx":2,`)
		}
		b.WriteString(`"end":true}`)
		return b.String()
	}
	for _, c := range []struct {
		in, key, path string
	}{
		{`{"decision":"deny","decision":"approve"}`, "decision", ""},
		{`{"decision":"deny","d\u0065cision":"approve"}`, "decision", ""},
		{`{"a":{"b":[1,{"c":1,"c":2}]}}`, "c", "a/b/1"},
		{`[{"x":1},{"y":1,"y":1}]`, "y", "1"},
		{"{\"\xff\":1,\"\xfe\":2}", "\ufffd", ""},
		{`{"rows":[{"id":1,"id":2}],"table":"t"}`, "id", "rows/0"},
		{many(true), "kxxx", ""},
	} {
		var v any
		err := Unmarshal([]byte(c.in), &v)
		var dup *DuplicateKeyError
		if !errors.As(err, &dup) {
			t.Errorf("%.60s: %v, want a duplicate key error", c.in, err)
			continue
		}
		if dup.Key != c.key || strings.Join(dup.Path, "/") != c.path {
			t.Errorf("%.60s: key %q at %q, want %q at %q", c.in, dup.Key, strings.Join(dup.Path, "/"), c.key, c.path)
		}
		if !strings.Contains(err.Error(), "appears more than once") {
			t.Errorf("%.60s: message %q", c.in, err)
		}
	}
	for _, in := range []string{`{}`, `[]`, `{"a":{"a":{"a":1}}}`, `[{"a":1},{"a":2}]`, `{"a":"\"a\":1,\"a\":2"}`,
		`{"a\"":1,"a":2}`, `{"A":1,"a":2}`, many(false), `"x"`, `1e3`, `null`, ` {"a" : [ 1 , 2 ] , "b" : { } } `} {
		var v any
		if err := Unmarshal([]byte(in), &v); err != nil {
			t.Errorf("%.60s: %v", in, err)
		}
	}
	// Invalid JSON is the decoder's to report, never a panic or a duplicate.
	for _, in := range []string{`{"a":1,"a"`, `{"a":`, `{"a" 1}`, `[1,`, `{"a":1,,"a":2}`, `{`, `"`, ``, `{"\u00":1}`} {
		var v any
		err := Unmarshal([]byte(in), &v)
		var dup *DuplicateKeyError
		if err == nil || errors.As(err, &dup) && in != `{"a":1,"a"` {
			t.Errorf("%q: %v, want the decoder's syntax error", in, err)
		}
	}
}

// FuzzCheckKeys: checkKeys never panics, and on valid JSON it finds a duplicate exactly when
// decoding into a map loses a member.
func FuzzCheckKeys(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":1}}`, `[{"x":1,"y":[{"z":1,"z":2}]}]`, `{"\u0061":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		dup := checkKeys(b)
		if !json.Valid(b) {
			return
		}
		if dup == nil && countLost(b) {
			t.Errorf("%q: no duplicate found, but a member is lost in decoding", b)
		}
	})
}

// countLost reports whether decoding b (valid JSON) into maps keeps fewer members than b writes.
func countLost(b []byte) bool {
	var v any
	_ = json.Unmarshal(b, &v)
	kept := 0
	var walk func(any)
	walk = func(x any) {
		switch y := x.(type) {
		case map[string]any:
			kept += len(y)
			for _, e := range y {
				walk(e)
			}
		case []any:
			for _, e := range y {
				walk(e)
			}
		}
	}
	walk(v)
	return kept < membersWritten(b)
}

// membersWritten counts the members of every object in b, as written.
func membersWritten(b []byte) int {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	type level struct{ object, wantKey bool }
	var stack []level
	n := 0
	value := func() { // a value ended: the next token of an object is a key
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, level{true, true})
		case json.Delim('['):
			stack = append(stack, level{false, false})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			value()
		default:
			if len(stack) > 0 && stack[len(stack)-1].object && stack[len(stack)-1].wantKey {
				n++
				stack[len(stack)-1].wantKey = false
				continue
			}
			value()
		}
	}
}
