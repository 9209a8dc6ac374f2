package tools

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/discovery"
	"github.com/pgtools/pgtools/tools/internal/ident"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/page"
	"github.com/pgtools/pgtools/tools/words"
)

// What a describe_schema page holds (docs/tools.md, "Discovery"): at most limit entries (tables,
// or one table's columns), at most the response byte cap, and, when the call gives no limit, at
// most describePageBytes, so that the first call on any database costs a model a few thousand
// tokens. A page never holds less than one entry unless that entry alone passes the byte cap.
const (
	describeLimitDefault = 100
	describePageBytes    = 16 << 10
	// listCommentRunes is where a listed table's comment is cut; describing the table shows it all.
	listCommentRunes = 200
	// overviewSchemasMax bounds the schemas an overview names; search matches schema names too.
	overviewSchemasMax = 50
	// fullColumnsMax is the columns each table of a listing with detail full shows.
	fullColumnsMax = 100
	// fullBatch is how many tables a listing with detail full describes per round trip.
	fullBatch = 25
	// pageEnvelope is what an answer holds besides its data and next_page: operation, table,
	// rowCount, truncated, executionTime and the hint, generously.
	pageEnvelope = 1024
)

// tableSummary is one entry of describe_schema's list. EstimatedRows is absent where row-level
// security applies to the caller's role: the planner's estimate counts every row of the table,
// including those the role may not see. MatchedColumns, in a search, names the columns that
// matched a word the table's name did not.
type tableSummary struct {
	Schema         string   `json:"schema"`
	Name           string   `json:"name"`
	Type           string   `json:"type"`
	EstimatedRows  *int64   `json:"estimatedRows,omitempty"`
	Comment        string   `json:"comment,omitempty"`
	MatchedColumns []string `json:"matchedColumns,omitempty"`
}

var kindCodes = map[string]byte{"table": 'r', "view": 'v', "materialized view": 'm', "foreign table": 'f', "partitioned table": 'p'}

// describeSchema lists or searches the tables an agent may use, or describes one table.
func describeSchema(ctx context.Context, req *request, a *describeArgs) (Result, *Error) {
	ws := discovery.Words(a.Search)
	if a.Search != "" && len(ws) == 0 {
		return nil, errorf(ErrInvalidArguments, `Give search one or more words, e.g. "invoice" or "customer email".`,
			"Invalid arguments: search holds no word, only white space")
	}
	if len(ws) > discovery.MaxWords {
		return nil, errorf(ErrInvalidArguments, fmt.Sprintf("Search with at most %d words: the few that name what you look for.", discovery.MaxWords),
			"Invalid arguments: search has %d words, more than %d", len(ws), discovery.MaxWords)
	}
	if a.Table != "" {
		return describeOne(ctx, req, a, ws)
	}
	return describeList(ctx, req, a, ws)
}

// pageBudget is the bytes a page's answer may hold: the response byte cap, and without a limit
// argument also describePageBytes.
func (a *describeArgs) pageBudget(req *request) int {
	if a.Limit.raw != "" {
		return req.maxBytes
	}
	return min(req.maxBytes, describePageBytes)
}

// pageReserve is what a page's answer needs besides its data: the envelope and a next_page,
// measured on a token after the longest key a page can end at.
func (a *describeArgs) pageReserve(req *request) int {
	if !req.paged() {
		return pageEnvelope
	}
	longest := strings.Repeat("\x01", 63) // a name of 63 bytes, each escaped in six
	return pageEnvelope + len(req.nextAfter("describe_schema", a.pageArgs(), "9999", longest, longest))
}

// pageFill collects a page's encoded entries, as a JSON array, while they fit in budget; the
// first one whenever it fits in hardCap, so that a page is never empty but for an entry the cap
// cannot hold.
type pageFill struct {
	items           [][]byte
	size            int // of the array: brackets and commas included
	budget, hardCap int
}

func newPageFill(budget, hardCap int) *pageFill {
	return &pageFill{size: 2, budget: budget, hardCap: hardCap}
}

// add appends it and reports true, or reports false when it does not fit.
func (p *pageFill) add(it []byte) bool {
	extra := len(it)
	if len(p.items) > 0 {
		extra++
	}
	if p.size+extra > p.budget && (len(p.items) > 0 || p.size+extra > p.hardCap) {
		return false
	}
	p.items, p.size = append(p.items, it), p.size+extra
	return true
}

// array is the entries as one JSON array.
func (p *pageFill) array() []byte {
	out := make([]byte, 0, p.size)
	out = append(out, '[')
	for i, it := range p.items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	return append(out, ']')
}

