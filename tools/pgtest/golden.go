package pgtest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// Golden compares got with the golden file at path; with update it writes got there instead
// (the -update flag of the caller's tests). What a model reads — error answers, descriptions —
// is pinned this way, so that a change of wording is reviewed as a diff.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs (run with -update and review the diff):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// Mask replaces what changes from run to run in an answer (an id, a time) before it is compared.
type Mask struct {
	Re   *regexp.Regexp
	With string
}

// GoldenAnswer compares a tool's answer with the golden file at path, as Golden does, after the
// masks and indented: indenting keeps the key order, which is part of what is pinned. The answer
// itself must be compact JSON, as every transport sends it.
func GoldenAnswer(t testing.TB, path string, raw []byte, update bool, masks ...Mask) {
	t.Helper()
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		t.Fatalf("%s: not JSON: %v\n%s", path, err, raw)
	}
	if !bytes.Equal(compact.Bytes(), raw) {
		t.Fatalf("%s: answer is not compact JSON:\n%s", path, raw)
	}
	for _, m := range masks {
		raw = m.Re.ReplaceAll(raw, []byte(m.With))
	}
	var got bytes.Buffer
	if err := json.Indent(&got, raw, "", "  "); err != nil {
		t.Fatal(err)
	}
	got.WriteByte('\n')
	Golden(t, path, got.Bytes(), update)
}
