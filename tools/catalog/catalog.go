// Package catalog keeps what a database's catalog says about its relations (tables, views,
// materialized views, foreign and partitioned tables: columns, keys, estimates, comments) in a
// cache shared by concurrent calls, and each agent role's view of it: what that role may read
// or reach, down to the column. It resolves the names an agent sends as PostgreSQL would, and
// answers a miss with the nearest names the role can read — never one it cannot.
//
// A Cache is safe for concurrent use; a Snapshot and the relations in it are immutable.
// It knows nothing of tools, requests or transports: it needs a way to acquire a connection
// and the operator's table lists, given to New.
package catalog

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
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pgtools/pgtools/tools/internal/ident"
	"github.com/pgtools/pgtools/tools/internal/pgerr"
	"github.com/pgtools/pgtools/tools/words"
)

// Relation is a table, view, materialized view, foreign or partitioned table as the catalog has it.
type Relation struct {
	Schema, Name string
	Kind         byte // pg_class.relkind
	Columns      []string
	ColTypes     []uint32 // type OID per column
	ColArray     []bool   // whether the column's type is an array type
	ColNotNull   []bool   // whether the column is NOT NULL
	// Key is the columns of the table's primary Key, else of its shortest unique index over NOT
	// NULL columns only (no expression, no predicate, not deferrable): what makes an order total
	// for paging (tools/page). nil when there is none (views, tables without such a key).
	Key       []string
	Estimate  int64
	Comment   string
	CanSelect bool
	Denied    bool // hidden by the operator's policy: refused as not_allowed, never suggested
	// RowSecurity: row-level security applies to the role this relation was loaded for (the
	// login role in a snapshot, an agent role in its RoleView), so estimate counts rows that role
	// may not see.
	RowSecurity bool
	// Restricted: columns holds only the columns an agent role holds a privilege on (RoleView),
	// and whatever names a column (describe_schema's keys, indexes, defaults) is cut to them.
	Restricted bool
	// ColRead, when not nil, tells per column whether the role may SELECT it: a role without
	// table-level SELECT reads only some columns, and "*" means those (readList).
	ColRead []bool
}

// ReadList is the select list that "all columns" means to the role r was loaded for: "*" where
// it may read every column, else its readable columns (an empty string where there are none).
func (r *Relation) ReadList() string {
	if r.ColRead == nil {
		return "*"
	}
	var names []string
	for i, ok := range r.ColRead {
		if ok {
			names = append(names, pgx.Identifier{r.Columns[i]}.Sanitize())
		}
	}
	return strings.Join(names, ", ")
}

// ColumnIndex returns the position of an exact column name, or -1.
func (r *Relation) ColumnIndex(name string) int {
	return slices.Index(r.Columns, name)
}

// Display is the name shown to a model: unqualified in public, qualified elsewhere.
func (r *Relation) Display() string {
	if r.Schema == "public" {
		return r.Name
	}
	return r.Schema + "." + r.Name
}

// Spelled is display as a model must write it to reach exactly this relation (spell).
func (r *Relation) Spelled() string {
	if r.Schema == "public" {
		return ident.Spell(r.Name)
	}
	return ident.Spell(r.Schema) + "." + ident.Spell(r.Name)
}

// ReadableKey is r's key (Key) when the role r was loaded for may read every column of it, else
// nil: a keyset order may use only columns the caller reads back.
func (r *Relation) ReadableKey() []string {
	for _, k := range r.Key {
		i := r.ColumnIndex(k)
		if i < 0 || (r.ColRead != nil && !r.ColRead[i]) {
			return nil
		}
	}
	return r.Key
}

// EstimateShown is the row estimate to show, or nil where row-level security applies to the
// role r was loaded for (the estimate counts rows that role may not see).
func (r *Relation) EstimateShown() *int64 {
	if r.RowSecurity {
		return nil
	}
	n := r.Estimate
	return &n
}

// RelKey is the key of a relation in Snapshot.rels. NUL cannot occur in a name, so
// schema "a.b" with table "c" and schema "a" with table "b.c" stay apart.
func RelKey(schema, name string) string { return schema + "\x00" + name }

// Snapshot is an immutable view of the catalog, shared by concurrent calls.
type Snapshot struct {
	loaded     time.Time
	Rels       map[string]*Relation // by relKey(schema, name), exact names
	SearchPath []string             // current_schemas(false) of the runner's role
	roles      roleViews            // each agent role's view, loaded on first use
}