// describeList answers a call without table: a page of the tables the role may read that match
// schema, kind and search, in the order discovery gives them.
func describeList(ctx context.Context, req *request, a *describeArgs, ws []string) (Result, *Error) {
	const op = "describe"
	cc := callContext{ReadOnly: true, Database: req.db.Name}
	mask := req.db.Policy.MasksErrorValues()
	role := req.who().role
	snap, err := req.db.cat.Fresh(ctx)
	if err != nil {
		return nil, withOp(classify(ctx, err, cc, mask), op, "")
	}
	view, err := req.db.cat.ViewFor(ctx, snap, role)
	if err != nil {
		return nil, withOp(classify(ctx, err, cc, mask), op, "")
	}
	ix := req.db.disc.Index(snap, view, role)
	limit := int(a.Limit.or(describeLimitDefault))
	q := discovery.Query{Schema: a.Schema, Kind: kindCodes[a.Kind], Words: ws, Limit: limit}
	if pg := req.pageState(); pg != nil {
		k, ok := listKey(pg.After)
		if !ok {
			return nil, withOp(page.TokenError("does not continue a list of tables", page.RestartFix), op, "")
		}
		q.After = &k
	}
	hits, more := ix.Find(q)

	res := &SchemaResult{Operation: op}
	budget, hardCap, reserve := a.pageBudget(req), req.maxBytes, a.pageReserve(req)
	overview := req.pageState() == nil && a.Schema == "" && len(ws) == 0 && a.Kind == "" && more && len(ix.Schemas()) > 1
	if overview {
		sc := ix.Schemas()
		res.Schemas, _ = wire.Marshal(sc[:min(len(sc), overviewSchemasMax)])
		reserve += len(res.Schemas) + len(`,"schemas":`)
	}
	page := newPageFill(budget-reserve, hardCap-reserve)
	last, err := req.db.listEntries(ctx, req.who(), a.Detail, hits, page)
	if err != nil {
		return nil, withOp(classify(ctx, err, cc, mask), op, "")
	}
	n := len(page.items)
	res.RowCount, res.Data = &n, page.array()
	cutByBytes := last < len(hits)
	res.Truncated = more || cutByBytes
	switch {
	case res.Truncated && last == 0:
		res.Hint = fmt.Sprintf("The first table's entry alone is larger than the %d-byte response cap; ask for detail names or summary.", req.maxBytes)
	case res.Truncated:
		if req.paged() {
			k := hits[last-1].Key
			res.NextPage = req.nextAfter("describe_schema", a.pageArgs(), strconv.Itoa(k.Rank), k.Schema, k.Name)
		}
		if cutByBytes {
			res.Hint = fmt.Sprintf("Page cut at %d tables to stay within %d bytes; call again with page_token set to next_page for the next ones, or narrow with schema, search or kind.", n, budget)
		} else {
			res.Hint = fmt.Sprintf("More tables match than the limit of %d; call again with page_token set to next_page for the next page, or narrow with schema, search or kind.", limit)
		}
		if overview {
			all := ix.Schemas()
			shown := "each"
			if len(all) > overviewSchemasMax {
				shown = fmt.Sprintf("the first %d", overviewSchemasMax)
			}
			res.Hint = fmt.Sprintf("The %d tables you may read are in %d schemas; schemas lists %s with its number of tables: pass schema or search to narrow. ", ix.Len(), len(all), shown) + res.Hint
		}
	case n == 0 && len(ws) > 0:
		res.Hint = "No table you may read matches every word of search (names, columns, comments); try fewer or shorter words, or drop schema or kind."
	case n == 0:
		res.Hint = "No tables are visible to the runner's role with this filter."
	default:
		res.Hint = "Call describe_schema with table to see a table's columns, keys, indexes and the tables it joins to."
	}
	return res, nil
}

// listKey reads the key a list's page token ends at: rank, schema, name.
func listKey(after []*string) (discovery.Key, bool) {
	if len(after) != 3 || after[0] == nil || after[1] == nil || after[2] == nil {
		return discovery.Key{}, false
	}
	rank, err := strconv.Atoi(*after[0])
	if err != nil || rank < 0 {
		return discovery.Key{}, false
	}
	return discovery.Key{Rank: rank, Schema: *after[1], Name: *after[2]}, true
}

