// Package plan reads PostgreSQL's plans of agent statements and judges them against cost
// budgets. It asks for a plan (ExplainPrefix, In), reads EXPLAIN (FORMAT JSON) output (Parse)
// and sums it up for a model (Summarize: the estimates and how each table is reached, without
// the plan tree). A Budget bounds a call's planner estimates: the configured bounds lowered by
// the call's own (WithBudget); Check refuses a plan over it with too_expensive, and Gate sorts
// statements by whether a budget can see their cost at all.
//
// The package knows nothing of tools, the registry or a request: package tools runs the
// EXPLAIN where the statement would run, acting as the caller, and passes in what a plan is
// judged by (the bounds, the catalog's table sizes). Its functions are safe for concurrent use;
// a Node or Summary belongs to the caller that made it, and In uses its connection as any
// single caller of a *pgconn.PgConn does.
package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/tools/internal/wire"
)

// ExplainPrefix turns an agent's statement into the request for its plan. Plain EXPLAIN (no
// ANALYZE) plans the statement and runs none of it; VERBOSE names each relation's schema, so a
// scan is matched to the catalog exactly. The agent's text follows the options, where
// PostgreSQL's grammar accepts only a statement: options cannot be smuggled in.
const ExplainPrefix = "EXPLAIN (FORMAT JSON, VERBOSE) "

// largeTableRows is the catalog row estimate from which a sequential scan is worth a warning: below
// it, reading the whole table costs about what an index would.
const largeTableRows = 10000

// Node is one node of EXPLAIN (FORMAT JSON) output, the fields the summary reads.
type Node struct {
	NodeType    string  `json:"Node Type"`
	Operation   string  `json:"Operation"` // ModifyTable: Insert, Update, Delete, Merge
	Relation    string  `json:"Relation Name"`
	Schema      string  `json:"Schema"`
	Index       string  `json:"Index Name"`
	TotalCost   float64 `json:"Total Cost"`
	PlanRows    float64 `json:"Plan Rows"`
	Filter      string  `json:"Filter"`
	IndexCond   string  `json:"Index Cond"`
	RecheckCond string  `json:"Recheck Cond"`
	Plans       []Node  `json:"Plans"`
}

// Summary is what a model reads of a statement's plan: the planner's estimates and how each
// table is reached, without the plan tree (execute_sql with EXPLAIN shows that).
type Summary struct {
	// Cost is the planner's total cost estimate of the whole statement (arbitrary units;
	// sequential page reads cost 1 each by default). nil when withheld.
	Cost *float64 `json:"estimatedCost,omitempty"`
	// Rows is the number of rows the statement is estimated to return. nil when withheld.
	Rows *int64 `json:"estimatedRows,omitempty"`
	// Scans are the tables read, in plan order.
	Scans []Scan `json:"scans,omitempty"`
	// Writes are the tables an INSERT, UPDATE, DELETE or MERGE would change, with the rows it
	// would touch.
	Writes []Write `json:"writes,omitempty"`
	// Warnings name what makes the statement expensive and the fix: full scans of large tables.
	Warnings []string `json:"warnings,omitempty"`
	// Withheld, when set, says why the plan's estimates and choices are not shown: the plan
	// reads a table under row-level security for the caller (Withhold).
	Withheld string `json:"withheld,omitempty"`
}

// Scan is how one table is read.
type Scan struct {
	Table  string `json:"table"`
	Method string `json:"method,omitempty"` // the plan node: Seq Scan, Index Scan, Index Only Scan, Bitmap Heap Scan, …
	Index  string `json:"index,omitempty"`  // the index used, if any
	Filter string `json:"filter,omitempty"`
	Rows   *int64 `json:"rows,omitempty"` // rows estimated to come out of the scan; nil when withheld
}

// Write is the change a write would make to one table.
type Write struct {
	Operation string `json:"operation"` // insert, update, delete, merge
	Table     string `json:"table"`
	Rows      *int64 `json:"rows,omitempty"` // rows the statement would touch; nil when withheld
}

// touched is the largest number of rows the summary says the statement returns or changes in one
// table: what max_estimated_rows bounds.
func (s *Summary) touched() int64 {
	var n int64
	if s.Rows != nil {
		n = *s.Rows
	}
	for _, w := range s.Writes {
		if w.Rows != nil {
			n = max(n, *w.Rows)
		}
	}
	return n
}

// estimateRows converts the planner's row estimate to a whole number.
func estimateRows(f float64) *int64 {
	n := int64(math.MaxInt64)
	if f < math.MaxInt64 {
		n = int64(math.Round(f))
	}
	return &n
}

