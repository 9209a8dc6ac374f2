package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strconv"
	"strings"

	"github.com/pgtools/pgtools/tools/internal/ident"
	"github.com/pgtools/pgtools/tools/words"
)

// This file holds each tool's arguments as a typed struct. Call parses a call's JSON once, into
// the map the schema validates, and then fills its tool's struct from that map, so handlers read
// fields rather than probing a map, and a value the schema lets through but Go cannot hold (limit 1e30) is an
// invalid_arguments answer instead of a silent default.

// target is the routing part every tool takes.
type target struct {
	Database  string `json:"database"`
	SessionID string `json:"session_id"`
}

type selectArgs struct {
	target
	Format  string   `json:"format"`
	Table   string   `json:"table"`
	Columns nameList `json:"columns"`
	Where   string   `json:"where"`
	Params  rawValue `json:"params"`
	OrderBy string   `json:"order_by"`
	Limit   count    `json:"limit"`
	Offset  count    `json:"offset"`
	// PageToken is checked and merged into the other arguments by Registry.decodeCall; page is
	// what it held, nil on a first page.
	PageToken string `json:"page_token"`
	paging
}

// paging is what a tool that issues page tokens needs of its call: the token it was given (nil:
// a first page), the signer and the caller its next token is bound to.
type paging struct {
	page   *pageState
	pages  *pager
	caller Principal
	spec   *pageSpec
}

// pageable is an argument struct that takes page tokens.
type pageable interface {
	setPage(st *pageState, pg *pager, p Principal, spec *pageSpec)
}

func (pa *paging) setPage(st *pageState, pg *pager, p Principal, spec *pageSpec) {
	pa.page, pa.pages, pa.caller, pa.spec = st, pg, p, spec
}

type describeArgs struct {
	target
	Table     string `json:"table"`
	Schema    string `json:"schema"`
	Search    string `json:"search"`
	Kind      string `json:"kind"`
	Detail    string `json:"detail"`
	Limit     count  `json:"limit"`
	PageToken string `json:"page_token"` // merged by Registry.decodeCall, like selectArgs'
	paging
}

type executeArgs struct {
	target
	Format             string   `json:"format"`
	SQL                string   `json:"sql"`
	Params             rawValue `json:"params"`
	Mode               string   `json:"mode"`
	ConfirmDestructive bool     `json:"confirm_destructive"`
	Autocommit         bool     `json:"autocommit"`
}

type insertArgs struct {
	target
	Format     string           `json:"format"`
	Table      string           `json:"table"`
	Row        map[string]any   `json:"row"`
	Rows       []map[string]any `json:"rows"`
	Returning  nameList         `json:"returning"`
	OnConflict *conflictArgs    `json:"on_conflict"`
	Autocommit bool             `json:"autocommit"`
}

type conflictArgs struct {
	Columns       nameList `json:"columns"`
	Action        string   `json:"action"`
	UpdateColumns nameList `json:"update_columns"`
}

// changeArgs are update_data's and delete_data's (delete has no set).
type changeArgs struct {
	target
	Format          string         `json:"format"`
	Table           string         `json:"table"`
	Set             map[string]any `json:"set"`
	Where           string         `json:"where"`
	Params          rawValue       `json:"params"`
	Returning       nameList       `json:"returning"`
	DryRun          bool           `json:"dry_run"`
	MaxAffectedRows count          `json:"max_affected_rows"`
	Autocommit      bool           `json:"autocommit"`
}

type txArgs struct {
	target
	Action         string `json:"action"`
	Name           string `json:"name"`
	IsolationLevel string `json:"isolation_level"`
	ReadOnly       bool   `json:"read_only"`
}

type batchArgs struct {
	target
	Format     string `json:"format"`
	Action     string `json:"action"`
	Operations []struct {
		SQL    string   `json:"sql"`
		Params rawValue `json:"params"`
	} `json:"operations"`
}

// argDecoder builds a tool's argument struct from the call's arguments as Call decoded them for
// the schema (numbers as json.Number).
type argDecoder func(args map[string]any) (any, error)

// decoderFor returns the decoder of T. The call's JSON is parsed once, into the map the schema
// validates; the struct is filled from that map by a field plan made here, once per type, so no
// call parses its JSON a second time.
func decoderFor[T any]() argDecoder {
	fill := structFiller(reflect.TypeFor[T]())
	return func(args map[string]any) (any, error) {
		v := new(T)
		return v, fill(reflect.ValueOf(v).Elem(), args, "")
	}
}

// argValue is an argument type that takes its value as decoded JSON (count, nameList, rawValue).
type argValue interface{ setArg(v any) error }

// filler sets dst from v, a decoded JSON value; path names the argument for errors.
type filler func(dst reflect.Value, v any, path string) error

// structFiller returns the filler of struct type t: each field by its json tag, embedded structs
// flattened. An absent or null argument leaves the field zero.
func structFiller(t reflect.Type) func(dst reflect.Value, args map[string]any, path string) error {
	type field struct {
		index []int
		name  string
		fill  filler
	}
	var fields []field
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous || name == "" || name == "-" {
			continue
		}
		fields = append(fields, field{f.Index, name, fillerOf(f.Type)})
	}
	return func(dst reflect.Value, args map[string]any, path string) error {
		for _, f := range fields {
			v, ok := args[f.name]
			if !ok || v == nil {
				continue
			}
			if err := f.fill(dst.FieldByIndex(f.index), v, path+f.name); err != nil {
				return err
			}
		}
		return nil
	}
}

