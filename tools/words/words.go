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
// case too.
func Closest(s string, names []string, n int) []string {
	type scored struct {
		name  string
		d, cd int
	}
	ls := ASCIILower(s)
	nls := utf8.RuneCountInString(ls)
	limit := max(2, nls/3)
	var out []scored
	for _, name := range names {
		ln := ASCIILower(name)
		contains := len(ls) >= 3 && (strings.Contains(ln, ls) || strings.Contains(ls, ln))
		if diff := nls - utf8.RuneCountInString(ln); !contains && (diff > limit || -diff > limit) {
			continue // the length difference alone exceeds the limit: skip the quadratic distance
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
