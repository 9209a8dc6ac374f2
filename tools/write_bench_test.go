package tools

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkAutocommitWrite measures one autocommit write through Registry.Call (no HTTP) on a
// pool of one connection: update_data by primary key, execute_sql write (agent SQL, with the
// effects readings around it), and pg_transaction with one operation (on the same pool). Each
// includes the reset of session state that ends every write.
func BenchmarkAutocommitWrite(b *testing.B) {
	bn := newBundleConns(b, Policy{}, 1)
	bn.db.Exec(b, "GRANT INSERT, UPDATE ON customers TO "+quoteIdent(bn.db.RoleName("agent")))
	calls := []struct {
		name, tool string
		args       func(i int) []byte
	}{
		{"update_data", "update_data", func(i int) []byte {
			return []byte(`{"table":"customers","set":{"country":"NL"},"where":"id = $1","params":[` + strconv.Itoa(i%50+1) + `],"autocommit":true}`)
		}},
		{"execute_sql", "execute_sql", func(i int) []byte {
			return []byte(`{"sql":"UPDATE customers SET country = 'BE' WHERE id = $1","params":[` + strconv.Itoa(i%50+1) + `],"mode":"write","autocommit":true}`)
		}},
		{"pg_transaction", "pg_transaction", func(i int) []byte {
			return []byte(`{"operations":[{"sql":"UPDATE customers SET country = 'LU' WHERE id = $1","params":[` + strconv.Itoa(i%50+1) + `]}]}`)
		}},
	}
	for _, c := range calls {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, e := bn.reg.Call(ctx, testPrincipal, c.tool, c.args(i)); e != nil {
					b.Fatal(e.Type, e.Message)
				}
			}
		})
	}
}
