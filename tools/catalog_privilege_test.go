package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// hiddenWords are parts of every name in newStaffBundle that the agent role holds no privilege
// on; no answer to that role may contain one, except where it echoes the caller's own argument.
var hiddenWords = []string{"hidden", "private", "secret"}

// newStaffBundle is newIdentityBundle plus tables granted to the agent role column by column:
// staff, whose SELECT covers id, public_name, boss, dept and salary_doubled (a generated column
// computed from the hidden hidden_base) and whose INSERT/UPDATE cover id, public_name and team (team is
// never readable); shifts, whose primary key includes a hidden column; vault, with a hidden NOT
// NULL column; inbox, which it may only insert into; and secret_dept, which it cannot use at all. Every hidden name contains one
// of hiddenWords, so that a leak shows as a substring.
func newStaffBundle(t *testing.T) *identityBundle {
	t.Helper()
	ib := newIdentityBundle(t)
	role := quoteIdent(ib.role)
	ib.db.Exec(t, fmt.Sprintf(`
		CREATE TABLE secret_dept (id int PRIMARY KEY, secret_budget numeric);
		CREATE TABLE staff (id int PRIMARY KEY, public_name text NOT NULL, private_salary_hidden numeric,
		  hidden_ssn_col text UNIQUE, hidden_base numeric, team int, boss int REFERENCES staff(id), dept int REFERENCES secret_dept(id),
		  salary_doubled numeric GENERATED ALWAYS AS (hidden_base * 2) STORED,
		  CONSTRAINT staff_name_or_ssn CHECK (public_name <> '' OR hidden_ssn_col IS NOT NULL),
		  CONSTRAINT staff_name_short CHECK (length(public_name) < 100),
		  CHECK (private_salary_hidden > 0));
		CREATE INDEX staff_by_name ON staff (public_name);
		CREATE INDEX staff_partial_name ON staff (lower(public_name)) WHERE private_salary_hidden > 0;
		CREATE INDEX staff_name_incl ON staff (public_name) INCLUDE (hidden_ssn_col);
		CREATE INDEX staff_expr ON staff ((public_name || hidden_ssn_col));
		INSERT INTO staff (id, public_name, private_salary_hidden, hidden_ssn_col) VALUES (1, 'Ada', 100, '123-45');
		CREATE TABLE shifts (staff_id int, secret_slot int, note text, PRIMARY KEY (staff_id, secret_slot));
		CREATE TABLE vault (id int, hidden_code text NOT NULL);
		CREATE TABLE inbox (id int, msg text);
		REVOKE ALL ON staff, shifts, vault, secret_dept, inbox FROM %[1]s;
		GRANT INSERT ON inbox TO %[1]s;
		GRANT SELECT (id, public_name, boss, dept, salary_doubled) ON staff TO %[1]s;
		GRANT INSERT (id, public_name, team), UPDATE (public_name, team) ON staff TO %[1]s;
		GRANT SELECT (staff_id, note) ON shifts TO %[1]s;
		GRANT SELECT (id), INSERT (id) ON vault TO %[1]s`, role))
	return ib
}

// describeTableAs runs describe_schema for table as p and decodes the detail; raw is the answer
// as the model reads it.
func describeTableAs(t *testing.T, ib *identityBundle, p Principal, table string) (d tableDetail, raw string) {
	t.Helper()
	res, _, e := ib.reg.Call(context.Background(), p, "describe_schema", []byte(`{"table":"`+table+`"}`))
	if e != nil {
		t.Fatalf("describe_schema %s as %s: %s", table, p.Name, errorJSON(t, e))
	}
	b, err := res.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(res.(*SchemaResult).Data, &d); err != nil {
		t.Fatal(err)
	}
	return d, string(b)
}

