package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/session"
)

// discoveryFixture adds to the bundle's customers and orders a table found by a word of its
// comment and by a column, names full of characters that wildcards and regular expressions
// would give a meaning, and a view.
const discoveryFixture = `
CREATE TABLE invoices (id int PRIMARY KEY, customer_id bigint REFERENCES customers(id), vat_number text);
COMMENT ON TABLE invoices IS 'Bills sent out, one per order';
CREATE TABLE "50%%_off" (id int);
CREATE TABLE a_b (x int);
CREATE TABLE axb (x int);
CREATE TABLE "a.*" (x int);
CREATE VIEW big_spenders AS SELECT customer_id FROM orders WHERE total > 100;
GRANT SELECT ON ALL TABLES IN SCHEMA public TO %s;
`

func newDiscoveryBundle(t *testing.T) *bundle {
	t.Helper()
	b := newBundle(t, Policy{})
	b.db.Exec(t, fmt.Sprintf(discoveryFixture, quoteIdent(b.db.RoleName("agent"))))
	return b
}

// listed is the names a list answer's data holds: each entry's name, or each string of
// detail names.
func listed(t *testing.T, out map[string]any) []string {
	t.Helper()
	var names []string
	for _, e := range out["data"].([]any) {
		switch v := e.(type) {
		case string:
			names = append(names, v)
		case map[string]any:
			names = append(names, v["name"].(string))
		}
	}
	return names
}

// TestDescribeSchemaSearch: search matches words, literally and in any case, against names,
// columns and comments, ranked exact name, prefix, contains, column, comment; kind filters;
// detail chooses names, the summary entry or every table's columns and keys.
func TestDescribeSchemaSearch(t *testing.T) {
	t.Parallel()
	b := newDiscoveryBundle(t)
	for _, tc := range []struct {
		args string
		want []string
	}{
		{`{"search":"bills"}`, []string{"invoices"}},                                           // a word of the comment
		{`{"search":"VAT"}`, []string{"invoices"}},                                             // a column, in another case
		{`{"search":"customers"}`, []string{"customers"}},                                      // exact beats the rest
		{`{"search":"customer"}`, []string{"customers", "big_spenders", "invoices", "orders"}}, // prefix, then those with a customer column, by name
		{`{"search":"order"}`, []string{"orders", "invoices"}},                                 // prefix, then comment
		{`{"search":"a_b"}`, []string{"a_b"}},                                                  // _ is not a wildcard
		{`{"search":"50%"}`, []string{"50%_off"}},                                              // nor is %
		{`{"search":"a.*"}`, []string{"a.*"}},                                                  // nor . and *
		{`{"search":"(["}`, nil},                                                               // nor a broken regular expression
		{`{"search":"public.inv"}`, []string{"invoices"}},                                      // schema.name
		{`{"search":"sent order"}`, []string{"invoices"}},                                      // every word must match
		{`{"search":"bills kayak"}`, nil},
		{`{"kind":"view"}`, []string{"big_spenders"}},
		{`{"search":"customer","kind":"table"}`, []string{"customers", "invoices", "orders"}},
	} {
		t.Run(tc.args, func(t *testing.T) {
			t.Parallel()
			out := b.mustCall(t, "describe_schema", tc.args)
			got := listed(t, out)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("found %q, want %q: %v", got, tc.want, out)
			}
			if out["truncated"] != false || out["next_page"] != nil {
				t.Fatalf("truncated %v, next_page %v", out["truncated"], out["next_page"])
			}
		})
	}

	// The columns that matched are named.
	out := b.mustCall(t, "describe_schema", `{"search":"vat"}`)
	entry := out["data"].([]any)[0].(map[string]any)
	if fmt.Sprint(entry["matchedColumns"]) != "[vat_number]" || entry["comment"] != "Bills sent out, one per order" {
		t.Fatalf("entry %v", entry)
	}

	// detail names: the names as a model writes them.
	out = b.mustCall(t, "describe_schema", `{"detail":"names","kind":"table"}`)
	if got := listed(t, out); !slices.Contains(got, "50%_off") || !slices.Contains(got, `"a.*"`) || !slices.Contains(got, "a_b") {
		t.Fatalf("names %q", got)
	}

	// detail full: each table's columns, keys and the tables it joins to.
	out = b.mustCall(t, "describe_schema", `{"search":"invoices","detail":"full"}`)
	raw, _ := json.Marshal(out["data"])
	var full []tableDetail
	if err := json.Unmarshal(raw, &full); err != nil || len(full) != 1 {
		t.Fatalf("full: %v %s", err, raw)
	}
	if d := full[0]; len(d.Columns) != 3 || !slices.Equal(d.PrimaryKey, []string{"id"}) || len(d.ForeignKeys) != 1 || d.ForeignKeys[0].ReferencesTable != "customers" {
		t.Fatalf("full detail %+v", d)
	}
}

