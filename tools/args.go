package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/pgtools/pgtools/tools/internal/ident"
	"github.com/pgtools/pgtools/tools/words"
)

// This file holds each tool's arguments as a typed struct. Call parses a call's JSON once into
// the value the schema validates; once it has passed, encoding/json decodes the same JSON into the
// tool's struct (numbers as json.Number), so handlers read fields rather than probing a map, and
// a value the schema lets through but Go cannot hold (limit 1e30) is an invalid_arguments answer
// instead of a silent default.

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
	// PageToken is checked and merged into the other arguments by Registry.decodeCall, before
	// validation; what it held is the request's pager.
	PageToken string `json:"page_token"`
}

// pageArgs are the arguments a page token of the call carries, by name (page.Spec.Args
// normalizes them; an absent one is nil or "").
func (a *selectArgs) pageArgs() map[string]any {
	return map[string]any{"database": a.Database, "table": a.Table, "columns": a.Columns.v, "where": a.Where,
		"params": a.Params.v, "order_by": a.OrderBy, "limit": a.Limit.arg(), "format": a.Format}
}

type describeArgs struct {
	target
	Table  string `json:"table"`
	Schema string `json:"schema"`
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

// argDecoder decodes a validated call's JSON into its tool's argument struct.
type argDecoder func(raw []byte) (any, error)

// decoderFor returns the decoder of T: encoding/json, numbers kept as json.Number, an absent or
// null argument leaving its field zero. The schema has already checked every value's type, so
// a field never meets a value it cannot hold, except a number too large for Go (count).
func decoderFor[T any]() argDecoder {
	return func(raw []byte) (any, error) {
		v := new(T)
		return v, decodeJSON(raw, v)
	}
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
	raw json.Number // as the call wrote it; "" when absent
}

type countError struct{ raw, text string }

func (e *countError) Error() string { return e.text }

// UnmarshalJSON reads a JSON number; null is an absent count.
func (c *count) UnmarshalJSON(b []byte) error {
	*c = count{}
	if string(b) == "null" {
		return nil
	}
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		var v any
		_ = decodeJSON(b, &v)
		return &countError{fmt.Sprint(v), fmt.Sprintf("%s is not a number", words.Quote(fmt.Sprint(v)))}
	}
	raw := string(b) // a JSON number literal, as encoding/json scanned it
	if i, err := strconv.ParseInt(raw, 10, 64); err == nil {
		c.n, c.raw = i, json.Number(raw)
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
	c.n, c.raw = i, json.Number(raw)
	return nil
}

// MarshalJSON writes the number as the call wrote it; null when absent.
func (c count) MarshalJSON() ([]byte, error) {
	if c.raw == "" {
		return []byte("null"), nil
	}
	return []byte(c.raw), nil
}

// arg is the count as a decoded call holds it: the number as written, or nil when absent.
func (c count) arg() any {
	if c.raw == "" {
		return nil
	}
	return c.raw
}

// or returns the number, or def when the argument was absent.
func (c count) or(def int64) int64 {
	if c.raw == "" {
		return def
	}
	return c.n
}

// nameList is a list of names given as a JSON array or one comma-separated string.
type nameList struct{ v any }

// UnmarshalJSON keeps the value as decoded; null is an absent list.
func (l *nameList) UnmarshalJSON(b []byte) error { l.v = nil; return decodeJSON(b, &l.v) }

// MarshalJSON writes the value as the call gave it.
func (l nameList) MarshalJSON() ([]byte, error) { return json.Marshal(l.v) }

// names returns the list (nil when absent or empty).
func (l nameList) names() []string { return ident.List(l.v) }

// rawValue is an argument kept as decoded JSON (numbers as json.Number): params, which is an array
// or a string holding one.
type rawValue struct{ v any }

// UnmarshalJSON keeps the value as decoded; null is an absent value.
func (r *rawValue) UnmarshalJSON(b []byte) error { r.v = nil; return decodeJSON(b, &r.v) }

// MarshalJSON writes the value as the call gave it.
func (r rawValue) MarshalJSON() ([]byte, error) { return json.Marshal(r.v) }
