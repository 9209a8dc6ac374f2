package tools

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestParamsBoundExactly: JSON numbers reach PostgreSQL as their exact text (never through
// float64), arrays and objects bind to array and json parameters, and params may come as a
// string holding a JSON array.
func TestParamsBoundExactly(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	b.db.Exec(t, `CREATE TABLE tokens (id uuid PRIMARY KEY, label text);
		INSERT INTO tokens VALUES ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'first'), ('b1ffcd00-0d1c-4ef8-bb6d-6bb9bd380a22', 'second')`)
	cases := []struct {
		name string
		tool string
		args string
		want string // JSON of the rows
	}{
		{"numeric keeps every digit", "execute_sql",
			`{"sql":"select $1::numeric AS v","params":[12345678901234567890.123456789]}`, `[{"v":"12345678901234567890.123456789"}]`},
		{"int8 max", "execute_sql",
			`{"sql":"select $1::int8 AS v","params":[9223372036854775807]}`, `[{"v":"9223372036854775807"}]`},
		{"int8 just above 2^53", "execute_sql",
			`{"sql":"select $1::int8 - 9007199254740992 AS v","params":[9007199254740993]}`, `[{"v":1}]`},
		{"exponent numeric", "execute_sql",
			`{"sql":"select $1::numeric AS v","params":[1.5e3]}`, `[{"v":"1500"}]`},
		{"uuid string against a uuid column", "select_query",
			`{"table":"tokens","columns":"label","where":"id = $1","params":["b1ffcd00-0d1c-4ef8-bb6d-6bb9bd380a22"]}`, `[{"label":"second"}]`},
		{"array param to int[]", "execute_sql",
			`{"sql":"select $1::int[] AS v","params":[[1,2,3]]}`, `[{"v":[1,2,3]}]`},
		{"array param with NULL and strings", "execute_sql",
			`{"sql":"select $1::text[] AS v","params":[["a\"b","c,d",null,"NULL"]]}`, `[{"v":["a\"b","c,d",null,"NULL"]}]`},
		{"array param to ANY in select_query", "select_query",
			`{"table":"orders","columns":"id","where":"id = ANY($1)","params":[[1,2,3]],"order_by":"id"}`, `[{"id":1},{"id":2},{"id":3}]`},
		{"jsonb object param", "execute_sql",
			`{"sql":"select $1::jsonb -> 'a' AS v","params":[{"a":{"b":[1,"x",null]}}]}`, `[{"v":{"b":[1,"x",null]}}]`},
		{"jsonb array param", "execute_sql",
			`{"sql":"select $1::jsonb AS v","params":[[1,{"c":2}]]}`, `[{"v":[1,{"c":2}]}]`},
		{"params as a string", "execute_sql",
			`{"sql":"select $1::int + $2::int AS v","params":"[1,2]"}`, `[{"v":3}]`},
		{"params as a string in select_query", "select_query",
			`{"table":"orders","columns":"id","where":"id = $1","params":" [7] "}`, `[{"id":7}]`},
		{"boolean and null", "execute_sql",
			`{"sql":"select $1::bool AS a, $2::int IS NULL AS b","params":[true,null]}`, `[{"a":true,"b":true}]`},
		{"string that looks like SQL", "execute_sql",
			`{"sql":"select $1::text AS v","params":["'); drop table orders; --"]}`, `[{"v":"'); drop table orders; --"}]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, e := callResult(t, b, c.tool, c.args)
			if e != nil {
				t.Fatal(errorJSON(t, e))
			}
			var got, want any
			decodeExact(t, res.Rows.Data, &got)
			decodeExact(t, []byte(c.want), &want)
			assertJSONEqual(t, got, want)
		})
	}
	b.countAtEnd(t, "SELECT count(*) FROM orders", 300, "a call changed the fixture")
}

// TestParamsRefusedNotRounded: a value that does not fit its parameter's type is an error, never
// silently converted (1.5 bound to int would be 1 or 2 through float64).
func TestParamsRefusedNotRounded(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	cases := []struct {
		name, args, sqlState string
	}{
		{"fraction to int", `{"sql":"select $1::int AS v","params":[1.5]}`, "22P02"},
		{"fraction to int8", `{"sql":"select $1::int8 AS v","params":[2.5]}`, "22P02"},
		{"fraction in an int array", `{"sql":"select $1::int[] AS v","params":[[1,1.5]]}`, "22P02"},
		{"too big for int", `{"sql":"select $1::int AS v","params":[2147483648]}`, "22003"},
		{"fraction against an int column", `{"sql":"select id from orders where id = $1::int","params":[1.5]}`, "22P02"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := b.mustFail(t, ErrSyntax, "execute_sql", c.args)
			if e.SQLState != c.sqlState {
				t.Fatalf("sqlState %q, want %q: %s", e.SQLState, c.sqlState, errorJSON(t, e))
			}
		})
	}
	t.Run("fraction against an int column in select_query", func(t *testing.T) {
		t.Parallel()
		// id = '1.5' with an unknown-typed parameter: PostgreSQL types it bigint and refuses it.
		e := b.mustFail(t, ErrSyntax, "select_query", `{"table":"orders","where":"id = $1","params":[1.5]}`)
		if e.SQLState != "22P02" {
			t.Fatalf("sqlState %q: %s", e.SQLState, errorJSON(t, e))
		}
	})
}

// TestParamCountMismatch: too few or too many params is the model's error, reported as such
// with advice about params, not as a connection failure, and without pgtools' internal
// statement names.
func TestParamCountMismatch(t *testing.T) {
	t.Parallel()
	b := newBundleConns(t, Policy{}, 1)
	cases := []struct {
		name, tool, args string
	}{
		{"missing param", "execute_sql", `{"sql":"select $1::int + $2::int AS v","params":[1]}`},
		{"no params at all", "execute_sql", `{"sql":"select $1::int AS v"}`},
		{"extra param", "execute_sql", `{"sql":"select 1 AS v","params":[1]}`},
		{"missing param in select_query", "select_query", `{"table":"orders","where":"id = $1 or id = $2","params":[1]}`},
		{"parameter $0", "execute_sql", `{"sql":"select $0::int AS v","params":[1]}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Not parallel: the single connection must serve the next call after each failure.
			e := b.mustFail(t, ErrSyntax, c.tool, c.args)
			if !strings.Contains(e.Suggestion, "params") || !strings.Contains(e.Suggestion, "$1") {
				t.Fatalf("suggestion does not explain params: %s", errorJSON(t, e))
			}
			if strings.Contains(e.Message, "pgt_") {
				t.Fatalf("message names an internal statement: %s", errorJSON(t, e))
			}
			if e.SQLState != "08P01" && e.SQLState != "42P02" {
				t.Fatalf("sqlState %q: %s", e.SQLState, errorJSON(t, e))
			}
			if rs := rows(t, b.mustCall(t, "execute_sql", `{"sql":"select $1::int AS v","params":[5]}`)); rs[0]["v"].(float64) != 5 {
				t.Fatalf("the connection is not usable after the error: %v", rs)
			}
		})
	}
}

