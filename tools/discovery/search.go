package discovery

import (
	"cmp"
	"sort"
	"strings"
	"unicode"
)

// How a word matches a relation, best first. A relation's rank for a search is the sum over
// its words, so a relation that every word names exactly comes first.
const (
	RankExact   = iota // the name, or schema.name, is the word
	RankPrefix         // the name, or schema.name, starts with the word
	RankName           // schema.name contains the word
	RankColumn         // a column the role may read contains the word
	RankComment        // the comment contains the word
)

// MaxWords is the most words a search may have.
const MaxWords = 10

// Words splits a search into its words, lower-cased: runs of characters other than white space.
// Every other character, % _ * . ( [ \ and the like included, is matched as itself.
func Words(search string) []string {
	return strings.FieldsFunc(strings.ToLower(search), unicode.IsSpace)
}

// Key is a place in an index's order: a relation's rank for the search (0 without one), schema
// and name. A page continues after the last key it sent, so relations created or dropped
// between pages shift nothing: each relation that is there throughout is listed exactly once.
type Key struct {
	Rank         int
	Schema, Name string
}

func (k Key) compare(o Key) int {
	return cmp.Or(cmp.Compare(k.Rank, o.Rank), strings.Compare(k.Schema, o.Schema), strings.Compare(k.Name, o.Name))
}

// Query is what to list: all fields are optional.
type Query struct {
	Schema string   // only this schema (exact name)
	Kind   byte     // only this pg_class.relkind
	Words  []string // a search: every word must match (Words); nil lists all
	After  *Key     // start after this key
	Limit  int      // at most this many hits (0: no limit)
}

// Hit is one relation found, with its key and, for a search, the readable columns whose names
// contain a word (at most MaxMatchedColumns).
type Hit struct {
	*Entry
	Key     Key
	Matched []string
}

// MaxMatchedColumns bounds the column names a hit repeats.
const MaxMatchedColumns = 5

// Find returns the first q.Limit relations after q.After that q matches, in key order, and
// whether more follow.
func (ix *Index) Find(q Query) (hits []Hit, more bool) {
	lo, hi := 0, len(ix.entries)
	if q.Schema != "" {
		lo = sort.Search(len(ix.entries), func(i int) bool { return ix.entries[i].Rel.Schema >= q.Schema })
		hi = sort.Search(len(ix.entries), func(i int) bool { return ix.entries[i].Rel.Schema > q.Schema })
	}
	want := q.Limit + 1 // one more tells whether more follow
	if q.Limit <= 0 {
		want = len(ix.entries) + 1
	}
	if len(q.Words) == 0 {
		if q.After != nil {
			// Without a search every rank is 0: the order is by schema and name alone.
			after := Key{Schema: q.After.Schema, Name: q.After.Name}
			lo = max(lo, sort.Search(len(ix.entries), func(i int) bool { return ix.entries[i].key(0).compare(after) > 0 }))
		}
		for i := lo; i < hi && len(hits) < want; i++ {
			en := &ix.entries[i]
			if q.Kind == 0 || en.Rel.Kind == q.Kind {
				hits = append(hits, Hit{Entry: en, Key: en.key(0)})
			}
		}
	} else {
		ix.folded()
		// Entries come in schema and name order, so within one rank they come in key order: the
		// first want of each rank are all that can be needed.
		byRank := make([][]Hit, RankComment*len(q.Words)+1)
		for i := lo; i < hi; i++ {
			en := &ix.entries[i]
			if q.Kind != 0 && en.Rel.Kind != q.Kind {
				continue
			}
			rank, ok := en.rank(q.Words)
			if !ok || len(byRank[rank]) >= want {
				continue
			}
			k := en.key(rank)
			if q.After != nil && k.compare(*q.After) <= 0 {
				continue
			}
			byRank[rank] = append(byRank[rank], Hit{Entry: en, Key: k})
		}
		for _, list := range byRank {
			for _, h := range list {
				if len(hits) == want {
					break
				}
				h.Matched = h.matchedColumns(q.Words)
				hits = append(hits, h)
			}
		}
	}
	if len(hits) == want {
		return hits[:want-1], true
	}
	return hits, false
}

func (en *Entry) key(rank int) Key { return Key{Rank: rank, Schema: en.Rel.Schema, Name: en.Rel.Name} }

// rank is the entry's rank for words, and whether every word matches it.
func (en *Entry) rank(words []string) (int, bool) {
	t := en.text
	total := 0
	for _, w := range words {
		switch {
		case t.name == w || t.qualified == w:
			total += RankExact
		case strings.HasPrefix(t.name, w) || strings.HasPrefix(t.qualified, w):
			total += RankPrefix
		case strings.Contains(t.qualified, w):
			total += RankName
		case strings.Contains(t.columns, w):
			total += RankColumn
		case strings.Contains(t.comment, w):
			total += RankComment
		default:
			return 0, false
		}
	}
	return total, true
}

// matchedColumns is the readable columns whose names contain one of words, at most
// MaxMatchedColumns: nil when the name matched every word (the columns are not why it is here).
func (en *Entry) matchedColumns(words []string) []string {
	need := false
	for _, w := range words {
		if !strings.Contains(en.text.qualified, w) && strings.Contains(en.text.columns, w) {
			need = true
		}
	}
	if !need {
		return nil
	}
	var out []string
	for _, c := range en.Readable {
		lc := strings.ToLower(c)
		for _, w := range words {
			if strings.Contains(lc, w) {
				out = append(out, c)
				break
			}
		}
		if len(out) == MaxMatchedColumns {
			break
		}
	}
	return out
}
