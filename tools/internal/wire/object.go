package wire

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Rows is a row set as an answer carries it. An ObjectEncoder writes it under its field's key
// ("data": Data) or, when Columns is set (format columns), as two members, "columns": Columns then
// "rows": Data. Both hold JSON this package made and are copied as they are.
type Rows struct {
	Columns json.RawMessage // a JSON array of the column names; nil unless the format is columns
	Data    json.RawMessage // a JSON array of rows, or for CSV a JSON string
}

// ObjectEncoder writes values of the struct type T as JSON objects whose members follow the
// order in which T declares its fields, named by their json tags. It reads T's type once, in
// NewObjectEncoder, and keeps a plan of each field's index and kind, so a call only reads the
// fields' values (reflect.Value reads, which allocate nothing). It is safe for concurrent use.
//
// It writes string, bool and integer fields, pointers to integers and bools, json.RawMessage
// (copied verbatim, never re-validated: it exists for the JSON this package made, which
// encoding/json would scan again byte by byte), Rows, and every other type through Marshal.
// Embedded structs are flattened, as encoding/json does; "omitempty" is the one tag option, with
// encoding/json's meaning (a nil Rows has both fields nil).
type ObjectEncoder[T any] struct {
	prefix string // members written first, e.g. `"success":true`
	fields []objectField
	fixed  int // an estimate of an object's bytes beyond its strings and raw JSON, to size buffers
}

type fieldKind uint8

const (
	kindString fieldKind = iota
	kindBool
	kindInt
	kindIntPtr
	kindBoolPtr
	kindRaw
	kindRows
	kindOther // through Marshal
)

type objectField struct {
	index     []int        // the field's index path in T, through embedded structs
	typ       reflect.Type // the field's type, for kindOther
	key       string       // the member's name, quoted, with its colon: `"name":`
	kind      fieldKind
	omitEmpty bool
}

var (
	rawType           = reflect.TypeFor[json.RawMessage]()
	rowsType          = reflect.TypeFor[Rows]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// NewObjectEncoder plans the encoding of T, a struct type. prefix is raw JSON members written
// before T's fields (without a trailing comma), or "". It panics when T is not a struct, embeds
// anything but a struct, uses a tag option other than omitempty, or names two members alike:
// plans are built once, when the program starts, so a mistake shows at once.
func NewObjectEncoder[T any](prefix string) *ObjectEncoder[T] {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("wire.NewObjectEncoder: %s is not a struct", t))
	}
	e := &ObjectEncoder[T]{prefix: prefix}
	seen := map[string]bool{}
	if prefix != "" {
		// The prefix's own names count too, so a field cannot repeat one.
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte("{"+prefix+"}"), &m); err != nil {
			panic(fmt.Sprintf("wire.NewObjectEncoder: prefix %q is not JSON object members: %v", prefix, err))
		}
		for k := range m {
			seen[k] = true
		}
	}
	e.plan(t, nil, seen)
	e.fixed = 2 + len(e.prefix)
	for _, f := range e.fields {
		e.fixed += 1 + len(f.key) // the comma and the name
		switch f.kind {
		case kindString:
			e.fixed += 2 // the quotes
		case kindRaw:
		case kindRows:
			e.fixed += len(`"columns":,"rows":`)
		case kindOther:
			// nothing: such fields are often empty (an answer with active_session grows once)
		default:
			e.fixed += 20 // a number or a bool
		}
	}
	return e
}

func (e *ObjectEncoder[T]) plan(t reflect.Type, index []int, seen map[string]bool) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous && name == "" {
			if sf.Type.Kind() != reflect.Struct {
				panic(fmt.Sprintf("wire.NewObjectEncoder: embedded field %s of %s is not a struct", sf.Name, t))
			}
			e.plan(sf.Type, append(slices.Clone(index), i), seen)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if opts != "" && opts != "omitempty" {
			panic(fmt.Sprintf("wire.NewObjectEncoder: field %s of %s: tag option %q is not supported", sf.Name, t, opts))
		}
		if name == "" {
			name = sf.Name
		}
		if seen[name] {
			panic(fmt.Sprintf("wire.NewObjectEncoder: field %s of %s repeats the member %q", sf.Name, t, name))
		}
		seen[name] = true
		if sf.Type == rowsType {
			for _, m := range []string{"columns", "rows"} {
				if seen[m] && m != name {
					panic(fmt.Sprintf("wire.NewObjectEncoder: field %s of %s: Rows writes %q, which another member has", sf.Name, t, m))
				}
				seen[m] = true
			}
		}
		f := objectField{index: append(slices.Clone(index), i), typ: sf.Type, key: string(AppendString(nil, name)) + ":",
			kind: kindOf(sf.Type), omitEmpty: opts == "omitempty"}
		e.fields = append(e.fields, f)
	}
}