// listEntries adds hits to page in detail (names, summary or full) while they fit, and returns
// how many hits the page covers: a table dropped since the catalog was read is passed over in a
// full listing, not listed.
func (db *Database) listEntries(ctx context.Context, who identity, detail string, hits []discovery.Hit, page *pageFill) (int, error) {
	if detail != "full" {
		for i, h := range hits {
			var it []byte
			if detail == "names" {
				it, _ = wire.Marshal(h.Rel.Spelled())
			} else {
				comment, cut := words.Clip(h.Rel.Comment, listCommentRunes)
				if cut {
					comment += "…"
				}
				it, _ = wire.Marshal(tableSummary{Schema: h.Rel.Schema, Name: h.Rel.Name, Type: relKinds[h.Rel.Kind],
					EstimatedRows: h.Rel.EstimateShown(), Comment: comment, MatchedColumns: h.Matched})
			}
			if !page.add(it) {
				return i, nil
			}
		}
		return len(hits), nil
	}
	for start := 0; start < len(hits); start += fullBatch {
		batch := hits[start:min(start+fullBatch, len(hits))]
		rels := make([]*catalog.Relation, len(batch))
		for i, h := range batch {
			rels[i] = h.Rel
		}
		details, err := db.describeTables(ctx, who.role, rels, describeOpts{keys: true, app: who.app})
		if err != nil {
			return 0, err
		}
		for i, d := range details {
			if d == nil {
				continue // dropped since the catalog was read
			}
			if more := len(d.Columns) - fullColumnsMax; more > 0 {
				d.Columns, d.MoreColumns = d.Columns[:fullColumnsMax], more
			}
			it, _ := wire.Marshal(d)
			if !page.add(it) {
				return start + i, nil
			}
		}
	}
	return len(hits), nil
}

// describeOne answers a call with table: a page of its columns (those matching search, if
// given) and, on the first page, its keys, indexes and the tables it joins to.
func describeOne(ctx context.Context, req *request, a *describeArgs, ws []string) (Result, *Error) {
	const op = "describe"
	cc := callContext{ReadOnly: true, Database: req.db.Name}
	mask := req.db.Policy.MasksErrorValues()
	name := a.Table
	if sc := a.Schema; sc != "" {
		if parts, ok := ident.SplitQualified(name); ok && len(parts) == 1 {
			name = pgx.Identifier{sc}.Sanitize() + "." + pgx.Identifier{parts[0].Name}.Sanitize()
			if !parts[0].Quoted {
				name = pgx.Identifier{sc}.Sanitize() + "." + parts[0].Name
			}
		}
	}
	role := req.who().role
	rel, err := req.db.cat.ResolveTable(ctx, role, name)
	if err != nil {
		return nil, withOp(classify(ctx, err, cc, mask), op, "")
	}
	table := rel.Display()
	var after int16
	if pg := req.pageState(); pg != nil {
		n, perr := 0, error(nil)
		if len(pg.After) == 1 && pg.After[0] != nil {
			n, perr = strconv.Atoi(*pg.After[0])
		}
		if len(pg.After) != 1 || pg.After[0] == nil || perr != nil || n < 0 || n > 1600 {
			return nil, withOp(page.TokenError("does not continue a table's columns", page.RestartFix), op, table)
		}
		after = int16(n)
	}
	details, err := req.db.describeTables(ctx, role, []*catalog.Relation{rel}, describeOpts{strict: true, afterNum: after, words: ws, keys: req.pageState() == nil, app: req.who().app})
	if err != nil {
		return nil, withOp(classify(ctx, err, cc, mask), op, table)
	}
	d := details[0]
	limit := int(a.Limit.or(describeLimitDefault))
	more := len(d.Columns) > limit
	if more {
		d.Columns, d.nums = d.Columns[:limit], d.nums[:limit]
	}
	first := req.pageState() == nil
	all := d.Columns
	d.Columns = []columnInfo{}
	bare, _ := wire.Marshal(d.shown(first))
	reserve := a.pageReserve(req) + len(bare) - 2
	page := newPageFill(a.pageBudget(req)-reserve, req.maxBytes-reserve)
	k := 0
	for _, c := range all {
		it, _ := wire.Marshal(c)
		if !page.add(it) {
			break
		}
		k++
	}
	d.Columns = all[:k]
	data, _ := wire.Marshal(d.shown(first))
	res := &SchemaResult{Operation: op, Table: table, Data: data, Truncated: more || k < len(all)}
	switch {
	case res.Truncated && k == 0:
		res.Hint = fmt.Sprintf("The table's first column, with its keys and indexes, is larger than the %d-byte response cap.", req.maxBytes)
	case res.Truncated:
		if req.paged() {
			res.NextPage = req.nextAfter("describe_schema", a.pageArgs(), strconv.Itoa(int(d.nums[k-1])))
		}
		res.Hint = fmt.Sprintf("%s has more columns than this page holds (%d); call again with page_token set to next_page for the next ones, or find some with search.", table, k)
	case len(ws) > 0 && len(d.Columns) == 0:
		res.Hint = fmt.Sprintf("No column of %s you may use matches every word of search; describe it without search to see them all.", table)
	}
	return res, nil
}
