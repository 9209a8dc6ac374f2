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
)

// relation is a table, view, materialized view, foreign or partitioned table as the catalog has it.
type relation struct {
	schema, name string
	kind         byte // pg_class.relkind
	columns      []string
	colTypes     []uint32 // type OID per column
	colArray     []bool   // whether the column's type is an array type
	estimate     int64
	comment      string
	canSelect    bool
	denied       bool // hidden by the operator's policy: refused as not_allowed, never suggested
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

func (r *relation) qualified() string { return r.schema + "." + r.name }

// catalogSnapshot is an immutable view of the catalog, shared by concurrent calls.
type catalogSnapshot struct {
	loaded     time.Time
	rels       map[string]*relation // by schema + "." + name, exact case
	searchPath []string             // current_schemas(false) of the runner's role
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
       coalesce(x.names, '{}'), coalesce(x.types, '{}'), coalesce(x.arrays, '{}')
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN LATERAL (
  SELECT array_agg(a.attname::text ORDER BY a.attnum) AS names, array_agg(a.atttypid ORDER BY a.attnum) AS types,
         array_agg(t.typcategory = 'A' ORDER BY a.attnum) AS arrays
  FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
  WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped) x ON true
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
		if err := rows.Scan(&r.schema, &r.name, &kind, &r.estimate, &r.comment, &r.canSelect, &r.columns, &r.colTypes, &r.colArray); err != nil {
			return nil, fmt.Errorf("loading the catalog: %w", err)
		}
		r.kind = kind[0]
		r.denied = !db.Policy.tableVisible(r.schema, r.name)
		snap.rels[r.qualified()] = r
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

// identPart is one part of a possibly qualified name, with whether it was double-quoted.
type identPart struct {
	name   string
	quoted bool
}

// splitQualified splits `schema.name`, `"My Schema"."Tbl"` or `name` into its parts.
func splitQualified(s string) ([]identPart, bool) {
	var parts []identPart
	s = strings.TrimSpace(s)
	for {
		var p identPart
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for ; i < len(s); i++ {
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					break
				}
				b.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, false
			}
			p = identPart{name: b.String(), quoted: true}
			s = s[i+1:]
		} else {
			i := strings.IndexByte(s, '.')
			if i < 0 {
				i = len(s)
			}
			p = identPart{name: strings.TrimSpace(s[:i])}
			s = s[i:]
		}
		if p.name == "" {
			return nil, false
		}
		parts = append(parts, p)
		if s == "" {
			return parts, len(parts) <= 2
		}
		if s[0] != '.' {
			return nil, false
		}
		s = s[1:]
	}
}

// candidates lists the spellings PostgreSQL would accept for a part: quoted names match exactly,
// unquoted ones as written and folded to lower case.
func (p identPart) candidates() []string {
	if p.quoted || strings.ToLower(p.name) == p.name {
		return []string{p.name}
	}
	return []string{p.name, strings.ToLower(p.name)}
}

func (s *catalogSnapshot) lookup(parts []identPart) *relation {
	if len(parts) == 2 {
		for _, sc := range parts[0].candidates() {
			for _, n := range parts[1].candidates() {
				if r := s.rels[sc+"."+n]; r != nil {
					return r
				}
			}
		}
		return nil
	}
	for _, sc := range s.searchPath {
		for _, n := range parts[0].candidates() {
			if r := s.rels[sc+"."+n]; r != nil {
				return r
			}
		}
	}
	return nil
}

// resolveTable finds the relation an agent named, or explains which names exist.
func (db *Database) resolveTable(ctx context.Context, name string) (*relation, error) {
	parts, ok := splitQualified(name)
	if !ok {
		return nil, errorf(ErrInvalidTable, "Name a table as name or schema.name, e.g. orders or public.orders; call describe_schema to list tables.",
			"Table name %s is not a valid name", quoteForMessage(name))
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
		if r := snap.lookup(parts); r != nil {
			if r.denied {
				return nil, errorf(ErrNotAllowed, "Use another table; describe_schema lists the tables you may use.",
					"Table %s is not available under this database's policy", quoteForMessage(name))
			}
			return r, nil
		}
		if refresh {
			return nil, &Error{Type: ErrInvalidTable, SQLState: "42P01",
				Message:    fmt.Sprintf("Table %s does not exist or is not available", quoteForMessage(name)),
				Suggestion: tableSuggestion(snap, name)}
		}
	}
	panic("unreachable")
}

// quoteForMessage quotes an agent-supplied name for a message, cut to a sane length.
func quoteForMessage(s string) string {
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return fmt.Sprintf("%q", s)
}

func tableSuggestion(snap *catalogSnapshot, name string) string {
	var names []string
	for _, r := range snap.rels {
		if r.canSelect && !r.denied {
			names = append(names, r.display())
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "No tables are available to the runner's role; ask the operator to grant access."
	}
	if close := closest(name, names, 3); len(close) > 0 {
		return fmt.Sprintf("Did you mean %s? Available tables: %s", strings.Join(quoteAll(close), " or "), listSome(names, 30))
	}
	return "Available tables: " + listSome(names, 30)
}

func columnSuggestion(r *relation, name string) string {
	if close := closest(name, r.columns, 2); len(close) > 0 {
		return fmt.Sprintf("Did you mean %s? Available columns: %s", strings.Join(quoteAll(close), " or "), listSome(r.columns, 60))
	}
	return "Available columns: " + listSome(r.columns, 60)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func listSome(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return strings.Join(names[:max], ", ") + fmt.Sprintf(" … (%d more; describe_schema lists all)", len(names)-max)
}

// closest returns up to n names within a small edit distance of s (case-insensitive), best first.
func closest(s string, names []string, n int) []string {
	type scored struct {
		name string
		d    int
	}
	ls := strings.ToLower(s)
	var out []scored
	for _, name := range names {
		ln := strings.ToLower(name)
		d := EditDistance(ls, ln)
		limit := max(2, len([]rune(ls))/3)
		if d <= limit || (len(ls) >= 3 && (strings.Contains(ln, ls) || strings.Contains(ls, ln))) {
			out = append(out, scored{name, d})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].d < out[j].d })
	res := make([]string, 0, n)
	for _, sc := range out {
		if len(res) == n {
			break
		}
		res = append(res, sc.name)
	}
	return res
}

// EditDistance is the Levenshtein distance between a and b in runes, for "did you mean"
// suggestions.
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// resolveColumn returns the column's exact name in r, or an invalid_column error.
func resolveColumn(r *relation, name string) (string, *Error) {
	parts, ok := splitQualified(name)
	if ok && len(parts) == 1 {
		for _, c := range parts[0].candidates() {
			if slices.Contains(r.columns, c) {
				return c, nil
			}
		}
	}
	return "", &Error{Type: ErrInvalidColumn, SQLState: "42703", Table: r.display(),
		Message:    fmt.Sprintf("Column %s does not exist in table %s", quoteForMessage(name), r.display()),
		Suggestion: columnSuggestion(r, name)}
}

// splitList splits a comma-separated list, respecting double quotes.
func splitList(s string) []string {
	var out []string
	inQuote := false
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				out = append(out, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, strings.TrimSpace(s[start:]))
}

// listArg normalises a list argument given as a JSON array or a comma-separated string.
func listArg(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		if strings.TrimSpace(x) == "" {
			return nil
		}
		return splitList(x)
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, strings.TrimSpace(s))
			}
		}
		return out
	}
	return nil
}
