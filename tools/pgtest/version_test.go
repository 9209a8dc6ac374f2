package pgtest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChosenBinDir: PGTOOLS_TEST_PG_MAJOR picks the newest cached version of that major, never
// another major's, and a major with no binaries is an error naming the fetch script; a
// PGTOOLS_TEST_PGBIN without initdb and postgres is an error too.
func TestChosenBinDir(t *testing.T) {
	cache := t.TempDir()
	mk := func(version string) string {
		dir := filepath.Join(cache, version, "native", "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"initdb", "postgres"} {
			if err := os.WriteFile(filepath.Join(dir, n), nil, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	mk("17.2.0-beta.14")
	want := mk("17.10.0-beta.17")
	mk("170.1.0")
	mk("18.4.0-beta.17")
	t.Setenv(envPGCache, cache)
	t.Setenv(envPGBin, "")
	t.Setenv(envPGMajor, "17")
	// /usr/lib/postgresql/17/bin wins when present; this test needs the cache to decide.
	if isBinDir("/usr/lib/postgresql/17/bin") {
		t.Skip("Debian's PostgreSQL 17 is installed")
	}
	if got, err := chosenBinDir(); err != nil || got != want {
		t.Fatalf("chosenBinDir = %q, %v; want %q", got, err, want)
	}
	t.Setenv(envPGMajor, "13")
	if got, err := chosenBinDir(); err == nil || !strings.Contains(err.Error(), ".ci/pg-fetch.sh 13") {
		t.Fatalf("missing major: %q, %v", got, err)
	}
	t.Setenv(envPGMajor, "seventeen")
	if _, err := chosenBinDir(); err == nil {
		t.Fatal("a major that is not a number was accepted")
	}
	t.Setenv(envPGBin, t.TempDir())
	if _, err := chosenBinDir(); err == nil || !strings.Contains(err.Error(), envPGBin) {
		t.Fatalf("empty bin dir: %v", err)
	}
}
