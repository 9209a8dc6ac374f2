package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestPolicyFlags serves with policy flags and checks each is enforced on the default database.
func TestPolicyFlags(t *testing.T) {
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, status text); CREATE TABLE secrets (k text);
		INSERT INTO orders VALUES (1, 'paid')`)
	dsn := db.RoleDSN(t, "pol")
	// --deny-tables is a grant: serve refuses to start while the login role can read secrets.
	db.Exec(t, `GRANT INSERT, UPDATE, DELETE ON orders TO "`+db.RoleName("pol")+`"; REVOKE ALL ON secrets FROM "`+db.RoleName("pol")+`"`)
	const token = "policy-flags-token-0123456789"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--database-url", dsn, "--listen", "127.0.0.1:0", "--token", token + ":read,write",
			"--read-only", "--deny-tables", "secrets", "--disable-tools", "pg_transaction", "--prepared-statements=false"}, &stdout, &stderr, envOf(nil))
	}()
	url := "http://" + waitFor(t, &stderr, regexp.MustCompile(`"listen":"([^"]+)"`))
	call := func(tool, args string) string {
		var out, errOut bytes.Buffer
		run(context.Background(), []string{"call", "--url", url, "--token", token, tool, args}, &out, &errOut, envOf(nil))
		return out.String()
	}
	for _, c := range []struct{ tool, args, want string }{
		{"insert_data", `{"table":"orders","row":{"id":2},"autocommit":true}`, "read-only under the operator's policy"},
		{"select_query", `{"table":"secrets"}`, `"errorType": "not_allowed"`},
		{"pg_transaction", `{"operations":[{"sql":"select 1"}]}`, "disabled"},
		{"select_query", `{"table":"orders"}`, `"rowCount": 1`},
		// With the statement cache on, the statement counting would itself be a named prepared statement.
		{"execute_sql", `{"sql":"SELECT count(*) AS n FROM pg_prepared_statements WHERE NOT from_sql"}`, `"n": 0`},
	} {
		if got := call(c.tool, c.args); !strings.Contains(got, c.want) {
			t.Errorf("%s %s: want %q in\n%s", c.tool, c.args, c.want, got)
		}
	}
	if n := db.QueryInt(t, "select count(*) from orders"); n != 1 {
		t.Fatalf("--read-only database was written: %d rows", n)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("serve did not stop")
	}

	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"serve", "--read-only"}, &out, &errOut, envOf(nil)); code != 2 || !strings.Contains(errOut.String(), "default") {
		t.Errorf("policy flag without a default database: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"serve", "--database-url", dsn, "--disable-tools", "drop_everything"}, &out, &errOut, envOf(nil)); code != 2 || !strings.Contains(errOut.String(), "unknown tool") {
		t.Errorf("unknown tool in --disable-tools: exit %d, %q", code, errOut.String())
	}
}
