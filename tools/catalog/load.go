package catalog

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The catalog is read in three plain scans (relations, their columns, their unique indexes) in
// one REPEATABLE READ transaction, so they agree, and assembled here. One query that aggregates
// columns and picks keys per relation costs 2.5 s at 50,000 tables (of which 0.25 s is JIT
// compiling it); these cost about 0.4 s there, most of it reading pg_attribute.
const (
	// relFilter keeps the relations pgtools serves: tables, views, materialized views, foreign
	// and partitioned tables outside the system schemas, partitions left out (their parent
	// stands for them).
	relFilter = `c.relkind IN ('r', 'v', 'm', 'f', 'p')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND NOT c.relispartition`
	relationsQuery = `
SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text, greatest(c.reltuples, 0)::bigint,
       coalesce(d.description, ''),
       has_table_privilege(c.oid, 'SELECT') OR has_any_column_privilege(c.oid, 'SELECT'),
       c.relrowsecurity AND NOT u.bypass AND (c.relforcerowsecurity OR NOT pg_has_role(c.relowner, 'USAGE'))
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN (SELECT rolsuper OR rolbypassrls AS bypass FROM pg_roles WHERE rolname = current_user) u
LEFT JOIN pg_description d ON d.objoid = c.oid AND d.classoid = 'pg_class'::regclass AND d.objsubid = 0
WHERE ` + relFilter
	columnsQuery = `
SELECT a.attrelid, a.attnum, a.attname::text, a.atttypid, t.typcategory = 'A', a.attnotnull
FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE a.attnum > 0 AND NOT a.attisdropped AND ` + relFilter
	// keysQuery lists the unique indexes that can order a page (Relation.Key): immediate, valid,
	// without expression or predicate. pickKey chooses among them.
	keysQuery = `
SELECT i.indrelid, i.indexrelid, i.indkey::text, i.indnkeyatts, i.indisprimary
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE i.indisunique AND i.indimmediate AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL AND ` + relFilter
)

// loadKey is one row of keysQuery.
type loadKey struct {
	index   uint32
	attnums []int16
	nkey    int16
	primary bool
}

