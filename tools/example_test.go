package tools_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// exampleRegistry builds what a transport serves: a pool from PoolConfig, a Database with its
// policy, and a Registry over it. The runner (runner.Build) does the same from the config file.
func exampleRegistry(ctx context.Context, dsn string, custom ...tools.CustomTool) (*tools.Registry, func()) {
	cfg, err := tools.PoolConfig(dsn, tools.Policy{}, 4)
	if err != nil {
		panic(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	db := tools.NewDatabase("default", pool, tools.Policy{})
	reg, err := tools.NewRegistry(ctx, tools.Options{Databases: []*tools.Database{db}, CustomTools: custom})
	if err != nil {
		pool.Close()
		panic(err)
	}
	return reg, pool.Close
}

// printAnswer prints the fields of an answer that do not change from run to run.
func printAnswer(res tools.Result) {
	raw, err := res.MarshalJSON()
	if err != nil {
		panic(err)
	}
	var out struct {
		RowCount     int              `json:"rowCount"`
		AffectedRows int              `json:"affectedRows"`
		Data         []map[string]any `json:"data"`
		Truncated    bool             `json:"truncated"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		panic(err)
	}
	fmt.Printf("rows %d, affected %d, truncated %v: %v\n", out.RowCount, out.AffectedRows, out.Truncated, out.Data)
}

const exampleSchema = `CREATE TABLE orders (id int PRIMARY KEY, status text NOT NULL, total numeric(10,2));
INSERT INTO orders VALUES (1, 'paid', 19.90), (2, 'pending', 5.00), (3, 'paid', 7.25);`

// A call names a tool and passes its arguments as JSON, exactly as a transport received them.
// The registry validates them against the tool's schema, routes the call and runs it as the
// principal; a mistake comes back as a categorized error with a suggestion for the next call.
func ExampleRegistry_Call() {
	pgtest.Example(func(d *pgtest.DB) {
		ctx := context.Background()
		d.Exec(pgtest.ExampleTB(), exampleSchema)
		reg, done := exampleRegistry(ctx, d.RoleDSN(pgtest.ExampleTB(), "agent"))
		defer done()
		agent := tools.Principal{Name: "example", Scopes: []string{"read"}}

		res, _, terr := reg.Call(ctx, agent, "select_query",
			[]byte(`{"table":"orders","columns":"id,total","where":"status = $1","params":["paid"],"order_by":"id","limit":1}`))
		if terr != nil {
			panic(terr)
		}
		printAnswer(res)

		_, _, terr = reg.Call(ctx, agent, "select_query", []byte(`{"table":"ordres"}`))
		fmt.Println(terr.Type, "|", terr.Message, "|", terr.Suggestion)

		_, _, terr = reg.Call(ctx, agent, "delete_data", []byte(`{"table":"orders","where":"id = 1","autocommit":true}`))
		fmt.Println(terr.Type)
	})
	// Output:
	// rows 1, affected 0, truncated true: [map[id:1 total:19.90]]
	// invalid_table | Table "ordres" does not exist or is not available | Did you mean "orders"? Available tables: orders
	// not_allowed
}

// An operator-defined tool is one parameterized statement published under a name of its own,
// with a JSON Schema built from its parameters. NewRegistry prepares it on its database and
// checks the declared parameter types against the ones PostgreSQL infers.
func ExampleCustomTool() {
	pgtest.Example(func(d *pgtest.DB) {
		ctx := context.Background()
		d.Exec(pgtest.ExampleTB(), exampleSchema)
		reg, done := exampleRegistry(ctx, d.RoleDSN(pgtest.ExampleTB(), "agent"), tools.CustomTool{
			Name:        "orders_by_status",
			Description: "Orders in one status, newest first.",
			SQL:         "SELECT id, total FROM orders WHERE status = $1 ORDER BY id DESC",
			Parameters:  []tools.CustomParam{{Name: "status", Type: "string", Description: "paid or pending", Required: true}},
		})
		defer done()
		agent := tools.Principal{Name: "example", Scopes: []string{"read"}}

		res, _, terr := reg.Call(ctx, agent, "orders_by_status", []byte(`{"status":"paid"}`))
		if terr != nil {
			panic(terr)
		}
		printAnswer(res)

		_, _, terr = reg.Call(ctx, agent, "orders_by_status", []byte(`{}`))
		fmt.Println(terr.Type, "|", terr.Message)
	})
	// Output:
	// rows 2, affected 0, truncated false: [map[id:3 total:7.25] map[id:1 total:19.90]]
	// invalid_arguments | Invalid arguments: (arguments): missing property 'status'
}
