package page

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/internal/wire"
)

// Term is one term of an ORDER BY, its column already checked against the catalog.
type Term struct {
	Col        string // the column's exact name
	Desc       bool
	NullsFirst bool // where NULLs sort; PostgreSQL's default is first for DESC, last for ASC
	NotNull    bool // the column is NOT NULL, so NULLs need no thought
}

func (o Term) sql() string {
	s := pgx.Identifier{o.Col}.Sanitize()
	if o.Desc {
		s += " DESC"
	}
	if o.NullsFirst != o.Desc { // not the default
		if o.NullsFirst {
			s += " NULLS FIRST"
		} else {
			s += " NULLS LAST"
		}
	}
	return s
}

// Order is the terms of an ORDER BY, in order.
type Order []Term

// SQL is the ORDER BY list of o.
func (o Order) SQL() string {
	parts := make([]string, len(o))
	for i, t := range o {
		parts[i] = t.sql()
	}
	return strings.Join(parts, ", ")
}

// Total extends the caller's order o with the columns of key it lacks, so that no two rows tie
// and "after the last row" names one place. key is the relation's primary key or unique NOT
// NULL index, nil when it has none the caller's role may read (a view, a table without one, a
// key column withheld from the role): Total then reports false and paging goes by offset. The
// added columns sort in the direction of the caller's first term, so an order of one direction
// stays one direction, which keeps the row comparison (After) an index range.
func (o Order) Total(key []string) (Order, bool) {
	if len(key) == 0 {
		return o, false
	}
	desc := len(o) > 0 && o[0].Desc
	out := o
	for _, k := range key {
		if o.has(k) {
			continue
		}
		out = append(out, Term{Col: k, Desc: desc, NullsFirst: desc, NotNull: true})
	}
	return out, true
}

func (o Order) has(col string) bool {
	for _, t := range o {
		if t.Col == col {
			return true
		}
	}
	return false
}

// After is the condition "sorts after the row whose order values are after" under o, with after
// bound as parameters from $first on (text format, the type inferred from the column; nil is
// NULL). Values are never written into the SQL. When every term has one direction and no NULL
// is possible it is a row comparison, which PostgreSQL answers from an index on those columns;
// otherwise it is spelled out term by term, minding each term's direction and where its NULLs
// sort. It fails when after does not hold one value per term.
func (o Order) After(after []*string, first int) (string, []any, error) {
	if len(after) != len(o) {
		return "", nil, fmt.Errorf("the token holds %d order values for %d order terms", len(after), len(o))
	}
	params := make([]any, 0, len(o))
	ph := func(v *string) string {
		params = append(params, wire.Text(*v))
		return "$" + strconv.Itoa(first+len(params)-1)
	}
	col := func(t Term) string { return pgx.Identifier{t.Col}.Sanitize() }
	simple := true
	for i, t := range o {
		if t.Desc != o[0].Desc || !t.NotNull || after[i] == nil {
			simple = false
		}
	}
	if simple {
		cols, vals := make([]string, len(o)), make([]string, len(o))
		for i, t := range o {
			cols[i], vals[i] = col(t), ph(after[i])
		}
		op := " > "
		if o[0].Desc {
			op = " < "
		}
		return "(" + strings.Join(cols, ", ") + ")" + op + "(" + strings.Join(vals, ", ") + ")", params, nil
	}
	// Term i: equal on every earlier term, after on term i. Each value binds once and the
	// equality of the later terms reuses its placeholder.
	eq := make([]string, 0, len(o))
	var terms []string
	for i, t := range o {
		c := col(t)
		var beyond, same string
		if v := after[i]; v != nil {
			op := " > "
			if t.Desc {
				op = " < "
			}
			p := ph(v)
			beyond, same = c+op+p, c+" = "+p
			if !t.NullsFirst && !t.NotNull { // NULLs sort after every value
				beyond = "(" + beyond + " OR " + c + " IS NULL)"
			}
		} else {
			same = c + " IS NULL"
			if t.NullsFirst { // the values sort after NULL; with NULLs last nothing does
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
