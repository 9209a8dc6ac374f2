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
	"github.com/jackc/pgx/v5/pgxpool"
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
       has_any_column_privilege(c.oid, 'SELECT'), -- true too with SELECT on the whole table
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

// colRow is one row of columnsQuery.
type colRow struct {
	oid, typ       uint32
	num            int16
	array, notNull bool
	name           string
}

// load reads the catalog. When a second connection is free at once (Cache.spare) and the
// catalog is big or not read yet, the columns and keys are read on it, in a transaction that
// imports the first one's snapshot, while the first reads the relations: the relations' scan
// spends most of its time in privilege checks, the columns' in reading pg_attribute, and the
// two take about as long.
func (c *Cache) load(ctx context.Context) (*Snapshot, error) {
	started := time.Now()
	fail := func(err error) (*Snapshot, error) { return nil, fmt.Errorf("loading the catalog: %w", err) }
	conn, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	var spare *pgxpool.Conn
	if prev := c.cur.Load(); c.spare != nil && (prev == nil || big(prev)) {
		if spare, err = c.spare(ctx); err != nil {
			spare = nil
		} else {
			defer spare.Release()
		}
	}
	begin := func() (pgx.Tx, error) {
		return conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	}
	tx, err := begin()
	if err != nil {
		return fail(err)
	}
	var snapshotID string
	if spare != nil {
		// A standby in recovery cannot export a snapshot, for one: then one transaction reads
		// everything, one scan after the other.
		if err := tx.QueryRow(ctx, "SELECT pg_export_snapshot()").Scan(&snapshotID); err != nil || !validSnapshotID(snapshotID) {
			snapshotID = ""
			_ = tx.Rollback(ctx)
			if tx, err = begin(); err != nil {
				return fail(err)
			}
		}
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a read-only transaction has nothing to lose
	snap := &Snapshot{Rels: map[string]*Relation{}}
	// JIT compiles these scans for longer than they run.
	if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
		return fail(err)
	}
	if err := tx.QueryRow(ctx, "SELECT current_schemas(false)::text[]").Scan(&snap.SearchPath); err != nil {
		return fail(err)
	}
	var cols []colRow
	colsDone := make(chan error, 1)
	var keys map[uint32][]loadKey
	if snapshotID != "" {
		go func() {
			var err error
			cols, keys, err = readColumnsIn(ctx, spare, snapshotID)
			colsDone <- err
		}()
	}
	byOID, err := c.readRelations(ctx, tx, snap)
	if snapshotID != "" {
		err = cmp.Or(err, <-colsDone)
	} else if err == nil {
		if cols, err = readColumns(ctx, tx); err == nil {
			keys, err = readKeys(ctx, tx)
		}
	}
	if err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	assemble(byOID, cols, keys)
	snap.loaded = time.Now()
	snap.took = snap.loaded.Sub(started)
	return snap, nil
}

// validSnapshotID accepts what pg_export_snapshot returns (hexadecimal digits and dashes), so
// that it can be written into SET TRANSACTION SNAPSHOT, which takes no parameter.
func validSnapshotID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, r := range id {
		if !(r == '-' || (r >= '0' && r <= '9') || (r >= 'A' && r <= 'F') || (r >= 'a' && r <= 'f')) {
			return false
		}
	}
	return true
}

// readColumnsIn reads the columns and keys on conn in a transaction that sees snapshot id.
func readColumnsIn(ctx context.Context, conn *pgxpool.Conn, id string) ([]colRow, map[uint32][]loadKey, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a read-only transaction has nothing to lose
	if _, err := tx.Exec(ctx, "SET TRANSACTION SNAPSHOT '"+id+"'"); err != nil {
		return nil, nil, err
	}
	if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
		return nil, nil, err
	}
	cols, err := readColumns(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	keys, err := readKeys(ctx, tx)
	if err != nil {
		return nil, nil, err
	}
	return cols, keys, tx.Commit(ctx)
}

// building is a relation being assembled, with the attnums of its columns.
type building struct {
	rel  *Relation
	nums []int16
}

