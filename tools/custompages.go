package tools

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/internal/ident"
	"github.com/pgtools/pgtools/tools/page"
)

// An operator-defined read tool whose definition declares order_by pages like select_query: its
// statement runs as a subquery ordered by the declared columns of its result, and a truncated
// answer carries next_page, which continues after the last row by those columns' values. The
// operator vouches that the order is unique (it ends with a key); pgtools cannot see a key
// through arbitrary SQL, so there is no offset fallback.

// checkCustomOrder resolves t.OrderBy against the columns t's statement returns and checks that
// PostgreSQL accepts the statement as the paged subquery; it sets t.order.
func checkCustomOrder(ctx context.Context, db *Database, t *CustomTool) error {
	if ident.TrimSpace(t.OrderBy) == "" {
		return nil
	}
	if customArgsFor(t.Mode)().access() != readsOnly {
		return fmt.Errorf("order_by pages the rows of a read tool; remove it from this write tool")
	}
	conn, err := db.acquire(ctx)
	if err != nil {
		return fmt.Errorf("connecting to database %q to check order_by: %w", t.Database, err)
	}
	defer conn.Release()
	pc := conn.Conn().PgConn()
	sd, err := pc.Prepare(ctx, "", t.SQL, nil)
	if err != nil {
		return fmt.Errorf("PostgreSQL does not accept the statement: %s", ClassifyError(ctx, err, db).Message)
	}
	result := &catalog.Relation{Name: t.Name}
	for _, f := range sd.Fields {
		result.Columns = append(result.Columns, f.Name)
	}
	items, e := parseOrder(result, ident.TrimSpace(t.OrderBy))
	if e != nil {
		return fmt.Errorf("order_by: %s. %s", e.Message, e.Suggestion)
	}
	t.order = items
	paged, _, _ := customPageSQL(*t, len(t.Parameters), nil, 1)
	if _, err := pc.Prepare(ctx, "", paged, nil); err != nil {
		return fmt.Errorf("order_by: the statement cannot be paged as a subquery (write one plain SELECT whose result names each column once, without a trailing semicolon): %s", ClassifyError(ctx, err, db).Message)
	}
	return nil
}

// customPageSQL is t's statement as one page: a subquery ordered by t.order, after pg's last
// row when there is one, limit+1 rows, with the order's values as trailing hidden columns.
// Its parameters follow the tool's nParams.
func customPageSQL(t CustomTool, nParams int, pg *page.State, limit int) (string, []any, *Error) {
	var sb strings.Builder
	sb.WriteString("SELECT *")
	for _, o := range t.order {
		sb.WriteString(", ")
		sb.WriteString(pgx.Identifier{o.Col}.Sanitize())
	}
	// The newlines keep a trailing "--" comment in the statement from swallowing the parenthesis.
	sb.WriteString(" FROM (\n")
	sb.WriteString(t.SQL)
	sb.WriteString("\n) AS pgtools_page")
	var params []any
	if pg != nil && pg.After != nil {
		cond, kp, err := t.order.After(pg.After, nParams+1)
		if err != nil {
			return "", nil, page.TokenError("no longer fits the tool: its order_by changed since the token was issued", page.RestartFix)
		}
		sb.WriteString(" WHERE ")
		sb.WriteString(cond)
		params = kp
	}
	sb.WriteString(" ORDER BY ")
	sb.WriteString(t.order.SQL())
	sb.WriteString(" LIMIT ")
	sb.WriteString(strconv.Itoa(limit + 1))
	return sb.String(), params, nil
}