// Cache keeps the catalog of one database so that resolving identifiers costs no round
// trip on the hot path. A miss reloads it (at most once per minReload), so tables created after
// start-up are found at once.
type Cache struct {
	cur       atomic.Pointer[Snapshot]
	mu        sync.Mutex // serialises reloads
	ttl       time.Duration
	minReload time.Duration
	acquire   func(context.Context) (*pgxpool.Conn, error)
	visible   func(schema, name string) bool
}

// New returns an empty cache that loads the catalog over connections from acquire (which must
// apply the caller's pool wait) and marks Denied every relation visible reports false for (the
// operator's schema and table lists). A miss reloads at most once per minReload.
func New(acquire func(context.Context) (*pgxpool.Conn, error), visible func(schema, name string) bool, minReload time.Duration) *Cache {
	return &Cache{acquire: acquire, visible: visible, minReload: minReload}
}

// Invalidate drops the cached snapshot: the next call loads the catalog again.
func (c *Cache) Invalidate() { c.cur.Store(nil) }

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

func (c *Cache) load(ctx context.Context) (*Snapshot, error) {
	conn, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, catalogQuery)
	if err != nil {
		return nil, fmt.Errorf("loading the catalog: %w", err)
	}
	defer rows.Close()
	snap := &Snapshot{loaded: time.Now(), Rels: map[string]*Relation{}}
	for rows.Next() {
		r := &Relation{}
		var kind string
		if err := rows.Scan(&r.Schema, &r.Name, &kind, &r.Estimate, &r.Comment, &r.CanSelect, &r.Columns, &r.ColTypes, &r.ColArray, &r.ColNotNull, &r.Key, &r.RowSecurity); err != nil {
			return nil, fmt.Errorf("loading the catalog: %w", err)
		}
		r.Kind = kind[0]
		r.Denied = !c.visible(r.Schema, r.Name)
		snap.Rels[RelKey(r.Schema, r.Name)] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("loading the catalog: %w", err)
	}
	if err := conn.QueryRow(ctx, "SELECT current_schemas(false)::text[]").Scan(&snap.SearchPath); err != nil {
		return nil, fmt.Errorf("loading the search path: %w", err)
	}
	return snap, nil
}

