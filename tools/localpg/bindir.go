package localpg

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
)

// ErrNotFound is returned (wrapped) by FindBinDir and Start when no
// PostgreSQL server binaries can be found. Callers that can do without a
// database (tests that skip) check for it with errors.Is.
var ErrNotFound = errors.New("PostgreSQL server binaries (initdb, postgres) not found")

// debianBinGlob is where Debian and Ubuntu install one directory per major
// version, e.g. /usr/lib/postgresql/15/bin.
const debianBinGlob = "/usr/lib/postgresql/*/bin"

// FindBinDir returns a directory holding both initdb and postgres: the
// newest major version under /usr/lib/postgresql/*/bin, else the directory
// of initdb found on PATH. The error wraps ErrNotFound and tells the user
// how to install PostgreSQL or how to use an existing server instead.
func FindBinDir() (string, error) {
	dirs, _ := filepath.Glob(debianBinGlob) // the pattern is constant, so no ErrBadPattern
	type versioned struct {
		dir     string
		version int
	}
	var found []versioned
	for _, dir := range dirs {
		// The version is the path element above bin: /usr/lib/postgresql/15/bin.
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		if err != nil || !hasServerBinaries(dir) {
			continue
		}
		found = append(found, versioned{dir, v})
	}
	if len(found) > 0 {
		sort.Slice(found, func(i, j int) bool { return found[i].version > found[j].version })
		return found[0].dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if hasServerBinaries(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("localpg: %w in %s or on PATH; install them "+
		"(Debian/Ubuntu: apt-get update && apt-get install -y postgresql) "+
		"or point at an existing database with DATABASE_URL (pgtools) or PG_TEST_DSN (tests)",
		ErrNotFound, debianBinGlob)
}

// hasServerBinaries reports whether dir holds executable initdb and postgres.
func hasServerBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}
