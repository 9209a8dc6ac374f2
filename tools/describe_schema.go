package tools

import (
	"context"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/catalog"
	"github.com/pgtools/pgtools/tools/internal/ident"
	"github.com/pgtools/pgtools/tools/internal/wire"
)

// tableSummary is one entry of describe_schema's list. EstimatedRows is absent where row-level
// security applies to the caller's role: the planner's estimate counts every row of the table,
// including those the role may not see.
type tableSummary struct {
	Schema        string `json:"schema"`
	Name          string `json:"name"`
	Type          string `json:"type"`
	EstimatedRows *int64 `json:"estimatedRows,omitempty"`
	Comment       string `json:"comment,omitempty"`
}

type columnInfo struct {
	Name     string  `json:"name"`
	Type     string  `json:"type"`
	Nullable bool    `json:"nullable"`
	Default  *string `json:"default,omitempty"`
	Comment  string  `json:"comment,omitempty"`
}

type foreignKey struct {
	Name              string   `json:"name"`
	Columns           []string `json:"columns"`
	ReferencesTable   string   `json:"referencesTable"`
	ReferencesColumns []string `json:"referencesColumns"`
}

type indexInfo struct {
	Name       string `json:"name"`
	Definition string `json:"definition"`
	Unique     bool   `json:"unique"`
}

type checkInfo struct {
	Name       string `json:"name"`
	Definition string `json:"definition"`
}

type tableDetail struct {
	Schema        string       `json:"schema"`
	Name          string       `json:"name"`
	Type          string       `json:"type"`
	Comment       string       `json:"comment,omitempty"`
	EstimatedRows *int64       `json:"estimatedRows,omitempty"`
	Columns       []columnInfo `json:"columns"`
	PrimaryKey    []string     `json:"primaryKey"`
	ForeignKeys   []foreignKey `json:"foreignKeys"`
	Indexes       []indexInfo  `json:"indexes"`
	Checks        []checkInfo  `json:"checkConstraints,omitempty"`
}

var relKinds = map[byte]string{'r': "table", 'v': "view", 'm': "materialized view", 'f': "foreign table", 'p': "partitioned table"}

// describeSchema lists the tables an agent may use, or describes one table.
func describeSchema(ctx context.Context, req *request, a *describeArgs) (Result, *Error) {
	const op = "describe"
	cc := callContext{ReadOnly: true, Database: req.db.Name}
	mask := req.db.Policy.MasksErrorValues()
	if name := a.Table; name != "" {
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
		detail, err := req.db.describeTable(ctx, role, rel)
		if err != nil {
			return nil, withOp(classify(ctx, err, cc, mask), op, rel.Display())
		}
		data, _ := wire.Marshal(detail)
		return &SchemaResult{Operation: op, Table: rel.Display(), Data: data}, nil
	}
	snap, err := req.db.cat.Snapshot(ctx, true)
	if err != nil {
		return nil, withOp(classify(ctx, err, cc, mask), op, "")
	}
	schema := a.Schema
	view, err := req.db.cat.ViewFor(ctx, snap, req.who().role)
	if err != nil {
		return nil, withOp(classify(ctx, err, cc, mask), op, "")
	}
	list := []tableSummary{}
	for _, r := range snap.Rels {
		if !view.Readable(r) || r.Denied || (schema != "" && r.Schema != schema) {
			continue
		}
		list = append(list, tableSummary{Schema: r.Schema, Name: r.Name, Type: relKinds[r.Kind], EstimatedRows: view.Rel(r).EstimateShown(), Comment: r.Comment})
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].Schema != list[j].Schema {
			return list[i].Schema < list[j].Schema
		}
		return list[i].Name < list[j].Name
	})
	data, _ := wire.Marshal(list)
	n := len(list)
	res := &SchemaResult{Operation: op, RowCount: &n, Data: data}
	if n == 0 {
		res.Hint = "No tables are visible to the runner's role with this filter."
	} else {
		res.Hint = "Call describe_schema with table to see a table's columns, keys and indexes."
	}
	return res, nil
}

