package pgtest

import (
	"os"
	"path/filepath"
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
