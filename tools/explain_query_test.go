package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// bigTableSQL adds a table large enough for a sequential scan to be worth a warning, analyzed so
// the planner's estimates are the table's, and a function with a side effect.
const bigTableSQL = `
CREATE TABLE big (id int PRIMARY KEY, kind text NOT NULL, n int NOT NULL);
INSERT INTO big SELECT i, 'k' || (i % 100), i FROM generate_series(1, 20000) i;
ANALYZE big;
CREATE TABLE side_effects (at timestamptz DEFAULT now());
CREATE FUNCTION log_call() RETURNS int LANGUAGE sql VOLATILE AS 'INSERT INTO side_effects DEFAULT VALUES RETURNING 1';
CREATE FUNCTION folded_counter() RETURNS bigint LANGUAGE sql IMMUTABLE AS 'SELECT nextval(''counter'')';
`

// newPlanBundle is a write bundle with bigTableSQL, the agent role allowed to read and write
// big and to call the functions, and its catalog loaded after the table was analyzed.
func newPlanBundle(t *testing.T, policy Policy) *bundle {
	t.Helper()
	b, _ := newWriteBundle(t, policy)
	b.db.Exec(t, bigTableSQL)
	role := quoteIdent(b.db.RoleName("agent"))
	b.db.Exec(t, "GRANT SELECT, INSERT, UPDATE, DELETE ON big, side_effects TO "+role)
	return b
}

// planOf calls explain_query and decodes its summary.
func planOf(t *testing.T, b *bundle, args string) PlanSummary {
	t.Helper()
	out := b.mustCall(t, "explain_query", args)
	if out["operation"] != "explain" {
		t.Errorf("operation %v, want explain", out["operation"])
	}
	raw, _ := json.Marshal(out)
	var s PlanSummary
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestExplainQueryReads(t *testing.T) {
	t.Parallel()
	b := newPlanBundle(t, Policy{})
	t.Run("sequential scan of a large table is flagged with its filter", func(t *testing.T) {
		s := planOf(t, b, `{"sql":"select * from big where kind = $1","params":["k7"]}`)
		if len(s.Scans) != 1 || s.Scans[0].Table != "big" || s.Scans[0].Method != "Seq Scan" || !strings.Contains(s.Scans[0].Filter, "kind") {
			t.Fatalf("scans %+v, want one Seq Scan of big filtered on kind", s.Scans)
		}
		if s.Cost == nil || s.Rows == nil || *s.Cost <= 0 || *s.Rows < 100 || *s.Rows > 400 {
			t.Errorf("estimate cost %v rows %v, want about 200 rows", s.Cost, s.Rows)
		}
		if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "big") || !strings.Contains(s.Warnings[0], "20000") || !strings.Contains(s.Warnings[0], "kind") {
			t.Errorf("warnings %q, want the full scan of big with its filter", s.Warnings)
		}
	})
	t.Run("a primary key read uses the index", func(t *testing.T) {
		s := planOf(t, b, `{"sql":"select * from big where id = $1","params":[42]}`)
		if len(s.Scans) != 1 || s.Scans[0].Method != "Index Scan" || s.Scans[0].Index != "big_pkey" || s.Rows == nil || *s.Rows != 1 || len(s.Warnings) != 0 {
			t.Fatalf("plan %+v, want one Index Scan on big_pkey, 1 row, no warning", s)
		}
	})
	t.Run("params of unknown type and arrays are bound as for execute_sql", func(t *testing.T) {
		planOf(t, b, `{"sql":"select $1","params":[1]}`)
		s := planOf(t, b, `{"sql":"select * from big where id = any($1)","params":[[1,2,3]]}`)
		if len(s.Scans) != 1 || s.Scans[0].Index != "big_pkey" || s.Rows == nil || *s.Rows != 3 {
			t.Fatalf("plan %+v, want the primary key for 3 rows", s)
		}
	})
	t.Run("a small table's full scan is no warning", func(t *testing.T) {
		s := planOf(t, b, `{"sql":"select * from customers c join orders o on o.customer_id = c.id"}`)
		if len(s.Scans) != 2 || len(s.Warnings) != 0 {
			t.Fatalf("plan %+v, want two scans and no warning", s)
		}
	})
}