// Snapshot returns the cached catalog, loading it when absent or older than the TTL (60
// seconds); with refresh it reloads unless the cache is younger than its minimum reload interval.
func (c *Cache) Snapshot(ctx context.Context, refresh bool) (*Snapshot, error) {
	snap := c.cur.Load()
	stale := func(s *Snapshot) bool {
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
	fresh, err := c.load(ctx)
	if err != nil {
		return nil, err
	}
	c.cur.Store(fresh)
	return fresh, nil
}

func (c *Cache) ttlOrDefault() time.Duration {
	if c.ttl <= 0 {
		return 60 * time.Second
	}
	return c.ttl
}

// Lookup finds the relation PostgreSQL would find for parts: a qualified name in its schema, an
// unqualified one in the first schema of the search path that has it. Names compare exactly
// after folding (identPart.folded); a part PostgreSQL could not read as a name matches nothing.
func (s *Snapshot) Lookup(parts []ident.Part) *Relation {
	if !ident.AllPlain(parts) {
		return nil
	}
	if len(parts) == 2 {
		return s.Rels[RelKey(parts[0].Folded(), parts[1].Folded())]
	}
	for _, sc := range s.SearchPath {
		if r := s.Rels[RelKey(sc, parts[0].Folded())]; r != nil {
			return r
		}
	}
	return nil
}

// ResolveTable finds the relation an agent named, or explains which names exist: an
// invalid_table error with the nearest names the role can read, or not_allowed for a table the
// policy hides.
//
// role is the caller's role ("" for the runner's login role): a relation the role has no
// privilege on is answered as missing, and suggestions name only what it can read.
func (c *Cache) ResolveTable(ctx context.Context, role, name string) (*Relation, error) {
	parts, ok := ident.SplitQualified(name)
	if !ok {
		suggestion := "Name a table as name or schema.name, e.g. orders or public.orders; call describe_schema to list tables."
		if snap, err := c.Snapshot(ctx, false); err == nil {
			if view, verr := c.ViewFor(ctx, snap, role); verr == nil {
				suggestion = "Name a table as name or schema.name, e.g. orders or public.orders. " + tableSuggestion(snap, view, name, "")
			}
		}
		return nil, pgerr.Errorf(pgerr.ErrInvalidTable, suggestion, "Table name %s is not a valid name", words.Quote(name))
	}
	// A name PostgreSQL could not read cannot appear by reloading the catalog: answer at once.
	plain := ident.AllPlain(parts)
	note := ""
	if !plain {
		note = ident.UnquotedNote
	}
	var prev *Snapshot // the snapshot of the first lookup, which missed
	for _, refresh := range []bool{false, true} {
		if prev != nil {
			// The refresh below is skipped while the cache is younger than minReload, which
			// would answer a table created since the last load with "does not exist": wait out
			// the rest of that interval instead. Only misses wait, and they reload at most once
			// per minReload however many there are.
			if wait := c.minReload - time.Since(prev.loaded); wait > 0 {
				timer := time.NewTimer(wait)
				select {
				case <-timer.C:
				case <-ctx.Done():
					timer.Stop()
					return nil, ctx.Err()
				}
			}
		}
		snap, err := c.Snapshot(ctx, refresh)
		if err != nil {
			return nil, err
		}
		prev = snap
		view, err := c.ViewFor(ctx, snap, role)
		if err != nil {
			return nil, err
		}
		if r := snap.Lookup(parts); r != nil && view.Usable(r) {
			if r.Denied {
				return nil, pgerr.Errorf(pgerr.ErrNotAllowed, "Use another table; describe_schema lists the tables you may use.",
					"Table %s is not available under this database's policy", words.Quote(name))
			}
			return view.Rel(r), nil
		}
		if refresh || !plain {
			return nil, &pgerr.Error{Type: pgerr.ErrInvalidTable, SQLState: "42P01",
				Message:    fmt.Sprintf("Table %s does not exist or is not available", words.Quote(name)),
				Suggestion: tableSuggestion(snap, view, partNames(parts), note)}
		}
	}
	panic("unreachable")
}

// partNames joins the parts' names as written inside any quotes, for comparing with catalog
// names in suggestions.
func partNames(parts []ident.Part) string {
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = p.Name
	}
	return strings.Join(names, ".")
}

// tableSuggestion names the tables nearest to name that view's role can read and lists the others,
// each spelled so that writing it as shown reaches that table; note (may be empty) goes between
// the two.
func tableSuggestion(snap *Snapshot, view *RoleView, name, note string) string {
	var rels []*Relation
	for _, r := range snap.Rels {
		if view.Readable(r) && !r.Denied {
			rels = append(rels, r)
		}
	}
	if len(rels) == 0 {
		return "No tables are available to the runner's role; ask the operator to grant access."
	}
	sort.Slice(rels, func(i, j int) bool { return rels[i].Display() < rels[j].Display() })
	names := make([]string, len(rels))
	spelled := make(map[string]string, len(rels))
	for i, r := range rels {
		names[i] = r.Display()
		spelled[names[i]] = r.Spelled()
	}
	return suggestNames(name, names, spelled, 3, 30, note, "tables")
}

func ColumnSuggestion(r *Relation, name, note string) string {
	spelled := make(map[string]string, len(r.Columns))
	for _, c := range r.Columns {
		spelled[c] = ident.Spell(c)
	}
	return suggestNames(name, r.Columns, spelled, 2, 60, note, "columns")
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

// ResolveColumn returns the column's exact name in r, or an invalid_column error.
// The name is read as PostgreSQL reads it (see ident.go): one part, folded if unquoted.
func ResolveColumn(r *Relation, name string) (string, *pgerr.Error) {
	parts, ok := ident.SplitQualified(name)
	query, note := name, ""
	if ok && len(parts) == 1 {
		if parts[0].Plain() {
			if i := r.ColumnIndex(parts[0].Folded()); i >= 0 {
				return r.Columns[i], nil
			}
		} else {
			note = ident.UnquotedNote
		}
		query = parts[0].Name
	}
	return "", &pgerr.Error{Type: pgerr.ErrInvalidColumn, SQLState: "42703", Table: r.Display(),
		Message:    fmt.Sprintf("Column %s does not exist in table %s", words.Quote(name), r.Display()),
		Suggestion: ColumnSuggestion(r, query, note)}
}
