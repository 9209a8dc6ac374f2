package catalog

import (
	"context"
	"fmt"
	"sync"
)

// RoleView is what one role may use of a catalog snapshot: the relations it can read (listed by
// describe_schema and offered in suggestions), those it can reach at all (resolved; a role with
// INSERT but not SELECT may still insert), and the role's own copy of each relation whose columns
// or row-level security differ from the snapshot's.
//
// The columns a role sees are those information_schema.columns shows it: the columns it holds
// SELECT, INSERT, UPDATE or REFERENCES on (per column or for the whole table), or all of them when
// it has the privileges of the owner. One set serves every tool: a column the role may insert but
// not read is named to it (an insert needs the name), and PostgreSQL refuses the wrong kind of use
// with permission_denied. Any other column is answered as one that does not exist.
type RoleView struct {
	readable map[string]bool // by relKey: true for each relation the role may read
	// rels holds the role's relation for each relation it may use: the snapshot's own where the
	// role sees it whole, else a copy (forRole). A relation missing here is one it may not use.
	rels map[string]*Relation // by relKey
	list readableList         // what suggestions name, made on first use
}

// roleViewQuery loads a role's view in one query. cols is NULL where the role may use every column
// (the owner, a table-level privilege, or a relation it cannot use at all), so that the common
// case costs no per-column check; readCols, likewise NULL where it may read every column, lists
// those it holds SELECT on.
const roleViewQuery = `
WITH u AS (SELECT coalesce((SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = $1), false) AS bypass)
SELECT n.nspname, c.relname, p.readable, p.usable,
       c.relrowsecurity AND NOT u.bypass AND (c.relforcerowsecurity OR NOT p.owner),
       CASE WHEN p.owner OR NOT (p.readable OR p.usable) OR has_table_privilege($1, c.oid, 'SELECT,INSERT,UPDATE,REFERENCES') THEN NULL
            ELSE ARRAY(SELECT a.attname::text FROM pg_attribute a
                       WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                         AND has_column_privilege($1, c.oid, a.attnum, 'SELECT,INSERT,UPDATE,REFERENCES')
                       ORDER BY a.attnum) END,
       CASE WHEN p.owner OR NOT (p.readable OR p.usable) OR has_table_privilege($1, c.oid, 'SELECT') THEN NULL
            ELSE ARRAY(SELECT a.attname::text FROM pg_attribute a
                       WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                         AND has_column_privilege($1, c.oid, a.attnum, 'SELECT')
                       ORDER BY a.attnum) END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace CROSS JOIN u
CROSS JOIN LATERAL (SELECT pg_has_role($1, c.relowner, 'USAGE') AS owner,
       has_schema_privilege($1, n.oid, 'USAGE') AND (has_table_privilege($1, c.oid, 'SELECT') OR has_any_column_privilege($1, c.oid, 'SELECT')) AS readable,
       has_schema_privilege($1, n.oid, 'USAGE') AND (has_table_privilege($1, c.oid, 'SELECT,INSERT,UPDATE,DELETE') OR has_any_column_privilege($1, c.oid, 'SELECT,INSERT,UPDATE')) AS usable) p
WHERE (p.readable OR p.usable) AND c.relkind IN ('r', 'v', 'm', 'f', 'p')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND NOT c.relispartition`

// roleViews caches each role's view of one snapshot; a reloaded catalog starts empty.
type roleViews struct {
	mu    sync.Mutex
	views map[string]*RoleView
}

// names returns up to max roles whose views are loaded.
func (rv *roleViews) names(max int) []string {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	out := make([]string, 0, min(max, len(rv.views)))
	for role := range rv.views {
		if len(out) == max {
			break
		}
		out = append(out, role)
	}
	return out
}