// TestDescribeSchemaJoins: one table's answer names the tables that join to it (foreign keys that
// reference it, with the join columns) beside those it references.
func TestDescribeSchemaJoins(t *testing.T) {
	t.Parallel()
	b := newDiscoveryBundle(t)
	res, e := callAnswer[*SchemaResult](t, b, "describe_schema", `{"table":"customers"}`)
	if e != nil {
		t.Fatal(errorJSON(t, e))
	}
	var d tableDetail
	if err := json.Unmarshal(res.Data, &d); err != nil {
		t.Fatal(err)
	}
	want := []inboundKey{
		{Name: "invoices_customer_id_fkey", Table: "invoices", Columns: []string{"customer_id"}, ReferencesColumns: []string{"id"}},
		{Name: "orders_customer_id_fkey", Table: "orders", Columns: []string{"customer_id"}, ReferencesColumns: []string{"id"}},
	}
	if fmt.Sprint(d.ReferencedBy) != fmt.Sprint(want) || len(d.ForeignKeys) != 0 {
		t.Fatalf("customers joins: out %+v, in %+v", d.ForeignKeys, d.ReferencedBy)
	}
}

// TestDescribeSchemaPages: with a limit, pages continue with next_page alone, list every table
// exactly once, and refuse a token that was changed, issued for other arguments or to another
// caller, or issued by another tool.
func TestDescribeSchemaPages(t *testing.T) {
	t.Parallel()
	b := newDiscoveryBundle(t)
	all := listed(t, b.mustCall(t, "describe_schema", `{}`))
	if len(all) != 8 {
		t.Fatalf("listed %q", all)
	}
	var got []string
	out := b.mustCall(t, "describe_schema", `{"limit":3}`)
	first := out["next_page"]
	for {
		got = append(got, listed(t, out)...)
		if out["truncated"] != true {
			break
		}
		if len(listed(t, out)) != 3 {
			t.Fatalf("a page of %d", len(listed(t, out)))
		}
		out = b.mustCall(t, "describe_schema", `{"page_token":"`+out["next_page"].(string)+`"}`)
	}
	if !slices.Equal(got, all) {
		t.Fatalf("pages listed %q, want %q", got, all)
	}
	tok := first.(string)

	// A search pages by rank, then name.
	out = b.mustCall(t, "describe_schema", `{"search":"customer","limit":1}`)
	got = listed(t, out)
	for out["truncated"] == true {
		out = b.mustCall(t, "describe_schema", `{"search":"customer","page_token":"`+out["next_page"].(string)+`"}`)
		got = append(got, listed(t, out)...)
	}
	if !slices.Equal(got, []string{"customers", "big_spenders", "invoices", "orders"}) {
		t.Fatalf("search pages %q", got)
	}

	tampered := []byte(tok)
	tampered[len(tampered)/2] ^= 1
	for _, tc := range []struct{ name, args, says string }{
		{"tampered", `{"page_token":"` + string(tampered) + `"}`, "page_token"},
		{"other arguments", `{"page_token":"` + tok + `","search":"orders"}`, "other search"},
		{"not base64", `{"page_token":"%%%"}`, "page_token"},
	} {
		e := b.mustFail(t, ErrInvalidArguments, "describe_schema", tc.args)
		if !strings.Contains(e.Message, tc.says) {
			t.Errorf("%s: %s", tc.name, errorJSON(t, e))
		}
	}
	other := testPrincipal
	other.Name = "someone else"
	if _, e := b.callAs(t, other, "describe_schema", `{"page_token":"`+tok+`"}`); e == nil || e.Type != ErrInvalidArguments || !strings.Contains(e.Message, "another caller") {
		t.Fatalf("another caller's token: %v", e)
	}
	sel := b.mustCall(t, "select_query", `{"table":"orders","limit":1}`)
	if e := b.mustFail(t, ErrInvalidArguments, "describe_schema", `{"page_token":"`+sel["next_page"].(string)+`"}`); !strings.Contains(e.Message, "another tool") {
		t.Fatalf("select_query's token: %s", errorJSON(t, e))
	}
}