// readRelations reads the relations into snap.Rels, and returns them by OID.
func (c *Cache) readRelations(ctx context.Context, tx pgx.Tx, snap *Snapshot) (map[uint32]*building, error) {
	rows, err := tx.Query(ctx, relationsQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	byOID := map[uint32]*building{}
	for rows.Next() {
		r := &Relation{}
		var kind string
		if err := rows.Scan(&r.OID, &r.Schema, &r.Name, &kind, &r.Estimate, &r.Comment, &r.CanSelect, &r.RowSecurity); err != nil {
			return nil, err
		}
		r.Kind = kind[0]
		r.Denied = !c.visible(r.Schema, r.Name)
		snap.Rels[RelKey(r.Schema, r.Name)] = r
		byOID[r.OID] = &building{rel: r}
	}
	return byOID, rows.Err()
}

// readColumns reads the columns of every relation: a quarter of a million rows at 50,000
// tables, read off the wire as they come, without pgx's per-value scan plans. Column names
// repeat across tables (id, created_at …): each is kept once.
func readColumns(ctx context.Context, tx pgx.Tx) ([]colRow, error) {
	rows, err := tx.Query(ctx, columnsQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names := map[string]string{}
	var out []colRow
	fields := rows.FieldDescriptions()
	for rows.Next() {
		raw := rows.RawValues()
		if len(raw) != 6 || len(fields) != 6 {
			return nil, fmt.Errorf("columns query: %d values", len(raw))
		}
		oid, err1 := wireUint(raw[0], fields[0].Format)
		num, err2 := wireUint(raw[1], fields[1].Format)
		typ, err3 := wireUint(raw[3], fields[3].Format)
		array, err4 := wireBool(raw[4], fields[4].Format)
		notNull, err5 := wireBool(raw[5], fields[5].Format)
		if err := cmp.Or(err1, err2, err3, err4, err5); err != nil {
			return nil, err
		}
		name, ok := names[string(raw[2])]
		if !ok {
			name = string(raw[2])
			names[name] = name
		}
		out = append(out, colRow{oid: uint32(oid), typ: uint32(typ), num: int16(num), array: array, notNull: notNull, name: name})
	}
	return out, rows.Err()
}

// readKeys reads the unique indexes that can order a page, by relation OID.
func readKeys(ctx context.Context, tx pgx.Tx) (map[uint32][]loadKey, error) {
	rows, err := tx.Query(ctx, keysQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	keys := map[uint32][]loadKey{}
	for rows.Next() {
		var oid uint32
		var k loadKey
		var indkey string // int2vector's text: attnums between spaces
		if err := rows.Scan(&oid, &k.index, &indkey, &k.nkey, &k.primary); err != nil {
			return nil, err
		}
		for _, f := range strings.Fields(indkey) {
			n, err := strconv.ParseInt(f, 10, 16)
			if err != nil {
				return nil, fmt.Errorf("index key %q: %w", indkey, err)
			}
			k.attnums = append(k.attnums, int16(n))
		}
		keys[oid] = append(keys[oid], k)
	}
	return keys, rows.Err()
}

// assemble gives each relation its columns, in attnum order, and its key. The columns of all
// relations share five arrays, each relation a capped window of them: a handful of
// allocations instead of several per relation.
func assemble(byOID map[uint32]*building, cols []colRow, keys map[uint32][]loadKey) {
	names, types := make([]string, len(cols)), make([]uint32, len(cols))
	arrays, notNull, nums := make([]bool, len(cols)), make([]bool, len(cols)), make([]int16, len(cols))
	for i, c := range cols {
		names[i], types[i], arrays[i], notNull[i], nums[i] = c.name, c.typ, c.array, c.notNull, c.num
	}
	// pg_attribute holds a table's columns together: each run of one relation is one window.
	for i := 0; i < len(cols); {
		j := i + 1
		for j < len(cols) && cols[j].oid == cols[i].oid {
			j++
		}
		if b := byOID[cols[i].oid]; b != nil { // else not among the relations the snapshot read
			r := b.rel
			if r.Columns == nil {
				r.Columns, r.ColTypes, r.ColArray, r.ColNotNull, b.nums = names[i:j:j], types[i:j:j], arrays[i:j:j], notNull[i:j:j], nums[i:j:j]
			} else { // a second run (ALTER TABLE … ADD COLUMN stored apart): append copies
				r.Columns, r.ColTypes = append(r.Columns, names[i:j]...), append(r.ColTypes, types[i:j]...)
				r.ColArray, r.ColNotNull, b.nums = append(r.ColArray, arrays[i:j]...), append(r.ColNotNull, notNull[i:j]...), append(b.nums, nums[i:j]...)
			}
		}
		i = j
	}
	for oid, b := range byOID {
		r := b.rel
		if !slices.IsSorted(b.nums) {
			sort.Sort(byNum{b.nums, r})
		}
		if r.Columns == nil {
			r.Columns, r.ColTypes, r.ColArray, r.ColNotNull = []string{}, []uint32{}, []bool{}, []bool{}
		}
		if ks := keys[oid]; len(ks) > 0 {
			r.Key = pickKey(r, b.nums, ks)
		}
	}
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