// fillerOf returns the filler of an argument field's type.
func fillerOf(t reflect.Type) filler {
	if reflect.PointerTo(t).Implements(reflect.TypeFor[argValue]()) {
		return func(dst reflect.Value, v any, _ string) error { return dst.Addr().Interface().(argValue).setArg(v) }
	}
	typeError := func(v any, path string) error {
		return &json.UnmarshalTypeError{Value: fmt.Sprintf("%T", v), Type: t, Field: path}
	}
	switch t.Kind() {
	case reflect.String:
		return func(dst reflect.Value, v any, path string) error {
			s, ok := v.(string)
			if !ok {
				return typeError(v, path)
			}
			dst.SetString(s)
			return nil
		}
	case reflect.Bool:
		return func(dst reflect.Value, v any, path string) error {
			b, ok := v.(bool)
			if !ok {
				return typeError(v, path)
			}
			dst.SetBool(b)
			return nil
		}
	case reflect.Map: // map[string]any: a row or a set, kept as decoded
		return func(dst reflect.Value, v any, path string) error {
			m, ok := v.(map[string]any)
			if !ok {
				return typeError(v, path)
			}
			dst.Set(reflect.ValueOf(m))
			return nil
		}
	case reflect.Pointer:
		elem := fillerOf(t.Elem())
		return func(dst reflect.Value, v any, path string) error {
			p := reflect.New(t.Elem())
			if err := elem(p.Elem(), v, path); err != nil {
				return err
			}
			dst.Set(p)
			return nil
		}
	case reflect.Slice:
		elem := fillerOf(t.Elem())
		return func(dst reflect.Value, v any, path string) error {
			list, ok := v.([]any)
			if !ok {
				return typeError(v, path)
			}
			out := reflect.MakeSlice(t, len(list), len(list))
			for i, item := range list {
				if item == nil {
					continue
				}
				if err := elem(out.Index(i), item, path+"."+strconv.Itoa(i)); err != nil {
					return err
				}
			}
			dst.Set(out)
			return nil
		}
	case reflect.Struct:
		fill := structFiller(t)
		return func(dst reflect.Value, v any, path string) error {
			m, ok := v.(map[string]any)
			if !ok {
				return typeError(v, path)
			}
			return fill(dst, m, path+".")
		}
	}
	panic(fmt.Sprintf("tools: no argument filler for %s", t)) // a programming error, found by any test
}

// argsError is the answer to a validated call whose value Go cannot hold; args, the same call
// as a map, names the argument.
func argsError(err error, args map[string]any) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return errorf(ErrInvalidArguments, "Fix the named argument and call again.", "Invalid arguments: %s: %s", strings.ReplaceAll(te.Field, ".", "/"), plainTypeError(te))
	}
	var ce *countError
	if errors.As(err, &ce) {
		name := "a number"
		for k, v := range args {
			if n, ok := v.(json.Number); ok && string(n) == ce.raw {
				name = k
			}
		}
		return errorf(ErrInvalidArguments, "Give a whole number that is not too large, e.g. 100.", "Invalid arguments: %s: %s", name, ce.Error())
	}
	return errorf(ErrInvalidArguments, "Check the arguments against the tool's schema.", "Invalid arguments: they do not fit the tool's argument types")
}

func plainTypeError(te *json.UnmarshalTypeError) string {
	return "must be " + map[string]string{"string": "a string", "bool": "true or false", "map[string]interface {}": "an object",
		"[]map[string]interface {}": "an array of objects"}[te.Type.String()]
}

// count is an optional whole number: the schema's integer, which JSON may write as 100, 100.0 or
// 1e2. It is exact (never through float64) and refuses what does not fit an int64.
type count struct {
	n   int64
	set bool
}

type countError struct{ raw, text string }

func (e *countError) Error() string { return e.text }

func (c *count) setArg(v any) error {
	n, ok := v.(json.Number)
	if !ok {
		return &countError{fmt.Sprint(v), fmt.Sprintf("%s is not a number", words.Quote(fmt.Sprint(v)))}
	}
	raw := string(n)
	if i, err := strconv.ParseInt(raw, 10, 64); err == nil {
		c.n, c.set = i, true
		return nil
	}
	// 1e2 and 100.0 are whole numbers too; read them exactly, never through float64.
	f, _, err := big.ParseFloat(raw, 10, 256, big.ToNearestEven)
	if err != nil || !f.IsInt() {
		return &countError{raw, fmt.Sprintf("%s is not a whole number", words.Quote(raw))}
	}
	i, acc := f.Int64()
	if acc != big.Exact {
		return &countError{raw, fmt.Sprintf("%s is too large", words.Quote(raw))}
	}
	c.n, c.set = i, true
	return nil
}

// or returns the number, or def when the argument was absent.
func (c count) or(def int64) int64 {
	if !c.set {
		return def
	}
	return c.n
}

// nameList is a list of names given as a JSON array or one comma-separated string.
type nameList struct{ v any }

func (l *nameList) setArg(v any) error { l.v = v; return nil }

// names returns the list (nil when absent or empty).
func (l nameList) names() []string { return ident.List(l.v) }

// rawValue is an argument kept as decoded JSON (numbers as json.Number): params, which is an array
// or a string holding one.
type rawValue struct{ v any }

func (r *rawValue) setArg(v any) error { r.v = v; return nil }
