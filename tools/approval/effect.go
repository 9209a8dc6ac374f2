package approval

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/tools/internal/pgerr"
)

// Effect is what a write did in its transaction, as measured before it committed: the rows it
// inserted, updated or deleted per table (a partition's rows count for its partitioned table;
// rows written by triggers count too), and whether it changed the schema.
type Effect struct {
	Tables []TableRows `json:"tables"`
	// Total is the rows of every table together.
	Total int64 `json:"total"`
	// Commands are the statements' command tags, in order (UPDATE, DELETE, CREATE TABLE …).
	Commands []string `json:"commands"`
	// DDL: a statement changed the schema; Destructive: one was a DROP or a TRUNCATE.
	DDL         bool `json:"ddl,omitempty"`
	Destructive bool `json:"destructive,omitempty"`
}

// TableRows is one table's rows in an Effect.
type TableRows struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	Rows   int64  `json:"rows"`
	// hidden: the caller's role holds no privilege on the table (rows a trigger wrote into an
	// audit table, say). The approver sees it; the caller is told only how many such rows.
	hidden bool
}

// Same reports whether e and o are the same effect: the same rows in the same tables and the
// same kind of statements.
func (e Effect) Same(o Effect) bool {
	if e.Total != o.Total || e.DDL != o.DDL || e.Destructive != o.Destructive || !slices.Equal(e.Commands, o.Commands) || len(e.Tables) != len(o.Tables) {
		return false
	}
	for i := range e.Tables {
		a, b := e.Tables[i], o.Tables[i]
		if a.Schema != b.Schema || a.Name != b.Name || a.Rows != b.Rows {
			return false
		}
	}
	return true
}

// forCaller is e as the caller may see it: tables its role holds no privilege on are one
// entry without a name.
func (e Effect) forCaller() Effect {
	out := e
	out.Tables = nil
	var hidden int64
	for _, t := range e.Tables {
		if t.hidden {
			hidden += t.Rows
			continue
		}
		out.Tables = append(out.Tables, t)
	}
	if hidden > 0 {
		out.Tables = append(out.Tables, TableRows{Name: "(tables your role cannot read)", Rows: hidden})
	}
	return out
}

// describe is e in words: "delete 120 rows of public.orders".
func (e Effect) describe() string {
	var parts []string
	for _, t := range e.Tables {
		name := t.Name
		if t.Schema != "" {
			name = t.Schema + "." + t.Name
		}
		parts = append(parts, fmt.Sprintf("%d rows of %s", t.Rows, name))
	}
	what := strings.Join(parts, ", ")
	if what == "" {
		what = "no rows"
	}
	cmds := strings.Join(e.Commands, ", ")
	if cmds == "" {
		cmds = "write"
	}
	return fmt.Sprintf("%s (%s)", what, cmds)
}

// TableWritesSQL reads the rows each table got inserted, updated or deleted as the backend
// counts them (a partition's rows count for its root), and whether the role holds a privilege
// on it. The counters are read for every table first and the rest only for those with rows, so
// it costs little more than one scan of pg_class. Its first row is a marker carrying
// track_counts: without it the counters stay zero and the effect cannot be measured. One
// statement, so it joins a pipeline or a simple-protocol string as one result; its rows decode
// with DecodeTableWrites.
const TableWritesSQL = `SELECT '', '', 0::int8, pg_catalog.current_setting('track_counts')::bool
 UNION ALL (SELECT n.nspname::text, r.relname::text, sum(w.n)::int8,
  pg_catalog.has_table_privilege(r.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
 FROM (SELECT c.oid, pg_catalog.pg_stat_get_xact_tuples_inserted(c.oid) + pg_catalog.pg_stat_get_xact_tuples_updated(c.oid)
    + pg_catalog.pg_stat_get_xact_tuples_deleted(c.oid) AS n
   FROM pg_catalog.pg_class c WHERE c.relkind IN ('r', 'm') AND c.relnamespace <> 'pg_catalog'::pg_catalog.regnamespace
    AND c.relnamespace IS DISTINCT FROM pg_catalog.to_regnamespace('information_schema')) w
 JOIN pg_catalog.pg_class r ON r.oid = coalesce(pg_catalog.pg_partition_root(w.oid), w.oid)
 JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace
 WHERE w.n > 0
 GROUP BY 1, 2, r.oid ORDER BY 1, 2)`

