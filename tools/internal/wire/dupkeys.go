package wire

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DuplicateKeyError is JSON that names one key twice in one object. encoding/json keeps the
// last value and other parsers the first, so such a body reads one way to a tool that reviews it
// and another way to pgtools: it is refused, wherever a caller's JSON is read.
type DuplicateKeyError struct {
	Key string
	// Path leads to the object holding Key: object keys and array indexes from the outside in.
	Path []string
}

func (e *DuplicateKeyError) Error() string {
	at := ""
	if len(e.Path) > 0 {
		at = " in " + strings.Join(e.Path, "/")
	}
	return "the key " + strconv.Quote(e.Key) + " appears more than once" + at
}

// checkKeys reports the first key data names twice in one object, at any depth. Keys compare
// as encoding/json reads them: after unescaping ("a" and "\u0061" are one key). It is one pass
// over the bytes, allocating only for an object of many keys or a key spelled with escapes.
// Data that is not valid JSON is left to the decoder to report: checkKeys then returns nil.
func checkKeys(data []byte) *DuplicateKeyError {
	s := dupScanner{b: data}
	s.value()
	if s.dup != nil {
		slices.Reverse(s.dup.Path) // gathered from the inside out
	}
	return s.dup
}

// CheckKeys is checkKeys for a reader that does not decode data itself: nil (an untyped nil
// error) when no key is named twice.
func CheckKeys(data []byte) error {
	if dup := checkKeys(data); dup != nil {
		return dup
	}
	return nil
}

type dupScanner struct {
	b   []byte
	i   int
	bad bool // not valid JSON: stop, the decoder will say why
	dup *DuplicateKeyError
}

func (s *dupScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value skips one value, checking the objects in it.
func (s *dupScanner) value() {
	s.ws()
	if s.i >= len(s.b) {
		s.bad = true
		return
	}
	switch s.b[s.i] {
	case '{':
		s.object()
	case '[':
		s.i++
		for n := 0; ; n++ {
			s.ws()
			if s.i < len(s.b) && s.b[s.i] == ']' {
				s.i++
				return
			}
			s.value()
			if s.bad || s.dup != nil {
				if s.dup != nil {
					s.dup.Path = append(s.dup.Path, strconv.Itoa(n))
				}
				return
			}
			s.ws()
			if s.i < len(s.b) && s.b[s.i] == ',' {
				s.i++
				continue
			}
			if s.i < len(s.b) && s.b[s.i] == ']' {
				s.i++
				return
			}
			s.bad = true
			return
		}
	case '"':
		s.str()
	default: // a number, true, false or null: up to the next delimiter
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return
			}
			s.i++
		}
	}
}

// str skips a string and returns its raw content and whether it holds escapes.
func (s *dupScanner) str() ([]byte, bool) {
	start := s.i + 1
	escaped := false
	for j := start; j < len(s.b); j++ {
		switch s.b[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			s.i = j + 1
			return s.b[start:j], escaped
		}
	}
	s.bad = true
	return nil, false
}

// smallObject is how many keys an object may have before checkKeys remembers them in a map.
const smallObject = 16

func (s *dupScanner) object() {
	s.i++
	var few [smallObject][]byte
	n := 0
	var many map[string]struct{}
	for {
		s.ws()
		if s.i >= len(s.b) {
			s.bad = true
			return
		}
		if s.b[s.i] == '}' {
			s.i++
			return
		}
		if s.b[s.i] != '"' {
			s.bad = true
			return
		}
		key, escaped := s.str()
		if s.bad {
			return
		}
		// A key with escapes, or with bytes that are not UTF-8 (encoding/json reads each such
		// byte as U+FFFD), is compared as decoded.
		if escaped || !utf8.Valid(key) {
			var k string
			if json.Unmarshal(s.b[s.i-len(key)-2:s.i], &k) != nil {
				s.bad = true
				return
			}
			key = []byte(k)
		}
		seen := false
		if many != nil {
			_, seen = many[string(key)]
			many[string(key)] = struct{}{}
		} else {
			for _, k := range few[:n] {
				if bytes.Equal(k, key) {
					seen = true
					break
				}
			}
			if n < smallObject {
				few[n] = key
				n++
			} else {
				many = make(map[string]struct{}, 2*smallObject)
				for _, k := range few {
					many[string(k)] = struct{}{}
				}
				many[string(key)] = struct{}{}
			}
		}
		if seen {
			s.dup = &DuplicateKeyError{Key: string(key)}
			return
		}
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			s.bad = true
			return
		}
		s.i++
		s.value()
		if s.bad || s.dup != nil {
			if s.dup != nil {
				s.dup.Path = append(s.dup.Path, string(key))
			}
			return
		}
		s.ws()
		if s.i < len(s.b) && s.b[s.i] == ',' {
			s.i++
			continue
		}
		if s.i < len(s.b) && s.b[s.i] == '}' {
			s.i++
			return
		}
		s.bad = true
		return
	}
}