// TestDescribeSchemaBadInput: an empty, blank or 10 KB search, too many words, a limit out of
// range and an unknown kind are invalid_arguments that say what to send; a search of wildcards
// and regular expression characters is no error, it matches them as written.
func TestDescribeSchemaBadInput(t *testing.T) {
	t.Parallel()
	b := newDiscoveryBundle(t)
	for _, tc := range []struct{ name, args, says string }{
		{"empty search", `{"search":""}`, "search"},
		{"blank search", `{"search":" \t "}`, "no word"},
		{"10 KB search", argsJSON(t, map[string]any{"search": strings.Repeat("orders ", 1500)}), "search"},
		{"too many words", `{"search":"a b c d e f g h i j k"}`, "11 words"},
		{"limit 0", `{"limit":0}`, "limit"},
		{"limit 1001", `{"limit":1001}`, "limit"},
		{"unknown kind", `{"kind":"index"}`, "kind"},
		{"unknown detail", `{"detail":"everything"}`, "detail"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := b.mustFail(t, ErrInvalidArguments, "describe_schema", tc.args)
			if !strings.Contains(e.Message+e.Suggestion, tc.says) || len(e.Message) > 400 {
				t.Fatalf("%s", errorJSON(t, e))
			}
		})
	}
	for _, s := range []string{`%`, `_`, `.*`, `^orders$`, `[a-z]+`, `\d`, `(?i)x`, `*`} {
		out := b.mustCall(t, "describe_schema", argsJSON(t, map[string]any{"search": s}))
		for _, entry := range out["data"].([]any) {
			// The name, schema, comment or a matched column holds the search as written.
			if !strings.Contains(strings.ToLower(fmt.Sprint(entry)), strings.ToLower(s)) {
				t.Errorf("search %q found %v", s, entry)
			}
		}
	}
}

// TestDescribeSchemaColumnPages: a table with more columns than the limit pages them with
// next_page, each column once and in order; search narrows them by name or comment; keys come
// with the first page only.
func TestDescribeSchemaColumnPages(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	cols := make([]string, 250)
	for i := range cols {
		cols[i] = fmt.Sprintf("c%d int", i+1)
	}
	b.db.Exec(t, "CREATE TABLE wide (id int PRIMARY KEY, "+strings.Join(cols, ", ")+"); COMMENT ON COLUMN wide.c77 IS 'Lucky number'; GRANT SELECT ON wide TO "+quoteIdent(b.db.RoleName("agent")))
	var names []string
	out := b.mustCall(t, "describe_schema", `{"table":"wide"}`)
	for page := 1; ; page++ {
		d := out["data"].(map[string]any)
		if _, hasKeys := d["primaryKey"]; hasKeys != (page == 1) {
			t.Fatalf("page %d: primaryKey present %v", page, hasKeys)
		}
		for _, c := range d["columns"].([]any) {
			names = append(names, c.(map[string]any)["name"].(string))
		}
		if out["truncated"] != true {
			break
		}
		out = b.mustCall(t, "describe_schema", `{"page_token":"`+out["next_page"].(string)+`"}`)
	}
	if len(names) != 251 || names[0] != "id" || names[250] != "c250" || len(slices.Compact(slices.Clone(names))) != 251 {
		t.Fatalf("%d columns: %v … %v", len(names), names[:3], names[len(names)-3:])
	}
	out = b.mustCall(t, "describe_schema", `{"table":"wide","search":"lucky"}`)
	if cs := out["data"].(map[string]any)["columns"].([]any); len(cs) != 1 || cs[0].(map[string]any)["name"] != "c77" {
		t.Fatalf("search lucky: %v", cs)
	}
	out = b.mustCall(t, "describe_schema", `{"table":"wide","search":"c24"}`)
	if cs := out["data"].(map[string]any)["columns"].([]any); len(cs) != 11 { // c24, c240 … c249
		t.Fatalf("search c24: %d columns", len(cs))
	}
}

