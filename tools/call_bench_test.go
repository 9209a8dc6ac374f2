package tools

import (
	"context"
	"strconv"
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
	}{{"prepared", Policy{}}, {"describe-exec", Policy{DescribeExec: true}}} {
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
				if _, e := bn.reg.Call(ctx, testPrincipal, "select_query", args[i%50]); e != nil {
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
				if _, e := bn.reg.Call(ctx, p.who, "select_query", args[i%50]); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}
