package tools

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pgtools/pgtools/tools/words"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// What invalid_arguments says is read by a model and paid for per token, and a caller controls
// every byte of the arguments. So a message repeats at most a short prefix of any value or name
// it was sent (a 1 MB session_id must not come back whole), lists a bounded number of failing
// paths, and says in plain words what to send instead of quoting the schema's regular
// expressions.
const (
	// maxListedPaths bounds the failing argument paths one invalid_arguments message lists.
	maxListedPaths = 10
	// maxListedNames bounds the unknown property names one message lists.
	maxListedNames = 10
	// maxKindRunes caps a validator message whose wording this file does not choose, in case a
	// future schema keyword's message repeats the value (format and const messages do).
	maxKindRunes = 160
)

// Patterns of schemas/*.json, each with the advice a model reads instead of the expression.
const (
	patternNotBlank  = `\S`
	patternSessionID = `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	patternParams    = `^\s*(\[[\s\S]*\])?\s*$`
	patternSavepoint = `^[A-Za-z_][A-Za-z0-9_]{0,62}$`
)

func patternAdvice(pattern string) string {
	switch pattern {
	case patternNotBlank:
		return "must not be blank"
	case patternSessionID:
		return "must be a session id as pg_tx begin returned it (a UUID)"
	case patternParams:
		return `must be a JSON array such as [42, "shipped"], or a string holding one`
	case patternSavepoint:
		return "must be a savepoint name: letters, digits and underscores, not starting with a digit, at most 63 characters"
	}
	return "does not have the form the tool's description of this argument gives"
}

// kindMessage words one failed schema keyword. typeOnly reports a mismatch of JSON type alone,
// which under anyOf is usually the branch the caller did not mean.
func kindMessage(k jsonschema.ErrorKind, p *message.Printer) (msg string, typeOnly bool) {
	switch k := k.(type) {
	case *kind.Pattern:
		return patternAdvice(k.Want), false
	case *kind.Type:
		return k.LocalizedString(p), true
	case *kind.MinLength:
		if k.Want == 1 {
			return "must not be empty", false
		}
		return fmt.Sprintf("must be at least %d characters long", k.Want), false
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long (got %d)", k.Want, k.Got), false
	case *kind.AdditionalProperties:
		word := "unknown property "
		if len(k.Properties) > 1 {
			word = "unknown properties "
		}
		return word + quotedNames(k.Properties), false
	}
	short, cut := words.Clip(k.LocalizedString(p), maxKindRunes)
	if cut {
		short += "…"
	}
	return short, false
}

// quotedNames lists agent-supplied names for a message: at most maxListedNames, each quoted and
// clipped by quoteForMessage.
func quotedNames(names []string) string {
	quoted := make([]string, 0, min(len(names), maxListedNames))
	for _, n := range names[:min(len(names), maxListedNames)] {
		quoted = append(quoted, words.Quote(n))
	}
	list := strings.Join(quoted, ", ")
	if more := len(names) - len(quoted); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return list
}

// argPath writes a JSON-pointer-like location as messages show it: "rows/3/name", or
// "(arguments)" for the whole object. Every segment is clipped: keys come from the caller.
func argPath(loc []string) string {
	if len(loc) == 0 {
		return "(arguments)"
	}
	segs := make([]string, len(loc))
	for i, s := range loc {
		segs[i] = words.Unquoted(s)
	}
	return strings.Join(segs, "/")
}

// validationError lists the failing argument paths in one message, at most maxListedPaths.
func validationError(err error, t *toolEntry) *Error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return errorf(ErrInvalidArguments, "Check the arguments against the tool's schema.", "Invalid arguments")
	}
	printer := message.NewPrinter(language.English)
	type failure struct {
		msgs     []string
		typeOnly []bool
	}
	byKey := map[string]*failure{} // keyed by the unclipped location, so clipping merges nothing
	display := map[string]string{}
	var unknown []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		key := strings.Join(e.InstanceLocation, "\x00")
		msg, typeOnly := kindMessage(e.ErrorKind, printer)
		if ap, ok := e.ErrorKind.(*kind.AdditionalProperties); ok {
			unknown = append(unknown, ap.Properties...)
		}
		f := byKey[key]
		if f == nil {
			f = &failure{}
			byKey[key] = f
			display[key] = argPath(e.InstanceLocation)
		}
		if !slices.Contains(f.msgs, msg) {
			f.msgs = append(f.msgs, msg)
			f.typeOnly = append(f.typeOnly, typeOnly)
		}
	}
	walk(ve)
	// Under anyOf a value fails every branch: "got string, want array" from the array branch is
	// noise when the string branch's own check (a pattern, a length) failed at the same place or
	// below it, which means the caller meant that branch.
	meant := func(key string) bool {
		for other, f := range byKey {
			if other != key && !(key == "" || strings.HasPrefix(other, key+"\x00")) {
				continue
			}
			if slices.Contains(f.typeOnly, false) {
				return true
			}
		}
		return false
	}
	var lines []string
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return display[keys[i]] < display[keys[j]] })
	for _, k := range keys {
		f := byKey[k]
		msgs := f.msgs
		if slices.Contains(f.typeOnly, true) && meant(k) {
			msgs = nil
			for i, m := range f.msgs {
				if !f.typeOnly[i] {
					msgs = append(msgs, m)
				}
			}
		}
		if len(msgs) > 0 {
			lines = append(lines, display[k]+": "+strings.Join(msgs, " or "))
		}
	}
	msg := "Invalid arguments: "
	if len(lines) > maxListedPaths {
		msg += strings.Join(lines[:maxListedPaths], "; ") + fmt.Sprintf("; and %d more arguments with errors", len(lines)-maxListedPaths)
	} else {
		msg += strings.Join(lines, "; ")
	}
	suggestion := "Fix each listed argument and call again."
	if len(unknown) > 0 {
		suggestion = "Remove the unknown properties " + quotedNames(unknown) + ". Allowed: " + strings.Join(t.props, ", ") + "."
	}
	return &Error{Type: ErrInvalidArguments, Message: msg, Suggestion: suggestion}
}

// maxNULPaths bounds the argument paths a NUL error names.
const maxNULPaths = 5

// nulError reports the arguments that contain a NUL character, or nil. PostgreSQL refuses NUL in
// every text value (and pgx would send it only to see the statement fail with a misleading
// encoding error), so a call is refused before anything reaches the database, naming each place.
// base is the path of v ("" for the arguments object).
func nulError(v any, base string) *Error {
	var paths []string
	total := 0
	var walk func(v any, path string)
	walk = func(v any, path string) {
		switch x := v.(type) {
		case string:
			if strings.IndexByte(x, 0) >= 0 {
				total++
				if len(paths) < maxNULPaths {
					paths = append(paths, path)
				}
			}
		case []any:
			for i, el := range x {
				walk(el, joinPath(path, strconv.Itoa(i)))
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if strings.IndexByte(k, 0) >= 0 {
					total++
					if len(paths) < maxNULPaths {
						where := path
						if where == "" {
							where = "(arguments)"
						}
						paths = append(paths, "the property name "+words.Quote(k)+" in "+where)
					}
					continue
				}
				walk(x[k], joinPath(path, words.Unquoted(k)))
			}
		}
	}
	walk(v, base)
	if total == 0 {
		return nil
	}
	list := strings.Join(paths, ", ")
	verb := "contains"
	if total > 1 {
		verb = "contain"
	}
	if total > len(paths) {
		list += fmt.Sprintf(" and %d more", total-len(paths))
	}
	return errorf(ErrInvalidArguments, "Remove every NUL character from the named arguments; send binary data as base64 or hex text instead.",
		"Invalid arguments: %s %s a NUL character (\\u0000), which PostgreSQL cannot accept in text", list, verb)
}

func joinPath(base, seg string) string {
	if base == "" {
		return seg
	}
	return base + "/" + seg
}

// Bounds of the backstop every failed call passes through (clipEchoes).
const (
	// maxMessageRunes and maxSuggestionRunes cap an error's two texts. A suggestion may list 60
	// column names of up to 63 bytes.
	maxMessageRunes    = 2000
	maxSuggestionRunes = 4500
)

// clipEchoes is the last step of every failed call, after values were masked: whatever built the
// error — PostgreSQL's `syntax error at or near "<a 1 MB token>"` included — a quoted span keeps
// at most words.MaxEchoRunes characters once it is longer than any real name, and each text is capped.
func clipEchoes(e *Error) {
	e.Message = words.Cap(words.ClipQuoted(e.Message), maxMessageRunes)
	e.Suggestion = words.Cap(words.ClipQuoted(e.Suggestion), maxSuggestionRunes)
}
