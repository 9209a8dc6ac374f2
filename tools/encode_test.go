package tools

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestResultEncoding pins the JSON form of every type family (docs/design.md §4): numbers that a
// float64 reader keeps exactly are numbers, everything else that could lose precision is a
// string, json is nested JSON, arrays are arrays, bytea is base64. Values are decoded with
// UseNumber, so a number's text is compared exactly.
func TestResultEncoding(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	cases := []struct {
		name string
		expr string // one SQL expression, selected AS v
		want string // the JSON value of v
	}{
		{"uuid", `'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid`, `"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"`},
		{"int8 zero", `0::int8`, `0`},
		{"int8 16 digits", `1234567890123456::int8`, `1234567890123456`},
		{"int8 max safe", `9007199254740991::int8`, `9007199254740991`},
		{"int8 min safe", `(-9007199254740991)::int8`, `-9007199254740991`},
		{"int8 2^53", `9007199254740992::int8`, `"9007199254740992"`},
		{"int8 above safe", `9007199254740993::int8`, `"9007199254740993"`},
		{"int8 below safe", `(-9007199254740993)::int8`, `"-9007199254740993"`},
		{"int8 max", `9223372036854775807::int8`, `"9223372036854775807"`},
		{"int8 min", `(-9223372036854775808)::int8`, `"-9223372036854775808"`},
		{"int4 max", `2147483647::int4`, `2147483647`},
		{"int4 min", `(-2147483648)::int4`, `-2147483648`},
		{"int2", `(-32768)::int2`, `-32768`},
		{"oid", `4294967295::oid`, `4294967295`},
		{"numeric 30 digits", `123456789012345678901234567890.123::numeric`, `"123456789012345678901234567890.123"`},
		{"numeric keeps scale", `1.50::numeric(5,2)`, `"1.50"`},
		{"numeric NaN", `'NaN'::numeric`, `"NaN"`},
		{"numeric Infinity", `'Infinity'::numeric`, `"Infinity"`},
		{"float8 NaN", `'NaN'::float8`, `"NaN"`},
		{"float8 Infinity", `'Infinity'::float8`, `"Infinity"`},
		{"float8 -Infinity", `'-Infinity'::float8`, `"-Infinity"`},
		{"float8", `1.5::float8`, `1.5`},
		{"float8 exponent", `1e300::float8`, `1e+300`},
		{"float8 negative zero", `'-0'::float8`, `-0`},
		{"float4", `0.25::float4`, `0.25`},
		{"float4 NaN", `'NaN'::float4`, `"NaN"`},
		{"jsonb nested", `'{"a":[1,2,{"b":null}]}'::jsonb`, `{"a":[1,2,{"b":null}]}`},
		{"json kept as written", `'{"z": 1, "a": [true, "x"], "n": 12345678901234567890.5}'::json`, `{"z":1,"a":[true,"x"],"n":12345678901234567890.5}`},
		{"jsonb string", `'"hi"'::jsonb`, `"hi"`},
		{"jsonb null", `'null'::jsonb`, `null`},
		{"int array with NULL", `'{1,2,NULL}'::int[]`, `[1,2,null]`},
		{"int8 array", `ARRAY[1, 9007199254740993]::int8[]`, `[1,"9007199254740993"]`},
		{"float8 array", `'{1.5,NaN,-Infinity}'::float8[]`, `[1.5,"NaN","-Infinity"]`},
		{"numeric array", `'{1.10,2}'::numeric[]`, `["1.10","2"]`},
		{"bool array", `'{t,f,NULL}'::bool[]`, `[true,false,null]`},
		{"text array", `ARRAY['a"b', 'c,d', 'e\f', NULL, 'NULL', '', ' sp ', '{x}', 'ü']::text[]`,
			`["a\"b","c,d","e\\f",null,"NULL",""," sp ","{x}","ü"]`},
		{"2-D int array", `'{{1,2},{3,4}}'::int[]`, `[[1,2],[3,4]]`},
		{"2-D text array", `ARRAY[['a','b'],['c',NULL]]`, `[["a","b"],["c",null]]`},
		{"empty array", `'{}'::int[]`, `[]`},
		{"array with bounds", `'[0:1]={1,2}'::int[]`, `[1,2]`},
		{"jsonb array", `ARRAY['{"a":1}'::jsonb, NULL]`, `[{"a":1},null]`},
		{"uuid array", `ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid]`, `["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"]`},
		{"date array", `ARRAY['2024-02-29'::date]`, `["2024-02-29"]`},
		{"date", `'2024-02-29'::date`, `"2024-02-29"`},
		{"interval", `'1 day 02:03:04'::interval`, `"1 day 02:03:04"`},
		{"interval months", `'1 year 2 months'::interval`, `"1 year 2 mons"`},
		{"time", `'12:34:56.789'::time`, `"12:34:56.789"`},
		{"numrange", `numrange(1.5, 2.5)`, `"[1.5,2.5)"`},
		{"inet", `'192.168.0.1/24'::inet`, `"192.168.0.1/24"`},
		{"bytea", `'\xdeadbeef'::bytea`, `"3q2+7w=="`},
		{"bytea empty", `''::bytea`, `""`},
		{"true", `true`, `true`},
		{"false", `false`, `false`},
		{"NULL int", `NULL::int`, `null`},
		{"NULL text", `NULL::text`, `null`},
		{"NULL jsonb", `NULL::jsonb`, `null`},
		{"NULL array", `NULL::int[]`, `null`},
		{"text with escapes", `E'line1\nline2 "q" \t tab \\ back \u00fcn\u00ef \U0001F418 <>&'`, `"line1\nline2 \"q\" \t tab \\ back ünï 🐘 <>&"`},
		{"control character", `E'a\x01b'`, `"a\u0001b"`},
		{"empty text", `''::text`, `""`},
		{"char padded", `'ab'::char(3)`, `"ab "`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rs := exactRows(t, b, "execute_sql", argsJSON(t, map[string]any{"sql": "SELECT " + c.expr + " AS v"}))
			if len(rs) != 1 || len(rs[0]) != 1 {
				t.Fatalf("want one row with one column, got %v", rs)
			}
			assertJSONEqual(t, rs[0]["v"], jsonValue(t, c.want))
		})
	}

	// Types sent as PostgreSQL's own text form: the JSON string equals expr::text.
	for _, expr := range []string{
		`'2024-01-02 03:04:05.678+02'::timestamptz`,
		`'2024-01-02 03:04:05'::timestamp`,
		`'infinity'::timestamptz`,
		`'12:00+05'::timetz`,
		`'2024-02-29'::date`,
		`'1 day 02:03:04'::interval`,
		`tstzrange('2024-01-01', '2024-02-01')`,
		`'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid`,
		`'08:00:2b:01:02:03'::macaddr`,
	} {
		t.Run("text form "+expr, func(t *testing.T) {
			t.Parallel()
			rs := exactRows(t, b, "execute_sql", argsJSON(t, map[string]any{"sql": "SELECT " + expr + " AS v, (" + expr + ")::text AS t"}))
			v, ok := rs[0]["v"].(string)
			if !ok || v != rs[0]["t"] {
				t.Fatalf("v = %#v, want PostgreSQL's text %#v", rs[0]["v"], rs[0]["t"])
			}
		})
	}

	t.Run("no HTML escaping", func(t *testing.T) {
		t.Parallel()
		res, e := callResult(t, b, "execute_sql", `{"sql":"SELECT '<a href=\"x\">&</a>' AS v"}`)
		if e != nil {
			t.Fatal(errorJSON(t, e))
		}
		if !strings.Contains(string(res.Rows.Data), `<a href=\"x\">&</a>`) {
			t.Fatalf("data %s", res.Rows.Data)
		}
	})
}

