package tools

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/internal/wire"
)

// orderItem is one catalog-checked term of an ORDER BY.
type orderItem struct {
	col        string // the column's exact name
	desc       bool
	nullsFirst bool // where NULLs sort; PostgreSQL's default is first for DESC, last for ASC
	notNull    bool // the column is NOT NULL, so NULLs need no thought
}

func (o orderItem) sql() string {
	s := pgx.Identifier{o.col}.Sanitize()
	if o.desc {
		s += " DESC"
	}
	if o.nullsFirst != o.desc { // not the default
		if o.nullsFirst {
			s += " NULLS FIRST"
		} else {
			s += " NULLS LAST"
		}
	}
	return s
}

// orderSQL is the ORDER BY list of items.
func orderSQL(items []orderItem) string {
	parts := make([]string, len(items))
	for i, o := range items {
		parts[i] = o.sql()
	}
	return strings.Join(parts, ", ")
}

// totalOrder extends the caller's order with the columns of rel's key it lacks, so that no two
// rows tie and "after the last row" names one place. It reports false when rel has no key the
// caller's role may read (a view, a table without a primary key or unique NOT NULL index, a key
// column withheld from the role): paging then goes by offset. The added columns sort in the
// direction of the caller's first term, so an order of one direction stays one direction, which
// keeps the row comparison (keysetAfter) an index range.
func totalOrder(rel *catalog.Relation, items []orderItem) ([]orderItem, bool) {
	if len(rel.Key) == 0 {
		return items, false
	}
	desc := len(items) > 0 && items[0].desc
	out := items
	for _, k := range rel.Key {
		i := rel.ColumnIndex(k)
		if i < 0 || (rel.ColRead != nil && !rel.ColRead[i]) {
			return items, false
		}
		if slicesContainsCol(items, k) {
			continue
		}
		out = append(out, orderItem{col: k, desc: desc, nullsFirst: desc, notNull: true})
	}
	return out, true
}

func slicesContainsCol(items []orderItem, col string) bool {
	for _, o := range items {
		if o.col == col {
			return true
		}
	}
	return false
}

// keysetAfter is the condition "sorts after the row whose order values are after" under items,
// with after bound as parameters from $first on (text format, the type inferred from the column;
// nil is NULL). Values are never written into the SQL. When every term has one direction and
// no NULL is possible it is a row comparison, which PostgreSQL answers from an index on those
// columns; otherwise it is spelled out term by term, minding each term's direction and where
// its NULLs sort.
func keysetAfter(items []orderItem, after []*string, first int) (string, []any, error) {
	if len(after) != len(items) {
		return "", nil, fmt.Errorf("the token holds %d order values for %d order terms", len(after), len(items))
	}
	params := make([]any, 0, len(items))
	ph := func(v *string) string {
		params = append(params, wire.Text(*v))
		return "$" + strconv.Itoa(first+len(params)-1)
	}
	col := func(o orderItem) string { return pgx.Identifier{o.col}.Sanitize() }
	simple := true
	for i, o := range items {
		if o.desc != items[0].desc || !o.notNull || after[i] == nil {
			simple = false
		}
	}
	if simple {
		cols, vals := make([]string, len(items)), make([]string, len(items))
		for i, o := range items {
			cols[i], vals[i] = col(o), ph(after[i])
		}
		op := " > "
		if items[0].desc {
			op = " < "
		}
		return "(" + strings.Join(cols, ", ") + ")" + op + "(" + strings.Join(vals, ", ") + ")", params, nil
	}
	// Term i: equal on every earlier term, after on term i. Each value binds once and the
	// equality of the later terms reuses its placeholder.
	eq := make([]string, 0, len(items))
	var terms []string
	for i, o := range items {
		c := col(o)
		var beyond, same string
		if v := after[i]; v != nil {
			op := " > "
			if o.desc {
				op = " < "
			}
			p := ph(v)
			beyond, same = c+op+p, c+" = "+p
			if !o.nullsFirst && !o.notNull { // NULLs sort after every value
				beyond = "(" + beyond + " OR " + c + " IS NULL)"
			}
		} else {
			same = c + " IS NULL"
			if o.nullsFirst { // the values sort after NULL; with NULLs last nothing does
				beyond = c + " IS NOT NULL"
			}
		}
		if beyond != "" {
			terms = append(terms, "("+strings.Join(append(eq[:len(eq):len(eq)], beyond), " AND ")+")")
		}
		eq = append(eq, same)
	}
	if len(terms) == 0 {
		return "false", params, nil
	}
	return "(" + strings.Join(terms, " OR ") + ")", params, nil
}