// Parse reads the one value EXPLAIN (FORMAT JSON) answers.
func Parse(raw []byte) (*Node, error) {
	var doc []struct {
		Plan *Node `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc) != 1 || doc[0].Plan == nil {
		return nil, fmt.Errorf("reading the plan: unexpected EXPLAIN output")
	}
	return doc[0].Plan, nil
}

// Summarize turns a plan into its summary; estimate gives a relation's catalog row estimate
// (ok false when unknown or not to be shown), from which a sequential scan earns a warning.
func Summarize(top *Node, estimate func(schema, name string) (int64, bool)) *Summary {
	cost := math.Round(top.TotalCost*100) / 100
	s := &Summary{Cost: &cost, Rows: estimateRows(top.PlanRows)}
	// bitmap is the position in s.Scans of the Bitmap Heap Scan whose index scans are below.
	var walk func(n *Node, bitmap int)
	walk = func(n *Node, bitmap int) {
		switch {
		case n.NodeType == "ModifyTable":
			var rows float64
			if len(n.Plans) > 0 {
				rows = n.Plans[0].PlanRows
			}
			s.Writes = append(s.Writes, Write{Operation: strings.ToLower(n.Operation), Table: planTable(n), Rows: estimateRows(rows)})
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
			s.Scans = append(s.Scans, Scan{Table: planTable(n), Method: n.NodeType, Index: n.Index, Filter: filter, Rows: estimateRows(n.PlanRows)})
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

// Relations calls f with the schema and name of every relation the plan reads or writes, in plan
// order (subplans and init plans included: they are nodes of the tree).
func Relations(top *Node, f func(schema, name string)) {
	var walk func(n *Node)
	walk = func(n *Node) {
		if n.Relation != "" {
			f(n.Schema, n.Relation)
		}
		for i := range n.Plans {
			walk(&n.Plans[i])
		}
	}
	walk(top)
}

// Reads reports whether the plan reads or writes a relation hidden says true of.
func Reads(top *Node, hidden func(schema, name string) bool) bool {
	found := false
	Relations(top, func(schema, name string) { found = found || hidden(schema, name) })
	return found
}

// withheldNote is what a withheld summary says in place of the planner's figures.
const withheldNote = "row-level security applies to %s for your role: the planner's estimates, costs, access methods and filters are computed over rows you cannot see, so none is shown. The tables the statement reads and writes are."

// Withhold is the summary of a plan that reads a table hidden says true of (row-level security
// applies to it for the caller): the tables it reads and writes, sorted and each named once, and
// nothing the planner derived from statistics over all rows — no row or cost estimate, no access
// method or index (the planner picks those by the estimates), no filter (a policy's expression
// is one), no warning. Two statements over the same tables answer the same, whatever values
// they look for.
func Withhold(top *Node, hidden func(schema, name string) bool) *Summary {
	s := &Summary{}
	read, written, secured := map[string]bool{}, map[string]bool{}, map[string]bool{}
	var walk func(n *Node)
	walk = func(n *Node) {
		if n.NodeType == "ModifyTable" {
			w := Write{Operation: strings.ToLower(n.Operation), Table: planTable(n)}
			if key := w.Operation + "\x00" + w.Table; !written[key] {
				written[key] = true
				s.Writes = append(s.Writes, w)
			}
		} else if n.Relation != "" && !read[planTable(n)] {
			read[planTable(n)] = true
			s.Scans = append(s.Scans, Scan{Table: planTable(n)})
		}
		if n.Relation != "" && hidden(n.Schema, n.Relation) {
			secured[planTable(n)] = true
		}
		for i := range n.Plans {
			walk(&n.Plans[i])
		}
	}
	walk(top)
	slices.SortFunc(s.Scans, func(a, b Scan) int { return strings.Compare(a.Table, b.Table) })
	slices.SortFunc(s.Writes, func(a, b Write) int { return strings.Compare(a.Table+"\x00"+a.Operation, b.Table+"\x00"+b.Operation) })
	names := make([]string, 0, len(secured))
	for n := range secured {
		names = append(names, n)
	}
	slices.Sort(names)
	s.Withheld = fmt.Sprintf(withheldNote, strings.Join(names, ", "))
	return s
}

// planTable names a plan node's relation as the tools do: schema.name outside public.
func planTable(n *Node) string {
	if n.Schema == "" || n.Schema == "public" {
		return n.Relation
	}
	return n.Schema + "." + n.Relation
}

// ShiftPosition makes a PostgreSQL error's position point into the agent's statement rather than
// into ExplainPrefix + statement. It returns err.
func ShiftPosition(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Position > int32(len(ExplainPrefix)) {
		pe.Position -= int32(len(ExplainPrefix))
	}
	return err
}

// In plans sql inside the transaction open on pc (a write's, after its identity was set), so
// that what the transaction did before (a session's or a batch's earlier statements) is seen.
// params are bound as the statement itself binds them: with known's parameter types (0:
// unknown), and those PostgreSQL infers when a value's text depends on its type. pre runs first
// in the same round trip.
func In(ctx context.Context, pc *pgconn.PgConn, sql string, params []any, known []uint32, pre []wire.Exec) (*Node, error) {
	sql = ExplainPrefix + sql
	oids := known
	if wire.NeedsTypes(params) {
		sd, err := pc.Prepare(ctx, "", sql, nil)
		if err != nil {
			return nil, ShiftPosition(err)
		}
		oids = wire.MergeOIDs(sd.ParamOIDs, known)
	}
	values, err := wire.EncodeParams(params, oids)
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
		return nil, ShiftPosition(err)
	}
	if len(results) != len(pre)+1 {
		return nil, fmt.Errorf("reading the plan: no result")
	}
	res := results[len(pre)]
	if len(res.Rows) != 1 || len(res.Rows[0]) != 1 {
		return nil, fmt.Errorf("reading the plan: unexpected EXPLAIN output")
	}
	return Parse(res.Rows[0][0])
}