// ViewFor returns role's view of snap, loading it on first use (one query per role and
// snapshot). The empty role is the login role, whose view is the snapshot's own.
func (c *Cache) ViewFor(ctx context.Context, snap *Snapshot, role string) (*RoleView, error) {
	if role == "" {
		return nil, nil
	}
	snap.roles.mu.Lock()
	defer snap.roles.mu.Unlock()
	if v, ok := snap.roles.views[role]; ok {
		return v, nil
	}
	conn, err := c.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, roleViewQuery, role)
	if err != nil {
		return nil, fmt.Errorf("loading role %s's view of the catalog: %w", role, err)
	}
	defer rows.Close()
	type access struct {
		key                   string
		readable, rowSecurity bool
		cols, readCols        []string // nil: every column
	}
	var list []access
	for rows.Next() {
		var schema, name string
		var a access
		var usable bool // or readable: the query lists no other relation
		if err := rows.Scan(&schema, &name, &a.readable, &usable, &a.rowSecurity, &a.cols, &a.readCols); err != nil {
			return nil, fmt.Errorf("loading role %s's view of the catalog: %w", role, err)
		}
		a.key = RelKey(schema, name)
		list = append(list, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("loading role %s's view of the catalog: %w", role, err)
	}
	// The query lists only what the role may use, so the view is as small as the role's reach.
	v := &RoleView{readable: make(map[string]bool, len(list)), rels: make(map[string]*Relation, len(list))}
	for _, a := range list {
		if a.readable {
			v.readable[a.key] = true
		}
		switch r := snap.Rels[a.key]; {
		case r == nil: // created since the snapshot was loaded
		case a.cols != nil || a.readCols != nil || a.rowSecurity != r.RowSecurity:
			v.rels[a.key] = r.forRole(a.cols, a.readCols, a.rowSecurity)
		default:
			v.rels[a.key] = r
		}
	}
	if snap.roles.views == nil {
		snap.roles.views = map[string]*RoleView{}
	}
	snap.roles.views[role] = v
	return v, nil
}

// forRole is a copy of r as a role sees it: with only the columns named in cols (nil: all of
// them, in which case the copy is not restricted), those in readCols marked readable (nil: all),
// and the role's row-level security. A column the snapshot does not have (added since it was
// loaded) is left out, as it is for the login role.
func (r *Relation) forRole(cols, readCols []string, rowSecurity bool) *Relation {
	c := *r
	c.RowSecurity = rowSecurity
	set := func(names []string) map[string]bool {
		m := make(map[string]bool, len(names))
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	keep, read := set(cols), set(readCols)
	c.Restricted = cols != nil
	c.Columns, c.ColTypes, c.ColArray, c.ColNotNull, c.ColRead = nil, nil, nil, nil, nil
	for i, name := range r.Columns {
		if cols != nil && !keep[name] {
			continue
		}
		c.Columns = append(c.Columns, name)
		c.ColTypes = append(c.ColTypes, r.ColTypes[i])
		c.ColArray = append(c.ColArray, r.ColArray[i])
		c.ColNotNull = append(c.ColNotNull, r.ColNotNull[i])
		if readCols != nil {
			c.ColRead = append(c.ColRead, read[name])
		}
	}
	return &c
}

// Rel is the view's role's relation for r: r itself for the login role (nil view). A relation
// the view has no entry for is one the role may not use: it gets r with no columns, so that
// nothing of it is named or resolved.
func (v *RoleView) Rel(r *Relation) *Relation {
	if v == nil {
		return r
	}
	if own := v.rels[RelKey(r.Schema, r.Name)]; own != nil {
		return own
	}
	return r.forRole([]string{}, []string{}, true)
}

// Readable reports whether the view's role may read r (nil view: the login role, by the catalog).
func (v *RoleView) Readable(r *Relation) bool {
	if v == nil {
		return r.CanSelect
	}
	return v.readable[RelKey(r.Schema, r.Name)]
}

// Usable reports whether the view's role may reach r at all (nil view: the login role, always).
func (v *RoleView) Usable(r *Relation) bool {
	if v == nil {
		return true
	}
	return v.rels[RelKey(r.Schema, r.Name)] != nil
}