func TestExplainQueryWritesRunNothing(t *testing.T) {
	t.Parallel()
	b := newPlanBundle(t, Policy{})
	sum := func() int64 { return b.db.QueryInt(t, "select count(*) * 1000000 + sum(n) from big") }
	before := sum()
	cases := []struct {
		args, op string
		min, max int64
	}{
		{`{"sql":"update big set n = n + 1 where id <= $1","params":[100]}`, "update", 50, 200},
		{`{"sql":"delete from big where kind = 'k3'"}`, "delete", 100, 400},
		{`{"sql":"insert into big select id + 100000, kind, n from big"}`, "insert", 15000, 25000},
		{`{"sql":"with gone as (delete from big where id < 10 returning *) select count(*) from gone"}`, "delete", 5, 15},
	}
	for _, c := range cases {
		s := planOf(t, b, c.args)
		if len(s.Writes) != 1 || s.Writes[0].Operation != c.op || s.Writes[0].Table != "big" || s.Writes[0].Rows == nil || *s.Writes[0].Rows < c.min || *s.Writes[0].Rows > c.max {
			t.Errorf("%s: writes %+v, want %s of %d..%d rows of big", c.args, s.Writes, c.op, c.min, c.max)
		}
	}
	if got := sum(); got != before {
		t.Fatalf("big changed: %d → %d", before, got)
	}
}

func TestExplainQueryVolatileFunctionsDoNotRun(t *testing.T) {
	t.Parallel()
	b := newPlanBundle(t, Policy{})
	b.db.Exec(t, "select nextval('counter')") // last_value 1, is_called
	b.db.Exec(t, "GRANT EXECUTE ON FUNCTION log_call(), folded_counter() TO "+quoteIdent(b.db.RoleName("agent")))
	planOf(t, b, `{"sql":"select nextval('counter'), log_call() from big where id = 1"}`)
	planOf(t, b, `{"sql":"insert into side_effects select now() from generate_series(1, log_call())"}`)
	// A function mislabelled IMMUTABLE is evaluated while planning: the READ ONLY transaction
	// refuses its nextval.
	e := b.mustFail(t, ErrReadOnlyViolation, "explain_query", `{"sql":"select folded_counter()"}`)
	if e.SQLState != "25006" {
		t.Errorf("sqlState %q, want 25006", e.SQLState)
	}
	if got := b.db.QueryInt(t, "select last_value from counter"); got != 1 {
		t.Errorf("the counter moved to %d", got)
	}
	if got := b.db.QueryInt(t, "select count(*) from side_effects"); got != 0 {
		t.Errorf("side_effects has %d rows", got)
	}
}

func TestExplainQueryRefusals(t *testing.T) {
	t.Parallel()
	b := newPlanBundle(t, Policy{})
	cases := []struct {
		sql     string
		want    ErrorType
		suggest string
	}{
		{"explain analyze delete from big", ErrNotAllowed, "without EXPLAIN"},
		{"/* hi */ EXPLAIN (ANALYZE) select 1", ErrNotAllowed, "without EXPLAIN"},
		{"analyze big", ErrNotAllowed, "without EXPLAIN"},
		{"create table t2 as select * from big", ErrNotAllowed, "SELECT, INSERT"},
		{"begin", ErrNotAllowed, "SELECT, INSERT"},
		{"set role postgres", ErrNotAllowed, "SELECT, INSERT"},
		{"select 1; delete from big", ErrSyntax, ""},
		{"delete from big; select 1", ErrSyntax, ""},
		{"select analyze delete from big", ErrSyntax, ""},
		{"select * from nope", ErrInvalidTable, ""},
	}
	for _, c := range cases {
		e := b.mustFail(t, c.want, "explain_query", fmt.Sprintf(`{"sql":%q}`, c.sql))
		if !strings.Contains(e.Suggestion, c.suggest) {
			t.Errorf("%s: suggestion %q, want it to say %q", c.sql, e.Suggestion, c.suggest)
		}
		if strings.Contains(e.Message+e.Suggestion, "EXPLAIN (FORMAT") {
			t.Errorf("%s: the error shows pgtools' own EXPLAIN: %s", c.sql, errorJSON(t, e))
		}
	}
	if got := b.db.QueryInt(t, "select count(*) from big"); got != 20000 {
		t.Fatalf("big has %d rows", got)
	}
}

// TestExplainQueryActsAsTheCaller: the plan is made as the caller's role with its claims, so a
// table the role may not read is refused, and one row-level security applies to is named without
// the estimates, methods and filters (the policy's expression among them) computed over rows the
// caller cannot see.
func TestExplainQueryActsAsTheCaller(t *testing.T) {
	t.Parallel()
	ib := newIdentityBundle(t)
	_, e := ib.callAs(t, ib.tenant(1), "explain_query", `{"sql":"select * from secret"}`)
	if e == nil || e.Type != ErrPermissionDenied {
		t.Fatalf("explain of a table the role may not read: %+v, want permission_denied", e)
	}
	out, e := ib.callAs(t, ib.tenant(1), "explain_query", `{"sql":"select * from docs"}`)
	if e != nil {
		t.Fatal(e)
	}
	raw, _ := json.Marshal(out)
	if !strings.Contains(string(raw), `"scans":[{"table":"docs"}]`) || strings.Contains(string(raw), "tenant") ||
		strings.Contains(string(raw), "estimatedRows") || !strings.Contains(string(raw), "row-level security applies to docs") {
		t.Errorf("answer %s: want docs named, its estimates and the policy's filter withheld", raw)
	}
}
