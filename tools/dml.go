package tools

// This file holds what the tools that generate DML (insert_data, update_data, delete_data) share:
// column checks, RETURNING, the affected-rows cap and running the statement.

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/internal/wire"
)

// previewRows is how many rows a dry run shows.
const previewRows = 10

// returningClause resolves the returning argument. The default is every column the caller's role
// may read (RETURNING needs SELECT on each column it returns), and nothing where it may read none:
// a role that may only insert still inserts.
func returningClause(rel *catalog.Relation, returning nameList) (string, *Error) {
	cols := listNames(returning)
	if len(cols) == 0 || (len(cols) == 1 && cols[0] == "*") {
		if list := rel.ReadList(); list != "" {
			return " RETURNING " + list, nil
		}
		return "", nil
	}
	parts := make([]string, 0, len(cols))
	for _, c := range cols {
		name, err := catalog.ResolveColumn(rel, c)
		if err != nil {
			return "", err
		}
		parts = append(parts, pgx.Identifier{name}.Sanitize())
	}
	return " RETURNING " + strings.Join(parts, ", "), nil
}

// valueOID is the parameter type to encode a value for column i with: json/jsonb and array
// columns need their JSON values shaped for them; other types are inferred by PostgreSQL.
func valueOID(rel *catalog.Relation, i int) uint32 {
	t := rel.ColTypes[i]
	if t == wire.OIDJSON || t == wire.OIDJSONB || rel.ColArray[i] {
		return t
	}
	return 0
}

// objectColumns resolves the keys of JSON objects (rows, set) to the table's columns. It returns
// the column indexes in the table's column order and, for each, the key as the caller wrote it.
func objectColumns(rel *catalog.Relation, keys []string, what string) ([]int, map[int]string, *Error) {
	sort.Strings(keys)
	keyOf := make(map[int]string, len(keys))
	idx := make([]int, 0, len(keys))
	for _, k := range keys {
		name, err := catalog.ResolveColumn(rel, k)
		if err != nil {
			return nil, nil, err
		}
		i := rel.ColumnIndex(name)
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
func columnSet(rel *catalog.Relation, names []string, what string) ([]int, *Error) {
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
		changed := "Nothing was changed."
		if note := sequenceNote(out.sequences); note != "" {
			changed = "No row was changed. " + note
		}
		res.Hint = fmt.Sprintf("Dry run: %d rows would be affected (affectedRows); data shows %d of them (rowCount) %s. %s Call again without dry_run, with autocommit: true or a session_id, to apply it.", affected, n, state, changed)
	case out.rows.ByBytes:
		res.Hint = fmt.Sprintf("The change is done; the returned rows were cut at the %d-byte response cap. Use returning with fewer columns to see more.", maxBytes)
	case truncated:
		res.Hint = "The change is done; not every returned row is shown."
	}
	return res
}

// affectedCap is the policy's max_affected_rows, lowered (never raised) by the call's own.
func affectedCap(req *request, arg count) int {
	capN := req.db.Policy.MaxAffectedRows
	if n := arg.or(0); n > 0 && n < int64(capN) {
		capN = int(n)
	}
	return capN
}

// runDML finishes a generated INSERT, UPDATE or DELETE in sb with its RETURNING clause, runs it
// (in the session, if any, else in its own transaction) and answers. maxAffected caps the rows
// it may change (0: no cap); a dry run reports the count, previews rows and rolls back.
func runDML(ctx context.Context, req *request, sess *Session, op string, rel *catalog.Relation, sb *strings.Builder, params []any, oids []uint32, paramCols []string, returning nameList, format wire.Format, dry bool, maxAffected int) (Result, *Error) {
	table := rel.Display()
	ret, rerr := returningClause(rel, returning)
	if rerr != nil {
		return nil, withOp(rerr, op, table)
	}
	sb.WriteString(ret)
	st := writeStmt{approval: req.approval, budget: req.budget, op: op, table: table, sql: sb.String(), params: params, colOIDs: oids,
		keepRows: req.db.Policy.MaxLimit, maxBytes: req.maxBytes, dryRun: dry, maxAffected: maxAffected, who: req.who(), format: format}
	if dry {
		st.keepRows = previewRows
		st.maxAffected = 0 // a dry run reports the count; the cap applies when it is applied
	}
	out, werr := runWriteOn(ctx, req.db, sess, st)
	if werr != nil {
		return nil, withOp(req.statementError(ctx, werr, stmtInfo{sql: st.sql, rel: rel, paramCols: paramCols}), op, table)
	}
	if sess != nil {
		req.db.sessionWarm.used(op, rel, sessionIdentity(sess))
	}
	res := writeResult(op, table, out, dry, req.maxBytes)
	if dry {
		noteOverCap(res, out.affected, maxAffected)
	}
	return res, nil
}

// noteOverCap tells, in a dry run's hint, that applying it would be refused by the cap.
func noteOverCap(res *WriteResult, affected int64, capN int) {
	if capN > 0 && affected > int64(capN) {
		res.Hint += fmt.Sprintf(" Note: %d rows is more than max_affected_rows (%d), so applying it as is would be refused.", affected, capN)
	}
}
