package tools

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgtools/pgtools/tools/words"
)

// relation is a table, view, materialized view, foreign or partitioned table as the catalog has it.
type relation struct {
	schema, name string
	kind         byte // pg_class.relkind
	columns      []string
	colTypes     []uint32 // type OID per column
	colArray     []bool   // whether the column's type is an array type
	colNotNull   []bool   // whether the column is NOT NULL
	// key is the columns of the table's primary key, else of its shortest unique index over NOT
	// NULL columns only (no expression, no predicate, not deferrable): what makes an order total
	// for paging (keyset.go). nil when there is none (views, tables without such a key).
	key       []string
	estimate  int64
	comment   string
	canSelect bool
	denied    bool // hidden by the operator's policy: refused as not_allowed, never suggested
	// rowSecurity: row-level security applies to the role this relation was loaded for (the
	// login role in a snapshot, an agent role in its roleView), so estimate counts rows that role
	// may not see.
	rowSecurity bool
	// restricted: columns holds only the columns an agent role holds a privilege on (roleView),
	// and whatever names a column (describe_schema's keys, indexes, defaults) is cut to them.
	restricted bool
	// colRead, when not nil, tells per column whether the role may SELECT it: a role without
	// table-level SELECT reads only some columns, and "*" means those (readList).
	colRead []bool
}

// readList is the select list that "all columns" means to the role r was loaded for: "*" where
// it may read every column, else its readable columns (an empty string where there are none).
func (r *relation) readList() string {
	if r.colRead == nil {
		return "*"
	}
	var names []string
	for i, ok := range r.colRead {
		if ok {
			names = append(names, pgx.Identifier{r.columns[i]}.Sanitize())
		}
	}
	return strings.Join(names, ", ")
}

// columnIndex returns the position of an exact column name, or -1.
func (r *relation) columnIndex(name string) int {
	return slices.Index(r.columns, name)
}

// display is the name shown to a model: unqualified in public, qualified elsewhere.
func (r *relation) display() string {
	if r.schema == "public" {
		return r.name
	}
	return r.schema + "." + r.name
}

// spelled is display as a model must write it to reach exactly this relation (spell).
func (r *relation) spelled() string {
	if r.schema == "public" {
		return spell(r.name)
	}
	return spell(r.schema) + "." + spell(r.name)
}

// relKey is the key of a relation in catalogSnapshot.rels. NUL cannot occur in a name, so
// schema "a.b" with table "c" and schema "a" with table "b.c" stay apart.
func relKey(schema, name string) string { return schema + "\x00" + name }

// catalogSnapshot is an immutable view of the catalog, shared by concurrent calls.
type catalogSnapshot struct {
	loaded     time.Time
	rels       map[string]*relation // by relKey(schema, name), exact names
	searchPath []string             // current_schemas(false) of the runner's role
	roles      roleViews            // each agent role's view, loaded on first use
}

// catalogCache keeps the catalog of one database so that resolving identifiers costs no round
// trip on the hot path. A miss reloads it (at most once per minReload), so tables created after
// start-up are found at once.
type catalogCache struct {
	cur       atomic.Pointer[catalogSnapshot]
	mu        sync.Mutex // serialises reloads
	ttl       time.Duration
	minReload time.Duration
}

const catalogQuery = `
SELECT n.nspname, c.relname, c.relkind::text, greatest(c.reltuples, 0)::bigint,
       coalesce(obj_description(c.oid, 'pg_class'), ''),
       has_table_privilege(c.oid, 'SELECT') OR has_any_column_privilege(c.oid, 'SELECT'),
       coalesce(x.names, '{}'), coalesce(x.types, '{}'), coalesce(x.arrays, '{}'),
       coalesce(x.notnull, '{}'), pk.cols,
       c.relrowsecurity AND NOT u.bypass AND (c.relforcerowsecurity OR NOT pg_has_role(c.relowner, 'USAGE'))
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN (SELECT rolsuper OR rolbypassrls AS bypass FROM pg_roles WHERE rolname = current_user) u
LEFT JOIN LATERAL (
  SELECT array_agg(a.attname::text ORDER BY a.attnum) AS names, array_agg(a.atttypid ORDER BY a.attnum) AS types,
         array_agg(t.typcategory = 'A' ORDER BY a.attnum) AS arrays, array_agg(a.attnotnull ORDER BY a.attnum) AS notnull
  FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) x ON true
LEFT JOIN LATERAL (
  SELECT ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, ord)
               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
               WHERE k.ord <= i.indnkeyatts ORDER BY k.ord) AS cols
  FROM pg_index i
  WHERE i.indrelid = c.oid AND i.indisunique AND i.indimmediate AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS NULL
    AND NOT EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum = ANY (i.indkey::int2[]) AND NOT a.attnotnull)
  ORDER BY i.indisprimary DESC, i.indnkeyatts, i.indexrelid LIMIT 1) pk ON true
WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND NOT c.relispartition`

