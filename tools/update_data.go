package tools

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/internal/wire"
)

// updateData updates the rows matching where. update_data and delete_data (delete_data.go) share
// one implementation, changeRows: the same where, params, returning, dry run and cap.
func updateData(ctx context.Context, req *request, a *changeArgs) (Result, *Error) {
	return changeRowsOn(ctx, req, "update", a, req.session)
}

func changeRowsOn(ctx context.Context, req *request, op string, a *changeArgs, sess *Session) (Result, *Error) {
	where := strings.TrimSpace(a.Where)
	if where == "" {
		return nil, &Error{Operation: op, Type: ErrInvalidArguments, Message: "Invalid arguments: where must not be empty",
			Suggestion: fmt.Sprintf(`Give a where that selects the rows to %s, e.g. "id = $1" with params [42]. To really %s every row, say so: where "true" (still capped by max_affected_rows).`, op, op)}
	}
	cc := callContext{Database: req.db.Name}
	mask := req.db.Policy.MasksErrorValues()
	params, perr := paramList(a.Params)
	if perr != nil {
		return nil, withOp(perr, op, "")
	}
	rel, err := req.db.cat.ResolveTable(ctx, req.who().role, a.Table)
	if err != nil {
		return nil, withOp(classify(ctx, err, cc, mask), op, "")
	}
	table := rel.Display()
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
		sb.WriteString(pgx.Identifier{rel.Schema, rel.Name}.Sanitize())
		sb.WriteString(" SET ")
		for i, c := range cols {
			if i > 0 {
				sb.WriteString(", ")
			}
			// set values follow the where params: where keeps $1…$n as the caller wrote them.
			params = append(params, set[keyOf[c]])
			oids = append(oids, valueOID(rel, c))
			paramCols = append(paramCols, rel.Columns[c])
			sb.WriteString(pgx.Identifier{rel.Columns[c]}.Sanitize())
			sb.WriteString(" = $")
			sb.WriteString(strconv.Itoa(len(params)))
		}
	} else {
		sb.WriteString("DELETE FROM ")
		sb.WriteString(pgx.Identifier{rel.Schema, rel.Name}.Sanitize())
	}
	sb.WriteString(" WHERE (\n")
	sb.WriteString(where)
	sb.WriteString("\n)")
	return runDML(ctx, req, sess, op, rel, &sb, params, oids, paramCols, a.Returning, req.format(a.Format), a.DryRun, affectedCap(req, a.MaxAffectedRows))
}

// dryRunCheck evaluates where in a READ ONLY transaction before a dry run executes the change and
// rolls it back: a where that calls nextval, setval or another function with effects a rollback
// does not undo is refused by PostgreSQL there, so a dry run changes nothing at all.
func dryRunCheck(ctx context.Context, req *request, sess *Session, rel *catalog.Relation, where string, params []any) *Error {
	sql := "SELECT 1 FROM " + pgx.Identifier{rel.Schema, rel.Name}.Sanitize() + " WHERE (\n" + where + "\n)"
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
