package tools

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/wire"
)

// maxBindParams is the protocol's limit on parameters in one statement.
const maxBindParams = 65535

// previewRows is how many rows a dry run shows.
const previewRows = 10

// intentExample shows the caller's own call with autocommit added, values elided.
func intentExample(tool string, args map[string]any) string {
	keys := make([]string, 0, len(args))
	for k := range args {
		if k != "autocommit" && k != "session_id" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(tool + " {")
	for _, k := range keys {
		fmt.Fprintf(&b, "%q: …, ", k)
	}
	b.WriteString(`"autocommit": true}`)
	return b.String()
}

// returningClause resolves the returning argument (default all columns).
func returningClause(rel *relation, returning nameList) (string, *Error) {
	cols := returning.names()
	if len(cols) == 0 || (len(cols) == 1 && cols[0] == "*") {
		return " RETURNING *", nil
	}
	parts := make([]string, 0, len(cols))
	for _, c := range cols {
		name, err := resolveColumn(rel, c)
		if err != nil {
			return "", err
		}
		parts = append(parts, pgx.Identifier{name}.Sanitize())
	}
	return " RETURNING " + strings.Join(parts, ", "), nil
}

// valueOID is the parameter type to encode a value for column i with: json/jsonb and array
// columns need their JSON values shaped for them; other types are inferred by PostgreSQL.
func valueOID(rel *relation, i int) uint32 {
	t := rel.colTypes[i]
	if t == wire.OIDJSON || t == wire.OIDJSONB || rel.colArray[i] {
		return t
	}
	return 0
}

// objectColumns resolves the keys of JSON objects (rows, set) to the table's columns. It returns
// the column indexes in the table's column order and, for each, the key as the caller wrote it.
func objectColumns(rel *relation, keys []string, what string) ([]int, map[int]string, *Error) {
	sort.Strings(keys)
	keyOf := make(map[int]string, len(keys))
	idx := make([]int, 0, len(keys))
	for _, k := range keys {
		name, err := resolveColumn(rel, k)
		if err != nil {
			return nil, nil, err
		}
		i := rel.columnIndex(name)
		if prev, dup := keyOf[i]; dup {
			return nil, nil, errorf(ErrInvalidArguments, "Give each column once.", "Invalid arguments: %s names column %q twice (%q and %q)", what, name, prev, k)
		}
		keyOf[i] = k
		idx = append(idx, i)
	}
	sort.Ints(idx)
	return idx, keyOf, nil
}

// columnSet resolves a list of column names, in the table's column order.
func columnSet(rel *relation, names []string, what string) ([]int, *Error) {
	idx, _, err := objectColumns(rel, names, what)
	return idx, err
}

func writeResult(op, table string, out *writeOutcome, dryRun bool, maxBytes int) *WriteResult {
	affected := int(out.affected)
	n := out.rows.RowCount
	truncated := out.rows.Truncated
	res := &WriteResult{Operation: op, Table: table, AffectedRows: affected, RowCount: n,
		Rows: wire.Rows{Columns: out.rows.Columns, Data: out.rows.Data}, Truncated: truncated, DryRun: dryRun}
	switch {
	case dryRun:
		if n < affected {
			res.Truncated = true
		}
		state := "as they would be after the change"
		if op == "delete" {
			state = "as they are now, before the delete"
		}
		res.Hint = fmt.Sprintf("Dry run: %d rows would be affected (affectedRows); data shows %d of them (rowCount) %s. Nothing was changed. Call again without dry_run, with autocommit: true or a session_id, to apply it.", affected, n, state)
	case out.rows.ByBytes:
		res.Hint = fmt.Sprintf("The change is done; the returned rows were cut at the %d-byte response cap. Use returning with fewer columns to see more.", maxBytes)
	case truncated:
		res.Hint = "The change is done; not every returned row is shown."
	}
	return res
}

// insertData inserts one row or many in one statement.
func insertData(ctx context.Context, req *request) (Result, *Error) {
	// Checked here rather than by a top-level oneOf in the schema, which several agent frameworks
	// flatten or refuse.
	a := req.in.(*insertArgs)
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
	mask := !req.db.Policy.ShowErrorValues
	rel, err := req.db.resolveTable(ctx, req.who().role, a.Table)
	if err != nil {
		return nil, withOp(classify(ctx, err, cc, mask), op, "")
	}
	table := rel.display()
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
	sb.WriteString(pgx.Identifier{rel.schema, rel.name}.Sanitize())
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
			sb.WriteString(pgx.Identifier{rel.columns[c]}.Sanitize())
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
				paramCols = append(paramCols, rel.columns[c])
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
func onConflict(rel *relation, oc *conflictArgs, inserted []int) (string, *Error) {
	target := oc.Columns.names()
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
		names[i] = pgx.Identifier{rel.columns[c]}.Sanitize()
	}
	clause := " ON CONFLICT (" + strings.Join(names, ", ") + ")"
	if oc.Action != "update" {
		return clause + " DO NOTHING", nil
	}
	var ucols []int
	if list := oc.UpdateColumns.names(); len(list) > 0 {
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
		id := pgx.Identifier{rel.columns[c]}.Sanitize()
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

// affectedCap is the policy's max_affected_rows, lowered (never raised) by the call's own.
func affectedCap(req *request, arg count) int {
	capN := req.db.Policy.MaxAffectedRows
	if n := arg.or(0); n > 0 && n < int64(capN) {
		capN = int(n)
	}
	return capN
}

// updateData updates the rows matching where.
func updateData(ctx context.Context, req *request) (Result, *Error) {
	return changeRows(ctx, req, "update")
}

// deleteData deletes the rows matching where.
func deleteData(ctx context.Context, req *request) (Result, *Error) {
	return changeRows(ctx, req, "delete")
}

func changeRows(ctx context.Context, req *request, op string) (Result, *Error) {
	return changeRowsOn(ctx, req, op, req.in.(*changeArgs), req.session)
}

func changeRowsOn(ctx context.Context, req *request, op string, a *changeArgs, sess *Session) (Result, *Error) {
	where := strings.TrimSpace(a.Where)
	if where == "" {
		return nil, &Error{Operation: op, Type: ErrInvalidArguments, Message: "Invalid arguments: where must not be empty",
			Suggestion: fmt.Sprintf(`Give a where that selects the rows to %s, e.g. "id = $1" with params [42]. To really %s every row, say so: where "true" (still capped by max_affected_rows).`, op, op)}
	}
	cc := callContext{Database: req.db.Name}
	mask := !req.db.Policy.ShowErrorValues
	params, perr := paramList(a.Params.v)
	if perr != nil {
		return nil, withOp(perr, op, "")
	}
	rel, err := req.db.resolveTable(ctx, req.who().role, a.Table)
	if err != nil {
		return nil, withOp(classify(ctx, err, cc, mask), op, "")
	}
	table := rel.display()
	if a.DryRun {
		if e := dryRunCheck(ctx, req, sess, rel, where, params); e != nil {
			return nil, withOp(e, op, table)
		}
	}
	oids := make([]uint32, len(params))
	paramCols := make([]string, len(params)) // where's own $n bind no column
	var sb strings.Builder
	if op == "update" {
		set := a.Set
		keys := make([]string, 0, len(set))
		for k := range set {
			keys = append(keys, k)
		}
		cols, keyOf, cerr := objectColumns(rel, keys, "set")
		if cerr != nil {
			return nil, withOp(cerr, op, table)
		}
		sb.WriteString("UPDATE ")
		sb.WriteString(pgx.Identifier{rel.schema, rel.name}.Sanitize())
		sb.WriteString(" SET ")
		for i, c := range cols {
			if i > 0 {
				sb.WriteString(", ")
			}
			// set values follow the where params: where keeps $1…$n as the caller wrote them.
			params = append(params, set[keyOf[c]])
			oids = append(oids, valueOID(rel, c))
			paramCols = append(paramCols, rel.columns[c])
			sb.WriteString(pgx.Identifier{rel.columns[c]}.Sanitize())
			sb.WriteString(" = $")
			sb.WriteString(strconv.Itoa(len(params)))
		}
	} else {
		sb.WriteString("DELETE FROM ")
		sb.WriteString(pgx.Identifier{rel.schema, rel.name}.Sanitize())
	}
	sb.WriteString(" WHERE (\n")
	sb.WriteString(where)
	sb.WriteString("\n)")
	return runDML(ctx, req, sess, op, rel, &sb, params, oids, paramCols, a.Returning, req.format(a.Format), a.DryRun, affectedCap(req, a.MaxAffectedRows))
}

// noteOverCap tells, in a dry run's hint, that applying it would be refused by the cap.
func noteOverCap(res *WriteResult, affected int64, capN int) {
	if capN > 0 && affected > int64(capN) {
		res.Hint += fmt.Sprintf(" Note: %d rows is more than max_affected_rows (%d), so applying it as is would be refused.", affected, capN)
	}
}

// dryRunCheck evaluates where in a READ ONLY transaction before a dry run executes the change and
// rolls it back: a where that calls nextval, setval or another function with effects a rollback
// does not undo is refused by PostgreSQL there, so a dry run changes nothing at all.
func dryRunCheck(ctx context.Context, req *request, sess *Session, rel *relation, where string, params []any) *Error {
	sql := "SELECT 1 FROM " + pgx.Identifier{rel.schema, rel.name}.Sanitize() + " WHERE (\n" + where + "\n)"
	_, err := runReadOn(ctx, req.db, sess, req.who(), wire.Stmt{SQL: sql, Params: params, MaxRows: 1})
	if err == nil {
		return nil
	}
	e := req.statementError(ctx, err, stmtInfo{sql: sql, rel: rel, readOnly: true})
	if e.Type == ErrReadOnlyViolation {
		e.Message = "A dry run first evaluates where in a READ ONLY transaction, and this where changes something a rollback cannot undo (nextval, setval or another function with effects); nothing was run"
		e.Suggestion = "Remove the function with effects from where to preview the change; to try it for real, run it in a session (pg_tx begin, then session_id) and roll back."
	}
	return e
}

// runDML finishes a generated INSERT, UPDATE or DELETE in sb with its RETURNING clause, runs it
// (in the session, if any, else in its own transaction) and answers. maxAffected caps the rows
// it may change (0: no cap); a dry run reports the count, previews rows and rolls back.
func runDML(ctx context.Context, req *request, sess *Session, op string, rel *relation, sb *strings.Builder, params []any, oids []uint32, paramCols []string, returning nameList, format wire.Format, dry bool, maxAffected int) (Result, *Error) {
	table := rel.display()
	ret, rerr := returningClause(rel, returning)
	if rerr != nil {
		return nil, withOp(rerr, op, table)
	}
	sb.WriteString(ret)
	st := writeStmt{op: op, table: table, sql: sb.String(), params: params, colOIDs: oids,
		keepRows: req.db.Policy.MaxLimit, maxBytes: req.maxBytes, dryRun: dry, maxAffected: maxAffected, who: req.who(), format: format}
	if dry {
		st.keepRows = previewRows
		st.maxAffected = 0 // a dry run reports the count; the cap applies when it is applied
	}
	out, werr := runWriteOn(ctx, req.db, sess, st)
	if werr != nil {
		return nil, withOp(req.statementError(ctx, werr, stmtInfo{sql: st.sql, rel: rel, paramCols: paramCols}), op, table)
	}
	res := writeResult(op, table, out, dry, req.maxBytes)
	if dry {
		noteOverCap(res, out.affected, maxAffected)
	}
	return res, nil
}