func (db *Database) loadCatalog(ctx context.Context) (*catalogSnapshot, error) {
	conn, err := db.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, catalogQuery)
	if err != nil {
		return nil, fmt.Errorf("loading the catalog: %w", err)
	}
	defer rows.Close()
	snap := &catalogSnapshot{loaded: time.Now(), rels: map[string]*relation{}}
	for rows.Next() {
		r := &relation{}
		var kind string
		if err := rows.Scan(&r.schema, &r.name, &kind, &r.estimate, &r.comment, &r.canSelect, &r.columns, &r.colTypes, &r.colArray, &r.colNotNull, &r.key, &r.rowSecurity); err != nil {
			return nil, fmt.Errorf("loading the catalog: %w", err)
		}
		r.kind = kind[0]
		r.denied = !db.Policy.tableVisible(r.schema, r.name)
		snap.rels[relKey(r.schema, r.name)] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("loading the catalog: %w", err)
	}
	if err := conn.QueryRow(ctx, "SELECT current_schemas(false)::text[]").Scan(&snap.searchPath); err != nil {
		return nil, fmt.Errorf("loading the search path: %w", err)
	}
	return snap, nil
}

// snapshot returns the cached catalog, loading it when absent or older than the TTL; with
// refresh it reloads unless the cache is younger than minReload.
func (db *Database) catalog(ctx context.Context, refresh bool) (*catalogSnapshot, error) {
	c := &db.cat
	snap := c.cur.Load()
	stale := func(s *catalogSnapshot) bool {
		if s == nil {
			return true
		}
		age := time.Since(s.loaded)
		return age > c.ttlOrDefault() || (refresh && age >= c.minReload)
	}
	if !stale(snap) {
		return snap, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if snap = c.cur.Load(); !stale(snap) {
		return snap, nil
	}
	fresh, err := db.loadCatalog(ctx)
	if err != nil {
		return nil, err
	}
	c.cur.Store(fresh)
	return fresh, nil
}

func (c *catalogCache) ttlOrDefault() time.Duration {
	if c.ttl <= 0 {
		return 60 * time.Second
	}
	return c.ttl
}

// lookup finds the relation PostgreSQL would find for parts: a qualified name in its schema, an
// unqualified one in the first schema of the search path that has it. Names compare exactly
// after folding (identPart.folded); a part PostgreSQL could not read as a name matches nothing.
func (s *catalogSnapshot) lookup(parts []identPart) *relation {
	if !allPlain(parts) {
		return nil
	}
	if len(parts) == 2 {
		return s.rels[relKey(parts[0].folded(), parts[1].folded())]
	}
	for _, sc := range s.searchPath {
		if r := s.rels[relKey(sc, parts[0].folded())]; r != nil {
			return r
		}
	}
	return nil
}

// resolveTable finds the relation an agent named, or explains which names exist.
//
// role is the caller's role ("" for the runner's login role): a relation the role has no
// privilege on is answered as missing, and suggestions name only what it can read.
func (db *Database) resolveTable(ctx context.Context, role, name string) (*relation, error) {
	parts, ok := splitQualified(name)
	if !ok {
		suggestion := "Name a table as name or schema.name, e.g. orders or public.orders; call describe_schema to list tables."
		if snap, err := db.catalog(ctx, false); err == nil {
			if view, verr := db.viewFor(ctx, snap, role); verr == nil {
				suggestion = "Name a table as name or schema.name, e.g. orders or public.orders. " + tableSuggestion(snap, view, name, "")
			}
		}
		return nil, errorf(ErrInvalidTable, suggestion, "Table name %s is not a valid name", words.Quote(name))
	}
	// A name PostgreSQL could not read cannot appear by reloading the catalog: answer at once.
	plain := allPlain(parts)
	note := ""
	if !plain {
		note = unquotedNote
	}
	var prev *catalogSnapshot // the snapshot of the first lookup, which missed
	for _, refresh := range []bool{false, true} {
		if prev != nil {
			// The refresh below is skipped while the cache is younger than minReload, which
			// would answer a table created since the last load with "does not exist": wait out
			// the rest of that interval instead. Only misses wait, and they reload at most once
			// per minReload however many there are.
			if wait := db.cat.minReload - time.Since(prev.loaded); wait > 0 {
				timer := time.NewTimer(wait)
				select {
				case <-timer.C:
				case <-ctx.Done():
					timer.Stop()
					return nil, ctx.Err()
				}
			}
		}
		snap, err := db.catalog(ctx, refresh)
		if err != nil {
			return nil, err
		}
		prev = snap
		view, err := db.viewFor(ctx, snap, role)
		if err != nil {
			return nil, err
		}
		if r := snap.lookup(parts); r != nil && view.usableRel(r) {
			if r.denied {
				return nil, errorf(ErrNotAllowed, "Use another table; describe_schema lists the tables you may use.",
					"Table %s is not available under this database's policy", words.Quote(name))
			}
			return view.rel(r), nil
		}
		if refresh || !plain {
			return nil, &Error{Type: ErrInvalidTable, SQLState: "42P01",
				Message:    fmt.Sprintf("Table %s does not exist or is not available", words.Quote(name)),
				Suggestion: tableSuggestion(snap, view, partNames(parts), note)}
		}
	}
	panic("unreachable")
}

// partNames joins the parts' names as written inside any quotes, for comparing with catalog
// names in suggestions.
func partNames(parts []identPart) string {
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.name
	}
	return strings.Join(names, ".")
}

