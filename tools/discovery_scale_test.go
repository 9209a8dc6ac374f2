package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// scaleFixture is 50,000 tables in 20 schemas (s01 … s20, 2,500 ledger tables each, with a
// comment each), a 1,600-column table, and a few tables to find by a word of a comment or a
// column. The role READER may read s01 … s19, not s20; of s07.kayak_orders not secret_margin;
// not s07.payroll_secret at all. AGENT, the runner's login role, reads everything. Building it
// takes 15 to 40 s (one DO block, committing every 500 tables).
const scaleFixture = `
DO $$
DECLARE sn text;
BEGIN
  FOR s IN 1..20 LOOP
    sn := 's' || lpad(s::text, 2, '0');
    EXECUTE format('CREATE SCHEMA %%I', sn);
    EXECUTE format('GRANT USAGE ON SCHEMA %%I TO %%I', sn, '%[1]s');
    EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %%I GRANT SELECT ON TABLES TO %%I', sn, '%[1]s');
    IF s < 20 THEN
      EXECUTE format('GRANT USAGE ON SCHEMA %%I TO %%I', sn, '%[2]s');
      EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %%I GRANT SELECT ON TABLES TO %%I', sn, '%[2]s');
    END IF;
    FOR i IN 1..2500 LOOP
      EXECUTE format('CREATE TABLE %%I.%%I (id int8 PRIMARY KEY, account_id int8, amount_cents int8, booked_on date)', sn, 'ledger_' || i);
      EXECUTE format('COMMENT ON TABLE %%I.%%I IS %%L', sn, 'ledger_' || i, format('Ledger entries of branch %%s in region %%s', i, s));
      IF i %% 500 = 0 THEN COMMIT; END IF;
    END LOOP;
  END LOOP;
END $$`

const scaleSpecials = `
CREATE TABLE s07.customer_accounts (id int8 PRIMARY KEY, email text, display_name text);
COMMENT ON TABLE s07.customer_accounts IS 'Everyone who ever bought a kayak';
CREATE TABLE s07.kayak_orders (id int8 PRIMARY KEY, customer_id int8 REFERENCES s07.customer_accounts (id), secret_margin numeric, paddle_count int);
CREATE TABLE s07.payroll_secret (id int8 PRIMARY KEY, customer_id int8 REFERENCES s07.customer_accounts (id));
CREATE TABLE s12.audit_trail (id int8 PRIMARY KEY, zebra_crossing_code text);
REVOKE ALL ON s07.payroll_secret, s07.kayak_orders FROM %[2]s;
GRANT SELECT (id, customer_id, paddle_count) ON s07.kayak_orders TO %[2]s;
GRANT CREATE ON SCHEMA s05 TO %[1]s;
DO $$ BEGIN
  EXECUTE 'CREATE TABLE s03.wide (' || (SELECT string_agg(format('c%%s int', i), ', ') FROM generate_series(1, 1600) i) || ')';
END $$;
COMMENT ON COLUMN s03.wide.c1234 IS 'The answer column';`

// scaleCap is the response byte cap of the scale bundle: small enough that detail full and the
// wide table meet it.
const scaleCap = 64 << 10

type scaleBundle struct {
	*bundle
	login, reader Principal
}

func newScaleBundle(t *testing.T) *scaleBundle {
	t.Helper()
	b := newBundle(t, Policy{MaxResponseBytes: scaleCap, AllowDDL: true})
	agent, reader := b.db.RoleName("agent"), b.db.RoleName("reader")
	// pgtest drops the role with the database (its privileges go with the database).
	b.db.Exec(t, fmt.Sprintf("CREATE ROLE %[2]s NOLOGIN; GRANT %[2]s TO %[1]s", quoteIdent(agent), quoteIdent(reader)))
	start := time.Now()
	b.db.Exec(t, fmt.Sprintf(scaleFixture, agent, reader))
	b.db.Exec(t, fmt.Sprintf(scaleSpecials, quoteIdent(agent), quoteIdent(reader)))
	t.Logf("built 50,000 tables in 20 schemas and a 1,600-column table in %v", time.Since(start).Round(time.Second))
	return &scaleBundle{bundle: b,
		login:  Principal{Name: "scale-login", Scopes: []string{"read", "write", "ddl"}},
		reader: Principal{Name: "scale-reader", Scopes: []string{"read"}, Role: reader}}
}

