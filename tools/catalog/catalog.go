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
	OID          uint32 // pg_class.oid, as of the snapshot the relation was loaded in
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
	took       time.Duration        // how long loading it took: what a reload will cost
	Rels       map[string]*Relation // by relKey(schema, name), exact names
	SearchPath []string             // current_schemas(false) of the runner's role
	roles      roleViews            // each agent role's view, loaded on first use
	login      readableList         // the relations the login role may read, sorted, made on first use
}

// Loaded is when the snapshot was read from the database.
func (s *Snapshot) Loaded() time.Time { return s.loaded }

// Took is how long reading the snapshot took.
func (s *Snapshot) Took() time.Duration { return s.took }

// Cache keeps the catalog of one database so that resolving identifiers costs no round
// trip on the hot path. A miss reloads it (at most once per minReload), so tables created after
// start-up are found at once.
type Cache struct {
	cur       atomic.Pointer[Snapshot]
	mu        sync.Mutex    // serialises reloads
	gen       atomic.Uint64 // counts Invalidate calls: a load begun before one is not kept
	reloading atomic.Bool   // a background reload is under way
	ttl       time.Duration
	minReload time.Duration
	acquire   func(context.Context) (*pgxpool.Conn, error)
	spare     func(context.Context) (*pgxpool.Conn, error) // a second connection, only if one is free at once (nil: none)
	visible   func(schema, name string) bool
}

// New returns an empty cache that loads the catalog over connections from acquire (which must
// apply the caller's pool wait) and marks Denied every relation visible reports false for (the
// operator's schema and table lists). A miss reloads at most once per minReload.
func New(acquire func(context.Context) (*pgxpool.Conn, error), visible func(schema, name string) bool, minReload time.Duration) *Cache {
	return &Cache{acquire: acquire, visible: visible, minReload: minReload}
}

// WithSpare lets a load read part of a big catalog on a second connection, from spare, which
// must answer at once (an error when none is free): the first call on a database of 50,000
// tables then waits for the longer of two scans instead of both. It returns c.
func (c *Cache) WithSpare(spare func(context.Context) (*pgxpool.Conn, error)) *Cache {
	c.spare = spare
	return c
}

// Invalidate drops the cached snapshot: the next call loads the catalog again, and a load under
// way (which may have read the catalog before the change that calls Invalidate) is not kept.
func (c *Cache) Invalidate() {
	c.gen.Add(1)
	c.cur.Store(nil)
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
		if refresh || !plain || !c.worthReloading(ctx, snap, parts) {
			return nil, &pgerr.Error{Type: pgerr.ErrInvalidTable, SQLState: "42P01",
				Message:    fmt.Sprintf("Table %s does not exist or is not available", words.Quote(name)),
				Suggestion: tableSuggestion(snap, view, partNames(parts), note)}
		}
	}
	panic("unreachable")
}

// existsQuery asks whether a name reaches a relation pgtools serves, as the login role's search
// path reads it.
const existsQuery = `SELECT EXISTS (SELECT FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass($1) AND ` + relFilter + `)`

