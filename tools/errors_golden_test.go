package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestErrorGolden pins, for one representative call per error category reachable on the read
// path, the error object a model reads. Wording changes show up as diffs of
// testdata/errors/<category>.golden; rewrite them with go test ./tools -run TestErrorGolden -update
// and review the diff. constraint_violation is not reachable on reads and has no file here.
func TestErrorGolden(t *testing.T) {
	t.Parallel()
	cases := []struct {
		category ErrorType
		policy   Policy
		p        *Principal // default testPrincipal
		tool     string
		args     string
		closedDB bool // run against a database whose server does not answer
	}{
		{category: ErrInvalidArguments, tool: "select_query", args: `{"limit":0}`},
		{category: ErrInvalidTable, tool: "select_query", args: `{"table":"order"}`},
		{category: ErrInvalidColumn, tool: "select_query", args: `{"table":"orders","columns":"id,totl"}`},
		{category: ErrSyntax, tool: "execute_sql", args: `{"sql":"selec id from orders"}`},
		{category: ErrReadOnlyViolation, tool: "execute_sql", args: `{"sql":"DELETE FROM orders WHERE id = $1","params":[1]}`},
		{category: ErrPermissionDenied, tool: "execute_sql", args: `{"sql":"select pg_read_file('postgresql.conf')"}`},
		{category: ErrTimeout, policy: Policy{StatementTimeout: 300 * time.Millisecond}, tool: "execute_sql", args: `{"sql":"select pg_sleep(5)"}`},
		{category: ErrNotAllowed, p: &Principal{Name: "writer", Scopes: []string{"write"}}, tool: "select_query", args: `{"table":"orders"}`},
		{category: ErrSessionNotFound, tool: "select_query", args: `{"table":"orders","session_id":"00000000-0000-4000-8000-000000000000"}`},
		{category: ErrUnknownTool, tool: "drop_everything", args: `{}`},
		{category: ErrConnection, tool: "select_query", args: `{"table":"orders"}`, closedDB: true},
	}
	for _, c := range cases {
		t.Run(string(c.category), func(t *testing.T) {
			t.Parallel()
			var reg *Registry
			if c.closedDB {
				reg = closedPortRegistry(t)
			} else {
				reg = newBundle(t, c.policy).reg
			}
			p := testPrincipal
			if c.p != nil {
				p = *c.p
			}
			res, e := reg.Call(context.Background(), p, c.tool, []byte(c.args))
			if e == nil {
				t.Fatalf("succeeded: %+v", res)
			}
			if e.Type != c.category {
				t.Fatalf("got %s, want %s: %s", e.Type, c.category, errorJSON(t, e))
			}
			raw, err := e.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := json.Indent(&got, raw, "", "  "); err != nil {
				t.Fatal(err)
			}
			got.WriteByte('\n')
			assertReadsWell(t, got.String())

			path := filepath.Join("testdata", "errors", string(c.category)+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got.String() != string(want) {
				t.Fatalf("%s differs (run with -update and review the diff):\n--- got\n%s--- want\n%s", path, got.String(), want)
			}
		})
	}
}

// assertReadsWell checks what every golden error must be: the fields a model reads, and none of
// what it must never read.
func assertReadsWell(t testing.TB, s string) {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(s), &obj); err != nil {
		t.Fatal(err)
	}
	if obj["success"] != false || obj["error"] == "" || obj["errorType"] == "" || obj["suggestion"] == "" {
		t.Fatalf("missing fields: %s", s)
	}
	for _, bad := range []string{"postgres://", "127.0.0.1", "password", "hunter2", "pgtools_user", "appdb", "SELECT ", "LIMIT ", `"public".`, "pgt_", "agent_", "pgtools_test_"} {
		if strings.Contains(s, bad) {
			t.Fatalf("error contains %q: %s", bad, s)
		}
	}
}

// closedPortRegistry is a registry over a database whose address refuses connections: a port
// that was just free on 127.0.0.1.
func closedPortRegistry(t testing.TB) *Registry {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	dsn := "postgres://pgtools_user:hunter2-password@127.0.0.1:" + strconv.Itoa(port) + "/appdb?sslmode=disable&connect_timeout=2"
	policy := Policy{PoolWait: 3 * time.Second}
	cfg, err := PoolConfig(dsn, policy, 1)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	reg, err := NewRegistry([]*Database{NewDatabase("default", pool, policy)})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}