// kindOf picks how a field of type t is written. A type with its own JSON or text form goes
// through Marshal, whatever its kind.
func kindOf(t reflect.Type) fieldKind {
	switch {
	case t == rawType:
		return kindRaw
	case t == rowsType:
		return kindRows
	case t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType) ||
		reflect.PointerTo(t).Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType):
		return kindOther
	}
	switch t.Kind() {
	case reflect.String:
		return kindString
	case reflect.Bool:
		return kindBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return kindInt
	case reflect.Pointer:
		switch el := t.Elem(); {
		case el.Implements(jsonMarshalerType) || el.Implements(textMarshalerType):
		case el.Kind() == reflect.Bool:
			return kindBoolPtr
		case el.Kind() >= reflect.Int && el.Kind() <= reflect.Int64:
			return kindIntPtr
		}
	}
	return kindOther
}

// Marshal returns v as one JSON object, in a buffer sized for its strings and raw JSON, so that
// it is allocated once.
func (e *ObjectEncoder[T]) Marshal(v *T) ([]byte, error) {
	rv := reflect.ValueOf(v).Elem()
	size := e.fixed
	for i := range e.fields {
		switch f := &e.fields[i]; f.kind {
		case kindString, kindRaw:
			size += rv.FieldByIndex(f.index).Len()
		case kindRows:
			r := rv.FieldByIndex(f.index)
			size += r.Field(0).Len() + r.Field(1).Len()
		}
	}
	return e.Append(make([]byte, 0, size), v)
}

// Append appends v as one JSON object to b.
func (e *ObjectEncoder[T]) Append(b []byte, v *T) ([]byte, error) {
	rv := reflect.ValueOf(v).Elem()
	b = append(b, '{')
	b = append(b, e.prefix...)
	first := e.prefix == ""
	for i := range e.fields {
		f := &e.fields[i]
		fv := rv.FieldByIndex(f.index)
		switch f.kind {
		case kindString:
			if s := fv.String(); s != "" || !f.omitEmpty {
				b = AppendString(appendKey(b, f.key, &first), s)
			}
		case kindBool:
			if x := fv.Bool(); x || !f.omitEmpty {
				b = strconv.AppendBool(appendKey(b, f.key, &first), x)
			}
		case kindInt:
			if n := fv.Int(); n != 0 || !f.omitEmpty {
				b = strconv.AppendInt(appendKey(b, f.key, &first), n, 10)
			}
		case kindIntPtr, kindBoolPtr:
			switch {
			case !fv.IsNil() && f.kind == kindIntPtr:
				b = strconv.AppendInt(appendKey(b, f.key, &first), fv.Elem().Int(), 10)
			case !fv.IsNil():
				b = strconv.AppendBool(appendKey(b, f.key, &first), fv.Elem().Bool())
			case !f.omitEmpty:
				b = append(appendKey(b, f.key, &first), "null"...)
			}
		case kindRaw:
			if raw := fv.Bytes(); len(raw) > 0 || !f.omitEmpty {
				b = appendRawOrNull(appendKey(b, f.key, &first), raw)
			}
		case kindRows:
			switch columns, data := fv.Field(0).Bytes(), fv.Field(1).Bytes(); {
			case columns != nil:
				b = append(appendRawOrNull(appendKey(b, `"columns":`, &first), columns), `,"rows":`...)
				b = appendRawOrNull(b, data)
			case data != nil || !f.omitEmpty:
				b = appendRawOrNull(appendKey(b, f.key, &first), data)
			}
		default:
			if f.omitEmpty && isEmpty(fv) {
				continue
			}
			out, err := Marshal(fv.Interface())
			if err != nil {
				return nil, fmt.Errorf("encoding %s: %w", f.key, err)
			}
			b = append(appendKey(b, f.key, &first), out...)
		}
	}
	return append(b, '}'), nil
}

// appendKey starts a member: a comma unless it is the object's first, then its quoted name.
func appendKey(b []byte, key string, first *bool) []byte {
	if !*first {
		b = append(b, ',')
	}
	*first = false
	return append(b, key...)
}

func appendRawOrNull(b, raw []byte) []byte {
	if len(raw) == 0 {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// isEmpty is encoding/json's test for omitempty.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}
