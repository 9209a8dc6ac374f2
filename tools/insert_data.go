package tools

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/pgtools/pgtools/tools/catalog"
)

// insertData inserts one row or many in one statement.
func insertData(ctx context.Context, req *request, a *insertArgs) (Result, *Error) {
	// Checked here rather than by a top-level oneOf in the schema, which several agent frameworks
	// flatten or refuse.
	hasRow, hasRows := a.Row != nil, a.Rows != nil
	if hasRow == hasRows {
		what := "neither row nor rows"
		if hasRow {
			what = "both row and rows"
		}
		return nil, &Error{Operation: "insert", Type: ErrInvalidArguments, Message: "Invalid arguments: give exactly one of row and rows, not " + what,
			Suggestion: `Insert one row with "row": {"name": "Ann"}, or several with "rows": [{"name": "Ann"}, {"name": "Bob"}].`}
	}
	return insertOn(ctx, req, a, req.session)
}

func insertOn(ctx context.Context, req *request, a *insertArgs, sess *Session) (Result, *Error) {
	const op = "insert"
	cc := callContext{Database: req.db.Name}
	mask := req.db.Policy.MasksErrorValues()
	rel, err := req.db.cat.ResolveTable(ctx, req.who().role, a.Table)
	if err != nil {
		return nil, withOp(classify(ctx, err, cc, mask), op, "")
	}
	table := rel.Display()
	rows := a.Rows
	if a.Row != nil {
		rows = []map[string]any{a.Row}
	}
	keySet := map[string]bool{}
	for _, r := range rows {
		for k := range r {
			keySet[k] = true
		}
	}
	keys := make([]string, 0, len(keySet))
	for k := range keySet {
		keys = append(keys, k)
	}
	cols, keyOf, cerr := objectColumns(rel, keys, "rows")
	if cerr != nil {
		return nil, withOp(cerr, op, table)
	}
	if n := len(rows) * len(cols); n > maxBindParams {
		return nil, withOp(errorf(ErrInvalidArguments, fmt.Sprintf("Split the rows into calls of at most %d rows.", maxBindParams/max(1, len(cols))),
			"Invalid arguments: %d rows × %d columns is %d values, more than the %d one statement can carry", len(rows), len(cols), n, maxBindParams), op, table)
	}

	var sb strings.Builder
	sb.WriteString("INSERT INTO ")
	sb.WriteString(pgx.Identifier{rel.Schema, rel.Name}.Sanitize())
	var params []any
	var oids []uint32
	var paramCols []string // the column each $n binds, for errors
	if len(cols) == 0 {
		if len(rows) != 1 {
			return nil, withOp(errorf(ErrInvalidArguments, "Give at least one column value per row, or insert one row at a time.",
				"Invalid arguments: rows are empty objects"), op, table)
		}
		sb.WriteString(" DEFAULT VALUES")
	} else {
		sb.WriteString(" (")
		for i, c := range cols {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(pgx.Identifier{rel.Columns[c]}.Sanitize())
		}
		sb.WriteString(") VALUES ")
		for ri, r := range rows {
			if ri > 0 {
				sb.WriteString(", ")
			}
			sb.WriteByte('(')
			for i, c := range cols {
				if i > 0 {
					sb.WriteString(", ")
				}
				v, present := r[keyOf[c]]
				if !present {
					sb.WriteString("DEFAULT")
					continue
				}
				params = append(params, v)
				oids = append(oids, valueOID(rel, c))
				paramCols = append(paramCols, rel.Columns[c])
				sb.WriteByte('$')
				sb.WriteString(strconv.Itoa(len(params)))
			}
			sb.WriteByte(')')
		}
	}
	if a.OnConflict != nil {
		clause, oerr := onConflict(rel, a.OnConflict, cols)
		if oerr != nil {
			return nil, withOp(oerr, op, table)
		}
		sb.WriteString(clause)
	}
	return runDML(ctx, req, sess, op, rel, &sb, params, oids, paramCols, a.Returning, req.format(a.Format), false, 0)
}

// onConflict builds ON CONFLICT (cols) DO NOTHING | DO UPDATE SET c = EXCLUDED.c, ….
func onConflict(rel *catalog.Relation, oc *conflictArgs, inserted []int) (string, *Error) {
	target := listNames(oc.Columns)
	if len(target) == 0 {
		return "", errorf(ErrInvalidArguments, `Name the unique columns, e.g. "on_conflict": {"columns": ["email"], "action": "update"}.`,
			"Invalid arguments: on_conflict.columns is empty")
	}
	tcols, err := columnSet(rel, target, "on_conflict.columns")
	if err != nil {
		return "", err
	}
	names := make([]string, len(tcols))
	for i, c := range tcols {
		names[i] = pgx.Identifier{rel.Columns[c]}.Sanitize()
	}
	clause := " ON CONFLICT (" + strings.Join(names, ", ") + ")"
	if oc.Action != "update" {
		return clause + " DO NOTHING", nil
	}
	var ucols []int
	if list := listNames(oc.UpdateColumns); len(list) > 0 {
		if ucols, err = columnSet(rel, list, "on_conflict.update_columns"); err != nil {
			return "", err
		}
	} else {
		for _, c := range inserted {
			if !containsInt(tcols, c) {
				ucols = append(ucols, c)
			}
		}
	}
	if len(ucols) == 0 {
		return "", errorf(ErrInvalidArguments, `Use "action": "nothing", or list update_columns.`,
			"Invalid arguments: on_conflict update has no column to update (every inserted column is a conflict column)")
	}
	sets := make([]string, len(ucols))
	for i, c := range ucols {
		id := pgx.Identifier{rel.Columns[c]}.Sanitize()
		sets[i] = id + " = EXCLUDED." + id
	}
	return clause + " DO UPDATE SET " + strings.Join(sets, ", "), nil
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
