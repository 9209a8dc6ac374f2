package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// decodeJSON decodes with UseNumber so every number keeps its exact text and is bound as written.
func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("unexpected data after the JSON value")
	}
	return nil
}

// paramList normalises the params argument: a JSON array, or a string holding a JSON array
// (n8n's $fromAI sends json parameters as strings). It refuses more values than one statement
// can bind, and, in the string form, values with a NUL character (Registry.Call checks the
// array form with the other arguments).
func paramList(v any) ([]any, *Error) {
	switch p := v.(type) {
	case nil:
		return nil, nil
	case []any:
		return p, checkParamCount(len(p), "params")
	case string:
		if strings.TrimSpace(p) == "" {
			return nil, nil
		}
		var out []any
		if err := decodeJSON([]byte(p), &out); err != nil {
			return nil, errorf(ErrInvalidArguments, `Pass params as a JSON array, e.g. [42, "shipped"]; element 1 binds to $1.`,
				"Invalid arguments: params is a string but not a JSON array")
		}
		if e := checkParamCount(len(out), "params"); e != nil {
			return nil, e
		}
		if e := nulError(out, "params"); e != nil {
			return nil, e
		}
		return out, nil
	}
	return nil, errorf(ErrInvalidArguments, `Pass params as a JSON array, e.g. [42, "shipped"].`, "Invalid arguments: params must be an array")
}

// checkParamCount refuses n bound values when they exceed what the protocol carries in one
// statement (maxBindParams): pgx would fail before sending, with an error that reads like a
// broken connection. what names the values for the message, e.g. "params".
func checkParamCount(n int, what string) *Error {
	if n <= maxBindParams {
		return nil
	}
	return errorf(ErrInvalidArguments,
		fmt.Sprintf("Bind a list as one array value instead, e.g. where id = ANY($1) with params [[1, 2, 3]], or split the work into calls of at most %d values.", maxBindParams),
		"Invalid arguments: %s has %d values, more than the %d parameters PostgreSQL accepts in one statement", what, n, maxBindParams)
}

// needsTypes reports whether a parameter's text form depends on the type PostgreSQL infers for its
// placeholder: a JSON array binds as a PostgreSQL array literal for an array type and as JSON text
// for json/jsonb.
func needsTypes(params []any) bool {
	for _, p := range params {
		if _, ok := p.([]any); ok {
			return true
		}
	}
	return false
}

// encodeParams renders params in PostgreSQL's text format. Parameters are sent with type OID 0
// (unknown) so PostgreSQL infers each type from its use: "42" binds to an int column, a uuid
// column or a text column alike, and "1.5" against an int column is refused instead of being
// rounded. oids, when known, are the server-inferred types from a Describe.
func encodeParams(params []any, oids []uint32) ([][]byte, error) {
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
			return nil, fmt.Errorf("params[%d]: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}

func encodeParam(v any, oid uint32) ([]byte, error) {
	if v != nil && (oid == oidJSON || oid == oidJSONB) {
		// A json column takes every value as JSON: the string "hi" is "\"hi\"".
		return jsonMarshal(v)
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
		if _, isArray := arrayElems[oid]; isArray || (oid != 0 && oid != oidJSON && oid != oidJSONB && oid != 25) {
			return appendArrayLiteral(nil, x)
		}
		return jsonMarshal(x)
	case map[string]any:
		return jsonMarshal(x)
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
