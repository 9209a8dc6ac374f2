// Package ident reads the names an agent sends (tables, columns, lists of them) the way
// PostgreSQL reads a name in SQL, and spells a catalog name so that writing it back reaches exactly
// that object. Its functions are pure and safe for concurrent use.
package ident

import (
	"strings"

	"github.com/pgtools/pgtools/tools/words"
)

// Identifier arguments (table, columns, order_by, returning, the keys of row and set, conflict
// columns) are read the way PostgreSQL reads a name in SQL, so that a name reaches exactly the
// relation or column PostgreSQL would give it, never a look-alike:
//
//   - an unquoted part folds ASCII A–Z to a–z and nothing else (downcase_identifier for UTF8:
//     bytes from 0x80 up are left alone, so the Kelvin sign U+212A is not k);
//   - a double-quoted part is verbatim, with "" standing for one quote;
//   - schema.name splits on dots outside quotes only;
//   - nothing is trimmed: a no-break or ideographic space is part of the name, and an unquoted
//     part with ASCII white space or a control character in it is no name PostgreSQL could read
//     (its scanner ends a name there), so it matches nothing and gets a suggestion instead.
//
// Lists given as one string ("id, name") are list syntax: ASCII white space around an item is a
// separator (trimPgSpace); elements of a JSON array are names as they stand.

// Part is one part of a possibly qualified name, with whether it was double-quoted.
type Part struct {
	Name   string
	Quoted bool
}

// IsSpace reports whether c is white space to PostgreSQL's scanner (scanner_isspace): space,
// tab, newline, carriage return, form feed and vertical tab. No other character is.
func IsSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\f', '\v':
		return true
	}
	return false
}

// TrimSpace trims PostgreSQL's white space (pgSpace) from both ends of s, and nothing else.
func TrimSpace(s string) string {
	for len(s) > 0 && IsSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && IsSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// ReadQuoted reads a double-quoted name at the start of s (which begins with `"`), undoubling
// "" to ". It returns the name and the rest of s after the closing quote, or ok false when the
// quote is not closed.
func ReadQuoted(s string) (name, rest string, ok bool) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] == '"' {
			if i+1 < len(s) && s[i+1] == '"' {
				b.WriteByte('"')
				i++
				continue
			}
			return b.String(), s[i+1:], true
		}
		b.WriteByte(s[i])
	}
	return "", "", false
}

// SplitQualified splits `schema.name`, `"My Schema"."Tbl"` or `name` into its parts, splitting
// on dots outside quotes only. It reports false when s is no name at all: an unterminated or
// stray quote, an empty part, text after a closing quote, or more than two parts. Nothing is
// trimmed; whether an unquoted part could be read by PostgreSQL is plain's question.
func SplitQualified(s string) ([]Part, bool) {
	var parts []Part
	for {
		var p Part
		if strings.HasPrefix(s, `"`) {
			name, rest, ok := ReadQuoted(s)
			if !ok {
				return nil, false
			}
			p, s = Part{Name: name, Quoted: true}, rest
		} else {
			i := strings.IndexAny(s, `."`)
			if i < 0 {
				i = len(s)
			} else if s[i] == '"' {
				return nil, false
			}
			p, s = Part{Name: s[:i]}, s[i:]
		}
		if p.Name == "" {
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

// plain reports whether PostgreSQL could read the part as one name: a quoted part always, an
// unquoted one unless it holds ASCII white space or a control character.
func (p Part) Plain() bool {
	if p.Quoted {
		return true
	}
	for i := 0; i < len(p.Name); i++ {
		if c := p.Name[i]; c < 0x20 || c == 0x7f || IsSpace(c) {
			return false
		}
	}
	return true
}

// Folded is the name PostgreSQL makes of the part: quoted verbatim, unquoted with A–Z Folded.
func (p Part) Folded() string {
	if p.Quoted {
		return p.Name
	}
	return words.ASCIILower(p.Name)
}

// AllPlain reports whether every part is plain.
func AllPlain(parts []Part) bool {
	for _, p := range parts {
		if !p.Plain() {
			return false
		}
	}
	return true
}

// Spell is how a model must write name so that it resolves to exactly name: as it is when an
// unquoted reading keeps it unchanged, else double-quoted with quotes doubled.
func Spell(name string) string {
	p := Part{Name: name}
	if name != "" && !strings.ContainsAny(name, `."`) && p.Plain() && words.ASCIILower(name) == name {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// UnquotedNote tells a model why an unquoted name with white space matched nothing.
const UnquotedNote = "Unquoted names are read as PostgreSQL reads them: nothing is trimmed and only A-Z is folded to lower case; write any other name in double quotes. "

// SplitList splits a comma-separated list outside double quotes and trims PostgreSQL's white
// space (ASCII only) around each item: there it is list syntax, not part of a name.
func SplitList(s string) []string {
	var out []string
	inQuote := false
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			inQuote = !inQuote
		case ',':
			if !inQuote {
				out = append(out, TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, TrimSpace(s[start:]))
}

// List normalises a list argument given as a JSON array or a comma-separated string. Array
// elements are taken as they stand: there is no list syntax around them to trim.
func List(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		if TrimSpace(x) == "" {
			return nil
		}
		return SplitList(x)
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