// TestDiscoveryPrivileges: a role never finds, and no answer names, a table or column it holds
// no privilege on: not by search on its name or a hidden column's, not among the tables joined
// to one it may read, not in detail full.
func TestDiscoveryPrivileges(t *testing.T) {
	t.Parallel()
	ib := newStaffBundle(t)
	p := ib.tenant(1)
	for _, args := range []string{`{"search":"secret"}`, `{"search":"hidden"}`, `{"search":"private"}`, `{"search":"ssn"}`,
		`{"search":"base"}`, `{"search":"dept"}`, `{"search":"staff","detail":"full"}`, `{"detail":"full"}`, `{"detail":"names"}`,
		`{"table":"staff"}`, `{"table":"staff","search":"s"}`} {
		out := ib.mustCallAs(t, p, "describe_schema", args)
		raw, _ := json.Marshal(out)
		noHiddenWord(t, "describe_schema "+args, string(raw))
		if strings.Contains(args, "secret") || strings.Contains(args, "hidden") || strings.Contains(args, "ssn") {
			if n := len(listed(t, out)); n != 0 {
				t.Fatalf("%s found %d tables: %s", args, n, raw)
			}
		}
	}
	// staff's dept column is readable, but the table it references is not: no join is named.
	d, raw := describeTableAs(t, ib, p, "staff")
	if len(d.ForeignKeys) != 1 || d.ForeignKeys[0].ReferencesTable != "staff" || len(d.ReferencedBy) != 1 {
		t.Fatalf("staff joins as the role: %s", raw)
	}
	// The login role sees the hidden table's join.
	ib.db.Exec(t, "CREATE TABLE secret_notes (id int, staff_id int REFERENCES staff(id))")
	_, raw = describeTableAs(t, ib, testPrincipal, "staff")
	if !strings.Contains(raw, "secret_notes") {
		t.Fatalf("the login role's staff: %s", raw)
	}
	_, raw = describeTableAs(t, ib, p, "staff")
	noHiddenWord(t, "staff's joins", raw)
}

// TestDescribeSchemaCap: every page obeys the response byte cap; a call without limit stops at
// 16 KB.
func TestDescribeSchemaCap(t *testing.T) {
	t.Parallel()
	const capBytes = 6000
	b := newBundle(t, Policy{MaxResponseBytes: capBytes})
	b.db.Exec(t, `DO $$ BEGIN FOR i IN 1..300 LOOP
	  EXECUTE format('CREATE TABLE t%s (id int PRIMARY KEY, note text, amount numeric)', i);
	  EXECUTE format('COMMENT ON TABLE t%s IS %L', i, repeat('words about table ' || i || ' ', 20));
	END LOOP; END $$; GRANT SELECT ON ALL TABLES IN SCHEMA public TO `+quoteIdent(b.db.RoleName("agent")))
	seen := map[string]int{}
	for _, detail := range []string{"names", "summary", "full"} {
		args := `{"limit":1000,"detail":"` + detail + `"}`
		pages := 0
		for {
			res, _, e := b.reg.Call(context.Background(), testPrincipal, "describe_schema", []byte(args))
			if e != nil {
				t.Fatal(errorJSON(t, e))
			}
			raw, _ := res.MarshalJSON()
			if len(raw) > capBytes {
				t.Fatalf("%s page %d: %d bytes, over the %d cap", detail, pages, len(raw), capBytes)
			}
			out := decodeResult(t, res)
			for _, n := range listed(t, out) {
				seen[detail+"/"+strings.Trim(n, `"`)]++
			}
			pages++
			if out["truncated"] != true {
				break
			}
			args = `{"page_token":"` + out["next_page"].(string) + `"}`
		}
		n := 0
		for k, c := range seen {
			if strings.HasPrefix(k, detail+"/") {
				n++
				if c != 1 {
					t.Fatalf("%s listed %d times", k, c)
				}
			}
		}
		if n != 302 || (pages < 2 && detail != "names") {
			t.Fatalf("%s: %d tables in %d pages", detail, n, pages)
		}
	}

	// Without limit, 16 KB.
	b2 := newBundle(t, Policy{})
	b2.db.Exec(t, `DO $$ BEGIN FOR i IN 1..400 LOOP
	  EXECUTE format('CREATE TABLE t%s (id int)', i);
	  EXECUTE format('COMMENT ON TABLE t%s IS %L', i, repeat('x', 300));
	END LOOP; END $$; GRANT SELECT ON ALL TABLES IN SCHEMA public TO `+quoteIdent(b2.db.RoleName("agent")))
	res, _, e := b2.reg.Call(context.Background(), testPrincipal, "describe_schema", []byte(`{}`))
	if e != nil {
		t.Fatal(errorJSON(t, e))
	}
	raw, _ := res.MarshalJSON()
	out := decodeResult(t, res)
	if len(raw) > 16<<10 || out["truncated"] != true || out["next_page"] == nil || len(listed(t, out)) < 20 {
		t.Fatalf("no-argument answer: %d bytes, %d tables, truncated %v", len(raw), len(listed(t, out)), out["truncated"])
	}
	entries := out["data"].([]any)
	if c := entries[len(entries)-1].(map[string]any)["comment"].(string); !strings.HasSuffix(c, "…") || len([]rune(c)) != 201 {
		t.Fatalf("a listed comment is not cut at 200 characters: %q", c)
	}
}