// describe calls describe_schema as p and checks that the answer obeys the byte cap (and, for a
// call without limit, 16 KB).
func (s *scaleBundle) describe(t *testing.T, p Principal, args string) (map[string]any, time.Duration) {
	t.Helper()
	start := time.Now()
	res, _, e := s.reg.Call(context.Background(), p, "describe_schema", []byte(args))
	took := time.Since(start)
	if e != nil {
		t.Fatalf("describe_schema %s as %s: %s", args, p.Name, errorJSON(t, e))
	}
	raw, err := res.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	limit := scaleCap
	if !strings.Contains(args, `"limit"`) && !strings.Contains(args, "page_token") {
		limit = 16 << 10
	}
	if len(raw) > limit {
		t.Fatalf("describe_schema %s as %s: %d bytes, over %d", args, p.Name, len(raw), limit)
	}
	return decodeResult(t, res), took
}

// qualified is a listed name as schema.name (detail names leaves public's unqualified).
func qualified(name string) string {
	if !strings.Contains(name, ".") {
		return "public." + name
	}
	return name
}

// timeSlack widens the timing bounds below for a machine that runs this with the race
// detector, or shares its cores with other tests: the figures the issue states are measured
// by make bench, without either.
func timeSlack() time.Duration {
	if raceEnabled {
		return 10
	}
	return 3
}

// TestDiscoveryAtScale: on 50,000 tables in 20 schemas, no describe_schema answer exceeds its
// cap; the first answer is an overview under 16 KB; paging returns every table exactly once
// while tables are created and dropped between pages, by pgtools and behind its back; search
// finds a table by a word of its comment and by a column; a role never sees, finds or is
// suggested a table or column it may not read; a wide table's 1,600 columns page; and the
// answers come in the time the issue states (within timeSlack).
func TestDiscoveryAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 50,000 tables (15 to 40 s)")
	}
	t.Parallel()
	s := newScaleBundle(t)
	slack := timeSlack()

	// The first call reads the catalog: an overview of the schemas, and the first tables.
	out, first := s.describe(t, s.login, `{}`)
	t.Logf("first call (reads the catalog of 50,007 tables): %v", first)
	if first > slack*time.Second {
		t.Errorf("first call took %v", first)
	}
	var overview []struct {
		Schema string `json:"schema"`
		Tables int    `json:"tables"`
	}
	raw, _ := json.Marshal(out["schemas"])
	if err := json.Unmarshal(raw, &overview); err != nil || len(overview) != 21 || overview[1].Schema != "s01" || overview[1].Tables != 2500 {
		t.Fatalf("overview %s", raw)
	}
	if out["truncated"] != true || out["next_page"] == nil || len(listed(t, out)) == 0 || !strings.Contains(out["hint"].(string), "21 schemas") {
		t.Fatalf("first answer: %v", out)
	}

	t.Run("pages see every table once", func(t *testing.T) { s.pageThroughChurn(t) })
	t.Run("search", func(t *testing.T) { s.search(t, slack) })
	t.Run("wide table", func(t *testing.T) { s.wide(t) })
	t.Run("privileges", func(t *testing.T) { s.privileges(t, slack) })
}

// pageThroughChurn pages through every table by name while, between pages, tables are created
// and dropped ahead of and behind the cursor, directly and through pgtools (whose DDL reloads
// the catalog).
func (s *scaleBundle) pageThroughChurn(t *testing.T) {
	stable := map[string]bool{}
	rows, err := s.db.Pool(t).Query(context.Background(), `SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p') AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%' AND NOT c.relispartition`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		stable[n] = true
	}
	if rows.Err() != nil || len(stable) != 50007 {
		t.Fatalf("%d tables at the start: %v", len(stable), rows.Err())
	}
	seen := map[string]int{}
	out, _ := s.describe(t, s.login, `{"detail":"names","limit":1000}`)
	start := time.Now()
	for page := 1; ; page++ {
		for _, n := range listed(t, out) {
			seen[qualified(n)]++
		}
		if out["truncated"] != true {
			break
		}
		// Behind the cursor and ahead of it, in schemas before, among and after the others.
		drop := []string{fmt.Sprintf("s%02d.ledger_%d", 1+page%20, 1000+page), fmt.Sprintf("s20.ledger_%d", 2000+page)}
		for _, d := range drop {
			s.db.Exec(t, "DROP TABLE "+d)
			delete(stable, d)
		}
		s.db.Exec(t, fmt.Sprintf("CREATE TABLE public.aaa_%d (i int); CREATE TABLE s10.zz_%d (i int)", page, page))
		if page%10 == 0 {
			if _, e := s.callAs(t, s.login, "execute_sql", fmt.Sprintf(`{"sql":"CREATE TABLE s05.made_by_agent_%d (i int)","mode":"write","autocommit":true}`, page)); e != nil {
				t.Fatal(errorJSON(t, e))
			}
		}
		out, _ = s.describe(t, s.login, `{"page_token":"`+out["next_page"].(string)+`"}`)
	}
	t.Logf("paged through %d tables in %v", len(seen), time.Since(start).Round(time.Millisecond))
	for n := range stable {
		if seen[n] != 1 {
			t.Fatalf("%s listed %d times", n, seen[n])
		}
	}
	for n, c := range seen {
		if c != 1 {
			t.Fatalf("%s listed %d times", n, c)
		}
	}
	// DDL through pgtools is seen at once, at any size.
	if _, e := s.callAs(t, s.login, "execute_sql", `{"sql":"CREATE TABLE s05.fresh_from_the_agent (i int)","mode":"write","autocommit":true}`); e != nil {
		t.Fatal(errorJSON(t, e))
	}
	out, took := s.describe(t, s.login, `{"search":"fresh_from_the_agent"}`)
	if got := listed(t, out); !slices.Equal(got, []string{"fresh_from_the_agent"}) {
		t.Fatalf("a table created through pgtools is not found at once: %v", out)
	}
	t.Logf("search after DDL through pgtools (reloads the catalog): %v", took)
}

