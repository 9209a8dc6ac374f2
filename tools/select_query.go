package tools

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/internal/ident"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/page"
	"github.com/pgtools/pgtools/tools/words"
)

// rowLimit checks the limit argument against the policy.
func rowLimit(req *request, arg count) (int, *Error) {
	p := req.db.Policy
	limit := arg.or(int64(p.DefaultLimit))
	if limit > int64(p.MaxLimit) {
		return 0, errorf(ErrInvalidArguments, fmt.Sprintf("Use a limit of at most %d; a truncated answer's next_page continues with the rows after it.", p.MaxLimit),
			"Invalid arguments: limit %d exceeds the hard cap of %d rows", limit, p.MaxLimit)
	}
	return int(limit), nil
}

// selectQuery reads rows from one table in a READ ONLY transaction.
func selectQuery(ctx context.Context, req *request, a *selectArgs) (Result, *Error) {
	const op = "select"
	sess := req.session
	limit, lerr := rowLimit(req, a.Limit)
	if lerr != nil {
		return nil, lerr
	}
	params, perr := paramList(a.Params)
	if perr != nil {
		return nil, perr
	}
	cc := callContext{ReadOnly: true, Database: req.db.Name}
	rel, err := req.db.cat.ResolveTable(ctx, req.who().role, a.Table)
	if err != nil {
		return nil, withOp(classify(ctx, err, cc, req.db.Policy.MasksErrorValues()), op, "")
	}
	table := rel.Display()

	var sb strings.Builder
	sb.WriteString("SELECT ")
	cols := listNames(a.Columns)
	if len(cols) == 0 || (len(cols) == 1 && cols[0] == "*") {
		// A role granted SELECT on some columns reads those: "*" would be refused whole. With
		// none, "*" lets PostgreSQL refuse it with its own permission error.
		list := rel.ReadList()
		if list == "" {
			list = "*"
		}
		sb.WriteString(list)
	} else {
		for i, c := range cols {
			name, cerr := catalog.ResolveColumn(rel, c)
			if cerr != nil {
				if c == "*" || strings.ContainsAny(c, "()") {
					cerr.Suggestion = `columns takes plain column names (or "*"); for expressions or aggregates use execute_sql. ` + cerr.Suggestion
				}
				return nil, withOp(cerr, op, table)
			}
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(pgx.Identifier{name}.Sanitize())
		}
	}
	items, oerr := parseOrder(rel, ident.TrimSpace(a.OrderBy))
	if oerr != nil {
		return nil, withOp(oerr, op, table)
	}
	total, keyed := items.Total(rel.ReadableKey())
	if keyed {
		// The order's values ride along after the caller's columns, unseen, so that the next
		// page starts after the last row actually sent, whether the row limit or the byte cap
		// cut the answer.
		for _, o := range total {
			sb.WriteString(", ")
			sb.WriteString(pgx.Identifier{o.Col}.Sanitize())
		}
	}
	sb.WriteString(" FROM ")
	sb.WriteString(pgx.Identifier{rel.Schema, rel.Name}.Sanitize())
	if where := strings.TrimSpace(a.Where); where != "" {
		// The newlines keep a trailing "--" comment in where from swallowing the closing parenthesis.
		sb.WriteString(" WHERE (\n")
		sb.WriteString(where)
		sb.WriteString("\n)")
	}
	offset := a.Offset.or(0)
	var keyParams []any
	if pg := req.pageState(); pg != nil {
		offset = pg.Offset
		if pg.After != nil {
			if !keyed || len(pg.After) != len(total) {
				return nil, withOp(page.TokenError("no longer fits the table: its key or columns changed since the token was issued", page.RestartFix), op, table)
			}
			cond, kp, err := total.After(pg.After, len(params)+1)
			if err != nil {
				return nil, withOp(page.TokenError("no longer fits the table", page.RestartFix), op, table)
			}
			if strings.TrimSpace(a.Where) != "" {
				sb.WriteString(" AND ")
			} else {
				sb.WriteString(" WHERE ")
			}
			sb.WriteString(cond)
			keyParams = kp
		}
	}
	if !keyed {
		total = items
	}
	if len(total) > 0 {
		sb.WriteString(" ORDER BY ")
		sb.WriteString(total.SQL())
	}
	sb.WriteString(" LIMIT ")
	sb.WriteString(strconv.Itoa(limit + 1))
	if offset > 0 {
		sb.WriteString(" OFFSET ")
		sb.WriteString(strconv.FormatInt(offset, 10))
	}
	st := wire.Stmt{SQL: sb.String(), Params: append(params, keyParams...), MaxRows: limit + 1, MaxBytes: req.maxBytes, Format: req.format(a.Format)}
	if keyed {
		st.KeyCols = len(total)
	}

	req.lookAhead = true
	rs, rerr := req.readOn(ctx, sess, st)
	if rerr != nil {
		return nil, withOp(req.statementError(ctx, rerr, stmtInfo{sql: st.SQL, rel: rel, readOnly: true}), op, table)
	}
	if sess != nil {
		req.db.sessionWarm.used("select", rel, sessionIdentity(sess))
	}
	res := rowsResult(op, table, rs, limit, int(offset), req.maxBytes)
	if rs.Truncated && rs.RowCount == 0 {
		// Nothing was sent, so there is nothing to continue after: a page of the same call
		// would be cut the same way.
		res.Hint = fmt.Sprintf("The first row alone is larger than the %d-byte response cap; select fewer columns.", req.maxBytes)
	}
	if rs.Truncated && rs.RowCount > 0 && req.paged() {
		res.NextPage = req.nextPage("select_query", a.pageArgs(), rs, keyed, offset)
		res.Hint = pageHint(rs, limit, req.maxBytes, keyed, table)
	}
	return res, nil
}

