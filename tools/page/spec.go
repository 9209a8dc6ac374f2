package page

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"github.com/pgtools/pgtools/tools/internal/pgerr"
)

// Spec is what a tool that pages keeps in its tokens: the arguments a token fixes (Bound), those
// it carries for a call that leaves them out but lets change (Carried), each argument's name
// inside the token (Short) and how its value is normalized (Norm).
type Spec struct {
	// Bound are the arguments that decide which rows match and in what order: a call with
	// page_token may repeat them or leave them out, but not change them.
	Bound []string
	// Carried are the arguments that only shape the page: a call may change them; left out,
	// they are the token's.
	Carried []string
	// Short names arguments inside a token, where every byte is paid for twice (when the model
	// reads it and when it writes it back). An argument it does not name keeps its name.
	Short map[string]string
	// Norm is v as a token holds argument k: nil when it means the default, ok false when it
	// has a type the tool's schema refuses anyway. nil keeps every value as given.
	Norm func(k string, v any) (any, bool)
}

// Key is argument k's name inside a token.
func (s *Spec) Key(k string) string { return cmp.Or(s.Short[k], k) }

func (s *Spec) all() []string { return append(slices.Clone(s.Bound), s.Carried...) }

func (s *Spec) norm(k string, v any) (any, bool) {
	if s.Norm == nil {
		return v, true
	}
	return s.Norm(k, v)
}

// Args is the normalized form of a call's arguments m that a token carries, by short name.
func (s *Spec) Args(m map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range s.all() {
		if v, ok := s.norm(k, m[k]); ok && v != nil {
			out[s.Key(k)] = v
		}
	}
	return out
}

// Merge checks a call's arguments m against the token's state st and fills in those the call
// left out, so that the call then validates and runs as the first page's call did. A call that
// names offset, or changes a bound argument, is refused (invalid_arguments).
func (s *Spec) Merge(m map[string]any, st *State) *pgerr.Error {
	if _, ok := m["offset"]; ok {
		return pgerr.Errorf(pgerr.ErrInvalidArguments, "Send page_token without offset: the token knows where the next page starts.",
			"Invalid arguments: page_token and offset cannot be combined")
	}
	var changed []string
	for _, k := range s.Bound {
		v, given := m[k]
		if !given {
			continue
		}
		// A value that cannot be normalized (a type the schema refuses, or an argument this
		// spec does not know how to compare) counts as changed: fail closed.
		if got, ok := s.norm(k, v); !ok || !sameJSON(got, st.Args[s.Key(k)]) {
			changed = append(changed, k)
		}
	}
	if len(changed) > 0 {
		return pgerr.Errorf(pgerr.ErrInvalidArguments,
			"Send page_token alone, or with the same "+strings.Join(changed, ", ")+" as the call that returned it; to read with other arguments, call without page_token.",
			"Invalid arguments: page_token was issued for a call with other %s", strings.Join(changed, ", "))
	}
	for _, k := range s.all() {
		if _, given := m[k]; !given && st.Args[s.Key(k)] != nil {
			m[k] = st.Args[s.Key(k)]
		}
	}
	return nil
}

func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