func (s *scaleBundle) search(t *testing.T, slack time.Duration) {
	cases := []struct {
		search string
		first  []string // the first hits, in order
	}{
		{"kayak", []string{"kayak_orders", "customer_accounts"}}, // a name's prefix, then a word of a comment
		{"bought", []string{"customer_accounts"}},
		{"zebra", []string{"audit_trail"}}, // a column
		{"ledger_2411", []string{"ledger_2411", "ledger_2411"}},
		{"s03.ledger_24", []string{"ledger_24", "ledger_240"}},
		{"region 7 branch 1999", []string{"ledger_1999"}},
	}
	for round := 0; round < 2; round++ { // the first round builds the search text; the second is the cached figure
		var took []time.Duration
		for _, c := range cases {
			out, d := s.describe(t, s.login, argsJSON(t, map[string]any{"search": c.search}))
			took = append(took, d)
			got := listed(t, out)
			if len(got) < len(c.first) || !slices.Equal(got[:len(c.first)], c.first) {
				t.Fatalf("search %q: %q", c.search, got)
			}
			if c.search == "zebra" && fmt.Sprint(out["data"].([]any)[0].(map[string]any)["matchedColumns"]) != "[zebra_crossing_code]" {
				t.Fatalf("zebra: %v", out["data"])
			}
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		t.Logf("search round %d: p50 %v, slowest %v", round+1, took[len(took)/2], took[len(took)-1])
		if round == 1 && took[len(took)/2] > slack*50*time.Millisecond {
			t.Errorf("cached search p50 %v", took[len(took)/2])
		}
	}
	// detail full within the cap, every page.
	out, _ := s.describe(t, s.login, `{"search":"ledger","detail":"full","limit":1000}`)
	if n := len(listed(t, out)); n == 0 || n >= 1000 || out["truncated"] != true {
		t.Fatalf("full: %d tables, truncated %v", n, out["truncated"])
	}
}

// wide pages through the 1,600 columns of s03.wide, by the default limit and by the byte cap.
func (s *scaleBundle) wide(t *testing.T) {
	for _, args := range []string{`{"table":"s03.wide"}`, `{"table":"s03.wide","limit":1000}`} {
		var cols []string
		out, _ := s.describe(t, s.login, args)
		pages := 1
		for {
			for _, c := range out["data"].(map[string]any)["columns"].([]any) {
				cols = append(cols, c.(map[string]any)["name"].(string))
			}
			if out["truncated"] != true {
				break
			}
			out, _ = s.describe(t, s.login, `{"page_token":"`+out["next_page"].(string)+`"}`)
			pages++
		}
		if len(cols) != 1600 || cols[0] != "c1" || cols[1599] != "c1600" || len(slices.Compact(slices.Clone(cols))) != 1600 || pages < 2 {
			t.Fatalf("%s: %d columns in %d pages", args, len(cols), pages)
		}
	}
	out, _ := s.describe(t, s.login, `{"table":"s03.wide","search":"answer"}`)
	if cs := out["data"].(map[string]any)["columns"].([]any); len(cs) != 1 || cs[0].(map[string]any)["name"] != "c1234" {
		t.Fatalf("search in the wide table: %v", cs)
	}
	// A mistyped column of 1,600 names a handful and points to search, quickly.
	start := time.Now()
	_, e := s.callAs(t, s.login, "select_query", `{"table":"s03.wide","columns":"c16000"}`)
	took := time.Since(start)
	if e == nil || e.Type != ErrInvalidColumn || !strings.Contains(e.Suggestion, `"c1600"`) || strings.Count(e.Suggestion, `"`)/2 > 3 ||
		!strings.Contains(e.Suggestion, "search") {
		t.Fatalf("a mistyped column: %v", e)
	}
	t.Logf("invalid_column among 1,600 columns: %v", took)
	if took > timeSlack()*10*time.Millisecond {
		t.Errorf("invalid_column took %v", took)
	}
}

// privileges checks that READER never sees s20, s07.payroll_secret or kayak_orders.secret_margin:
// not listed, not found, not joined, not suggested.
func (s *scaleBundle) privileges(t *testing.T, slack time.Duration) {
	hidden := func(what, text string) {
		t.Helper()
		for _, w := range []string{"s20", "payroll", "secret", "margin"} {
			if strings.Contains(text, w) {
				t.Fatalf("%s names %q: %.2000s", what, w, text)
			}
		}
	}
	p := s.reader
	out, took := s.describe(t, p, `{}`)
	t.Logf("the reader's first call (reads its view of the catalog): %v", took)
	raw, _ := json.Marshal(out)
	hidden("the reader's overview", string(raw))
	if !strings.Contains(out["hint"].(string), "in 19 schemas") {
		t.Fatalf("the reader's overview: %s", raw)
	}
	n := 0
	out, _ = s.describe(t, p, `{"detail":"names","limit":1000}`)
	for {
		names := listed(t, out)
		n += len(names)
		hidden("a page of the reader's list", strings.Join(names, " "))
		if out["truncated"] != true {
			break
		}
		out, _ = s.describe(t, p, `{"page_token":"`+out["next_page"].(string)+`"}`)
	}
	// s01 … s19 as built (a few ledgers were dropped meanwhile), the specials, the tables the
	// paging created; none of s20.
	if n < 47400 || n > 47700 {
		t.Fatalf("the reader lists %d tables", n)
	}
	for _, args := range []string{`{"search":"secret"}`, `{"search":"margin"}`, `{"search":"payroll"}`, `{"search":"s20"}`,
		`{"search":"kayak","detail":"full"}`, `{"table":"s07.customer_accounts"}`, `{"table":"s07.kayak_orders"}`, `{"schema":"s20"}`} {
		out, _ := s.describe(t, p, args)
		raw, _ := json.Marshal(out)
		hidden("describe_schema "+args, string(raw))
	}
	out, _ = s.describe(t, p, `{"table":"s07.customer_accounts"}`)
	raw, _ = json.Marshal(out["data"].(map[string]any)["referencedBy"])
	if !strings.Contains(string(raw), "kayak_orders") {
		t.Fatalf("the reader's joins of customer_accounts: %s", raw)
	}
	// Suggestions: quick, a handful, nothing hidden.
	var worst time.Duration
	for _, c := range []struct{ tool, args, want string }{
		{"select_query", `{"table":"s20.ledger_1"}`, ""},
		{"select_query", `{"table":"s01.ledgr_17"}`, `"s01.ledger_17"`},
		{"describe_schema", `{"table":"s07.payroll_secret"}`, ""},
		{"select_query", `{"table":"s07.kayak_orders","columns":"secret_margn"}`, "paddle_count"},
	} {
		start := time.Now()
		_, e := s.callAs(t, p, c.tool, c.args)
		worst = max(worst, time.Since(start))
		if e == nil || (e.Type != ErrInvalidTable && e.Type != ErrInvalidColumn) {
			t.Fatalf("%s %s: %v", c.tool, c.args, e)
		}
		hidden(c.args+"'s suggestion", e.Suggestion)
		if c.want != "" && !strings.Contains(e.Suggestion, c.want) {
			t.Fatalf("%s: %s", c.args, e.Suggestion)
		}
		if q := strings.Count(e.Suggestion, `"`) / 2; q > 5 {
			t.Fatalf("%s: suggests %d names: %s", c.args, q, e.Suggestion)
		}
	}
	t.Logf("slowest invalid_table/invalid_column answer: %v", worst)
	if worst > slack*10*time.Millisecond {
		t.Errorf("a suggestion took %v", worst)
	}
}
