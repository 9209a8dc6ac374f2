// Package words spells what pgtools says back to a model: names and values quoted for a
// message and cut to what a message may repeat, lists of names bounded, and the near misses
// of a mistyped name found by edit distance. It knows nothing of PostgreSQL or of tools; every
// function is pure and safe for concurrent use.
//
// A caller controls every byte of its arguments, and a message is read by a model and paid for
// per token, so a message repeats at most a short prefix of anything it was sent (Echo).
package words

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// MaxEchoRunes is how many characters of an agent-supplied value or name a message repeats
// before "…" and the value's length.
const MaxEchoRunes = 48

// maxQuotedRunes is the longest quoted span QuoteSpans keeps whole: longer than any PostgreSQL
// name (63 bytes), so real table and column names are never cut.
const maxQuotedRunes = 64

// Clip returns s cut to at most n characters, and whether it was cut. It never splits a UTF-8
// sequence.
func Clip(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	count := 0
	for i := range s {
		if count == n {
			return s[:i], true
		}
		count++
	}
	return s, false
}

// Echo cuts an agent-supplied s to what a message may repeat: its first MaxEchoRunes
// characters. n is the length of s in characters when it was cut.
func Echo(s string) (prefix string, n int, cut bool) {
	prefix, cut = Clip(s, MaxEchoRunes)
	if cut {
		n = utf8.RuneCountInString(s)
	}
	return prefix, n, cut
}

// Unquoted is s for a message: whole when short, else its prefix, "…" and its length. Unlike
// Quote it adds no quotes, for path segments.
func Unquoted(s string) string {
	if prefix, n, cut := Echo(s); cut {
		return fmt.Sprintf("%s… (%d characters)", prefix, n)
	}
	return s
}

// Quote quotes an agent-supplied name for a message. A long name is cut to its first
// MaxEchoRunes characters, then "…" and its length: the caller chose every byte of it, and a
// message must not carry it back whole.
func Quote(s string) string {
	if prefix, n, cut := Echo(s); cut {
		return fmt.Sprintf("%q (%d characters)", prefix+"…", n)
	}
	return fmt.Sprintf("%q", s)
}

// QuoteAll quotes each of ss with Go's %q, for names the catalog holds (never cut).
func QuoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// Cap cuts s to n characters, marking the cut with "…".
func Cap(s string, n int) string {
	if short, cut := Clip(s, n); cut {
		return short + "…"
	}
	return s
}

// ClipQuoted cuts every "…"-quoted span of s longer than any real name (64 characters) to its
// first MaxEchoRunes, then "…" and its length, whoever wrote the message (PostgreSQL's
// `syntax error at or near "<a 1 MB token>"` included).
func ClipQuoted(s string) string {
	if len(s) <= maxQuotedRunes {
		return s
	}
	var b strings.Builder
	for {
		open := strings.IndexByte(s, '"')
		if open < 0 {
			break
		}
		end := strings.IndexByte(s[open+1:], '"')
		if end < 0 {
			break
		}
		end += open + 1
		b.WriteString(s[:open+1])
		inner := s[open+1 : end]
		if _, long := Clip(inner, maxQuotedRunes); long {
			prefix, n, _ := Echo(inner)
			fmt.Fprintf(&b, "%s…\" (%d characters)", prefix, n)
		} else {
			b.WriteString(inner)
			b.WriteByte('"')
		}
		s = s[end+1:]
	}
	if b.Len() == 0 {
		return s
	}
	b.WriteString(s)
	return b.String()
}

