package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// This file holds each tool's arguments as a typed struct. Call decodes a call's JSON into its
// tool's struct once, after the schema has validated it, so handlers read fields rather than
// probing a map, and a value the schema lets through but Go cannot hold (limit 1e30) is an
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

// argDecoders decode a validated call into its tool's struct.
var argDecoders = map[string]func([]byte) (any, error){
	"select_query":    decodeInto[selectArgs],
	"describe_schema": decodeInto[describeArgs],
	"execute_sql":     decodeInto[executeArgs],
	"insert_data":     decodeInto[insertArgs],
	"update_data":     decodeInto[changeArgs],
	"delete_data":     decodeInto[changeArgs],
	"pg_tx":           decodeInto[txArgs],
	"pg_transaction":  decodeInto[batchArgs],
}

// decodeInto decodes raw into a new T with numbers kept as json.Number (never through float64).
func decodeInto[T any](raw []byte) (any, error) {
	v := new(T)
	if len(bytes.TrimSpace(raw)) == 0 {
		return v, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return v, dec.Decode(v)
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

// UnmarshalJSON implements json.Unmarshaler.
func (c *count) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	f, _, err := big.ParseFloat(string(b), 10, 256, big.ToNearestEven)
	if err != nil || !f.IsInt() {
		return &countError{string(b), fmt.Sprintf("%s is not a whole number", quoteForMessage(string(b)))}
	}
	i, acc := f.Int64()
	if acc != big.Exact {
		return &countError{string(b), fmt.Sprintf("%s is too large", quoteForMessage(string(b)))}
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

// UnmarshalJSON implements json.Unmarshaler.
func (l *nameList) UnmarshalJSON(b []byte) error { return json.Unmarshal(b, &l.v) }

// names returns the list (nil when absent or empty).
func (l nameList) names() []string { return listArg(l.v) }

// rawValue is an argument kept as decoded JSON (numbers as json.Number): params, which is an array
// or a string holding one.
type rawValue struct{ v any }

// UnmarshalJSON implements json.Unmarshaler.
func (r *rawValue) UnmarshalJSON(b []byte) error { return decodeJSON(b, &r.v) }