// schemaColumns is what information_schema.columns shows role of table: PostgreSQL's own rule
// for which column names a role may learn.
func schemaColumns(t *testing.T, ib *identityBundle, role, table string) []string {
	t.Helper()
	conn, err := ib.db.Pool(t).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	if _, err := tx.Exec(context.Background(), "SET LOCAL ROLE "+quoteIdent(role)); err != nil {
		t.Fatal(err)
	}
	var cols []string
	if err := tx.QueryRow(context.Background(), `SELECT coalesce(array_agg(column_name::text ORDER BY ordinal_position), '{}')
		FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1`, table).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	return cols
}

func noHiddenWord(t *testing.T, what, s string) {
	t.Helper()
	for _, w := range hiddenWords {
		if strings.Contains(s, w) {
			t.Fatalf("%s names something the role may not see (%q): %s", what, w, s)
		}
	}
}

// TestDescribeColumnPrivileges: describe_schema with a table names only the columns the caller's
// role holds a privilege on — exactly what information_schema shows that role — and leaves out
// every key, index, constraint and default that would name another column or a table the role
// cannot use.
func TestDescribeColumnPrivileges(t *testing.T) {
	t.Parallel()
	ib := newStaffBundle(t)
	p := ib.tenant(1)
	d, raw := describeTableAs(t, ib, p, "staff")
	noHiddenWord(t, "describe_schema staff", raw)
	var names []string
	for _, c := range d.Columns {
		names = append(names, c.Name)
		if c.Name == "salary_doubled" && c.Default != nil {
			t.Fatalf("the generated column's expression is shown: %s", *c.Default)
		}
	}
	want := schemaColumns(t, ib, ib.role, "staff")
	if !slices.Equal(names, want) || !slices.Equal(want, []string{"id", "public_name", "team", "boss", "dept", "salary_doubled"}) {
		t.Fatalf("columns %v, information_schema shows the role %v", names, want)
	}
	if !slices.Equal(d.PrimaryKey, []string{"id"}) {
		t.Fatalf("primary key %v", d.PrimaryKey)
	}
	if len(d.ForeignKeys) != 1 || d.ForeignKeys[0].ReferencesTable != "staff" || !slices.Equal(d.ForeignKeys[0].Columns, []string{"boss"}) {
		t.Fatalf("foreign keys %+v: want only boss -> staff(id)", d.ForeignKeys)
	}
	var idx []string
	for _, ix := range d.Indexes {
		idx = append(idx, ix.Name)
	}
	if !slices.Equal(idx, []string{"staff_by_name", "staff_pkey"}) {
		t.Fatalf("indexes %v", idx)
	}
	if len(d.Checks) != 1 || d.Checks[0].Name != "staff_name_short" {
		t.Fatalf("check constraints %+v", d.Checks)
	}

	// A key with a hidden column is left out whole: a part of it is no key.
	d, raw = describeTableAs(t, ib, p, "shifts")
	noHiddenWord(t, "describe_schema shifts", raw)
	if len(d.PrimaryKey) != 0 || len(d.Indexes) != 0 || len(d.Columns) != 2 {
		t.Fatalf("shifts: %s", raw)
	}

	// The list names the tables the role reads through column grants, and nothing it cannot read.
	out := ib.mustCallAs(t, p, "describe_schema", `{}`)
	listed, _ := json.Marshal(out["data"])
	noHiddenWord(t, "describe_schema's list", string(listed))
	var tables []string
	for _, r := range rows(t, out) {
		tables = append(tables, r["name"].(string))
	}
	if !slices.Equal(tables, []string{"docs", "shifts", "staff", "vault"}) {
		t.Fatalf("describe_schema lists %v", tables)
	}

	// The login role (no token role) keeps the snapshot's own view: every column.
	d, _ = describeTableAs(t, ib, testPrincipal, "staff")
	if len(d.Columns) != 9 || len(d.Indexes) != 6 || len(d.ForeignKeys) != 2 {
		t.Fatalf("the login role's view of staff: %+v", d)
	}
}