// TestDuplicateColumnNames: every column of a row becomes a distinct key, in column order, even
// when a renamed duplicate would take a later column's name.
func TestDuplicateColumnNames(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	for _, c := range []struct{ sql, want string }{
		{"select 1, 2", `[{"?column?":1,"?column?_2":2}]`},
		{"select 1, 2, 3", `[{"?column?":1,"?column?_2":2,"?column?_3":3}]`},
		{"select 1 a, 2 a, 3 a_2", `[{"a":1,"a_2":2,"a_2_2":3}]`},
		{"select 1 a_2, 2 a, 3 a", `[{"a_2":1,"a":2,"a_3":3}]`},
		{"select o.id, c.id from orders o join customers c on c.id = o.customer_id where o.id = 1", `[{"id":1,"id_2":2}]`},
	} {
		t.Run(c.sql, func(t *testing.T) {
			t.Parallel()
			res, e := callResult(t, b, "execute_sql", argsJSON(t, map[string]any{"sql": c.sql}))
			if e != nil {
				t.Fatal(errorJSON(t, e))
			}
			if string(res.Rows.Data) != c.want {
				t.Fatalf("data %s, want %s", res.Rows.Data, c.want)
			}
		})
	}
}

// BenchmarkResultEncode measures encoding a select_query answer as a transport sends it
// (MarshalJSON): 100 rows in the objects and the columns format, and one row, where the fields
// around the rows cost most; the rows come from a real call.
func BenchmarkResultEncode(b *testing.B) {
	bn := newBundleConns(b, Policy{}, 1)
	for _, c := range []struct {
		name, format string
		limit        int
	}{{"objects", "objects", 100}, {"columns", "columns", 100}, {"one-row", "objects", 1}} {
		b.Run(c.name, func(b *testing.B) {
			res, _, e := bn.reg.Call(context.Background(), testPrincipal, "select_query", fmt.Appendf(nil, `{"table":"orders","order_by":"id","limit":%d,"format":%q}`, c.limit, c.format))
			if e != nil {
				b.Fatal(e.Message)
			}
			out, err := res.MarshalJSON()
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := res.MarshalJSON(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
