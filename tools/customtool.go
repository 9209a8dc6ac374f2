package tools

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"github.com/pgtools/pgtools/tools/internal/ident"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/page"
)

type (
	customParamFields CustomParam // CustomParam's fields without its JSON methods
	customItems       struct {
		Type string `json:"type"`
	}
)

// CustomTool is an operator-defined tool (docs/design.md §13): one parameterized statement published
// under a name of its own, served on every transport like a built-in tool and under the same
// rules — reads in READ ONLY transactions with the row and byte caps; writes with stated intent,
// max_affected_rows, dry_run and the audit log; scopes, roles and claims. Its JSON is an entry of
// the config file's custom_tools.
type CustomTool struct {
	// Name is the wire name: lower-case letters, digits and underscores, starting with a letter,
	// at most 64 characters, distinct from the built-in tools.
	Name string `json:"name"`
	// Description is what the model reads about the tool.
	Description string `json:"description"`
	// Database is the configured database it runs on (default "default").
	Database string `json:"database"`
	// SQL is one statement with $1 … $n, bound to Parameters in order.
	SQL string `json:"sql"`
	// Mode is "read" (default) or "write".
	Mode string `json:"mode"`
	// Parameters are the statement's parameters, in $n order.
	Parameters []CustomParam `json:"parameters,omitempty"`
	// OrderBy, for a read tool, orders its rows by columns of its result ("col [asc|desc]
	// [nulls first|last], …", ending with a unique one) and makes a truncated answer carry
	// next_page (custompages.go). "" (the default): rows come as the statement gives them.
	OrderBy string     `json:"order_by,omitempty"`
	order   page.Order // OrderBy resolved against the result's columns when the tool is added
}

// CustomParam is one parameter of a CustomTool.
type CustomParam struct {
	// Name is the argument name (lower-case letters, digits, underscores).
	Name string `json:"name"`
	// Type is its JSON type: string, integer, number, boolean, array or object.
	Type string `json:"type"`
	// Items is the JSON type of an array's elements (default string); the file spells it
	// {"type": …}, as JSON Schema does.
	Items string `json:"-"`
	// Description is what the model reads about it.
	Description string `json:"description,omitempty"`
	// Required makes the argument mandatory; an optional one without Default binds NULL.
	Required bool `json:"required,omitempty"`
	// Default is bound when the argument is absent.
	Default any `json:"default,omitempty"`
	// Enum limits the values.
	Enum []any `json:"enum,omitempty"`
	// Minimum and Maximum bound a number (nil: unbounded).
	Minimum *float64 `json:"minimum,omitempty"`
	Maximum *float64 `json:"maximum,omitempty"`
	// MaxLength bounds a string's length in characters (0: unbounded).
	MaxLength int `json:"maxLength,omitempty"`
}

// customParamJSON is a CustomParam as the config file spells it: items as a JSON Schema object,
// and default and enum as raw JSON, decoded with UseNumber so that an integer default binds as
// the integer it is (as call arguments do).
type customParamJSON struct {
	customParamFields
	Items   *customItems    `json:"items,omitempty"`
	Default json.RawMessage `json:"default,omitempty"`
	Enum    json.RawMessage `json:"enum,omitempty"`
}

// UnmarshalJSON reads a parameter as the config file spells it (customParamJSON).
func (p *CustomParam) UnmarshalJSON(b []byte) error {
	var f customParamJSON
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*p = CustomParam(f.customParamFields)
	if f.Items != nil {
		p.Items = f.Items.Type
	}
	p.Default = nil
	if err := decodeNumbers(f.Default, &p.Default); err != nil {
		return fmt.Errorf("parameter %q: default: %w", p.Name, err)
	}
	var enum any
	if err := decodeNumbers(f.Enum, &enum); err != nil {
		return fmt.Errorf("parameter %q: enum: %w", p.Name, err)
	}
	p.Enum, _ = enum.([]any)
	return nil
}

