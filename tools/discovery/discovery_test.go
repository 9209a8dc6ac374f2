package discovery

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/catalog"
)

// snapshotOf is a login-role snapshot of rels (every one readable).
func snapshotOf(rels ...*catalog.Relation) *catalog.Snapshot {
	s := &catalog.Snapshot{Rels: map[string]*catalog.Relation{}}
	for _, r := range rels {
		r.CanSelect = true
		if r.Kind == 0 {
			r.Kind = 'r'
		}
		s.Rels[catalog.RelKey(r.Schema, r.Name)] = r
	}
	return s
}

func names(hits []Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Rel.Schema + "." + h.Rel.Name
	}
	return out
}

func TestWordsAreLiteral(t *testing.T) {
	if got := Words("  Orders\t%_ .* (?i)x \n"); !slices.Equal(got, []string{"orders", "%_", ".*", "(?i)x"}) {
		t.Fatalf("Words = %q", got)
	}
}

// TestRanking: exact name, then prefix, then contains (schema.name), then a column, then the
// comment; ties by schema and name; every word must match.
func TestRanking(t *testing.T) {
	snap := snapshotOf(
		&catalog.Relation{Schema: "public", Name: "invoice"},
		&catalog.Relation{Schema: "b", Name: "invoice_lines"},
		&catalog.Relation{Schema: "a", Name: "invoice_lines"},
		&catalog.Relation{Schema: "public", Name: "old_invoices"},
		&catalog.Relation{Schema: "public", Name: "payments", Columns: []string{"id", "invoice_id"}},
		&catalog.Relation{Schema: "public", Name: "ledger", Comment: "Every INVOICE booked"},
		&catalog.Relation{Schema: "invoices", Name: "runs"},
		&catalog.Relation{Schema: "public", Name: "unrelated"},
	)
	var c Cache
	ix := c.Index(snap, nil, "")
	hits, more := ix.Find(Query{Words: Words("Invoice")})
	want := []string{"public.invoice", "a.invoice_lines", "b.invoice_lines", "invoices.runs", "public.old_invoices", "public.payments", "public.ledger"}
	if got := names(hits); !slices.Equal(got, want) || more {
		t.Fatalf("search invoice: %q (more %v), want %q", got, more, want)
	}
	if hits[5].Matched == nil || hits[5].Matched[0] != "invoice_id" || hits[0].Matched != nil {
		t.Fatalf("matched columns: %v, %v", hits[5].Matched, hits[0].Matched)
	}
	if hits, _ := ix.Find(Query{Words: Words("invoice lines")}); !slices.Equal(names(hits), []string{"a.invoice_lines", "b.invoice_lines"}) {
		t.Fatalf("two words: %q", names(hits))
	}
	if hits, _ := ix.Find(Query{Words: Words("invoice"), Schema: "b"}); !slices.Equal(names(hits), []string{"b.invoice_lines"}) {
		t.Fatalf("in schema b: %q", names(hits))
	}
	if got := ix.Schemas(); fmt.Sprint(got) != "[{a 1} {b 1} {invoices 1} {public 5}]" {
		t.Fatalf("schemas %v", got)
	}
}

