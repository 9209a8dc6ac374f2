package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/internal/wire"
)

// explainPrefix turns an agent's statement into the request for its plan. Plain EXPLAIN (no
// ANALYZE) plans the statement and runs none of it; VERBOSE names each relation's schema, so a
// scan is matched to the catalog exactly. The agent's text follows the options, where
// PostgreSQL's grammar accepts only a statement: options cannot be smuggled in.
const explainPrefix = "EXPLAIN (FORMAT JSON, VERBOSE) "

// largeTableRows is the catalog row estimate from which a sequential scan is worth a warning: below
// it, reading the whole table costs about what an index would.
const largeTableRows = 10000

// planNode is one node of EXPLAIN (FORMAT JSON) output, the fields the summary reads.
type planNode struct {
	NodeType    string     `json:"Node Type"`
	Operation   string     `json:"Operation"` // ModifyTable: Insert, Update, Delete, Merge
	Relation    string     `json:"Relation Name"`
	Schema      string     `json:"Schema"`
	Index       string     `json:"Index Name"`
	TotalCost   float64    `json:"Total Cost"`
	PlanRows    float64    `json:"Plan Rows"`
	Filter      string     `json:"Filter"`
	IndexCond   string     `json:"Index Cond"`
	RecheckCond string     `json:"Recheck Cond"`
	Plans       []planNode `json:"Plans"`
}

// PlanSummary is what a model reads of a statement's plan: the planner's estimates and how each
// table is reached, without the plan tree (execute_sql with EXPLAIN shows that).
type PlanSummary struct {
	// Cost is the planner's total cost estimate of the whole statement (arbitrary units;
	// sequential page reads cost 1 each by default).
	Cost float64 `json:"estimatedCost"`
	// Rows is the number of rows the statement is estimated to return.
	Rows int64 `json:"estimatedRows"`
	// Scans are the tables read, in plan order.
	Scans []PlanScan `json:"scans,omitempty"`
	// Writes are the tables an INSERT, UPDATE, DELETE or MERGE would change, with the rows it
	// would touch.
	Writes []PlanWrite `json:"writes,omitempty"`
	// Warnings name what makes the statement expensive and the fix: full scans of large tables.
	Warnings []string `json:"warnings,omitempty"`
}

// PlanScan is how one table is read.
type PlanScan struct {
	Table  string `json:"table"`
	Method string `json:"method"`          // the plan node: Seq Scan, Index Scan, Index Only Scan, Bitmap Heap Scan, …
	Index  string `json:"index,omitempty"` // the index used, if any
	Filter string `json:"filter,omitempty"`
	Rows   int64  `json:"rows"` // rows estimated to come out of the scan
}

// PlanWrite is the change a write would make to one table.
type PlanWrite struct {
	Operation string `json:"operation"` // insert, update, delete, merge
	Table     string `json:"table"`
	Rows      int64  `json:"rows"` // rows the statement would touch
}

// touched is the largest number of rows the summary says the statement returns or changes in one
// table: what max_estimated_rows bounds.
func (s *PlanSummary) touched() int64 {
	n := s.Rows
	for _, w := range s.Writes {
		n = max(n, w.Rows)
	}
	return n
}

// estimateRows converts the planner's row estimate to a whole number.
func estimateRows(f float64) int64 {
	if f >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Round(f))
}

