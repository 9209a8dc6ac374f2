package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

const (
	// envPGBin names a directory holding initdb and postgres to run the
	// tests on, e.g. one .ci/pg-fetch.sh extracted.
	envPGBin = "PGTOOLS_TEST_PGBIN"
	// envPGMajor names a PostgreSQL major (14 to 18) to run the tests on:
	// Debian's /usr/lib/postgresql/<major>/bin, else what .ci/pg-fetch.sh
	// put in the cache. The server's version is checked against it.
	envPGMajor = "PGTOOLS_TEST_PG_MAJOR"
	// envPGCache overrides where .ci/pg-fetch.sh extracts server binaries.
	envPGCache = "PGTOOLS_PG_CACHE"
)

// wantedMajor returns the major PGTOOLS_TEST_PG_MAJOR asks for, 0 when unset.
func wantedMajor() (int, error) {
	s := os.Getenv(envPGMajor)
	if s == "" {
		return 0, nil
	}
	m, err := strconv.Atoi(s)
	if err != nil || m < 10 || m > 99 {
		return 0, fmt.Errorf("%s=%q is not a PostgreSQL major version such as 17", envPGMajor, s)
	}
	return m, nil
}

// chosenBinDir returns the bin directory the environment asks for: PGTOOLS_TEST_PGBIN,
// else the one of PGTOOLS_TEST_PG_MAJOR; "" when neither is set (discover then
// picks as before). An asked-for version that is missing is an error, never a
// silent run on another major.
func chosenBinDir() (string, error) {
	if dir := os.Getenv(envPGBin); dir != "" {
		if !isBinDir(dir) {
			return "", fmt.Errorf("%s=%s holds no executable initdb and postgres", envPGBin, dir)
		}
		return dir, nil
	}
	major, err := wantedMajor()
	if err != nil || major == 0 {
		return "", err
	}
	debian := fmt.Sprintf("/usr/lib/postgresql/%d/bin", major)
	if isBinDir(debian) {
		return debian, nil
	}
	cache := os.Getenv(envPGCache)
	if cache == "" {
		cache = defaultCache()
	}
	// .ci/pg-fetch.sh extracts into <cache>/<full version>/native/bin; the
	// newest of the major wins.
	dirs, _ := filepath.Glob(filepath.Join(cache, strconv.Itoa(major)+".*", "native", "bin"))
	sort.Slice(dirs, func(i, j int) bool { return versionLess(dirs[j], dirs[i]) })
	for _, d := range dirs {
		if isBinDir(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%s=%d: no server binaries in %s or %s; fetch them with .ci/pg-fetch.sh %d",
		envPGMajor, major, debian, cache, major)
}

// versionLess orders two paths holding <major>.<minor>.… by their numbers.
func versionLess(a, b string) bool {
	na, nb := versionNumbers(a), versionNumbers(b)
	for i := 0; i < len(na) && i < len(nb); i++ {
		if na[i] != nb[i] {
			return na[i] < nb[i]
		}
	}
	return len(na) < len(nb)
}

func versionNumbers(p string) []int {
	base := filepath.Base(filepath.Dir(filepath.Dir(p))) // <cache>/<version>/native/bin
	var out []int
	for _, f := range strings.FieldsFunc(base, func(r rune) bool { return r < '0' || r > '9' }) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// defaultCache is where .ci/pg-fetch.sh puts binaries by default. Root's
// is outside /root: tests running as root start the server as the postgres
// user, who cannot enter it.
func defaultCache() string {
	if os.Geteuid() == 0 {
		return "/var/cache/pgtools-pg"
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "pgtools-pg")
}

func isBinDir(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// checkMajor reads the server's version and, when PGTOOLS_TEST_PG_MAJOR is
// set, refuses a server of another major: a matrix run that silently tested
// the default version would prove nothing.
func (s *server) checkMajor(ctx context.Context) error {
	if err := s.admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&s.versionNum); err != nil {
		return fmt.Errorf("reading server_version_num: %w", err)
	}
	want, err := wantedMajor()
	if err != nil {
		return err
	}
	if want != 0 && s.versionNum/10000 != want {
		return fmt.Errorf("%s=%d but %s runs PostgreSQL %d", envPGMajor, want, s.source, s.versionNum/10000)
	}
	return nil
}

// ServerVersionNum returns the test server's server_version_num (e.g. 170004),
// for tests whose expectation differs by major.
func ServerVersionNum(t testing.TB) int {
	t.Helper()
	return getServer(t).versionNum
}

// publicSchemaAs15 gives a cluster this binary started PostgreSQL 15's
// default for schema public on older majors: before 15 every role may CREATE
// in it, so a test role meant to be read-only could create tables. Operators
// on 14 revoke it the same way (docs/postgres-versions.md).
func (s *server) publicSchemaAs15(ctx context.Context, template1DSN string) error {
	var v int
	if err := s.admin.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&v); err != nil {
		return err
	}
	if v >= 150000 {
		return nil
	}
	conn, err := pgx.Connect(ctx, template1DSN)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "REVOKE CREATE ON SCHEMA public FROM PUBLIC")
	return err
}