func (c *Cache) load(ctx context.Context) (*Snapshot, error) {
	started := time.Now()
	conn, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("loading the catalog: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a read-only transaction has nothing to lose
	// JIT compiles these scans for longer than they run.
	b := &pgx.Batch{}
	b.Queue("SET LOCAL jit = off")
	b.Queue("SELECT current_schemas(false)::text[]")
	b.Queue(relationsQuery)
	b.Queue(columnsQuery)
	b.Queue(keysQuery)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	fail := func(err error) (*Snapshot, error) { return nil, fmt.Errorf("loading the catalog: %w", err) }
	if _, err := br.Exec(); err != nil {
		return fail(err)
	}
	snap := &Snapshot{Rels: map[string]*Relation{}}
	if err := br.QueryRow().Scan(&snap.SearchPath); err != nil {
		return fail(err)
	}
	// Relations by OID, and the attnums of each one's columns until they are known to be in
	// order. Column names repeat across tables (id, created_at …): each is kept once.
	type building struct {
		rel    *Relation
		nums   []int16
		keys   []loadKey
		sorted bool
	}
	byOID := map[uint32]*building{}
	rows, err := br.Query()
	if err != nil {
		return fail(err)
	}
	for rows.Next() {
		r := &Relation{}
		var kind string
		if err := rows.Scan(&r.OID, &r.Schema, &r.Name, &kind, &r.Estimate, &r.Comment, &r.CanSelect, &r.RowSecurity); err != nil {
			return fail(err)
		}
		r.Kind = kind[0]
		r.Denied = !c.visible(r.Schema, r.Name)
		snap.Rels[RelKey(r.Schema, r.Name)] = r
		byOID[r.OID] = &building{rel: r, sorted: true}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	names := map[string]string{}
	rows, err = br.Query()
	if err != nil {
		return fail(err)
	}
	var cur *building
	var curOID uint32
	// A quarter of a million rows at 50,000 tables: read from the wire as they come, without
	// pgx's per-value scan plans.
	fields := rows.FieldDescriptions()
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 6 || len(fields) != 6 {
			return fail(fmt.Errorf("columns query: %d values", len(raw)))
		}
		oid, err1 := wireUint(raw[0], fields[0].Format)
		num, err2 := wireUint(raw[1], fields[1].Format)
		typ, err3 := wireUint(raw[3], fields[3].Format)
		array, err4 := wireBool(raw[4], fields[4].Format)
		notNull, err5 := wireBool(raw[5], fields[5].Format)
		if err := cmp.Or(err1, err2, err3, err4, err5); err != nil {
			return fail(err)
		}
		name := raw[2]
		// pg_attribute holds a table's columns together, so the relation changes seldom.
		if cur == nil || uint32(oid) != curOID {
			cur, curOID = byOID[uint32(oid)], uint32(oid)
		}
		if cur == nil {
			continue // created since the relations were read: not in this snapshot
		}
		n, ok := names[string(name)]
		if !ok {
			n = string(name)
			names[n] = n
		}
		r := cur.rel
		if len(cur.nums) > 0 && int16(num) < cur.nums[len(cur.nums)-1] {
			cur.sorted = false
		}
		cur.nums = append(cur.nums, int16(num))
		r.Columns, r.ColTypes = append(r.Columns, n), append(r.ColTypes, uint32(typ))
		r.ColArray, r.ColNotNull = append(r.ColArray, array), append(r.ColNotNull, notNull)
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	rows, err = br.Query()
	if err != nil {
		return fail(err)
	}
	for rows.Next() {
		var oid uint32
		var k loadKey
		var indkey string // int2vector's text: attnums between spaces
		if err := rows.Scan(&oid, &k.index, &indkey, &k.nkey, &k.primary); err != nil {
			return fail(err)
		}
		for _, f := range strings.Fields(indkey) {
			n, err := strconv.ParseInt(f, 10, 16)
			if err != nil {
				return fail(fmt.Errorf("index key %q: %w", indkey, err))
			}
			k.attnums = append(k.attnums, int16(n))
		}
		if b := byOID[oid]; b != nil {
			b.keys = append(b.keys, k)
		}
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if err := br.Close(); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	for _, b := range byOID {
		r := b.rel
		if !b.sorted {
			// ALTER TABLE … ADD COLUMN can store a column apart from the others.
			sort.Sort(byNum{b.nums, r})
		}
		if r.Columns == nil {
			r.Columns, r.ColTypes, r.ColArray, r.ColNotNull = []string{}, []uint32{}, []bool{}, []bool{}
		}
		if len(b.keys) > 0 {
			r.Key = pickKey(r, b.nums, b.keys)
		}
	}
	snap.loaded = time.Now()
	snap.took = snap.loaded.Sub(started)
	return snap, nil
}

// pickKey is Relation.Key: the columns of the primary key, else of the unique index with the
// fewest key columns (then the oldest), among those whose columns are all NOT NULL; nil if none.
// nums are the attnums of r's columns.
func pickKey(r *Relation, nums []int16, keys []loadKey) []string {
	col := func(n int16) int { return slices.Index(nums, n) }
	var best *loadKey
	for i := range keys {
		k := &keys[i]
		usable := len(k.attnums) > 0 && int(k.nkey) <= len(k.attnums)
		for _, n := range k.attnums {
			if i := col(n); i < 0 || !r.ColNotNull[i] {
				usable = false
			}
		}
		if !usable {
			continue
		}
		if best == nil || (k.primary && !best.primary) ||
			(k.primary == best.primary && (k.nkey < best.nkey || (k.nkey == best.nkey && k.index < best.index))) {
			best = k
		}
	}
	if best == nil {
		return nil
	}
	out := make([]string, best.nkey)
	for i, n := range best.attnums[:best.nkey] {
		out[i] = r.Columns[col(n)]
	}
	return out
}

// byNum sorts a relation's columns by attnum.
type byNum struct {
	nums []int16
	r    *Relation
}

func (b byNum) Len() int           { return len(b.nums) }
func (b byNum) Less(i, j int) bool { return b.nums[i] < b.nums[j] }
func (b byNum) Swap(i, j int) {
	r := b.r
	b.nums[i], b.nums[j] = b.nums[j], b.nums[i]
	r.Columns[i], r.Columns[j] = r.Columns[j], r.Columns[i]
	r.ColTypes[i], r.ColTypes[j] = r.ColTypes[j], r.ColTypes[i]
	r.ColArray[i], r.ColArray[j] = r.ColArray[j], r.ColArray[i]
	r.ColNotNull[i], r.ColNotNull[j] = r.ColNotNull[j], r.ColNotNull[i]
}

// wireUint reads an oid or integer column's value as PostgreSQL sent it: text, or big-endian
// binary of 2, 4 or 8 bytes.
func wireUint(b []byte, format int16) (uint64, error) {
	if format == pgx.BinaryFormatCode {
		switch len(b) {
		case 2:
			return uint64(int64(int16(binary.BigEndian.Uint16(b)))), nil
		case 4:
			return uint64(binary.BigEndian.Uint32(b)), nil
		case 8:
			return binary.BigEndian.Uint64(b), nil
		}
		return 0, fmt.Errorf("an integer of %d bytes", len(b))
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return uint64(n), err
}

// wireBool reads a boolean column's value: text t or f, or one binary byte.
func wireBool(b []byte, format int16) (bool, error) {
	switch {
	case len(b) != 1:
		return false, fmt.Errorf("a boolean of %d bytes", len(b))
	case format == pgx.BinaryFormatCode:
		return b[0] != 0, nil
	}
	return b[0] == 't', nil
}