// worthReloading reports whether a miss of parts in snap could be answered by reloading the
// catalog. A name snap has is one the role may not use: a reload can only show a grant made
// since, which is worth it where reloading is cheap. A name snap lacks is asked of PostgreSQL
// (one round trip, where a reload reads the whole catalog): only one that exists now is worth
// it, so a typo is answered at once at any catalog size. When the question fails (no USAGE on
// the schema the name gives, say) the reload decides, as it always did.
func (c *Cache) worthReloading(ctx context.Context, snap *Snapshot, parts []ident.Part) bool {
	if snap.Lookup(parts) != nil {
		return !big(snap)
	}
	names := make(pgx.Identifier, len(parts))
	for i, p := range parts {
		names[i] = p.Folded()
	}
	conn, err := c.acquire(ctx)
	if err != nil {
		return true
	}
	defer conn.Release()
	var exists bool
	if err := conn.QueryRow(ctx, existsQuery, names.Sanitize()).Scan(&exists); err != nil {
		return true
	}
	return exists
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

// tableSuggestion names the tables nearest to name that view's role can read and, when there are
// few, lists the others, each spelled so that writing it as shown reaches that table; note (may
// be empty) goes between the two. Past a few dozen tables it names only the near misses and
// points to search: a list of thousands helps no one.
func tableSuggestion(snap *Snapshot, view *RoleView, name, note string) string {
	rels, names := snap.readable(view)
	if len(rels) == 0 {
		return "No tables are available to the runner's role; ask the operator to grant access."
	}
	return suggestNames(name, names, func(i int) string { return rels[i].Spelled() }, 3, 30, note, "tables",
		"describe_schema with search finds one by a word of its name, its columns or its comment")
}

// ColumnSuggestion is the suggestion of an invalid_column error: the columns of r nearest to
// name, and all of them when there are few; note (may be empty) goes between the two.
func ColumnSuggestion(r *Relation, name, note string) string {
	return suggestNames(name, r.Columns, func(i int) string { return ident.Spell(r.Columns[i]) }, 2, 60, note, "columns",
		"describe_schema with this table and search finds one by a word of its name or comment")
}

// suggestNames is "Did you mean …? note Available <what>: …" with up to n near misses of name
// among names, and every name when there are at most max, else their number and find (how to
// look one up). spell(i) is names[i] as the model must write it.
func suggestNames(name string, names []string, spell func(i int) string, n, max int, note, what, find string) string {
	var list string
	if len(names) <= max {
		shown := make([]string, len(names))
		for i := range names {
			shown[i] = spell(i)
		}
		list = "Available " + what + ": " + strings.Join(shown, ", ")
	} else {
		list = fmt.Sprintf("There are %d %s; %s.", len(names), what, find)
	}
	near := words.ClosestIndexes(name, names, n)
	if len(near) == 0 {
		return note + list
	}
	close := make([]string, len(near))
	for i, k := range near {
		close[i] = spell(k)
	}
	return fmt.Sprintf("Did you mean %s? %s%s", strings.Join(words.QuoteAll(close), " or "), note, list)
}

// readableList is the relations a role may read that the policy does not hide, in the order of
// their display names: what suggestions choose from, made once per snapshot and role.
type readableList struct {
	once  sync.Once
	rels  []*Relation
	names []string // Display of each
}

// Readable returns the relations view's role may read and the policy does not hide (nil view:
// the login role's), sorted by display name; made once per snapshot and role. The caller must
// not modify the slice.
func (s *Snapshot) Readable(view *RoleView) []*Relation {
	rels, _ := s.readable(view)
	return rels
}

// readable returns view's readable list of s (nil view: the login role's) and the display names.
func (s *Snapshot) readable(view *RoleView) ([]*Relation, []string) {
	l := &s.login
	if view != nil {
		l = &view.list
	}
	l.once.Do(func() {
		for key, r := range s.Rels {
			// The view's maps are keyed like Rels: no key to build per relation.
			readable := r.CanSelect
			if view != nil {
				readable = view.readable[key]
			}
			if readable && !r.Denied {
				l.rels = append(l.rels, r)
			}
		}
		l.names = make([]string, len(l.rels))
		for i, r := range l.rels {
			l.names[i] = r.Display()
		}
		sort.Sort(byName{l.rels, l.names})
	})
	return l.rels, l.names
}

// byName sorts relations by their display names.
type byName struct {
	rels  []*Relation
	names []string
}

func (b byName) Len() int           { return len(b.rels) }
func (b byName) Less(i, j int) bool { return b.names[i] < b.names[j] }
func (b byName) Swap(i, j int) {
	b.rels[i], b.rels[j] = b.rels[j], b.rels[i]
	b.names[i], b.names[j] = b.names[j], b.names[i]
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
