package tools

import (
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pgtools/pgtools/tools/internal/ident"
)

// A value bound as data can come back in an error as a name, because PostgreSQL reads text as
// a name wherever a name is wanted (::regclass, ::regtype, current_setting, a regclass column …)
// and echoes what it read, not what was sent: quotes removed and "" halved, unquoted parts
// folded to lower case, white space around parts dropped, the name split on dots (schema "x"
// does not exist), each part cut to NAMEDATALEN-1 (63) bytes. valueMasker masks a value in all
// of those forms.

// minCutLen is the shortest quoted name taken for a cut-off value: a quoted name that is a
// prefix of a value's name part and at least this long is masked. PostgreSQL cuts names to
// NAMEDATALEN-1 bytes, 63 by default; 31 still catches a server built with NAMEDATALEN 32 or a
// cut in a server encoding with fewer bytes per character, while shorter prefixes are more often
// real names a value merely starts with.
const minCutLen = 31

// maxNameLen is NAMEDATALEN-1 of a default PostgreSQL build: the bytes it keeps of a name.
const maxNameLen = 63

// valueMasker masks the values of one call in a message.
type valueMasker struct {
	// whole are the forms of a value as a whole: as sent, and as PostgreSQL parses it into a
	// qualified name and writes it back. They are masked wherever they occur.
	whole      []string
	wholeLower []string // whole in lower case, for comparing with quoted names
	// names are the parts a value can be cut into when read as a name or a signature; a quoted
	// name in a message that equals one, contains a whole form, or is a cut of a name, is masked
	// as a whole. Lower case, for comparison.
	names []string
}

// newValueMasker prepares the forms of vals, each at least minRedactLen characters long.
func newValueMasker(vals []string) *valueMasker {
	m := &valueMasker{}
	seenWhole, seenName := map[string]bool{}, map[string]bool{}
	addWhole := func(f string) {
		if utf8.RuneCountInString(f) >= minRedactLen && !seenWhole[strings.ToLower(f)] {
			seenWhole[strings.ToLower(f)] = true
			m.whole = append(m.whole, f)
		}
	}
	addName := func(f string) {
		f = strings.ToLower(f)
		if utf8.RuneCountInString(f) >= minRedactLen && !seenName[f] {
			seenName[f] = true
			m.names = append(m.names, f)
		}
	}
	for _, v := range vals {
		addWhole(v)
		addName(v)
		if parts, ok := parseNameList(v); ok {
			folded := make([]string, len(parts))
			cut := make([]string, len(parts))
			quoted := make([]string, len(parts))
			for i, p := range parts {
				folded[i] = p.Folded()
				cut[i] = clipName(folded[i])
				quoted[i] = ident.Spell(folded[i])
				addName(folded[i])
				addName(cut[i])
			}
			addWhole(strings.Join(folded, "."))
			addWhole(strings.Join(cut, "."))
			addWhole(strings.Join(quoted, "."))
		}
		if nameLike(v) {
			for _, t := range nameTokens(v) {
				addName(t)
			}
		}
	}
	// Longest first, so a form containing another is masked whole.
	sortLongestFirst(m.whole)
	for _, f := range m.whole {
		m.wholeLower = append(m.wholeLower, strings.ToLower(f))
	}
	return m
}

// mask returns s with every quoted name that stands for a value replaced by "***", then every
// whole form of a value replaced by ***.
func (m *valueMasker) mask(s string) string {
	if len(m.whole) == 0 && len(m.names) == 0 {
		return s
	}
	spans := quotedSpans(s)
	for i := len(spans) - 1; i >= 0; i-- {
		sp := spans[i]
		if m.isValue(s[sp[0]+1 : sp[1]-1]) {
			s = s[:sp[0]] + `"***"` + s[sp[1]:]
		}
	}
	for _, f := range m.whole {
		if len(f) > 4*len(s) {
			continue // too long to occur in s even case-folded; compiling a 1 MB value costs ~0.5 GB
		}
		s = regexp.MustCompile("(?i)"+regexp.QuoteMeta(f)).ReplaceAllLiteralString(s, "***")
	}
	return s
}

// isValue reports whether the quoted name q (without its quotes) stands for a value: it
// contains a whole form, or it, one of its dot-separated pieces or one of its tokens equals a
// value's name or is a cut of one.
func (m *valueMasker) isValue(q string) bool {
	lq := strings.ToLower(q)
	for _, f := range m.wholeLower {
		if strings.Contains(lq, f) {
			return true
		}
	}
	cands := append([]string{lq}, strings.Split(lq, ".")...)
	if nameLike(lq) {
		cands = append(cands, nameTokens(lq)...)
	}
	for _, c := range cands {
		if utf8.RuneCountInString(c) < minRedactLen {
			continue
		}
		for _, n := range m.names {
			if c == n || (len(c) >= minCutLen && strings.HasPrefix(n, c)) {
				return true
			}
		}
	}
	return false
}

