package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/plan"
)

// planBudgetOf is the budget of one call of p on db.
func planBudgetOf(ctx context.Context, p Principal, db *Database) plan.Budget {
	return plan.BudgetOf(ctx, plan.Budget{Cost: db.Policy.MaxEstimatedCost, Rows: db.Policy.MaxEstimatedRows},
		plan.Budget{Cost: p.MaxEstimatedCost, Rows: p.MaxEstimatedRows})
}

// catalogEstimate answers plan.Summarize's question from db's catalog snapshot, for the relations the
// role may read; a table under row-level security has no estimate to show (its rows count those
// the role may not see).
func (req *request) catalogEstimate(ctx context.Context) func(schema, name string) (int64, bool) {
	snap, err := req.db.cat.Snapshot(ctx, false)
	if err != nil {
		return func(string, string) (int64, bool) { return 0, false }
	}
	view, verr := req.db.cat.ViewFor(ctx, snap, req.who().role)
	return func(schema, name string) (int64, bool) {
		r := snap.Rels[catalog.RelKey(schema, name)]
		if r == nil || verr != nil {
			return 0, false
		}
		if view != nil {
			if !view.Readable(r) {
				return 0, false
			}
			r = view.Rel(r)
		}
		if r == nil || r.RowSecurity || r.Estimate < 0 {
			return 0, false
		}
		return r.Estimate, true
	}
}

// rowSecured answers plan.Budget's Hidden and plan.Withhold's question from db's catalog
// snapshot: does row-level security apply to the relation for the caller's role? A partition,
// which the catalog lets its root stand for, is secured when its root is, or when it has row
// security of its own (a statement may name it directly). A relation the snapshot does not hold
// otherwise (a table newer than the snapshot, a temporary table), or the role may not read,
// counts as secured: without a catalog that says otherwise, no estimate over it is shown.
func (req *request) rowSecured(ctx context.Context) func(schema, name string) bool {
	snap, err := req.db.cat.Snapshot(ctx, false)
	if err != nil {
		return func(string, string) bool { return true }
	}
	view, verr := req.db.cat.ViewFor(ctx, snap, req.who().role)
	parts := map[string]bool{} // partitions asked about, by key: secured
	var secured func(schema, name string, partition bool) bool
	secured = func(schema, name string, partition bool) bool {
		key := catalog.RelKey(schema, name)
		r := snap.Rels[key]
		if r == nil && !partition {
			if v, ok := parts[key]; ok {
				return v
			}
			root, own, ok := req.db.partitionRoot(ctx, schema, name)
			parts[key] = !ok || own || secured(root[0], root[1], true)
			return parts[key]
		}
		if r == nil || verr != nil {
			return true
		}
		if view != nil {
			if !view.Readable(r) {
				return true
			}
			r = view.Rel(r)
		}
		return r == nil || r.RowSecurity
	}
	return func(schema, name string) bool { return secured(schema, name, false) }
}

// partitionRootQuery finds a partition's root and whether the partition has row security of
// its own.
const partitionRootQuery = `
SELECT rn.nspname::text, r.relname::text, c.relrowsecurity
FROM pg_class c JOIN pg_namespace cn ON cn.oid = c.relnamespace
JOIN pg_class r ON r.oid = pg_partition_root(c.oid) JOIN pg_namespace rn ON rn.oid = r.relnamespace
WHERE c.relispartition AND cn.nspname = $1 AND c.relname = $2`

// partitionRoot is the root (schema, name) of partition schema.name and whether the partition
// enables row security itself; ok is false when it is no partition or the catalog cannot say.
func (db *Database) partitionRoot(ctx context.Context, schema, name string) (root [2]string, ownRLS, ok bool) {
	conn, err := db.acquire(ctx)
	if err != nil {
		return root, false, false
	}
	defer conn.Release()
	if err := conn.QueryRow(ctx, partitionRootQuery, schema, name).Scan(&root[0], &root[1], &ownRLS); err != nil {
		return root, false, false
	}
	return root, ownRLS, true
}

// summarize is the summary of top the caller may read: the planner's, or where the plan reads a
// table under row-level security for the caller, plan.Withhold's.
func (req *request) summarize(ctx context.Context, top *plan.Node) *plan.Summary {
	if hidden := req.rowSecured(ctx); plan.Reads(top, hidden) {
		return plan.Withhold(top, hidden)
	}
	return plan.Summarize(top, req.catalogEstimate(ctx))
}

// explainGuard refuses, before it runs, an EXPLAIN (sent through execute_sql or pg_transaction)
// of a statement that reads a table under row-level security for the caller: EXPLAIN's output
// (row estimates, costs, the access method chosen by them, the policy's own expression as a
// filter, and with ANALYZE the rows a policy removed) is computed over rows the caller cannot
// see, and cannot be cut back reliably in every format it comes in. The explained statement is
// planned on its own, acting as the caller (in the session, when there is one), to learn which
// tables it reads; an EXPLAIN whose options pgtools does not read, or whose statement cannot be
// planned, is refused too. Any other statement passes.
func (req *request) explainGuard(ctx context.Context, sess *Session, sql string, params []any) *Error {
	if leadingKeyword(sql) != "EXPLAIN" {
		return nil
	}
	inner, ok := explained(sql)
	if !ok {
		return &Error{Type: ErrNotAllowed, Message: "pgtools could not read this EXPLAIN's options, so it cannot tell which tables the plan reads; nothing was run",
			Suggestion: "Use explain_query to see a statement's plan, or write the options as EXPLAIN (ANALYZE, VERBOSE, FORMAT TEXT) statement."}
	}
	if !plan.Plannable(leadingKeyword(inner)) {
		return nil // EXPLAIN of something without a plan: PostgreSQL answers its own error
	}
	top, err := req.planRead(ctx, sess, inner, params)
	if err != nil {
		return req.statementError(ctx, err, stmtInfo{sql: inner, readOnly: true})
	}
	hidden := req.rowSecured(ctx)
	if !plan.Reads(top, hidden) {
		return nil
	}
	w := plan.Withhold(top, hidden)
	return &Error{Type: ErrNotAllowed, Message: "EXPLAIN is not available for this statement: " + w.Withheld + " Nothing was run",
		Suggestion: "Use explain_query: it names the tables the statement reads and writes. Estimates and costs are shown only for plans that read no table under row-level security for your role."}
}

