package tools

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// formatSQL returns 100 rows of every type family the encoding table covers, NULLs and text that
// CSV must quote included.
const formatSQL = `select i as order_id, i::int8 * 100000000000 as customer_ref, (i / 3.0)::numeric(12,2) as amount_due,
  (i * 0.5)::float8 as discount_ratio, i % 2 = 0 as is_paid, (i % 3)::int2 as priority_level,
  case when i % 7 = 0 then null else 'n' || i || case when i % 25 = 0 then ', "q"' || chr(10) || 'x' else '' end end as customer_label,
  case when i % 11 = 0 then '' else 'ok' end as delivery_note,
  jsonb_build_object('k', i % 3) as extra_metadata, array[i % 5] as line_item_ids,
  date '2026-01-01' + i as created_on, '\x0a'::bytea as signature_blob
  from generate_series(1, 100) i`

// TestFormatsCarryTheSameValues: columns and csv give back exactly the values objects gives
// (csv as PostgreSQL's text), with the same rowCount and truncation, and columns costs far fewer
// tokens of OpenAI's o200k encoding than objects (printed).
func TestFormatsCarryTheSameValues(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	call := func(format string) map[string]any {
		t.Helper()
		return b.mustCall(t, "execute_sql", argsJSON(t, map[string]any{"sql": formatSQL, "format": format}))
	}
	objects, columns, csvOut := call("objects"), call("columns"), call("csv")
	objRows := rows(t, objects)
	names, _ := columns["columns"].([]any)
	arrays, _ := columns["rows"].([]any)
	if len(objRows) != 100 || len(arrays) != 100 || len(names) != 12 || columns["data"] != nil {
		t.Fatalf("columns answer: %d names, %d rows, data %v", len(names), len(arrays), columns["data"] != nil)
	}
	for i, r := range objRows {
		row := arrays[i].([]any)
		for j, n := range names {
			if fmt.Sprint(row[j]) != fmt.Sprint(r[n.(string)]) {
				t.Fatalf("row %d column %s: columns %v, objects %v", i, n, row[j], r[n.(string)])
			}
		}
	}
	text, _ := csvOut["data"].(string)
	records, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil {
		t.Fatalf("csv does not parse: %v\n%.300s", err, text)
	}
	if len(records) != 101 || strings.Join(records[0], ",") != "order_id,customer_ref,amount_due,discount_ratio,is_paid,priority_level,customer_label,delivery_note,extra_metadata,line_item_ids,created_on,signature_blob" {
		t.Fatalf("csv: %d records, header %v", len(records), records[0])
	}
	// csv carries each value's text: numbers as PostgreSQL writes them (exact, unlike objects'
	// JSON numbers read as float64 here), so compare against the objects answer decoded exactly.
	res, e := callResult(t, b, "execute_sql", argsJSON(t, map[string]any{"sql": formatSQL}))
	if e != nil {
		t.Fatal(errorJSON(t, e))
	}
	var exact []map[string]any
	decodeExact(t, res.Rows.Data, &exact)
	for i, rec := range records[1:] {
		r := exact[i]
		if rec[0] != fmt.Sprint(r["order_id"]) || rec[1] != fmt.Sprint(r["customer_ref"]) || rec[2] != r["amount_due"] || rec[10] != r["created_on"] {
			t.Fatalf("csv row %d %v vs objects %v", i, rec, r)
		}
		label, _ := r["customer_label"].(string)
		if rec[6] != label { // NULL and the empty field read the same in CSV; objects tells them apart
			t.Fatalf("csv row %d label %q vs %q", i, rec[6], label)
		}
		if r["delivery_note"] == "" && !strings.Contains(text, `,"",`) {
			t.Fatal("an empty string is not quoted, so it reads as NULL")
		}
		if rec[4] != map[bool]string{true: "t", false: "f"}[r["is_paid"].(bool)] || rec[11] != `\x0a` {
			t.Fatalf("csv row %d: bool %q bytea %q", i, rec[4], rec[11])
		}
	}
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	count := func(v map[string]any) int {
		raw, _ := json.Marshal(v)
		ids, _, _ := enc.Encode(string(raw))
		return len(ids)
	}
	o, c, s := count(objects), count(columns), count(csvOut)
	t.Logf("tokens (o200k) of a 100-row answer with 12 columns of every type family: objects %d, columns %d (%.2f×), csv %d (%.2f×)", o, c, float64(c)/float64(o), s, float64(s)/float64(o))
	if float64(c) > 0.6*float64(o) {
		t.Fatalf("columns costs %d tokens, more than 0.6× objects' %d", c, o)
	}
}

// TestFormatsEverywhere: format applies to every tool that returns rows, and truncation, hints and
// the byte cap behave the same in each.
func TestFormatsEverywhere(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{MaxResponseBytes: 300})
	for _, f := range []string{"objects", "columns", "csv"} {
		out := b.mustCall(t, "select_query", fmt.Sprintf(`{"table":"orders","order_by":"id","format":%q}`, f))
		if out["truncated"] != true || !strings.Contains(out["hint"].(string), "300-byte response cap") {
			t.Fatalf("%s: %v", f, out)
		}
		key := map[string]string{"objects": "data", "columns": "rows", "csv": "data"}[f]
		raw, _ := json.Marshal(out[key])
		if len(raw) > 300 {
			t.Fatalf("%s: %d bytes past the 300-byte cap", f, len(raw))
		}
	}
	out := b.mustCall(t, "update_data", `{"table":"orders","set":{"status":"x"},"where":"id <= 2","returning":"id,status","autocommit":true,"format":"columns"}`)
	if fmt.Sprint(out["columns"]) != "[id status]" || len(out["rows"].([]any)) != 2 {
		t.Fatalf("update returning as columns: %v", out)
	}
	out = b.mustCall(t, "pg_transaction", `{"format":"csv","operations":[{"sql":"select id from orders where id <= 2 order by id"}]}`)
	res := out["results"].([]any)[0].(map[string]any)
	if res["rows"] != "id\r\n1\r\n2\r\n" {
		t.Fatalf("pg_transaction csv: %q", res["rows"])
	}
	b.mustFail(t, ErrInvalidArguments, "select_query", `{"table":"orders","format":"xml"}`)
	// A database's default format applies when a call gives none; the call's own wins.
	b2 := newBundle(t, Policy{DefaultFormat: "columns"})
	if out := b2.mustCall(t, "select_query", `{"table":"orders","limit":1}`); out["columns"] == nil {
		t.Fatalf("database default ignored: %v", out)
	}
	if out := b2.mustCall(t, "select_query", `{"table":"orders","limit":1,"format":"objects"}`); out["data"] == nil {
		t.Fatalf("call's format ignored: %v", out)
	}
	// A principal's default comes before the database's.
	csvReader := Principal{Name: "csv", Scopes: []string{"read"}, DefaultFormat: "csv"}
	if out, e := b2.callAs(t, csvReader, "select_query", `{"table":"orders","limit":1,"columns":"id","order_by":"id"}`); e != nil || out["data"] != "id\r\n1\r\n" {
		t.Fatalf("principal's default ignored: %v %v", out, e)
	}
}