// tableSuggestion names the tables nearest to name that view's role can read and lists the others,
// each spelled so that writing it as shown reaches that table; note (may be empty) goes between
// the two.
func tableSuggestion(snap *catalogSnapshot, view *roleView, name, note string) string {
	var rels []*relation
	for _, r := range snap.rels {
		if view.readableRel(r) && !r.denied {
			rels = append(rels, r)
		}
	}
	if len(rels) == 0 {
		return "No tables are available to the runner's role; ask the operator to grant access."
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i].display() < rels[j].display() })
	names := make([]string, len(rels))
	spelled := make(map[string]string, len(rels))
	for i, r := range rels {
		names[i] = r.display()
		spelled[names[i]] = r.spelled()
	}
	return suggestNames(name, names, spelled, 3, 30, note, "tables")
}

func columnSuggestion(r *relation, name, note string) string {
	spelled := make(map[string]string, len(r.columns))
	for _, c := range r.columns {
		spelled[c] = spell(c)
	}
	return suggestNames(name, r.columns, spelled, 2, 60, note, "columns")
}

// suggestNames is "Did you mean …? note Available <what>: …" with up to n near misses of name
// among names and the first max names, each shown as spelled[name].
func suggestNames(name string, names []string, spelled map[string]string, n, max int, note, what string) string {
	shown := make([]string, len(names))
	for i, s := range names {
		shown[i] = spelled[s]
	}
	list := "Available " + what + ": " + listSome(shown, max)
	close := words.Closest(name, names, n)
	if len(close) == 0 {
		return note + list
	}
	for i, c := range close {
		close[i] = spelled[c]
	}
	return fmt.Sprintf("Did you mean %s? %s%s", strings.Join(words.QuoteAll(close), " or "), note, list)
}

func listSome(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:max], ", ") + fmt.Sprintf(" … (%d more; describe_schema lists all)", len(names)-max)
}

// resolveColumn returns the column's exact name in r, or an invalid_column error.
// The name is read as PostgreSQL reads it (see ident.go): one part, folded if unquoted.
func resolveColumn(r *relation, name string) (string, *Error) {
	parts, ok := splitQualified(name)
	query, note := name, ""
	if ok && len(parts) == 1 {
		if parts[0].plain() {
			if i := r.columnIndex(parts[0].folded()); i >= 0 {
				return r.columns[i], nil
			}
		} else {
			note = unquotedNote
		}
		query = parts[0].name
	}
	return "", &Error{Type: ErrInvalidColumn, SQLState: "42703", Table: r.display(),
		Message:    fmt.Sprintf("Column %s does not exist in table %s", words.Quote(name), r.display()),
		Suggestion: columnSuggestion(r, query, note)}
}
