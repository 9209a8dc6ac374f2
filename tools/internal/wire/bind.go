// Package wire is pgtools' side of PostgreSQL's extended query protocol: the one-round-trip read
// pipeline (frames of BEGIN READ ONLY or a session savepoint around the agent's statement, with
// a portal row limit), the per-connection cache of named prepared statements, binding JSON
// values as untyped text parameters, and the row encoder that writes PostgreSQL's text results
// as lossless JSON. It is the only package that speaks pgproto3. It knows nothing of tools,
// policies or agents: callers pass limits in and classify the errors that come out.
package wire

import (
	"encoding/json"
	"fmt"
)

// ParamError is a value EncodeParams cannot bind: the caller's argument, not the database, is wrong.
type ParamError struct {
	Index int
	Err   error
}

func (e *ParamError) Error() string { return fmt.Sprintf("params[%d]: %v", e.Index, e.Err) }

// Unwrap returns the underlying error.
func (e *ParamError) Unwrap() error { return e.Err }

// NeedsTypes reports whether a parameter's text form depends on the type PostgreSQL infers for its
// placeholder: a JSON array binds as a PostgreSQL array literal for an array type and as JSON text
// for json/jsonb.
func NeedsTypes(params []any) bool {
	for _, p := range params {
		if _, ok := p.([]any); ok {
			return true
		}
	}
	return false
}

// EncodeParams renders params in PostgreSQL's text format. Parameters are sent with type OID 0
// (unknown) so PostgreSQL infers each type from its use: "42" binds to an int column, a uuid
// column or a text column alike, and "1.5" against an int column is refused instead of being
// rounded. oids, when known, are the server-inferred types from a Describe.
func EncodeParams(params []any, oids []uint32) ([][]byte, error) {
	if len(params) == 0 {
		return nil, nil
	}
	out := make([][]byte, len(params))
	for i, p := range params {
		var oid uint32
		if i < len(oids) {
			oid = oids[i]
		}
		b, err := encodeParam(p, oid)
		if err != nil {
			return nil, &ParamError{Index: i, Err: err}
		}
		out[i] = b
	}
	return out, nil
}

// Text is a parameter already in PostgreSQL's text format for its placeholder's type (a value
// PostgreSQL itself sent as text): bound as it is, whatever type the placeholder has.
type Text string

func encodeParam(v any, oid uint32) ([]byte, error) {
	if t, ok := v.(Text); ok {
		return []byte(t), nil
	}
	if v != nil && (oid == OIDJSON || oid == OIDJSONB) {
		// A json column takes every value as JSON: the string "hi" is "\"hi\"".
		return Marshal(v)
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool:
		if x {
			return []byte("true"), nil
		}
		return []byte("false"), nil
	case json.Number:
		return []byte(x), nil
	case string:
		return []byte(x), nil
	case []any:
		if _, isArray := arrayElems[oid]; isArray || (oid != 0 && oid != OIDJSON && oid != OIDJSONB && oid != 25) {
			return appendArrayLiteral(nil, x)
		}
		return Marshal(x)
	case map[string]any:
		return Marshal(x)
	}
	return nil, fmt.Errorf("unsupported value type %T", v)
}

// appendArrayLiteral writes a JSON array as a PostgreSQL array literal: {1,"two",NULL,{3,4}}.
func appendArrayLiteral(dst []byte, arr []any) ([]byte, error) {
	dst = append(dst, '{')
	for i, e := range arr {
		if i > 0 {
			dst = append(dst, ',')
		}
		switch x := e.(type) {
		case nil:
			dst = append(dst, "NULL"...)
		case []any:
			var err error
			if dst, err = appendArrayLiteral(dst, x); err != nil {
				return nil, err
			}
		default:
			b, err := encodeParam(x, 0)
			if err != nil {
				return nil, err
			}
			dst = append(dst, '"')
			for _, c := range b {
				if c == '"' || c == '\\' {
					dst = append(dst, '\\')
				}
				dst = append(dst, c)
			}
			dst = append(dst, '"')
		}
	}
	return append(dst, '}'), nil
}

// MergeOIDs is the parameter types a statement is bound with: those PostgreSQL described
// (described), except where the caller knows better (known, 0: no opinion), e.g. a column's
// own type for a value written to it.
func MergeOIDs(described, known []uint32) []uint32 {
	out := append([]uint32(nil), described...)
	for i := range out {
		if i < len(known) && known[i] != 0 {
			out[i] = known[i]
		}
	}
	return out
}
