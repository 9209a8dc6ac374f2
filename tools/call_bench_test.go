package tools

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// BenchmarkSelectByPK measures one primary-key select_query through Registry.Call (no HTTP), with
// allocations, with the statement cache and in describe-exec mode; compare with
// BenchmarkRawPipelined for the overhead of the tool layer.
func BenchmarkSelectByPK(b *testing.B) {
	for _, mode := range []struct {
		name string
		pol  Policy
	}{{"prepared", Policy{}}, {"describe-exec", Policy{PreparedStatements: new(bool)}}} {
		b.Run(mode.name, func(b *testing.B) {
			bn := newBundleConns(b, mode.pol, 1)
			args := make([][]byte, 50)
			for i := range args {
				args[i] = []byte(`{"table":"orders","where":"id = $1","params":[` + strconv.Itoa(i+1) + `]}`)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, e := bn.reg.Call(ctx, testPrincipal, "select_query", args[i%50]); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}

// BenchmarkRawPipelined runs the statement select_query generates for the same call as raw pgx
// with its default settings (statements prepared and cached), BEGIN READ ONLY/query/COMMIT
// pipelined in one batch on one connection to the same database: the floor for the tool layer's
// overhead in BenchmarkSelectByPK.
func BenchmarkRawPipelined(b *testing.B) {
	bn := newBundleConns(b, Policy{}, 1)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, bn.db.DSN)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	const sql = `SELECT * FROM "public"."orders" WHERE (
id = $1
) LIMIT 101`
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		batch := &pgx.Batch{}
		batch.Queue("BEGIN READ ONLY")
		batch.Queue(sql, i%50+1)
		batch.Queue("COMMIT")
		if err := conn.SendBatch(ctx, batch).Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSelectByPKIdentity is BenchmarkSelectByPK's prepared read as the login role and as a
// principal with a role and claims, in one run on one connection: the cost of SET LOCAL ROLE and
// set_config(request.jwt.claims), which travel in the same round trip as the read.
func BenchmarkSelectByPKIdentity(b *testing.B) {
	bn := newBundleConns(b, Policy{}, 1)
	role := bn.db.RoleName("tenant")
	bn.db.Exec(b, "CREATE ROLE "+quoteIdent(role)+" NOLOGIN; GRANT "+quoteIdent(role)+" TO "+quoteIdent(bn.db.RoleName("agent"))+"; GRANT SELECT ON orders TO "+quoteIdent(role))
	b.Cleanup(func() { bn.db.Exec(b, "DROP OWNED BY "+quoteIdent(role)) })
	tenant := Principal{Name: "tenant", Scopes: []string{"read"}, Role: role, Claims: []byte(`{"sub":"user-1","tenant":1}`)}
	args := make([][]byte, 50)
	for i := range args {
		args[i] = []byte(`{"table":"orders","where":"id = $1","params":[` + strconv.Itoa(i+1) + `]}`)
	}
	for _, p := range []struct {
		name string
		who  Principal
	}{{"login-role", testPrincipal}, {"role+claims", tenant}} {
		b.Run(p.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, _, e := bn.reg.Call(ctx, p.who, "select_query", args[i%50]); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}

// BenchmarkCatalogByPrivilege is a primary-key select_query naming columns, and describe_schema of
// the table, as a role granted SELECT on the whole table and as one granted SELECT on three of its
// columns: the cost of resolving names against the role's own columns (its view is loaded once
// per catalog snapshot, so neither call pays a query for it).
func BenchmarkCatalogByPrivilege(b *testing.B) {
	bn := newBundleConns(b, Policy{}, 1)
	agent := quoteIdent(bn.db.RoleName("agent"))
	whole, cols := bn.db.RoleName("whole"), bn.db.RoleName("cols")
	bn.db.Exec(b, fmt.Sprintf(`CREATE ROLE %[1]s NOLOGIN; GRANT %[1]s TO %[3]s; GRANT SELECT ON orders TO %[1]s;
		CREATE ROLE %[2]s NOLOGIN; GRANT %[2]s TO %[3]s; GRANT SELECT (id, status, total) ON orders TO %[2]s`, quoteIdent(whole), quoteIdent(cols), agent))
	b.Cleanup(func() {
		bn.db.Exec(b, fmt.Sprintf("DROP OWNED BY %s; DROP OWNED BY %s", quoteIdent(whole), quoteIdent(cols)))
	})
	args := make([][]byte, 50)
	for i := range args {
		args[i] = []byte(`{"table":"orders","columns":"id,status,total","where":"id = $1","params":[` + strconv.Itoa(i+1) + `]}`)
	}
	describe := []byte(`{"table":"orders"}`)
	for _, role := range []string{whole, cols} {
		p := Principal{Name: "bench", Scopes: []string{"read"}, Role: role}
		kind := strings.TrimSuffix(role, "_"+strings.SplitN(role, "_", 2)[1])
		for _, tool := range []string{"select_query", "describe_schema"} {
			b.Run(tool+"/"+kind, func(b *testing.B) {
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					a := describe
					if tool == "select_query" {
						a = args[i%50]
					}
					if _, _, e := bn.reg.Call(ctx, p, tool, a); e != nil {
						b.Fatal(e)
					}
				}
			})
		}
	}
}

// BenchmarkSelectPages reads 100-row pages of a 10,000-row table: the first page, the next page
// by its page token (keyset on the key) and the same page by offset 5,000, which the server
// reaches by reading and dropping the rows before it.
func BenchmarkSelectPages(b *testing.B) {
	bn := newBundleConns(b, Policy{}, 1)
	bn.db.Exec(b, `CREATE TABLE big (id int PRIMARY KEY, label text);
INSERT INTO big SELECT i, 'row ' || i FROM generate_series(1, 10000) i; ANALYZE big;`)
	ctx := context.Background()
	res, _, e := bn.reg.Call(ctx, testPrincipal, "select_query", []byte(`{"table":"big","limit":100,"offset":4900}`))
	if e != nil {
		b.Fatal(e)
	}
	// A token made after row 5,000: the same page as offset 5,000 (rows 5,001–5,100).
	tok := res.(*RowsResult).NextPage
	for _, c := range []struct{ name, args string }{
		{"first page", `{"table":"big","limit":100}`},
		{"page token at 5000", `{"page_token":"` + tok + `"}`},
		{"offset 5000", `{"table":"big","limit":100,"offset":5000}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, _, e := bn.reg.Call(ctx, testPrincipal, "select_query", []byte(c.args)); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}