// tableWritesStmtName names TableWritesSQL prepared on a connection (once: it is planned like
// a small statement, and reading it on every write under rules should not pay for that).
const tableWritesStmtName = "pgtools_table_writes"

// TableWritesText is what reads TableWritesSQL in a simple-protocol string on pc: an EXECUTE
// of the statement prepared once per connection where named statements are allowed (named:
// the database's policy prepares statements; the reset never deallocates it and agents
// cannot), else the SQL. Called outside a transaction or before its first statement fails it.
func TableWritesText(ctx context.Context, pc *pgconn.PgConn, named bool) string {
	if !named {
		return TableWritesSQL
	}
	data := pc.CustomData()
	if data[tableWritesStmtName] != true {
		if _, err := pc.Prepare(ctx, tableWritesStmtName, TableWritesSQL, nil); err != nil {
			return TableWritesSQL
		}
		data[tableWritesStmtName] = true
	}
	return "EXECUTE " + tableWritesStmtName
}

// ReadTableWrites reads the table writes on pc, inside the open transaction, with tw
// (TableWritesText).
func ReadTableWrites(ctx context.Context, pc *pgconn.PgConn, tw string) ([]TableRows, error) {
	res, err := pc.Exec(ctx, tw).ReadAll()
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("the table writes reading answered %d results", len(res))
	}
	return DecodeTableWrites(res[0].Rows)
}

// DecodeTableWrites decodes the rows of TableWritesSQL. Where track_counts is off, the effect
// cannot be measured, and the error is a *pgerr.Error (not_allowed) that says so.
func DecodeTableWrites(rows [][][]byte) ([]TableRows, error) {
	marked, counting := false, false
	out := make([]TableRows, 0, len(rows))
	for _, row := range rows {
		if len(row) != 4 {
			return nil, fmt.Errorf("the table writes reading has %d columns", len(row))
		}
		if len(row[0]) == 0 && len(row[1]) == 0 { // the marker: no table has an empty name
			marked, counting = true, string(row[3]) == "t"
			continue
		}
		n, err := strconv.ParseInt(string(row[2]), 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, TableRows{Schema: string(row[0]), Name: string(row[1]), Rows: n, hidden: string(row[3]) != "t"})
	}
	if !marked {
		return nil, fmt.Errorf("the table writes reading has no marker row")
	}
	if !counting {
		return nil, &pgerr.Error{Type: pgerr.ErrNotAllowed,
			Message:    "Approval rules apply to this call, but track_counts is off on the server, so its effect cannot be measured; nothing was changed",
			Suggestion: "Ask the operator to turn track_counts on (the default): approval rules count rows with it."}
	}
	return out, nil
}

// AddTableWrites is the rows of a and b together, per table, sorted by schema and name as
// TableWritesSQL sorts them: what a session's statements wrote, statement after statement.
func AddTableWrites(a, b []TableRows) []TableRows {
	byName := map[[2]string]int{}
	var out []TableRows
	for _, list := range [][]TableRows{a, b} {
		for _, t := range list {
			k := [2]string{t.Schema, t.Name}
			if i, ok := byName[k]; ok {
				out[i].Rows += t.Rows
				out[i].hidden = out[i].hidden || t.hidden
				continue
			}
			byName[k] = len(out)
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(x, y TableRows) int {
		if c := strings.Compare(x.Schema, y.Schema); c != 0 {
			return c
		}
		return strings.Compare(x.Name, y.Name)
	})
	return out
}

// SubtractTableWrites is after minus before, per table, keeping the tables that changed: the
// rows a transaction wrote between two readings.
func SubtractTableWrites(after, before []TableRows) []TableRows {
	prev := map[[2]string]int64{}
	for _, t := range before {
		prev[[2]string{t.Schema, t.Name}] = t.Rows
	}
	var out []TableRows
	for _, t := range after {
		t.Rows -= prev[[2]string{t.Schema, t.Name}]
		if t.Rows > 0 {
			out = append(out, t)
		}
	}
	return out
}