// explained is the statement an EXPLAIN explains: what follows EXPLAIN, its parenthesized
// options and the ANALYZE, ANALYSE and VERBOSE keywords of its older form. ok is false when the
// options hold anything but words, numbers, commas and plain quoted strings: the statement is
// then not told apart from its options with certainty.
func explained(sql string) (string, bool) {
	i := skipBlank(sql, 0)
	if !hasWordAt(sql, i, "EXPLAIN") {
		return "", false
	}
	i = skipBlank(sql, i+len("EXPLAIN"))
	if i < len(sql) && sql[i] == '(' {
		i++
		for {
			i = skipBlank(sql, i)
			if i >= len(sql) {
				return "", false
			}
			c := sql[i]
			switch {
			case c == ')':
				i++
			case c == ',' || c == '_' || c == '.' || c == '-' || c == '+' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
				i++
				continue
			case c == '\'':
				j := strings.IndexByte(sql[i+1:], '\'')
				if j < 0 || strings.ContainsAny(sql[i+1:i+1+j], "\\") {
					return "", false
				}
				i += j + 2
				continue
			default:
				return "", false
			}
			break
		}
	}
	for {
		i = skipBlank(sql, i)
		w := ""
		for _, kw := range []string{"ANALYZE", "ANALYSE", "VERBOSE"} {
			if hasWordAt(sql, i, kw) {
				w = kw
			}
		}
		if w == "" {
			return sql[i:], true
		}
		i += len(w)
	}
}

// hasWordAt reports whether the keyword kw (upper case) is at sql[i:], case-insensitively and
// whole.
func hasWordAt(sql string, i int, kw string) bool {
	if i+len(kw) > len(sql) || !strings.EqualFold(sql[i:i+len(kw)], kw) {
		return false
	}
	if j := i + len(kw); j < len(sql) {
		c := sql[j]
		return !(c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80)
	}
	return true
}

// planRead plans sql as a read does: in a READ ONLY transaction (or the session's read-only
// savepoint) acting as the caller, with its identity checked, then rolled back. Nothing of the
// statement runs.
func (req *request) planRead(ctx context.Context, sess *Session, sql string, params []any) (*plan.Node, error) {
	rs, err := runReadOn(ctx, req.db, sess, req.who(), wire.Stmt{SQL: plan.ExplainPrefix + sql, Params: params, MaxRows: 2, Format: wire.Objects})
	if err != nil {
		return nil, plan.ShiftPosition(err)
	}
	var rows []map[string]json.RawMessage
	if err := json.Unmarshal(rs.Data, &rows); err != nil || len(rows) != 1 || len(rows[0]) != 1 {
		return nil, fmt.Errorf("reading the plan: unexpected EXPLAIN output")
	}
	for _, v := range rows[0] {
		return plan.Parse(v)
	}
	return nil, nil // unreachable: one column
}

// withinBudget plans a read the way it will run (planRead) and refuses it when over the call's
// budget: one round trip before the statement, only when a budget is set. seen > 0 bounds the
// rows the read may return instead (plan.Budget.Check: the plan reads a table under row-level
// security).
func (req *request) withinBudget(ctx context.Context, sess *Session, st wire.Stmt) (seen int64, err error) {
	if !req.budget.Set() {
		return 0, nil
	}
	if planned, e := plan.Gate(leadingKeyword(st.SQL)); !planned {
		if e != nil {
			return 0, e
		}
		return 0, nil
	}
	top, err := req.planRead(ctx, sess, st.SQL, st.Params)
	if err != nil {
		return 0, err
	}
	if req.lookAhead && st.MaxRows > 0 && top.PlanRows >= float64(st.MaxRows) {
		// select_query asks for one row past its limit, to tell that more exist; the caller is
		// answered at most limit rows, and that is what the row budget bounds.
		top.PlanRows = float64(st.MaxRows - 1)
	}
	seen, e := req.budget.Check(ctx, top)
	if e != nil {
		return 0, e
	}
	return seen, nil
}

// readOn is runReadOn for the agent's statement of a call: refused before it runs when its plan
// is over the call's budget, and when it reads a table under row-level security, refused after it
// ran (rolled back, nothing answered) when it returned more rows than the budget's.
func (req *request) readOn(ctx context.Context, sess *Session, st wire.Stmt) (*wire.RowSet, error) {
	seen, err := req.withinBudget(ctx, sess, st)
	if err != nil {
		return nil, err
	}
	rs, err := runReadOn(ctx, req.db, sess, req.who(), st)
	if err != nil || seen <= 0 {
		return rs, err
	}
	n := int64(rs.RowCount)
	if req.lookAhead && st.MaxRows > 0 {
		n = min(n, int64(st.MaxRows-1)) // the row asked for past the limit is never answered
	}
	if n > seen {
		return nil, plan.RowsOver(n, seen, false)
	}
	return rs, nil
}