// TestDDLThroughPgtoolsRefreshesTheCatalog: DDL that pgtools runs — execute_sql write,
// pg_transaction, a session's at its commit (not before) — drops the cached catalog, so that the
// next describe_schema sees it however big the catalog is; a rolled-back session drops nothing.
func TestDDLThroughPgtoolsRefreshesTheCatalog(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{AllowDDL: true})
	b.db.Exec(t, "GRANT CREATE ON SCHEMA public TO "+quoteIdent(b.db.RoleName("agent")))
	sessions := session.New(session.Config{TTL: time.Minute})
	t.Cleanup(func() { sessions.Close(context.Background()) })
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{b.tdb}, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	b.reg = reg
	p := Principal{Name: "builder", Scopes: []string{"read", "write", "ddl"}}
	ctx := context.Background()
	cached := func() *catalog.Snapshot {
		s, err := b.tdb.cat.Snapshot(ctx, false)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	must := func(tool, args string) map[string]any {
		t.Helper()
		out, e := b.callAs(t, p, tool, args)
		if e != nil {
			t.Fatalf("%s %s: %s", tool, args, errorJSON(t, e))
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		run   func() // the DDL, through pgtools
		table string
	}{
		{"execute_sql", func() {
			must("execute_sql", `{"sql":"CREATE TABLE made_by_execute (i int)","mode":"write","autocommit":true}`)
		}, "made_by_execute"},
		{"pg_transaction", func() {
			must("pg_transaction", `{"operations":[{"sql":"CREATE TABLE made_by_batch (i int)"},{"sql":"INSERT INTO made_by_batch VALUES (1)"}]}`)
		}, "made_by_batch"},
		{"a session's commit", func() {
			sid := must("pg_tx", `{"action":"begin"}`)["session_id"].(string)
			before := cached()
			must("execute_sql", `{"sql":"CREATE TABLE made_in_session (i int)","mode":"write","session_id":"`+sid+`"}`)
			if cached() != before {
				t.Fatal("the catalog was dropped before the session committed")
			}
			must("pg_tx", `{"action":"commit","session_id":"`+sid+`"}`)
		}, "made_in_session"},
	} {
		before := cached()
		tc.run()
		after := cached()
		if after == before || after.Rels[catalog.RelKey("public", tc.table)] == nil {
			t.Fatalf("%s: the cached catalog was not refreshed", tc.name)
		}
	}
	sid := must("pg_tx", `{"action":"begin"}`)["session_id"].(string)
	must("execute_sql", `{"sql":"CREATE TABLE never_made (i int)","mode":"write","session_id":"`+sid+`"}`)
	before := cached()
	must("pg_tx", `{"action":"rollback","session_id":"`+sid+`"}`)
	if cached() != before {
		t.Fatal("a rolled-back session dropped the catalog")
	}
}