// parseNameList reads v as PostgreSQL's text input for a qualified name does
// (stringToQualifiedNameList): parts separated by dots, white space around them skipped, quoted
// parts verbatim with "" halved, unquoted parts ending at a dot or white space. It reports false
// when v is no such list.
func parseNameList(v string) ([]ident.Part, bool) {
	var parts []ident.Part
	s := ident.TrimSpace(v)
	for {
		var p ident.Part
		if strings.HasPrefix(s, `"`) {
			name, rest, ok := ident.ReadQuoted(s)
			if !ok || name == "" {
				return nil, false
			}
			p, s = ident.Part{Name: name, Quoted: true}, rest
		} else {
			i := 0
			for i < len(s) && s[i] != '.' && !ident.IsSpace(s[i]) {
				i++
			}
			if i == 0 {
				return nil, false
			}
			p, s = ident.Part{Name: s[:i]}, s[i:]
		}
		parts = append(parts, p)
		s = ident.TrimSpace(s)
		if s == "" {
			return parts, true
		}
		if s[0] != '.' {
			return nil, false
		}
		s = ident.TrimSpace(s[1:])
	}
}

// clipName cuts a name to maxNameLen bytes on a character boundary, as PostgreSQL's
// truncate_identifier does in UTF8.
func clipName(s string) string {
	if len(s) <= maxNameLen {
		return s
	}
	n := maxNameLen
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// nameLike reports whether v could be a name, a qualified name or a signature such as
// f(int, text) — no white space outside quotes except next to . , ( or ) — rather than free
// text. Only such values are cut into tokens: splitting prose into words would mask any column
// that a sentence happens to mention.
func nameLike(v string) bool {
	inQuote := false
	prev := byte(0) // last non-space byte outside quotes
	gap := false    // white space since prev
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"':
			if !inQuote && gap && !strings.ContainsRune(".,()", rune(prev)) && prev != 0 {
				return false
			}
			inQuote, gap, prev = !inQuote, false, c
		case inQuote:
		case ident.IsSpace(c):
			gap = true
		default:
			if gap && prev != 0 && !strings.ContainsRune(".,()", rune(prev)) && !strings.ContainsRune(".,()", rune(c)) {
				return false
			}
			gap, prev = false, c
		}
	}
	return true
}

// nameTokens cuts v into the names it holds: quoted names (verbatim, "" halved) and runs of the
// bytes an unquoted name is made of (ASCII letters, digits, _ and $, and every byte from 0x80).
func nameTokens(v string) []string {
	var out []string
	for i := 0; i < len(v); {
		c := v[i]
		switch {
		case c == '"':
			name, rest, ok := ident.ReadQuoted(v[i:])
			if !ok {
				name, rest = v[i+1:], ""
			}
			out = append(out, name)
			i = len(v) - len(rest)
		case identByte(c):
			j := i
			for j < len(v) && identByte(v[j]) {
				j++
			}
			out = append(out, v[i:j])
			i = j
		default:
			i++
		}
	}
	return out
}

func identByte(c byte) bool {
	return c >= 0x80 || c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// quotedSpans returns the byte ranges of the double-quoted names in msg, quotes included.
// PostgreSQL writes a name into a message as "%s" without doubling quotes inside it, so a quote
// opens a name only at the start or after white space or ( , = : . [ and closes it only at the
// end or before white space or . , : ; ) ].
func quotedSpans(msg string) [][2]int {
	var spans [][2]int
	for i := 0; i < len(msg); i++ {
		if msg[i] != '"' || (i > 0 && !ident.IsSpace(msg[i-1]) && !strings.ContainsRune("(,=:.[", rune(msg[i-1]))) {
			continue
		}
		for j := i + 1; j < len(msg); j++ {
			if msg[j] == '"' && (j+1 == len(msg) || ident.IsSpace(msg[j+1]) || strings.ContainsRune(".,:;)]", rune(msg[j+1]))) {
				spans = append(spans, [2]int{i, j + 1})
				i = j
				break
			}
		}
	}
	return spans
}

// sortLongestFirst sorts ss by length, longest first, then alphabetically.
func sortLongestFirst(ss []string) {
	slices.SortFunc(ss, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
}

// minRedactLen is the shortest value, in characters, that redactValues masks: masking "1" or
// "id" would garble messages about columns and positions, and so short a value reveals little.
// The same bound applies to the names a value is cut into (valueMasker).
const minRedactLen = 4