// parsePlan reads the one value EXPLAIN (FORMAT JSON) answers.
func parsePlan(raw []byte) (*planNode, error) {
	var doc []struct {
		Plan *planNode `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc) != 1 || doc[0].Plan == nil {
		return nil, fmt.Errorf("reading the plan: unexpected EXPLAIN output")
	}
	return doc[0].Plan, nil
}

// summarize turns a plan into its summary; estimate gives a relation's catalog row estimate
// (ok false when unknown or not to be shown).
func summarize(top *planNode, estimate func(schema, name string) (int64, bool)) *PlanSummary {
	s := &PlanSummary{Cost: math.Round(top.TotalCost*100) / 100, Rows: estimateRows(top.PlanRows)}
	// bitmap is the position in s.Scans of the Bitmap Heap Scan whose index scans are below.
	var walk func(n *planNode, bitmap int)
	walk = func(n *planNode, bitmap int) {
		switch {
		case n.NodeType == "ModifyTable":
			var rows float64
			if len(n.Plans) > 0 {
				rows = n.Plans[0].PlanRows
			}
			s.Writes = append(s.Writes, PlanWrite{Operation: strings.ToLower(n.Operation), Table: planTable(n), Rows: estimateRows(rows)})
		case n.NodeType == "Bitmap Index Scan":
			if bitmap >= 0 {
				if s.Scans[bitmap].Index != "" {
					s.Scans[bitmap].Index += ", "
				}
				s.Scans[bitmap].Index += n.Index
			}
		case n.Relation != "":
			filter := n.Filter
			if filter == "" {
				filter = n.RecheckCond
			}
			s.Scans = append(s.Scans, PlanScan{Table: planTable(n), Method: n.NodeType, Index: n.Index, Filter: filter, Rows: estimateRows(n.PlanRows)})
			bitmap = -1
			if n.NodeType == "Bitmap Heap Scan" {
				bitmap = len(s.Scans) - 1
			}
			if n.NodeType == "Seq Scan" {
				if est, ok := estimate(n.Schema, n.Relation); ok && est >= largeTableRows {
					w := fmt.Sprintf("Seq Scan reads all of %s (about %d rows)", planTable(n), est)
					if n.Filter != "" {
						w += " to apply " + n.Filter + ": an index on the filtered columns, or a where on indexed ones, avoids it"
					} else {
						w += ": a where on indexed columns, or a limit, avoids it"
					}
					s.Warnings = append(s.Warnings, w)
				}
			}
		}
		for i := range n.Plans {
			walk(&n.Plans[i], bitmap)
		}
	}
	walk(top, -1)
	return s
}

// planTable names a plan node's relation as the tools do: schema.name outside public.
func planTable(n *planNode) string {
	if n.Schema == "" || n.Schema == "public" {
		return n.Relation
	}
	return n.Schema + "." + n.Relation
}

// shiftPosition makes a PostgreSQL error's position point into the agent's statement rather than
// into explainPrefix + statement.
func shiftPosition(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Position > int32(len(explainPrefix)) {
		pe.Position -= int32(len(explainPrefix))
	}
	return err
}

// catalogEstimate answers summarize's question from db's catalog snapshot, for the relations the
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

// planRead plans sql as a read does: in a READ ONLY transaction (or the session's read-only
// savepoint) acting as the caller, with its identity checked, then rolled back. Nothing of the
// statement runs.
func (req *request) planRead(ctx context.Context, sess *Session, sql string, params []any) (*planNode, error) {
	rs, err := runReadOn(ctx, req.db, sess, req.who(), wire.Stmt{SQL: explainPrefix + sql, Params: params, MaxRows: 2, Format: wire.Objects})
	if err != nil {
		return nil, shiftPosition(err)
	}
	var rows []map[string]json.RawMessage
	if err := json.Unmarshal(rs.Data, &rows); err != nil || len(rows) != 1 || len(rows[0]) != 1 {
		return nil, fmt.Errorf("reading the plan: unexpected EXPLAIN output")
	}
	for _, v := range rows[0] {
		return parsePlan(v)
	}
	return nil, nil // unreachable: one column
}

// planIn plans st inside the transaction open on pc (a write's, after its identity was set), so
// that what the transaction did before (a session's or a batch's earlier statements) is seen. pre
// runs first in the same round trip.
func planIn(ctx context.Context, pc *pgconn.PgConn, st writeStmt, pre []wire.Exec) (*planNode, error) {
	sql := explainPrefix + st.sql
	oids := st.colOIDs
	if wire.NeedsTypes(st.params) {
		sd, err := pc.Prepare(ctx, "", sql, nil)
		if err != nil {
			return nil, shiftPosition(err)
		}
		oids = mergeOIDs(sd.ParamOIDs, st.colOIDs)
	}
	values, err := wire.EncodeParams(st.params, oids)
	if err != nil {
		return nil, err
	}
	var b pgconn.Batch
	for _, e := range pre {
		b.ExecParams(e.SQL, e.Params, nil, nil, nil)
	}
	b.ExecParams(sql, values, nil, nil, nil)
	results, err := pc.ExecBatch(ctx, &b).ReadAll()
	if err != nil {
		return nil, shiftPosition(err)
	}
	if len(results) != len(pre)+1 {
		return nil, fmt.Errorf("reading the plan: no result")
	}
	res := results[len(pre)]
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return nil, fmt.Errorf("reading the plan: unexpected EXPLAIN output")
	}
	return parsePlan(res.Rows[0][0])
}
