package tools

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/session"
)

// preparedCount counts the protocol-level prepared statements of the pool's only connection, as
// the read path left them: the count is read on that connection through pgx's own unnamed
// statement, outside the tools.
func preparedCount(t *testing.T, b *bundle) int {
	t.Helper()
	conn, err := b.tdb.Pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_prepared_statements WHERE NOT from_sql").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDescribeExecPreparesNothing: with Policy.DescribeExec every read is parsed as the unnamed
// statement, so a pooler in transaction mode never sees a named prepared statement; reads, refusals
// and recovery after an error behave as with the statement cache. The default mode does prepare
// (the check would pass vacuously otherwise).
func TestDescribeExecPreparesNothing(t *testing.T) {
	t.Parallel()
	for _, describeExec := range []bool{false, true} {
		t.Run(fmt.Sprintf("DescribeExec=%v", describeExec), func(t *testing.T) {
			t.Parallel()
			prepared := !describeExec
			b := newBundleConns(t, Policy{PreparedStatements: &prepared}, 1)
			for i := 1; i <= 3; i++ {
				out := b.mustCall(t, "select_query", fmt.Sprintf(`{"table":"customers","columns":"id","where":"id = $1","params":[%d]}`, i))
				if rs := rows(t, out); len(rs) != 1 || fmt.Sprint(rs[0]["id"]) != fmt.Sprint(i) {
					t.Fatalf("select_query id %d: %v", i, rs)
				}
			}
			// A statement that fails mid-pipeline, then reads that must still work on the same
			// connection.
			b.mustFail(t, ErrSyntax, "execute_sql", `{"sql":"selec 1"}`)
			b.mustFail(t, ErrReadOnlyViolation, "execute_sql", `{"sql":"SET TRANSACTION READ WRITE"}`)
			b.mustFail(t, ErrReadOnlyViolation, "execute_sql", `{"sql":"DELETE FROM orders"}`)
			// An array parameter takes the path that asks the server for the parameter types first.
			out := b.mustCall(t, "execute_sql", `{"sql":"SELECT count(*) AS n FROM customers WHERE id = ANY($1)","params":[[1,2]]}`)
			if rs := rows(t, out); len(rs) != 1 || fmt.Sprint(rs[0]["n"]) != "2" {
				t.Fatalf("array parameter: %v", rs)
			}
			// Advisory locks are still released after the read.
			b.mustCall(t, "execute_sql", `{"sql":"SELECT pg_advisory_lock(7)"}`)
			out = b.mustCall(t, "execute_sql", `{"sql":"SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"}`)
			if rs := rows(t, out); len(rs) != 1 || fmt.Sprint(rs[0]["n"]) != "0" {
				t.Fatalf("advisory lock survived the read: %v", rs)
			}
			n := preparedCount(t, b)
			if describeExec && n != 0 {
				t.Errorf("%d named prepared statements on the connection, want none", n)
			}
			if !describeExec && n == 0 {
				t.Error("the default mode prepared nothing: the statement cache is not in use")
			}

			// A read inside a session runs on the session's own connection, in the same mode.
			s, err := session.Open(context.Background(), "describe-exec-test", testPrincipal.Name, sessionTarget(testPrincipal, identityOf(testPrincipal), b.tdb), TxOptions{}, time.Minute, time.Now)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			rs, err := readIn(context.Background(), b.tdb, s, wire.Stmt{SQL: "SELECT id FROM customers WHERE id = $1", Params: []any{"1"}, MaxRows: 2})
			if err != nil || rs.RowCount != 1 {
				t.Fatalf("read in a session: %v, %+v", err, rs)
			}
			var inSession int
			if err := s.Conn().QueryRow(context.Background(), "SELECT count(*) FROM pg_prepared_statements WHERE NOT from_sql").Scan(&inSession); err != nil {
				t.Fatal(err)
			}
			if describeExec && inSession != 0 {
				t.Errorf("%d named prepared statements on the session's connection, want none", inSession)
			}
			if !describeExec && inSession == 0 {
				t.Error("the default mode prepared nothing in the session")
			}
		})
	}
}