// List names things for a message: "none" for no names, else the names joined by ", ".
func List(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Closest returns up to n of names within a small edit distance of s, best first: at most a
// third of s's length (2 at least), or any name that contains s or is contained in it (3
// characters or more). Distances fold ASCII case only, as PostgreSQL does, so a look-alike such
// as the Kelvin sign counts as the different character it is; ties go to the name closer in
// case too, then to the earlier name.
func Closest(s string, names []string, n int) []string {
	idx := ClosestIndexes(s, names, n)
	out := make([]string, len(idx))
	for i, k := range idx {
		out[i] = names[k]
	}
	return out
}

// ClosestIndexes is Closest as positions in names. It costs little per name even among tens of
// thousands: a name is measured only as far as it could still be among the n best.
func ClosestIndexes(s string, names []string, n int) []int {
	if n <= 0 {
		return []int{}
	}
	type scored struct{ i, d int }
	ls := ASCIILower(s)
	q := []rune(ls)
	limit := max(2, len(q)/3)
	var kept []scored
	bound := -1 // once n names are within bound, a name farther away cannot be among the best
	var buf distanceBuf
	buf.hist.set(ls)
	for i, name := range names {
		ln := ASCIILower(name)
		contains := len(ls) >= 3 && (strings.Contains(ln, ls) || strings.Contains(ls, ln))
		if diff := len(q) - utf8.RuneCountInString(ln); !contains && (diff > limit || -diff > limit) {
			continue // the length difference alone exceeds the limit
		}
		k := limit
		if contains {
			k = len(q) + len(ln) // any distance
		}
		if bound >= 0 {
			k = min(k, bound)
		}
		if buf.hist.apart(ln, k) {
			continue
		}
		d := buf.within(q, ln, k)
		if d > k {
			continue
		}
		kept = append(kept, scored{i, d})
		if len(kept) >= 4*n {
			// Keep the n best and those tied with the worst of them; the bound tightens.
			sort.SliceStable(kept, func(a, b int) bool { return kept[a].d < kept[b].d })
			bound = kept[n-1].d
			j := n
			for j < len(kept) && kept[j].d <= bound {
				j++
			}
			kept = kept[:j]
		}
	}
	cd := make(map[int]int, len(kept))
	for _, sc := range kept {
		cd[sc.i] = EditDistance(s, names[sc.i])
	}
	sort.SliceStable(kept, func(a, b int) bool {
		if kept[a].d != kept[b].d {
			return kept[a].d < kept[b].d
		}
		if cd[kept[a].i] != cd[kept[b].i] {
			return cd[kept[a].i] < cd[kept[b].i]
		}
		return kept[a].i < kept[b].i
	})
	res := make([]int, 0, n)
	for _, sc := range kept {
		if len(res) == n {
			break
		}
		res = append(res, sc.i)
	}
	return res
}

// distanceBuf holds the rows of a bounded edit distance, reused from name to name.
type distanceBuf struct {
	b         []rune
	prev, cur []int
	hist      byteHist
}

// byteHist counts the bytes of an ASCII word, to tell cheaply that another is far from it: one
// edit changes the counts by at most two, so half their difference bounds the distance below.
type byteHist struct {
	ascii  bool
	n      int
	counts [128]int32
}

func (h *byteHist) set(s string) {
	h.ascii, h.n = isASCII(s), len(s)
	if h.ascii {
		for i := 0; i < len(s); i++ {
			h.counts[s[i]]++
		}
	}
}

// apart reports whether s, ASCII like the counted word, is certainly more than k edits from it.
func (h *byteHist) apart(s string, k int) bool {
	if !h.ascii || !isASCII(s) {
		return false
	}
	common := 0
	for i := 0; i < len(s); i++ {
		if h.counts[s[i]] > 0 {
			common++
		}
		h.counts[s[i]]--
	}
	for i := 0; i < len(s); i++ {
		h.counts[s[i]]++
	}
	diff := h.n + len(s) - 2*common
	return (diff+1)/2 > k
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// within is the Levenshtein distance in runes between a and b when it is at most k, else k+1. It
// fills only the diagonal band of width 2k+1 and stops at the first row whose every cell
// exceeds k (Ukkonen's cut-off).
func (buf *distanceBuf) within(a []rune, b string, k int) int {
	buf.b = buf.b[:0]
	for _, r := range b {
		buf.b = append(buf.b, r)
	}
	rb := buf.b
	m, n := len(a), len(rb)
	inf := k + 1
	if m-n > k || n-m > k {
		return inf
	}
	if cap(buf.prev) < n+2 {
		buf.prev, buf.cur = make([]int, n+2), make([]int, n+2)
	}
	prev, cur := buf.prev[:n+2], buf.cur[:n+2]
	for j := range prev {
		prev[j] = min(j, inf)
	}
	for i := 1; i <= m; i++ {
		lo, hi := max(1, i-k), min(n, i+k)
		cur[0] = min(i, inf)
		rowMin := inf
		if lo == 1 {
			rowMin = cur[0]
		} else {
			cur[lo-1] = inf
		}
		for j := lo; j <= hi; j++ {
			v := prev[j-1]
			if a[i-1] != rb[j-1] {
				v++
			}
			v = min(v, prev[j]+1, cur[j-1]+1, inf)
			cur[j] = v
			rowMin = min(rowMin, v)
		}
		cur[hi+1] = inf
		if rowMin > k {
			return inf
		}
		prev, cur = cur, prev
	}
	return min(prev[n], inf)
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

// ASCIILower folds A–Z to a–z and leaves every other byte alone, as PostgreSQL folds unquoted
// identifiers in a multibyte encoding.
func ASCIILower(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