// TestHiddenColumnIsUnknown: for every argument that names a column, a column the role holds no
// privilege on is answered exactly as a column that does not exist — the oracle is the same call
// after the hidden columns are dropped — and no suggestion or list names one.
func TestHiddenColumnIsUnknown(t *testing.T) {
	t.Parallel()
	ib := newStaffBundle(t)
	p := ib.tenant(1)
	cases := []string{ // %s is the column
		`select_query {"table":"staff","columns":"id, %s"}`,
		`select_query {"table":"staff","columns":["%s"]}`,
		`select_query {"table":"staff","columns":"id","order_by":"%s desc"}`,
		`insert_data {"table":"staff","row":{"id":7,"public_name":"x","%s":"1"},"autocommit":true}`,
		`insert_data {"table":"staff","row":{"id":7,"public_name":"x"},"returning":"%s","autocommit":true}`,
		`insert_data {"table":"staff","row":{"id":7,"public_name":"x"},"on_conflict":{"columns":["%s"],"action":"nothing"},"autocommit":true}`,
		`update_data {"table":"staff","set":{"%s":"1"},"where":"id = 1","autocommit":true}`,
		`update_data {"table":"staff","set":{"team":1},"where":"id = 1","returning":["%s"],"autocommit":true}`,
	}
	type call struct{ tool, args string }
	var calls []call
	for _, c := range cases {
		tool, args, _ := strings.Cut(c, " ")
		for _, name := range []string{"private_salary_hidden", "hidden_ssn_col", "Hidden_SSN_Col", `\"hidden_ssn_col\"`} {
			calls = append(calls, call{tool, fmt.Sprintf(args, name)})
		}
	}
	calls = append(calls, call{"insert_data", `{"table":"vault","row":{"id":1,"hidden_code":"x"},"autocommit":true}`},
		call{"select_query", `{"table":"staff","columns":"private_salary"}`}, // a near miss of a hidden column
		call{"select_query", `{"table":"staff","columns":"id","where":"no_such_col = 1"}`})
	answers := make([]string, len(calls))
	for i, c := range calls {
		e := ib.mustFailAs(t, p, ErrInvalidColumn, c.tool, c.args)
		noHiddenWord(t, c.tool+" "+c.args+" suggestion", e.Suggestion)
		if !strings.Contains(e.Suggestion, "public_name") && !strings.Contains(c.args, "vault") {
			t.Fatalf("%s %s: the suggestion lists no visible column: %s", c.tool, c.args, e.Suggestion)
		}
		answers[i] = errorJSON(t, e)
	}
	if n := ib.db.QueryInt(t, "select (select count(*) from staff) + (select count(*) from vault)"); n != 1 {
		t.Fatalf("%d rows after refused calls, want 1", n)
	}
	ib.db.Exec(t, "ALTER TABLE staff DROP COLUMN private_salary_hidden CASCADE, DROP COLUMN hidden_ssn_col CASCADE; ALTER TABLE vault DROP COLUMN hidden_code")
	ib.tdb.cat.Invalidate() // the next call loads the catalog without the dropped columns
	for i, c := range calls {
		e := ib.mustFailAs(t, p, ErrInvalidColumn, c.tool, c.args)
		if got := errorJSON(t, e); got != answers[i] {
			t.Errorf("%s %s: a hidden column is told apart from a missing one:\nhidden:  %s\nmissing: %s", c.tool, c.args, answers[i], got)
		}
	}
}