// The queries of describeTable. Each also returns the columns an entry names, so that a role's
// description can leave out what names a column the role may not use: refs of a column are those
// its default or generation expression reads; an index's are its key, INCLUDE, expression and
// predicate columns (the latter two as PostgreSQL records them in pg_depend).
const (
	columnsQuery = `
SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), coalesce(col_description(a.attrelid, a.attnum), ''),
       coalesce((SELECT array_agg(r.attname::text) FROM pg_depend dep
                 JOIN pg_attribute r ON r.attrelid = dep.refobjid AND r.attnum = dep.refobjsubid
                 WHERE dep.refclassid = 'pg_class'::regclass AND dep.refobjid = a.attrelid AND dep.refobjsubid > 0
                   AND ((dep.classid = 'pg_attrdef'::regclass AND dep.objid = d.oid)
                     OR (dep.classid = 'pg_class'::regclass AND dep.objid = a.attrelid AND dep.objsubid = a.attnum))), '{}')
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`
	constraintsQuery = `
SELECT c.conname::text, c.contype::text,
       coalesce((SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(c.conkey) WITH ORDINALITY k(n, ord)
                 JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n), '{}'),
       coalesce(c.confrelid::regclass::text, ''), coalesce(fn.nspname::text, ''), coalesce(fc.relname::text, ''),
       coalesce((SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(c.confkey) WITH ORDINALITY k(n, ord)
                 JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n), '{}'),
       pg_get_constraintdef(c.oid)
FROM pg_constraint c LEFT JOIN pg_class fc ON fc.oid = c.confrelid LEFT JOIN pg_namespace fn ON fn.oid = fc.relnamespace
WHERE c.conrelid = $1::regclass ORDER BY c.conname`
	indexesQuery = `
SELECT i.relname::text, pg_get_indexdef(x.indexrelid), x.indisunique,
       coalesce((SELECT array_agg(a.attname::text) FROM pg_attribute a
                 WHERE a.attrelid = x.indrelid AND a.attnum > 0
                   AND (a.attnum = ANY (x.indkey::int2[])
                     OR a.attnum IN (SELECT dep.refobjsubid FROM pg_depend dep
                                     WHERE dep.classid = 'pg_class'::regclass AND dep.objid = x.indexrelid
                                       AND dep.refclassid = 'pg_class'::regclass AND dep.refobjid = x.indrelid))), '{}')
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
WHERE x.indrelid = $1::regclass ORDER BY i.relname`
)

// describeTable describes rel as role sees it. For an agent role (role != "") a key, index,
// constraint or default that names a column the role may not use (relation.restricted), and a
// foreign key to a table it cannot use, is left out whole: part of a key is no key, and an
// entry's name or definition would name the hidden column. The login role sees the catalog's own.
func (db *Database) describeTable(ctx context.Context, role string, rel *catalog.Relation) (*tableDetail, error) {
	var snap *catalog.Snapshot
	var view *catalog.RoleView
	if role != "" {
		var err error
		if snap, err = db.cat.Snapshot(ctx, false); err != nil {
			return nil, err
		}
		if view, err = db.cat.ViewFor(ctx, snap, role); err != nil {
			return nil, err
		}
	}
	shows := func(r *catalog.Relation, cols []string) bool {
		if !r.Restricted {
			return true
		}
		for _, c := range cols {
			if r.ColumnIndex(c) < 0 {
				return false
			}
		}
		return true
	}
	conn, err := db.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a read-only transaction has nothing to lose
	reg := pgx.Identifier{rel.Schema, rel.Name}.Sanitize()
	d := &tableDetail{Schema: rel.Schema, Name: rel.Name, Type: relKinds[rel.Kind], Comment: rel.Comment, EstimatedRows: rel.EstimateShown(),
		Columns: []columnInfo{}, PrimaryKey: []string{}, ForeignKeys: []foreignKey{}, Indexes: []indexInfo{}}
	rows, err := tx.Query(ctx, columnsQuery, reg)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var c columnInfo
		var refs []string
		if err := rows.Scan(&c.Name, &c.Type, &c.Nullable, &c.Default, &c.Comment, &refs); err != nil {
			return nil, err
		}
		if !shows(rel, []string{c.Name}) {
			continue
		}
		if !shows(rel, refs) {
			c.Default = nil
		}
		d.Columns = append(d.Columns, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = tx.Query(ctx, constraintsQuery, reg)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name, kind, refTable, refSchema, refName, def string
		var cols, refCols []string
		if err := rows.Scan(&name, &kind, &cols, &refTable, &refSchema, &refName, &refCols, &def); err != nil {
			return nil, err
		}
		if !shows(rel, cols) {
			continue
		}
		switch kind {
		case "p":
			d.PrimaryKey = cols
		case "f":
			if view != nil {
				ref := snap.Rels[catalog.RelKey(refSchema, refName)]
				if ref == nil || !view.Usable(ref) || !shows(view.Rel(ref), refCols) {
					continue
				}
			}
			d.ForeignKeys = append(d.ForeignKeys, foreignKey{Name: name, Columns: cols, ReferencesTable: refTable, ReferencesColumns: refCols})
		case "c":
			d.Checks = append(d.Checks, checkInfo{Name: name, Definition: def})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = tx.Query(ctx, indexesQuery, reg)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var ix indexInfo
		var cols []string
		if err := rows.Scan(&ix.Name, &ix.Definition, &ix.Unique, &cols); err != nil {
			return nil, err
		}
		if shows(rel, cols) {
			d.Indexes = append(d.Indexes, ix)
		}
	}
	return d, rows.Err()
}
