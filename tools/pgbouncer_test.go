package tools

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestTransactionPoolerNeedsDescribeExec runs reads through a real PgBouncer in transaction
// pooling mode (one server connection shared by two client pools, like two runner replicas),
// where named prepared statements do not survive from one transaction to the next. With the
// statement cache the second pool's reads fail; with Policy.DescribeExec every read works, and so
// do a write, a pg_transaction batch and a read-only refusal.
func TestTransactionPoolerNeedsDescribeExec(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	b.db.Exec(t, "GRANT INSERT, UPDATE ON customers TO "+quoteIdent(b.db.RoleName("agent")))
	bouncer := b.db.PgBouncer(t, b.db.RoleDSN(t, "agent"), 1)
	ctx := context.Background()
	read := func(reg *Registry, id int) *Error {
		out, _, e := reg.Call(ctx, testPrincipal, "select_query", fmt.Appendf(nil, `{"table":"customers","columns":"id","where":"id = $1","params":[%d]}`, id))
		if e == nil && out.(*RowsResult).RowCount != 1 {
			t.Fatalf("select_query id %d through PgBouncer: rowCount %d", id, out.(*RowsResult).RowCount)
		}
		return e
	}

	t.Run("statement cache", func(t *testing.T) {
		regA, _ := registryOver(t, bouncer, Policy{}, 1)
		regB, _ := registryOver(t, bouncer, Policy{}, 1)
		failed := 0
		for i := 1; i <= 3; i++ {
			for _, reg := range []*Registry{regA, regB} {
				e := read(reg, i)
				if e == nil {
					continue
				}
				failed++
				// The operator's misconfiguration, named as such: not the model's SQL.
				if e.Type != ErrConnection || !strings.Contains(e.Suggestion, "prepared_statements: false") {
					t.Errorf("read %d failed as %s: %s (%s), want connection_error naming prepared_statements: false", i, e.Type, e.Message, e.Suggestion)
				}
			}
		}
		if failed == 0 {
			t.Fatal("every read worked with named statements: the pooler did not share its server connection, so this test shows nothing")
		}
	})

	t.Run("describe-exec", func(t *testing.T) {
		pol := Policy{PreparedStatements: new(bool)}
		regA, _ := registryOver(t, bouncer, pol, 1)
		regB, _ := registryOver(t, bouncer, pol, 1)
		for i := 1; i <= 5; i++ {
			for name, reg := range map[string]*Registry{"A": regA, "B": regB} {
				if e := read(reg, i); e != nil {
					t.Fatalf("pool %s, read %d through PgBouncer: %s: %s", name, i, e.Type, e.Message)
				}
			}
		}
		if _, _, e := regA.Call(ctx, testPrincipal, "execute_sql", []byte(`{"sql":"SELECT count(*) AS n FROM customers WHERE id = ANY($1)","params":[[1,2]]}`)); e != nil {
			t.Fatalf("array parameter through PgBouncer: %s: %s", e.Type, e.Message)
		}
		if _, _, e := regB.Call(ctx, testPrincipal, "execute_sql", []byte(`{"sql":"DELETE FROM orders"}`)); e == nil || e.Type != ErrReadOnlyViolation {
			t.Fatalf("a write in a read through PgBouncer: %v, want read_only_violation", e)
		}
		before := b.db.QueryInt(t, "SELECT count(*) FROM customers")
		if _, _, e := regA.Call(ctx, testPrincipal, "insert_data", []byte(`{"table":"customers","row":{"name":"pooled"},"autocommit":true}`)); e != nil {
			t.Fatalf("insert through PgBouncer: %s: %s", e.Type, e.Message)
		}
		if _, _, e := regB.Call(ctx, testPrincipal, "pg_transaction", []byte(`{"operations":[{"sql":"UPDATE customers SET country = 'NL' WHERE name = 'pooled'"},{"sql":"SELECT count(*) FROM customers WHERE country = 'NL'"}]}`)); e != nil {
			t.Fatalf("pg_transaction through PgBouncer: %s: %s", e.Type, e.Message)
		}
		if after := b.db.QueryInt(t, "SELECT count(*) FROM customers"); after != before+1 {
			t.Fatalf("customers: %d rows after one insert, want %d", after, before+1)
		}
	})
}
