package tools

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/catalog"
)

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

// inboundKey is a foreign key of another table that references the described one: Table joins
// to it on Columns = ReferencesColumns (the described table's).
type inboundKey struct {
	Name              string   `json:"name"`
	Table             string   `json:"table"`
	Columns           []string `json:"columns"`
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

// tableDetail is one table described: its columns (the first page of them), keys, indexes and
// the tables it joins to both ways (foreign keys out, and in: referencedBy).
type tableDetail struct {
	Schema        string       `json:"schema"`
	Name          string       `json:"name"`
	Type          string       `json:"type"`
	Comment       string       `json:"comment,omitempty"`
	EstimatedRows *int64       `json:"estimatedRows,omitempty"`
	Columns       []columnInfo `json:"columns"`
	// MoreColumns, in a listing with detail full, counts the columns left out; describe_schema
	// with the table pages through them.
	MoreColumns  int          `json:"moreColumns,omitempty"`
	PrimaryKey   []string     `json:"primaryKey"`
	ForeignKeys  []foreignKey `json:"foreignKeys"`
	ReferencedBy []inboundKey `json:"referencedBy"`
	Indexes      []indexInfo  `json:"indexes"`
	Checks       []checkInfo  `json:"checkConstraints,omitempty"`

	nums []int16 // the attnum of each of Columns, for paging
}

// columnsPage is a later page of a wide table's columns: the keys came with the first.
type columnsPage struct {
	Schema  string       `json:"schema"`
	Name    string       `json:"name"`
	Type    string       `json:"type"`
	Columns []columnInfo `json:"columns"`
}

// shown is what a page of d sends: d itself on the first page (keys read), else its columns.
func (d *tableDetail) shown(first bool) any {
	if first {
		return d
	}
	return &columnsPage{Schema: d.Schema, Name: d.Name, Type: d.Type, Columns: d.Columns}
}

var relKinds = map[byte]string{'r': "table", 'v': "view", 'm': "materialized view", 'f': "foreign table", 'p': "partitioned table"}

// The queries of describeTables, each over the tables whose names $1 holds (spelled for
// regclass). detailOIDs gives each name's OID; the others answer per table by OID. Each also
// returns the columns an entry names, so that a role's description can leave out what names a
// column the role may not use: refs of a column are those its default or generation expression
// reads; an index's are its key, INCLUDE, expression and predicate columns (the latter two as
// PostgreSQL records them in pg_depend).
const (
	detailOIDs = `(SELECT to_regclass(n) FROM unnest($1::text[]) n)`
	// detailOIDsStrict resolves one table as a cast does: a name gone since the catalog was
	// read is PostgreSQL's undefined_table error.
	detailOIDsStrictQuery = `SELECT n::regclass::oid FROM unnest($1::text[]) WITH ORDINALITY u(n, i) ORDER BY i`
	detailOIDsQuery       = `SELECT to_regclass(n)::oid FROM unnest($1::text[]) WITH ORDINALITY u(n, i) ORDER BY i`
	detailColumnsQuery    = `
SELECT a.attrelid, a.attnum, a.attname::text, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,
       pg_get_expr(d.adbin, d.adrelid), coalesce(col_description(a.attrelid, a.attnum), ''),
       coalesce((SELECT array_agg(r.attname::text) FROM pg_depend dep
                 JOIN pg_attribute r ON r.attrelid = dep.refobjid AND r.attnum = dep.refobjsubid
                 WHERE dep.refclassid = 'pg_class'::regclass AND dep.refobjid = a.attrelid AND dep.refobjsubid > 0
                   AND ((dep.classid = 'pg_attrdef'::regclass AND dep.objid = d.oid)
                     OR (dep.classid = 'pg_class'::regclass AND dep.objid = a.attrelid AND dep.objsubid = a.attnum))), '{}')
FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE a.attrelid IN ` + detailOIDs + ` AND a.attnum > $2 AND NOT a.attisdropped ORDER BY a.attrelid, a.attnum`
	detailConstraintsQuery = `
SELECT c.conrelid, c.conname::text, c.contype::text,
       coalesce((SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(c.conkey) WITH ORDINALITY k(n, ord)
                 JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n), '{}'),
       coalesce(c.confrelid::regclass::text, ''), coalesce(fn.nspname::text, ''), coalesce(fc.relname::text, ''),
       coalesce((SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(c.confkey) WITH ORDINALITY k(n, ord)
                 JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n), '{}'),
       pg_get_constraintdef(c.oid)
FROM pg_constraint c LEFT JOIN pg_class fc ON fc.oid = c.confrelid LEFT JOIN pg_namespace fn ON fn.oid = fc.relnamespace
WHERE c.conrelid IN ` + detailOIDs + ` ORDER BY c.conrelid, c.conname`
	// detailInboundQuery lists the foreign keys that reference the tables: a partition's copy
	// of its parent's key (conparentid) is the parent's.
	detailInboundQuery = `
SELECT c.confrelid, c.conname::text, c.conrelid::regclass::text, rn.nspname::text, r.relname::text,
       coalesce((SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(c.conkey) WITH ORDINALITY k(n, ord)
                 JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n), '{}'),
       coalesce((SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(c.confkey) WITH ORDINALITY k(n, ord)
                 JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n), '{}')
FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid JOIN pg_namespace rn ON rn.oid = r.relnamespace
WHERE c.confrelid IN ` + detailOIDs + ` AND c.contype = 'f' AND c.conparentid = 0
ORDER BY c.confrelid, rn.nspname, r.relname, c.conname`
	detailIndexesQuery = `
SELECT x.indrelid, i.relname::text, pg_get_indexdef(x.indexrelid), x.indisunique,
       coalesce((SELECT array_agg(a.attname::text) FROM pg_attribute a
                 WHERE a.attrelid = x.indrelid AND a.attnum > 0
                   AND (a.attnum = ANY (x.indkey::int2[])
                     OR a.attnum IN (SELECT dep.refobjsubid FROM pg_depend dep
                                     WHERE dep.classid = 'pg_class'::regclass AND dep.objid = x.indexrelid
                                       AND dep.refclassid = 'pg_class'::regclass AND dep.refobjid = x.indrelid))), '{}')
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
WHERE x.indrelid IN ` + detailOIDs + ` ORDER BY x.indrelid, i.relname`
)

// describeOpts says what describeTables reads of each table.
type describeOpts struct {
	strict   bool     // one table: a name gone since the catalog was read is an error, not an absence
	afterNum int16    // only columns after this attnum (a page token's)
	words    []string // only columns whose name or comment contains every word (lower case)
	keys     bool     // keys, indexes, checks and the tables joined both ways, besides the columns
	app      string   // the caller's application_name, set in the reading's transaction ("": the connection's)
}

// describeTables describes rels as role sees them, in their order; a table gone since the
// catalog was read is nil (strict: an error). For an agent role (role != "") a key, index,
// constraint or default that names a column the role may not use (Relation.Restricted) is left
// out whole: part of a key is no key, and an entry's name or definition would name the hidden
// column. A foreign key either way to a table the role may not use, or that the policy hides,
// is left out too. The login role sees the catalog's own.
func (db *Database) describeTables(ctx context.Context, role string, rels []*catalog.Relation, o describeOpts) ([]*tableDetail, error) {
	snap, err := db.cat.Snapshot(ctx, false)
	if err != nil {
		return nil, err
	}
	view, err := db.cat.ViewFor(ctx, snap, role)
	if err != nil {
		return nil, err
	}
	// other is the relation schema.name as the role sees it, if the role may use it. One newer
	// than the snapshot is the login role's if the policy shows it; an agent role's privileges
	// on it are unknown until the catalog is read again, so it is not named.
	other := func(schema, name string) *catalog.Relation {
		r := snap.Rels[catalog.RelKey(schema, name)]
		switch {
		case r == nil && role == "" && db.Policy.tableVisible(schema, name):
			return &catalog.Relation{Schema: schema, Name: name}
		case r == nil || r.Denied || !view.Usable(r):
			return nil
		}
		return view.Rel(r)
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
	names := make([]string, len(rels))
	for i, r := range rels {
		names[i] = pgx.Identifier{r.Schema, r.Name}.Sanitize()
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
	b := &pgx.Batch{}
	if o.app != "" {
		// First in the batch, so in its round trip: the reading runs named for its caller.
		b.Queue(sqlSetApp, o.app)
	}
	if o.strict {
		b.Queue(detailOIDsStrictQuery, names)
	} else {
		b.Queue(detailOIDsQuery, names)
	}
	b.Queue(detailColumnsQuery, names, o.afterNum)
	if o.keys {
		b.Queue(detailConstraintsQuery, names)
		b.Queue(detailInboundQuery, names)
		b.Queue(detailIndexesQuery, names)
	}
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if o.app != "" {
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}

	out := make([]*tableDetail, len(rels))
	byOID := map[uint32]int{}
	i := 0
	err = eachRow(br, func(rows pgx.Rows) error { // the OIDs, in the order of names
		defer func() { i++ }()
		var oid *uint32
		if err := rows.Scan(&oid); err != nil {
			return err
		}
		if oid == nil || i >= len(rels) {
			return nil
		}
		r := rels[i]
		byOID[*oid] = i
		d := &tableDetail{Schema: r.Schema, Name: r.Name, Type: relKinds[r.Kind], Comment: r.Comment, EstimatedRows: r.EstimateShown(), Columns: []columnInfo{}}
		if o.keys {
			d.PrimaryKey, d.ForeignKeys, d.ReferencedBy, d.Indexes = []string{}, []foreignKey{}, []inboundKey{}, []indexInfo{}
		}
		out[i] = d
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(br, func(rows pgx.Rows) error { // the columns
		var oid uint32
		var num int16
		var c columnInfo
		var refs []string
		if err := rows.Scan(&oid, &num, &c.Name, &c.Type, &c.Nullable, &c.Default, &c.Comment, &refs); err != nil {
			return err
		}
		i, ok := byOID[oid]
		if !ok {
			return nil
		}
		r, d := rels[i], out[i]
		if !shows(r, []string{c.Name}) || !matchesWords(o.words, c.Name, c.Comment) {
			return nil
		}
		if !shows(r, refs) {
			c.Default = nil
		}
		d.Columns = append(d.Columns, c)
		d.nums = append(d.nums, num)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !o.keys {
		return out, br.Close()
	}
	err = eachRow(br, func(rows pgx.Rows) error { // the constraints
		var oid uint32
		var name, kind, refTable, refSchema, refName, def string
		var cols, refCols []string
		if err := rows.Scan(&oid, &name, &kind, &cols, &refTable, &refSchema, &refName, &refCols, &def); err != nil {
			return err
		}
		i, ok := byOID[oid]
		if !ok || !shows(rels[i], cols) {
			return nil
		}
		d := out[i]
		switch kind {
		case "p":
			d.PrimaryKey = cols
		case "f":
			if ref := other(refSchema, refName); ref == nil || !shows(ref, refCols) {
				return nil
			}
			d.ForeignKeys = append(d.ForeignKeys, foreignKey{Name: name, Columns: cols, ReferencesTable: refTable, ReferencesColumns: refCols})
		case "c":
			d.Checks = append(d.Checks, checkInfo{Name: name, Definition: def})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(br, func(rows pgx.Rows) error { // the foreign keys that reference the tables
		var oid uint32
		var k inboundKey
		var schema, name string
		if err := rows.Scan(&oid, &k.Name, &k.Table, &schema, &name, &k.Columns, &k.ReferencesColumns); err != nil {
			return err
		}
		i, ok := byOID[oid]
		if !ok || !shows(rels[i], k.ReferencesColumns) {
			return nil
		}
		if from := other(schema, name); from == nil || !shows(from, k.Columns) {
			return nil
		}
		out[i].ReferencedBy = append(out[i].ReferencedBy, k)
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(br, func(rows pgx.Rows) error { // the indexes
		var oid uint32
		var ix indexInfo
		var cols []string
		if err := rows.Scan(&oid, &ix.Name, &ix.Definition, &ix.Unique, &cols); err != nil {
			return err
		}
		if i, ok := byOID[oid]; ok && shows(rels[i], cols) {
			out[i].Indexes = append(out[i].Indexes, ix)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, br.Close()
}

// eachRow reads the batch's next result, a row at a time.
func eachRow(br pgx.BatchResults, row func(pgx.Rows) error) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := row(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// matchesWords reports whether every word (lower case) is in the column's name or comment.
func matchesWords(words []string, name, comment string) bool {
	if len(words) == 0 {
		return true
	}
	name, comment = strings.ToLower(name), strings.ToLower(comment)
	for _, w := range words {
		if !strings.Contains(name, w) && !strings.Contains(comment, w) {
			return false
		}
	}
	return true
}
