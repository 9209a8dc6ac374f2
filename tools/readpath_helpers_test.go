package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// newBundleConns is newBundle with a pool of maxConns connections. With one connection every
// call reuses the same backend (unless a call destroyed it), which is what a test of session
// state leaking from one call into the next needs.
func newBundleConns(t testing.TB, policy Policy, maxConns int32) *bundle {
	t.Helper()
	b := newBundle(t, policy)
	reg, tdb := registryOver(t, b.db.RoleDSN(t, "agent"), policy, maxConns)
	return &bundle{db: b.db, reg: reg, tdb: tdb}
}

// fixtureState is a fingerprint of the fixture data, taken as superuser: the row counts and a hash
// over every row of both tables, and the state of the sequence.
type fixtureState struct {
	orders, customers       int64
	ordersHash, custHash    int64
	seqCalled, extraObjects int64
}

func takeFixtureState(t testing.TB, b *bundle) fixtureState {
	t.Helper()
	return fixtureState{
		orders:     b.db.QueryInt(t, "SELECT count(*) FROM orders"),
		customers:  b.db.QueryInt(t, "SELECT count(*) FROM customers"),
		ordersHash: b.db.QueryInt(t, "SELECT coalesce(sum(hashtext(o::text)::bigint), 0)::bigint FROM orders o"),
		custHash:   b.db.QueryInt(t, "SELECT coalesce(sum(hashtext(c::text)::bigint), 0)::bigint FROM customers c"),
		seqCalled:  b.db.QueryInt(t, "SELECT is_called::int FROM counter"),
		// Tables, temp tables and other relations beyond the fixture's.
		extraObjects: b.db.QueryInt(t, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relkind IN ('r', 'v', 'm', 'S', 'p') AND (n.nspname = 'public' OR n.nspname LIKE 'pg_temp%')
			  AND c.relname NOT IN ('customers', 'orders', 'counter')`),
	}
}

// assertFixtureUnchanged fails the test when the fixture data differs from before. It reports
// with Errorf, so it may run in a t.Cleanup.
func assertFixtureUnchanged(t testing.TB, b *bundle, before fixtureState) {
	t.Helper()
	if after := takeFixtureState(t, b); after != before {
		t.Errorf("database changed: before %+v, after %+v", before, after)
	}
	if before.orders != 300 || before.customers != 50 {
		t.Errorf("fixture not as expected: %+v", before)
	}
}

// callResult runs a read (select_query, execute_sql in read mode) and returns its answer
// unencoded, so tests can look at the rows byte for byte. A success of another shape fails t.
func callResult(t testing.TB, b *bundle, tool, args string) (*RowsResult, *Error) {
	t.Helper()
	return callAnswer[*RowsResult](t, b, tool, args)
}

// callAnswer runs a tool and returns its answer as the result type R it must have.
func callAnswer[R Result](t testing.TB, b *bundle, tool, args string) (R, *Error) {
	t.Helper()
	var zero R
	res, _, e := b.reg.Call(context.Background(), testPrincipal, tool, []byte(args))
	if e != nil {
		return zero, e
	}
	r, ok := res.(R)
	if !ok {
		t.Fatalf("%s answered a %T, want a %T", tool, res, zero)
	}
	return r, nil
}

// exactRows runs a successful read and decodes its data with UseNumber, so numbers keep their
// exact text.
func exactRows(t testing.TB, b *bundle, tool, args string) []map[string]any {
	t.Helper()
	res, terr := callResult(t, b, tool, args)
	if terr != nil {
		t.Fatalf("%s %s: %s (%s, %s) — %s", tool, args, terr.Message, terr.Type, terr.SQLState, terr.Suggestion)
	}
	var out []map[string]any
	decodeExact(t, res.Rows.Data, &out)
	return out
}

// decodeExact decodes JSON with UseNumber and fails on trailing data.
func decodeExact(t testing.TB, data []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("not valid JSON: %v\n%s", err, data)
	}
	if dec.More() {
		t.Fatalf("trailing data after JSON value: %s", data)
	}
}

// jsonValue decodes one JSON literal written in a test table.
func jsonValue(t testing.TB, lit string) any {
	t.Helper()
	var v any
	decodeExact(t, []byte(lit), &v)
	return v
}

// assertJSONEqual compares two decoded JSON values exactly (numbers by their text).
func assertJSONEqual(t testing.TB, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		t.Fatalf("got %s (%T), want %s (%T)", g, got, w, want)
	}
}

// argsJSON marshals tool arguments, so SQL with quotes and backslashes needs no hand escaping.
func argsJSON(t testing.TB, args map[string]any) string {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// errorJSON is the error object exactly as transports send it.
func errorJSON(t testing.TB, e *Error) string {
	t.Helper()
	b, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// assertNoGeneratedSQL fails when an error shows SQL that pgtools built (the quoted qualified
// table name, the LIMIT it appends, the SELECT list it writes).
func assertNoGeneratedSQL(t testing.TB, e *Error) {
	t.Helper()
	text := e.Message + "\n" + e.Suggestion
	for _, frag := range []string{`"public".`, "LIMIT ", "SELECT ", " FROM ", "WHERE ("} {
		if strings.Contains(text, frag) {
			t.Fatalf("error shows generated SQL (%q): %s", frag, errorJSON(t, e))
		}
	}
}
