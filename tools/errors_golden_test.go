package tools

import (
	"context"
	"encoding/json"
	"flag"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestErrorGolden pins, for one representative call per error category reachable on the read
// path and the write path, the error object a model reads. Wording changes show up as diffs of
// testdata/errors/<category>[-name].golden; rewrite them with
// go test ./tools -run TestErrorGolden -update and review the diff.
func TestErrorGolden(t *testing.T) {
	t.Parallel()
	ddl := &Principal{Name: "dba", Scopes: []string{"read", "write", "ddl"}}
	cases := []struct {
		category ErrorType
		name     string // file name suffix when a category has several cases
		policy   Policy
		p        *Principal // default testPrincipal
		tool     string
		args     string
		closedDB bool            // run against a database whose server does not answer
		write    bool            // a bundle whose role may write (newWriteBundle)
		setup    func(b *bundle) // extra superuser setup
	}{
		{category: ErrWriteIntentRequired, write: true, tool: "update_data", args: `{"table":"orders","set":{"status":"paid"},"where":"id = $1","params":[1]}`},
		{category: ErrConstraint, name: "unique", write: true, tool: "insert_data", args: `{"table":"items","rows":[{"sku":"A-1"},{"sku":"A-1"}],"autocommit":true}`},
		{category: ErrConstraint, name: "foreign-key", write: true, tool: "insert_data", args: `{"table":"items","row":{"sku":"B-1","customer_id":999999},"autocommit":true}`},
		{category: ErrTooManyRows, write: true, policy: Policy{MaxAffectedRows: 100}, tool: "delete_data", args: `{"table":"orders","where":"true","autocommit":true}`},
		{category: ErrTooExpensive, write: true, policy: Policy{MaxEstimatedRows: 1000}, tool: "execute_sql", args: `{"sql":"select * from orders cross join customers"}`,
			setup: func(b *bundle) { b.db.Exec(b.t, "ANALYZE orders, customers") }},
		{category: ErrTooExpensive, name: "write", write: true, policy: Policy{MaxEstimatedCost: 2}, tool: "delete_data", args: `{"table":"orders","where":"status = $1","params":["paid"],"autocommit":true}`,
			setup: func(b *bundle) { b.db.Exec(b.t, "ANALYZE orders") }},
		{category: ErrNotAllowed, name: "ddl", write: true, tool: "execute_sql", args: `{"sql":"create table scratch2 (i int)","mode":"write","autocommit":true}`,
			setup: func(b *bundle) {
				b.db.Exec(b.t, "GRANT CREATE ON SCHEMA public TO "+quoteIdent(b.db.RoleName("agent")))
			}},
		{category: ErrNotAllowed, name: "transaction-control", write: true, tool: "execute_sql", args: `{"sql":"COMMIT","mode":"write","autocommit":true}`},
		{category: ErrNotAllowed, name: "read-only-database", write: true, policy: Policy{ReadOnly: true}, tool: "insert_data", args: `{"table":"items","row":{"sku":"x"},"autocommit":true}`},
		{category: ErrConfirmationRequired, write: true, policy: Policy{AllowDDL: true}, p: ddl, tool: "execute_sql", args: `{"sql":"drop table scratch","mode":"write","autocommit":true}`,
			setup: func(b *bundle) {
				b.db.Exec(b.t, "CREATE TABLE scratch (i int); ALTER TABLE scratch OWNER TO "+quoteIdent(b.db.RoleName("agent")))
			}},
		{category: ErrInvalidArguments, tool: "select_query", args: `{"limit":0}`},
		{category: ErrInvalidArguments, name: "plain-words", tool: "delete_data", args: `{"table":"orders","where":" ","session_id":"abc","params":"nope"}`},
		{category: ErrInvalidArguments, name: "huge-name", tool: "select_query", args: `{"table":"orders","` + strings.Repeat("x", 1<<20) + `":1}`},
		{category: ErrInvalidArguments, name: "nul", tool: "select_query", args: `{"table":"orders","where":"status = $1","params":["a\u0000b"]}`},
		{category: ErrInvalidArguments, name: "too-many-params", tool: "select_query", args: `{"table":"orders","where":"id = 1","params":[` + strings.Repeat("1,", 69999) + `1]}`},
		{category: ErrInvalidTable, name: "huge-name", tool: "select_query", args: `{"table":"` + strings.Repeat("x", 1<<20) + `"}`},
		{category: ErrInvalidTable, tool: "select_query", args: `{"table":"order"}`},
		{category: ErrInvalidColumn, tool: "select_query", args: `{"table":"orders","columns":"id,totl"}`},
		{category: ErrInvalidTable, name: "look-alike", tool: "select_query", args: `{"table":"orders\u00a0"}`},
		{category: ErrInvalidColumn, name: "unquoted-space", tool: "select_query", args: `{"table":"orders","columns":"id, placed at"}`},
		{category: ErrInvalidTable, name: "value-as-name", tool: "execute_sql", args: `{"sql":"select $1::regclass","params":["public.\"Hunter2Password\""]}`},
		{category: ErrSyntax, tool: "execute_sql", args: `{"sql":"selec id from orders"}`},
		{category: ErrReadOnlyViolation, tool: "execute_sql", args: `{"sql":"DELETE FROM orders WHERE id = $1","params":[1]}`},
		{category: ErrPermissionDenied, tool: "execute_sql", args: `{"sql":"select pg_read_file('postgresql.conf')"}`},
		{category: ErrTimeout, policy: Policy{StatementTimeout: 300 * time.Millisecond}, tool: "execute_sql", args: `{"sql":"select pg_sleep(5)"}`},
		{category: ErrNotAllowed, p: &Principal{Name: "writer", Scopes: []string{"write"}}, tool: "select_query", args: `{"table":"orders"}`},
		{category: ErrNotAllowed, name: "mcp-flags-scope", p: &Principal{Name: "mcp-stdio", Scopes: []string{"read"}, Grant: GrantMCPFlags}, tool: "insert_data", args: `{"table":"orders","row":{"status":"x"},"autocommit":true}`},
		{category: ErrNotAllowed, name: "mcp-flags-ddl", write: true, p: &Principal{Name: "mcp-stdio", Scopes: []string{"read", "write"}, Grant: GrantMCPFlags},
			tool: "execute_sql", args: `{"sql":"create table scratch2 (i int)","mode":"write","autocommit":true}`,
			setup: func(b *bundle) {
				b.db.Exec(b.t, "GRANT CREATE ON SCHEMA public TO "+quoteIdent(b.db.RoleName("agent")))
			}},
		{category: ErrNotAllowed, name: "tool-allow-list", p: &Principal{Name: "narrow", Scopes: []string{"read"}, Tools: []string{"select_query", "pg_tx"}}, tool: "describe_schema", args: `{}`},
		{category: ErrSessionNotFound, tool: "select_query", args: `{"table":"orders","session_id":"00000000-0000-4000-8000-000000000000"}`},
		{category: ErrUnknownTool, tool: "drop_everything", args: `{}`},
		{category: ErrConnection, tool: "select_query", args: `{"table":"orders"}`, closedDB: true},
	}
	for _, c := range cases {
		file := string(c.category)
		if c.name != "" {
			file += "-" + c.name
		}
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			var reg *Registry
			switch {
			case c.closedDB:
				reg = closedPortRegistry(t)
			case c.write:
				b, _ := newWriteBundle(t, c.policy)
				b.t = t
				if c.setup != nil {
					c.setup(b)
				}
				reg = b.reg
			default:
				reg = newBundle(t, c.policy).reg
			}
			p := testPrincipal
			if c.p != nil {
				p = *c.p
			}
			res, _, e := reg.Call(context.Background(), p, c.tool, []byte(c.args))
			if e == nil {
				t.Fatalf("succeeded: %+v", res)
			}
			if e.Type != c.category {
				t.Fatalf("got %s, want %s: %s", e.Type, c.category, errorJSON(t, e))
			}
			checkErrorGolden(t, file, e)
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
	reg, _ := registryOver(t, dsn, policy, 1)
	return reg
}
