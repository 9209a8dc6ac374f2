package tools

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pgtools/pgtools/tools/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// bundle is one test's fixtures: its own database, a registry whose pool connects as a
// least-privilege role, and the superuser handle for setup and assertions.
type bundle struct {
	t   testing.TB // set by tests that need it in setup callbacks
	db  *pgtest.DB
	reg *Registry
	tdb *Database
}

var testPrincipal = Principal{Name: "tester", Scopes: []string{"read", "write"}}

const fixtureSQL = `
CREATE TABLE customers (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL, email text UNIQUE, country text);
COMMENT ON TABLE customers IS 'People who buy things';
CREATE TABLE orders (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, customer_id bigint REFERENCES customers(id),
  status text NOT NULL DEFAULT 'pending', total numeric(12,2), placed_at timestamptz DEFAULT '2026-01-01T00:00:00Z');
CREATE INDEX orders_customer_idx ON orders(customer_id);
INSERT INTO customers (name, email, country) SELECT 'customer ' || i, 'c' || i || '@example.com', CASE WHEN i % 2 = 0 THEN 'DE' ELSE 'FR' END FROM generate_series(1, 50) i;
INSERT INTO orders (customer_id, status, total) SELECT 1 + i % 50, CASE WHEN i % 3 = 0 THEN 'paid' ELSE 'pending' END, i * 1.5 FROM generate_series(1, 300) i;
CREATE SEQUENCE counter;
`

// newBundle makes a database with the fixture tables and a registry over it. The pool's role may
// read and (for later write tests) write those tables, nothing else. policy may be zero.
func newBundle(t testing.TB, policy Policy) *bundle {
	t.Helper()
	db := pgtest.New(t)
	db.Exec(t, fixtureSQL)
	dsn := db.RoleDSN(t, "agent")
	role := db.RoleName("agent")
	db.Exec(t, "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "+quoteIdent(role))
	reg, tdb := registryOver(t, dsn, policy, 4)
	return &bundle{db: db, reg: reg, tdb: tdb}
}

// registryOver is a registry over a pool of maxConns connections to dsn, configured as pgtools
// configures it and closed when the test ends.
func registryOver(t testing.TB, dsn string, policy Policy, maxConns int32) (*Registry, *Database) {
	t.Helper()
	cfg, err := PoolConfig(dsn, policy, maxConns)
	if err != nil {
		t.Fatal(err)
	}
	tdb := NewDatabase("default", pgtest.OpenPool(t, cfg), policy)
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{tdb}})
	if err != nil {
		t.Fatal(err)
	}
	return reg, tdb
}

func quoteIdent(s string) string { return `"` + s + `"` }

// call runs a tool and returns the JSON a transport would send, decoded.
func (b *bundle) call(t testing.TB, tool string, args string) (map[string]any, *Error) {
	t.Helper()
	return b.callAs(t, testPrincipal, tool, args)
}

func (b *bundle) callAs(t testing.TB, p Principal, tool string, args string) (map[string]any, *Error) {
	t.Helper()
	res, _, terr := b.reg.Call(context.Background(), p, tool, []byte(args))
	if terr != nil {
		return nil, terr
	}
	return decodeResult(t, res), nil
}

// decodeResult is the JSON a transport would send for res, decoded.
func decodeResult(t testing.TB, res Result) map[string]any {
	t.Helper()
	raw, err := res.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("result is not valid JSON: %v\n%s", err, raw)
	}
	return out
}

// mustCall fails the test unless the call succeeds.
func (b *bundle) mustCall(t testing.TB, tool, args string) map[string]any {
	t.Helper()
	out, terr := b.call(t, tool, args)
	if terr != nil {
		t.Fatalf("%s %s: %s (%s) — %s", tool, args, terr.Message, terr.Type, terr.Suggestion)
	}
	return out
}

// mustFail fails the test unless the call fails with the given type.
func (b *bundle) mustFail(t testing.TB, want ErrorType, tool, args string) *Error {
	t.Helper()
	out, terr := b.call(t, tool, args)
	if terr == nil {
		t.Fatalf("%s %s: succeeded, want %s: %v", tool, args, want, out)
	}
	if terr.Type != want {
		t.Fatalf("%s %s: got %s (%s: %s), want %s", tool, args, terr.Type, terr.SQLState, terr.Message, want)
	}
	if terr.Suggestion == "" {
		t.Fatalf("%s %s: error without a suggestion: %+v", tool, args, terr)
	}
	return terr
}

func rows(t testing.TB, out map[string]any) []map[string]any {
	t.Helper()
	data, ok := out["data"].([]any)
	if !ok {
		t.Fatalf("data is not an array: %v", out["data"])
	}
	res := make([]map[string]any, len(data))
	for i, r := range data {
		res[i] = r.(map[string]any)
	}
	return res
}