// TestErrorsNeverEchoParamValues: whatever PostgreSQL echoes, the error a model or a log sees
// does not contain a value passed in params.
func TestErrorsNeverEchoParamValues(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	const secret = "SECRET-VALUE-123"
	cases := []struct {
		name, tool string
		args       map[string]any
	}{
		{"int", "execute_sql", map[string]any{"sql": "select $1::int", "params": []any{secret}}},
		{"uuid", "execute_sql", map[string]any{"sql": "select $1::uuid", "params": []any{secret}}},
		{"date", "execute_sql", map[string]any{"sql": "select $1::date", "params": []any{secret}}},
		{"timestamptz", "execute_sql", map[string]any{"sql": "select $1::timestamptz", "params": []any{secret}}},
		{"bool", "execute_sql", map[string]any{"sql": "select $1::bool", "params": []any{secret}}},
		{"numeric", "execute_sql", map[string]any{"sql": "select $1::numeric", "params": []any{secret}}},
		{"interval", "execute_sql", map[string]any{"sql": "select $1::interval", "params": []any{secret}}},
		{"inet", "execute_sql", map[string]any{"sql": "select $1::inet", "params": []any{secret}}},
		{"jsonb", "execute_sql", map[string]any{"sql": "select $1::jsonb", "params": []any{secret}}},
		{"int array", "execute_sql", map[string]any{"sql": "select $1::int[]", "params": []any{secret}}},
		{"array element", "execute_sql", map[string]any{"sql": "select $1::int[]", "params": []any{[]any{"1", secret}}}},
		{"regclass (42P01 echoes it folded to lower case)", "execute_sql", map[string]any{"sql": "select $1::regclass", "params": []any{secret}}},
		{"current_setting (42704)", "execute_sql", map[string]any{"sql": "select current_setting($1)", "params": []any{secret}}},
		{"to_date echoes a prefix", "execute_sql", map[string]any{"sql": "select to_date($1, 'YYYY-MM-DD')", "params": []any{secret}}},
		{"out of range number", "execute_sql", map[string]any{"sql": "select $1::int", "params": []any{json.Number("123456789012345678901234567890")}}},
		{"params as a string", "execute_sql", map[string]any{"sql": "select $1::int", "params": `["` + secret + `"]`}},
		{"params string that is not an array", "execute_sql", map[string]any{"sql": "select $1::int", "params": secret}},
		{"select_query where", "select_query", map[string]any{"table": "orders", "where": "id = $1", "params": []any{secret}}},
		{"select_query where with cast", "select_query", map[string]any{"table": "orders", "where": "placed_at > $1::timestamptz", "params": []any{secret}}},
		{"pg_transaction operation params", "pg_transaction", map[string]any{"operations": []any{
			map[string]any{"sql": "select 1"}, map[string]any{"sql": "select $1::regclass", "params": []any{secret}}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := b.refused(t, c.tool, argsJSON(t, c.args))
			text := strings.ToLower(errorJSON(t, e))
			for _, v := range []string{secret, "123456789012345678901234567890", "secr"} {
				if strings.Contains(text, strings.ToLower(v)) {
					t.Fatalf("the error echoes a param value (%s): %s", v, errorJSON(t, e))
				}
			}
			if e.Suggestion == "" {
				t.Fatalf("no suggestion: %s", errorJSON(t, e))
			}
		})
	}
}

// TestRedactValues covers the value-carrying arguments of every tool: params (array or string),
// row, rows, set and pg_transaction's operations[].params. Column names (the keys of row and
// set) and values too short to matter are left as they are.
func TestRedactValues(t *testing.T) {
	t.Parallel()
	cases := []redactCase{
		{"params, folded case", `{"params":["Secret-Value"]}`, `Relation "secret-value" does not exist`, `Relation "***" does not exist`},
		{"params as a string", `{"params":"[\"opsecret\", 1]"}`, `unknown "OPSECRET"`, `unknown "***"`},
		{"number param", `{"params":[123456]}`, `value 123456 out of range`, `value *** out of range`},
		{"row value, not its key", `{"row":{"email":"alice@example.com"}}`, `email alice@example.com rejected`, `email *** rejected`},
		{"rows", `{"rows":[{"a":"LongValue1"},{"a":"LongValue2"}]}`, `LongValue2 and LongValue1`, `*** and ***`},
		{"set", `{"set":{"name":"Bobby Tables"}}`, `name "Bobby Tables"`, `name "***"`},
		{"nested value", `{"params":[{"k":["deepsecret"]}]}`, `got deepsecret`, `got ***`},
		{"operations params", `{"operations":[{"sql":"select 1"},{"sql":"select $1::regclass","params":["opvalue"]}]}`, `relation "opvalue"`, `relation "***"`},
		{"longest first", `{"params":["abcd","abcdefgh"]}`, `x abcdefgh y`, `x *** y`},
		{"short values stay", `{"params":["id",1]}`, `column "id" at 1`, `column "id" at 1`},
		{"sql text is not a value", `{"sql":"select secretcolumn"}`, `column "secretcolumn"`, `column "secretcolumn"`},
		{"regexp metacharacters", `{"params":["a.b*c(d"]}`, `bad a.b*c(d and aXbbc(d`, `bad *** and aXbbc(d`},
	}
	checkRedactions(t, cases)
}