// pageHint says how to read on from a truncated select_query answer that carries next_page.
func pageHint(rs *wire.RowSet, limit, maxBytes int, keyed bool, table string) string {
	var h string
	if rs.ByBytes {
		h = fmt.Sprintf("Result cut at %d rows because it reached the %d-byte response cap; call again with page_token set to next_page for the next rows, or select fewer columns.", rs.RowCount, maxBytes)
	} else {
		h = fmt.Sprintf("More rows match than the limit of %d; call again with page_token set to next_page for the next page, or narrow where.", limit)
	}
	if !keyed {
		h += fmt.Sprintf(" %s has no primary key or unique NOT NULL key you can read, so next_page goes by offset: rows added or removed meanwhile can shift the pages.", table)
	}
	return h
}

// rowsResult builds the answer of a read, with the paging hint when rows were cut.
func rowsResult(op, table string, rs *wire.RowSet, limit, offset, maxBytes int) *RowsResult {
	n := rs.RowCount
	res := &RowsResult{Operation: op, Table: table, RowCount: n, Rows: wire.Rows{Columns: rs.Columns, Data: rs.Data}, Truncated: rs.Truncated}
	switch {
	case rs.ByBytes && op == "select":
		res.Hint = fmt.Sprintf("Result cut at %d rows because it reached the %d-byte response cap; call again with offset %d for the next rows, or select fewer columns.", n, maxBytes, offset+n)
	case rs.ByBytes:
		res.Hint = fmt.Sprintf("Result cut at %d rows because it reached the %d-byte response cap; select fewer columns, or page with LIMIT %d OFFSET %d in your SQL.", n, maxBytes, n, n)
	case rs.Truncated && op == "select":
		res.Hint = fmt.Sprintf("More rows match than the limit of %d; call again with offset %d for the next page, or narrow where.", limit, offset+limit)
	case rs.Truncated:
		res.Hint = fmt.Sprintf("Only the first %d rows are shown; add LIMIT/OFFSET or a narrower WHERE to your SQL to see others.", limit)
	}
	return res
}

// parseOrder reads "col [asc|desc] [nulls first|last], …" into catalog-checked order terms.
func parseOrder(rel *catalog.Relation, spec string) (page.Order, *Error) {
	if spec == "" {
		return nil, nil
	}
	bad := func(item string) *Error {
		return errorf(ErrInvalidArguments, `Write order_by as "column [asc|desc] [nulls first|last], …", e.g. "placed_at desc, id".`,
			"Invalid arguments: order_by item %s is not \"column [asc|desc]\"", words.Quote(item))
	}
	var out page.Order
	for _, item := range ident.SplitList(spec) {
		words := splitWords(item)
		if len(words) == 0 || len(words) > 4 {
			return nil, bad(item)
		}
		col, cerr := catalog.ResolveColumn(rel, words[0])
		if cerr != nil {
			return nil, cerr
		}
		o := page.Term{Col: col}
		if i := rel.ColumnIndex(col); i >= 0 && i < len(rel.ColNotNull) {
			o.NotNull = rel.ColNotNull[i]
		}
		rest := words[1:]
		if len(rest) > 0 {
			switch strings.ToLower(rest[0]) {
			case "asc", "desc":
				o.Desc = strings.EqualFold(rest[0], "desc")
				rest = rest[1:]
			}
		}
		o.NullsFirst = o.Desc
		if len(rest) == 2 && strings.EqualFold(rest[0], "nulls") && (strings.EqualFold(rest[1], "first") || strings.EqualFold(rest[1], "last")) {
			o.NullsFirst = strings.EqualFold(rest[1], "first")
			rest = nil
		}
		if len(rest) != 0 {
			return nil, bad(item)
		}
		out = append(out, o)
	}
	return out, nil
}

// splitWords splits on white space outside double quotes.
func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote := false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
			cur.WriteRune(r)
		case !inQuote && (r == ' ' || r == '\t' || r == '\n'):
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}