// TestConstraintErrorsNameNoHiddenColumn: a write that breaks a constraint over a column the role
// cannot see is refused without naming that column, in the message or the suggestion.
func TestConstraintErrorsNameNoHiddenColumn(t *testing.T) {
	t.Parallel()
	ib := newStaffBundle(t)
	p := ib.tenant(1)
	e := ib.mustFailAs(t, p, ErrConstraint, "insert_data", `{"table":"staff","row":{"id":8,"public_name":""},"returning":"id","autocommit":true}`)
	noHiddenWord(t, "check violation", e.Message+" "+e.Suggestion)
	e = ib.mustFailAs(t, p, ErrConstraint, "insert_data", `{"table":"vault","row":{"id":1},"returning":"id","autocommit":true}`)
	noHiddenWord(t, "not-null violation", e.Message+" "+e.Suggestion)
	e = ib.mustFailAs(t, p, ErrConstraint, "insert_data", `{"table":"staff","row":{"id":8,"public_name":"x","dept":99},"returning":"id","autocommit":true}`)
	noHiddenWord(t, "foreign key to a table the role cannot use", e.Message+" "+e.Suggestion)
	// A constraint over what the role may use keeps PostgreSQL's own answer.
	e = ib.mustFailAs(t, p, ErrConstraint, "insert_data", `{"table":"staff","row":{"id":1,"public_name":"x"},"returning":"id","autocommit":true}`)
	if !strings.Contains(e.Message, "staff_pkey") {
		t.Fatalf("a duplicate key lost its constraint's name: %s", errorJSON(t, e))
	}
	// A check over visible columns still shows its rule.
	e = ib.mustFailAs(t, p, ErrConstraint, "insert_data", fmt.Sprintf(`{"table":"staff","row":{"id":8,"public_name":"%s"},"returning":"id","autocommit":true}`, strings.Repeat("n", 120)))
	if !strings.Contains(e.Suggestion, "length(public_name)") {
		t.Fatalf("the visible rule is not shown: %s", errorJSON(t, e))
	}
}

// estimatePresent reports whether describe_schema as p shows estimatedRows for table, in the list
// and in the table's own description; it fails the test when the two disagree.
func estimatePresent(t *testing.T, ib *identityBundle, p Principal, table string) bool {
	t.Helper()
	out := ib.mustCallAs(t, p, "describe_schema", `{}`)
	inList, found := false, false
	for _, r := range rows(t, out) {
		if r["name"] == table {
			_, inList = r["estimatedRows"]
			found = true
		}
	}
	if !found {
		t.Fatalf("describe_schema as %s does not list %s", p.Name, table)
	}
	out = ib.mustCallAs(t, p, "describe_schema", `{"table":"`+table+`"}`)
	_, inDetail := out["data"].(map[string]any)["estimatedRows"]
	if inList != inDetail {
		t.Fatalf("%s as %s: estimatedRows in the list %v, in the table's description %v", table, p.Name, inList, inDetail)
	}
	return inList
}

// TestEstimateHiddenUnderRowSecurity: estimatedRows counts every row of a table, so describe_schema
// leaves it out where row-level security applies to the caller's role (RLS enabled and the role
// not the owner, or FORCE ROW LEVEL SECURITY), for a token role and the login role alike.
func TestEstimateHiddenUnderRowSecurity(t *testing.T) {
	t.Parallel()
	ib := newIdentityBundle(t)
	role := quoteIdent(ib.role)
	ib.db.Exec(t, fmt.Sprintf(`
		CREATE TABLE own_rls (id int); ALTER TABLE own_rls ENABLE ROW LEVEL SECURITY; ALTER TABLE own_rls OWNER TO %[1]s;
		CREATE TABLE forced_rls (id int); ALTER TABLE forced_rls ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY; ALTER TABLE forced_rls OWNER TO %[1]s;
		CREATE TABLE plain (id int); GRANT SELECT ON plain TO %[1]s;
		ANALYZE docs, own_rls, forced_rls, plain`, role))
	for _, c := range []struct {
		who   Principal
		table string
		want  bool
	}{
		{ib.tenant(1), "docs", false},        // RLS applies: not the owner
		{testPrincipal, "docs", false},       // the login role is no owner either
		{ib.tenant(1), "plain", true},        // no RLS
		{testPrincipal, "plain", true},       //
		{ib.tenant(1), "own_rls", true},      // the owner without FORCE bypasses its policies
		{testPrincipal, "own_rls", true},     // the login role inherits the owner's privileges
		{ib.tenant(1), "forced_rls", false},  // FORCE applies the policies to the owner too
		{testPrincipal, "forced_rls", false}, //
	} {
		if got := estimatePresent(t, ib, c.who, c.table); got != c.want {
			t.Errorf("%s as %s: estimatedRows shown %v, want %v", c.table, c.who.Name, got, c.want)
		}
	}
}

