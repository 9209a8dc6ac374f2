package words

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestQuoteCutsLongNames(t *testing.T) {
	long := strings.Repeat("é", 100)
	if got, want := Quote(long), `"`+strings.Repeat("é", MaxEchoRunes)+`…" (100 characters)`; got != want {
		t.Fatalf("Quote(100 × é) = %s, want %s", got, want)
	}
	if got := Quote("orders"); got != `"orders"` {
		t.Fatalf("Quote(orders) = %s", got)
	}
}

func TestClipQuotedKeepsNamesWhole(t *testing.T) {
	name := strings.Repeat("n", 63)
	msg := `relation "` + name + `" and "` + strings.Repeat("x", 500) + `"`
	got := ClipQuoted(msg)
	if !strings.Contains(got, `"`+name+`"`) {
		t.Fatalf("a 63-character name was cut: %s", got)
	}
	if strings.Contains(got, strings.Repeat("x", MaxEchoRunes+1)) || !strings.Contains(got, "(500 characters)") {
		t.Fatalf("a 500-character span was not cut: %s", got)
	}
}

func TestClosest(t *testing.T) {
	names := []string{"orders", "order_items", "customers", "Orders2", "events"}
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"ordres", []string{"orders"}},
		{"custmers", []string{"customers"}},
		{"zzzz", []string{}},
		{"ORDERS", []string{"orders", "Orders2"}},
	} {
		got := Closest(tc.in, names, 2)
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("Closest(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if d := EditDistance("kitten", "sitting"); d != 3 {
		t.Errorf("EditDistance(kitten, sitting) = %d, want 3", d)
	}
	if got := List(nil); got != "none" {
		t.Errorf("List(nil) = %q", got)
	}
	if got := ASCIILower("ÀBc"); got != "Àbc" {
		t.Errorf("ASCIILower folds only A-Z: %q", got)
	}
}

// closestReference is Closest as it was written first, measuring every name in full: the
// bounded search must choose exactly what it chose.
func closestReference(s string, names []string, n int) []string {
	type scored struct {
		name  string
		d, cd int
	}
	ls := ASCIILower(s)
	nls := len([]rune(ls))
	limit := max(2, nls/3)
	var out []scored
	for _, name := range names {
		ln := ASCIILower(name)
		contains := len(ls) >= 3 && (strings.Contains(ln, ls) || strings.Contains(ls, ln))
		if diff := nls - len([]rune(ln)); !contains && (diff > limit || -diff > limit) {
			continue
		}
		if d := EditDistance(ls, ln); d <= limit || contains {
			out = append(out, scored{name, d, EditDistance(s, name)})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].d != out[j].d {
			return out[i].d < out[j].d
		}
		return out[i].cd < out[j].cd
	})
	res := []string{}
	for _, sc := range out {
		if len(res) == n {
			break
		}
		res = append(res, sc.name)
	}
	return res
}

// TestClosestMatchesReference: on random names and typos, Closest names what a full measure of
// every name names.
func TestClosestMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune("abcdeABC_é1.")
	word := func(n int) string {
		r := make([]rune, n)
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(r)
	}
	for round := 0; round < 300; round++ {
		names := make([]string, 1+rng.IntN(60))
		for i := range names {
			names[i] = word(1 + rng.IntN(10))
		}
		s := word(1 + rng.IntN(10))
		if rng.IntN(2) == 0 {
			s = names[rng.IntN(len(names))] + word(rng.IntN(2))
		}
		n := 1 + rng.IntN(3)
		if got, want := Closest(s, names, n), closestReference(s, names, n); !slices.Equal(got, want) {
			t.Fatalf("Closest(%q, %q, %d) = %q, want %q", s, names, n, got, want)
		}
	}
}

// TestClosestAmongManyIsFast: near misses among 50,000 look-alike names take milliseconds.
func TestClosestAmongManyIsFast(t *testing.T) {
	names := make([]string, 50000)
	for i := range names {
		names[i] = fmt.Sprintf("s%02d.ledger_%d", i%20+1, i/20+1)
	}
	start := time.Now()
	got := Closest("s07.ledgr_1234", names, 3)
	took := time.Since(start)
	if len(got) == 0 || got[0] != "s07.ledger_1234" {
		t.Fatalf("Closest = %v", got)
	}
	t.Logf("Closest among %d names: %v", len(names), took)
}
