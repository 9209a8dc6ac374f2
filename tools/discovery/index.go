// Package discovery lists and searches the relations a role may read, for describe_schema at
// any catalog size: in a stable order (so pages continue by key, not by offset), narrowed by
// schema and kind, and ranked by how a search's words match a relation's name, schema, columns
// and comment.
//
// An Index is one role's view of one catalog snapshot, built once (linear in the relations the
// role may read) and shared by concurrent calls; a Cache keeps the indexes of the latest
// snapshots. Nothing here reads the database or knows of tools and requests: it reads
// tools/catalog's snapshots and role views. An Index and the hits it returns are immutable and
// safe for concurrent use.
package discovery

import (
	"cmp"
	"slices"
	"strings"
	"sync"

	"github.com/pgtools/pgtools/tools/catalog"
)

// Entry is one relation an index lists.
type Entry struct {
	// Rel is the relation as the role sees it: its columns cut to those the role may use.
	Rel *catalog.Relation
	// Readable is the columns of Rel the role may read: what a search matches and names.
	Readable []string
	text     *folded
	shared   bool // Rel is the snapshot's own: its folded text is the snapshot's, shared by roles
}

// folded is what a search compares with, lower-cased once per snapshot and relation.
type folded struct {
	name, qualified, comment string
	columns                  string // the readable columns' names, each followed by "\n"
}

// SchemaCount is a schema and how many of its relations an index lists.
type SchemaCount struct {
	Schema string `json:"schema"`
	Tables int    `json:"tables"`
}

// Index lists the relations one role may read in one snapshot, by schema and name.
type Index struct {
	entries []Entry
	schemas []SchemaCount
	// The text a search compares with is folded on the first search, not when the index is
	// built: a listing needs none of it.
	fold   sync.Once
	shared *sharedText
}

// Len is the number of relations the index lists.
func (ix *Index) Len() int { return len(ix.entries) }

// Schemas returns each schema that has a listed relation, with their number, by schema name.
// The caller must not modify the slice.
func (ix *Index) Schemas() []SchemaCount { return ix.schemas }

// build makes the index of view's role over snap; shared holds the folded text of the
// snapshot's own relations, which roles that see a relation whole share.
func build(snap *catalog.Snapshot, view *catalog.RoleView, shared *sharedText) *Index {
	rels := snap.Readable(view)
	ix := &Index{entries: make([]Entry, len(rels)), shared: shared}
	for i, r := range rels {
		own := view.Rel(r)
		ix.entries[i] = Entry{Rel: own, Readable: readableColumns(own), shared: own == r}
	}
	slices.SortFunc(ix.entries, func(a, b Entry) int {
		return cmp.Or(strings.Compare(a.Rel.Schema, b.Rel.Schema), strings.Compare(a.Rel.Name, b.Rel.Name))
	})
	for _, e := range ix.entries {
		if n := len(ix.schemas); n > 0 && ix.schemas[n-1].Schema == e.Rel.Schema {
			ix.schemas[n-1].Tables++
		} else {
			ix.schemas = append(ix.schemas, SchemaCount{Schema: e.Rel.Schema, Tables: 1})
		}
	}
	return ix
}

// readableColumns is r's columns that the role r was loaded for may SELECT.
func readableColumns(r *catalog.Relation) []string {
	if r.ColRead == nil {
		return r.Columns
	}
	out := make([]string, 0, len(r.Columns))
	for i, c := range r.Columns {
		if r.ColRead[i] {
			out = append(out, c)
		}
	}
	return out
}

func fold(r *catalog.Relation, cols []string) *folded {
	n := 0
	for _, c := range cols {
		n += len(c) + 1
	}
	b := make([]byte, 0, n)
	for _, c := range cols {
		b = append(b, strings.ToLower(c)...)
		b = append(b, '\n')
	}
	name := strings.ToLower(r.Name)
	return &folded{name: name, qualified: strings.ToLower(r.Schema) + "." + name,
		comment: strings.ToLower(r.Comment), columns: string(b)}
}

// folded makes sure every entry has its folded text.
func (ix *Index) folded() {
	ix.fold.Do(func() {
		sh := ix.shared
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if sh.m == nil {
			sh.m = make(map[*catalog.Relation]*folded, len(ix.entries))
		}
		for i := range ix.entries {
			e := &ix.entries[i]
			if !e.shared {
				e.text = fold(e.Rel, e.Readable)
				continue
			}
			if e.text = sh.m[e.Rel]; e.text == nil {
				e.text = fold(e.Rel, e.Readable)
				sh.m[e.Rel] = e.text
			}
		}
	})
}

// sharedText is the folded text of a snapshot's relations, made on the first search of any
// role that sees them whole.
type sharedText struct {
	mu sync.Mutex
	m  map[*catalog.Relation]*folded
}

// Cache keeps the indexes of the latest snapshots, one per role, built on first use. It is safe
// for concurrent use; the zero value is ready.
type Cache struct {
	mu    sync.Mutex
	snaps []*snapIndexes // the latest first; at most keptSnapshots
}

// keptSnapshots is how many snapshots a Cache keeps indexes of: the current one, and the one
// calls that began before a reload still read.
const keptSnapshots = 2

// maxRoles bounds the roles whose indexes one snapshot keeps; past it the least recently used
// index is dropped (and built again when its role returns).
const maxRoles = 64

type snapIndexes struct {
	snap   *catalog.Snapshot
	shared sharedText
	roles  map[string]*roleIndex
	clock  uint64
}

type roleIndex struct {
	once sync.Once
	ix   *Index
	used uint64
}

// Index returns role's index of snap, building it on first use. view is role's view of snap
// (nil for the login role, role "").
func (c *Cache) Index(snap *catalog.Snapshot, view *catalog.RoleView, role string) *Index {
	c.mu.Lock()
	var si *snapIndexes
	for _, s := range c.snaps {
		if s.snap == snap {
			si = s
		}
	}
	if si == nil {
		si = &snapIndexes{snap: snap, roles: map[string]*roleIndex{}}
		// A newer snapshot goes first; an older one that a slow call still reads goes last.
		if len(c.snaps) > 0 && snap.Loaded().Before(c.snaps[0].snap.Loaded()) {
			c.snaps = append(c.snaps, si)
		} else {
			c.snaps = append([]*snapIndexes{si}, c.snaps...)
		}
		if len(c.snaps) > keptSnapshots {
			c.snaps = c.snaps[:keptSnapshots]
		}
	}
	si.clock++
	ri := si.roles[role]
	if ri == nil {
		if len(si.roles) >= maxRoles {
			var oldest string
			for name, r := range si.roles {
				if oldest == "" || r.used < si.roles[oldest].used {
					oldest = name
				}
			}
			delete(si.roles, oldest)
		}
		ri = &roleIndex{}
		si.roles[role] = ri
	}
	ri.used = si.clock
	c.mu.Unlock()
	ri.once.Do(func() { ri.ix = build(snap, view, &si.shared) })
	return ri.ix
}