// TestColumnRoleReadsItsColumns: where a role may read only some columns, "all columns" — the
// default of select_query's columns and of returning — means those, so that its calls are not
// refused whole; a role that may read none still inserts, and gets no rows back.
func TestColumnRoleReadsItsColumns(t *testing.T) {
	t.Parallel()
	ib := newStaffBundle(t)
	p := ib.tenant(1)
	keys := func(r map[string]any) []string {
		var ks []string
		for k := range r {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		return ks
	}
	readable := []string{"boss", "dept", "id", "public_name", "salary_doubled"}
	out := ib.mustCallAs(t, p, "select_query", `{"table":"staff"}`)
	if r := rows(t, out); len(r) != 1 || !slices.Equal(keys(r[0]), readable) {
		t.Fatalf("select_query staff as a column-granted role: %v", out["data"])
	}
	out = ib.mustCallAs(t, p, "insert_data", `{"table":"staff","row":{"id":9,"public_name":"Bo","team":3},"autocommit":true}`)
	if r := rows(t, out); len(r) != 1 || !slices.Equal(keys(r[0]), readable) || r[0]["public_name"] != "Bo" {
		t.Fatalf("insert_data staff returned %v", out["data"])
	}
	out = ib.mustCallAs(t, p, "update_data", `{"table":"staff","set":{"team":4},"where":"id = 9","autocommit":true}`)
	if out["affectedRows"].(float64) != 1 || len(rows(t, out)) != 1 {
		t.Fatalf("update_data staff: %v", out)
	}
	out = ib.mustCallAs(t, p, "insert_data", `{"table":"inbox","row":{"id":1,"msg":"hello"},"autocommit":true}`)
	if out["affectedRows"].(float64) != 1 || len(rows(t, out)) != 0 {
		t.Fatalf("insert_data inbox as an insert-only role: %v", out)
	}
	if n := ib.db.QueryInt(t, "select (select count(*) from staff where team = 4) + (select count(*) from inbox)"); n != 2 {
		t.Fatalf("%d rows landed, want 2", n)
	}
}

// TestRoleViewMatchesInformationSchema walks every relation of the catalog: for each one a role
// may use, the columns its view holds are exactly those information_schema shows the role; each
// one it may not use has none.
func TestRoleViewMatchesInformationSchema(t *testing.T) {
	t.Parallel()
	ib := newStaffBundle(t)
	ib.db.Exec(t, fmt.Sprintf(`CREATE TABLE purge (id int, junk text); REVOKE ALL ON purge FROM %[1]s; GRANT DELETE ON purge TO %[1]s;
		CREATE TABLE refs_only (id int, code text); REVOKE ALL ON refs_only FROM %[1]s; GRANT REFERENCES (id) ON refs_only TO %[1]s`, quoteIdent(ib.role)))
	ctx := context.Background()
	snap, err := ib.tdb.cat.Snapshot(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	view, err := ib.tdb.cat.ViewFor(ctx, snap, ib.role)
	if err != nil {
		t.Fatal(err)
	}
	usable := 0
	for _, r := range snap.Rels {
		got := view.Rel(r).Columns
		if !view.Usable(r) {
			if len(got) != 0 {
				t.Errorf("%s: the role may not use it, yet its view has columns %v", r.Display(), got)
			}
			continue
		}
		usable++
		if want := schemaColumns(t, ib, ib.role, r.Name); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: the role's view has columns %v, information_schema shows it %v", r.Display(), got, want)
		}
	}
	// docs, staff, shifts, vault, inbox and purge; refs_only (REFERENCES only) cannot be queried.
	if usable != 6 {
		t.Fatalf("the role may use %d relations, want 6", usable)
	}
}