// MarshalJSON writes p as the config file spells it (customParamJSON).
func (p CustomParam) MarshalJSON() ([]byte, error) {
	f := customParamJSON{customParamFields: customParamFields(p)}
	f.customParamFields.Default, f.customParamFields.Enum = nil, nil
	if p.Items != "" {
		f.Items = &customItems{Type: p.Items}
	}
	var err error
	if p.Default != nil {
		if f.Default, err = json.Marshal(p.Default); err != nil {
			return nil, err
		}
	}
	if p.Enum != nil {
		if f.Enum, err = json.Marshal(p.Enum); err != nil {
			return nil, err
		}
	}
	return json.Marshal(f)
}

// decodeNumbers decodes raw into *v keeping numbers as json.Number; nothing for no raw.
func decodeNumbers(raw json.RawMessage, v *any) error {
	if len(raw) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	return d.Decode(v)
}

var customName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// CustomReservedArgs returns the argument names pgtools adds to every custom tool, which no
// parameter may take (for config validation before the registry exists).
func CustomReservedArgs() []string { return slices.Clone(reservedArgs) }

// Schema returns the JSON Schema (2020-12) of t's arguments as clients see it.
func (t CustomTool) Schema() json.RawMessage {
	props := map[string]any{}
	var required []string
	for _, p := range t.Parameters {
		s := map[string]any{"type": p.Type}
		if p.Description != "" {
			s["description"] = p.Description
		}
		if p.Type == "array" {
			s["items"] = map[string]any{"type": cmp.Or(p.Items, "string")}
		}
		if len(p.Enum) > 0 {
			s["enum"] = p.Enum
		}
		if p.Minimum != nil {
			s["minimum"] = *p.Minimum
		}
		if p.Maximum != nil {
			s["maximum"] = *p.Maximum
		}
		if p.MaxLength > 0 {
			s["maxLength"] = p.MaxLength
		}
		if p.Default != nil {
			s["default"] = p.Default
		}
		props[p.Name] = s
		if p.Required {
			required = append(required, p.Name)
		}
	}
	props["session_id"] = map[string]any{"type": "string", "description": "Session id from pg_tx begin: run inside that open transaction."}
	props["format"] = map[string]any{"type": "string", "enum": []string{"objects", "columns", "csv"}, "description": "Row format (default objects)."}
	k := customArgsFor(t.Mode)().access()
	if k == readsOnly && ident.TrimSpace(t.OrderBy) != "" {
		props["page_token"] = map[string]any{"type": "string", "minLength": 1, "description": "next_page of a truncated answer: continues after its last row."}
	}
	if k != readsOnly {
		props["autocommit"] = map[string]any{"type": "boolean", "description": "Set true to run and commit this call on its own (or give session_id)."}
		props["dry_run"] = map[string]any{"type": "boolean", "description": "Run, report the rows it would change, roll back."}
	}
	if k.judged() {
		props["approval_id"] = map[string]any{"type": "string", "description": "An approved request's id."}
	}
	doc := map[string]any{"type": "object", "description": t.Description, "additionalProperties": false, "properties": props}
	if len(required) > 0 {
		doc["required"] = required
	}
	raw, _ := wire.Marshal(doc)
	return raw
}

// jsonTypeFits tells whether a JSON value of type jt binds to a parameter of PostgreSQL type oid
// (category and array flag from pg_type).
func jsonTypeFits(jt string, category byte, isArray bool) bool {
	switch jt {
	case "array":
		return isArray
	case "object":
		return category == 'U' // json, jsonb
	case "boolean":
		return category == 'B'
	case "integer", "number":
		return category == 'N'
	case "string":
		return !isArray
	}
	return false
}

// CustomToolError is why NewRegistry refused the operator-defined tool at Index of
// Options.CustomTools; Err names the tool and what to fix.
type CustomToolError struct {
	Index int
	Err   error
}

func (e *CustomToolError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *CustomToolError) Unwrap() error { return e.Err }