// TestPagesSeeEveryRelationOnce: continuing after the last key of each page lists every
// relation that exists throughout exactly once, whatever is created and dropped between pages
// (each page is answered from a snapshot of its own), with or without a search.
func TestPagesSeeEveryRelationOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	rels := map[string]*catalog.Relation{}
	add := func(schema, name string) {
		r := &catalog.Relation{Schema: schema, Name: name, CanSelect: true, Kind: 'r'}
		if rng.IntN(3) == 0 {
			r.Columns = []string{"ledger_id"}
		}
		rels[catalog.RelKey(schema, name)] = r
	}
	for i := 0; i < 3000; i++ {
		add(fmt.Sprintf("s%d", rng.IntN(7)), fmt.Sprintf("ledger_%d", i))
	}
	snapshot := func() *catalog.Snapshot {
		s := &catalog.Snapshot{Rels: map[string]*catalog.Relation{}}
		for k, r := range rels {
			s.Rels[k] = r
		}
		return s
	}
	for _, words := range [][]string{nil, Words("ledger")} {
		stable := map[string]bool{} // there from start to end
		for k := range rels {
			stable[k] = true
		}
		seen := map[string]int{}
		var after *Key
		for page := 0; ; page++ {
			var c Cache // a fresh snapshot per page, as after a reload
			hits, more := c.Index(snapshot(), nil, "").Find(Query{Words: words, After: after, Limit: 97})
			for _, h := range hits {
				seen[catalog.RelKey(h.Rel.Schema, h.Rel.Name)]++
			}
			if !more {
				break
			}
			last := hits[len(hits)-1].Key
			after = &last
			// Between pages: drop some, create some, before and after the cursor.
			for k := range rels {
				if rng.IntN(100) == 0 {
					delete(rels, k)
					delete(stable, k)
				}
			}
			for i := 0; i < 20; i++ {
				add(fmt.Sprintf("s%d", rng.IntN(8)), fmt.Sprintf("ledger_new_%d_%d", page, i))
			}
		}
		for k := range stable {
			if seen[k] != 1 {
				t.Fatalf("search %q: %q seen %d times", words, k, seen[k])
			}
		}
		for k, n := range seen {
			if n > 1 {
				t.Fatalf("search %q: %q seen %d times", words, k, n)
			}
		}
	}
}

// TestCacheKeepsIndexesPerSnapshotAndRole: an index is built once per snapshot and role, and a
// new snapshot gets new ones.
func TestCacheKeepsIndexesPerSnapshotAndRole(t *testing.T) {
	s1 := snapshotOf(&catalog.Relation{Schema: "public", Name: "a"})
	var c Cache
	if c.Index(s1, nil, "") != c.Index(s1, nil, "") {
		t.Fatal("the same snapshot and role built two indexes")
	}
	s2 := snapshotOf(&catalog.Relation{Schema: "public", Name: "a"}, &catalog.Relation{Schema: "public", Name: "b"})
	if ix := c.Index(s2, nil, ""); ix.Len() != 2 {
		t.Fatalf("a new snapshot's index lists %d", ix.Len())
	}
}

// TestSearchAtScale: a search among 50,000 relations of 5 to 30 columns answers in
// milliseconds once the index is built.
func TestSearchAtScale(t *testing.T) {
	snap := &catalog.Snapshot{Rels: map[string]*catalog.Relation{}}
	for i := 0; i < 50000; i++ {
		cols := []string{"id", "account_id", "amount_cents", "booked_on"}
		for j := 0; j < i%26; j++ {
			cols = append(cols, fmt.Sprintf("attr_%d", j))
		}
		r := &catalog.Relation{Schema: fmt.Sprintf("s%02d", i%20), Name: fmt.Sprintf("ledger_%d", i), Kind: 'r', CanSelect: true,
			Columns: cols, Comment: fmt.Sprintf("Ledger entries of branch %d", i)}
		snap.Rels[catalog.RelKey(r.Schema, r.Name)] = r
	}
	var c Cache
	start := time.Now()
	ix := c.Index(snap, nil, "")
	built := time.Since(start)
	var worst time.Duration
	start = time.Now()
	ix.Find(Query{Words: Words("first"), Limit: 100})
	first := time.Since(start)
	for _, q := range []string{"ledger_4711", "branch 4711", "attr_24", "nothing_like_it", "ledger"} {
		start = time.Now()
		hits, _ := ix.Find(Query{Words: Words(q), Limit: 100})
		worst = max(worst, time.Since(start))
		if len(hits) == 0 && q != "nothing_like_it" {
			t.Fatalf("%q found nothing", q)
		}
	}
	t.Logf("index of 50,000 built in %v; first search (folds the text) %v; slowest search after %v", built, first, worst)
}
