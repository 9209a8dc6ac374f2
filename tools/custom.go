package tools

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pgtools/pgtools/tools/internal/ident"
	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/page"
	"github.com/pgtools/pgtools/tools/words"
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

type (
	customParamFields CustomParam // CustomParam's fields without its JSON methods
	customItems       struct {
		Type string `json:"type"`
	}
)

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

// reservedArgs are the arguments pgtools adds to a custom tool beside its parameters.
var reservedArgs = []string{"session_id", "autocommit", "dry_run", "format", "page_token", "approval_id"}

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
	if t.Mode != "write" && ident.TrimSpace(t.OrderBy) != "" {
		props["page_token"] = map[string]any{"type": "string", "minLength": 1, "description": "next_page of a truncated answer: continues after its last row."}
	}
	if t.Mode == "write" {
		props["autocommit"] = map[string]any{"type": "boolean", "description": "Set true to run and commit this call on its own (or give session_id)."}
		props["dry_run"] = map[string]any{"type": "boolean", "description": "Run, report the rows it would change, roll back."}
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

// addCustomTools checks and registers operator-defined tools (Options.CustomTools). Each statement is prepared on its
// database (as the login role), which proves it is one valid statement there; its parameter count
// and the types PostgreSQL infers must fit the declared parameters. The error names the tool
// and the parameter to fix. NewRegistry calls it before the registry serves.
func (r *Registry) addCustomTools(ctx context.Context, list []CustomTool) error {
	c := jsonschema.NewCompiler()
	for i, t := range list {
		if err := r.addCustomTool(ctx, c, t); err != nil {
			return &CustomToolError{Index: i, Err: err}
		}
	}
	return nil
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

func (r *Registry) addCustomTool(ctx context.Context, c *jsonschema.Compiler, t CustomTool) error {
	if t.Mode == "" {
		t.Mode = "read"
	}
	if t.Database == "" {
		t.Database = "default"
	}
	where := fmt.Sprintf("custom tool %q", t.Name)
	switch {
	case !customName.MatchString(t.Name):
		return fmt.Errorf("%s: the name must be lower-case letters, digits and underscores, starting with a letter (at most 64)", where)
	case r.tools[t.Name] != nil:
		return fmt.Errorf("%s: the name is taken by another tool; choose another", where)
	case t.Mode != "read" && t.Mode != "write":
		return fmt.Errorf("%s: mode must be read or write, not %q", where, t.Mode)
	case strings.TrimSpace(t.Description) == "":
		return fmt.Errorf("%s: give a description: it is what the model reads", where)
	}
	db, ok := r.dbs[t.Database]
	if !ok {
		return fmt.Errorf("%s: database %q is not configured (databases: %s)", where, t.Database, words.List(r.Databases()))
	}
	seen := map[string]bool{}
	for i, p := range t.Parameters {
		pw := fmt.Sprintf("%s parameter %d (%q)", where, i+1, p.Name)
		switch {
		case !customName.MatchString(p.Name):
			return fmt.Errorf("%s: the name must be lower-case letters, digits and underscores", pw)
		case seen[p.Name] || slices.Contains(reservedArgs, p.Name):
			return fmt.Errorf("%s: the name is used twice or reserved (%s)", pw, strings.Join(reservedArgs, ", "))
		case !slices.Contains([]string{"string", "integer", "number", "boolean", "array", "object"}, p.Type):
			return fmt.Errorf("%s: type must be string, integer, number, boolean, array or object, not %q", pw, p.Type)
		}
		seen[p.Name] = true
	}
	if err := checkStatement(ctx, db, t); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	if err := checkCustomOrder(ctx, db, &t); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	raw := t.Schema()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	url := "mem://custom/" + t.Name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return fmt.Errorf("%s: the parameters do not make a valid schema: %w", where, err)
	}
	write := t.Mode == "write"
	// An operator-defined tool is its own kind, with a gate built here rather than in the
	// tool table, checked the same way.
	g := gate{access: readsOnly, session: always, readOnlyFix: noWritesFix}
	scope := "read"
	var pv previewer
	if write {
		g.access, g.intent, scope, pv = writesAlways, true, "write", previewCustom
	}
	if err := g.check(); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	tool := t
	r.tools[t.Name] = &toolEntry{
		info:      ToolInfo{Name: t.Name, Description: t.Description, InputSchema: raw, ReadOnly: !write, Destructive: write},
		plain:     withoutApprovalID(raw),
		operation: t.Name, scope: scope, props: schemaProperties(raw), schema: sch, gate: g, database: t.Database, preview: pv,
		decode: func(map[string]any) (any, error) { return &customArgs{}, nil },
		run:    func(ctx context.Context, req *request) (Result, *Error) { return runCustom(ctx, req, tool) },
	}
	if len(t.order) > 0 {
		r.tools[t.Name].paging = customPages(t)
	}

	r.order = append(r.order, t.Name)
	return nil
}

// checkStatement prepares t's statement on db and compares what PostgreSQL infers with the
// declared parameters.
func checkStatement(ctx context.Context, db *Database, t CustomTool) error {
	if e := checkFreeSQL(t.SQL, t.Mode == "read", false); e != nil {
		return fmt.Errorf("the statement is refused: %s", e.Message)
	}
	conn, err := db.acquire(ctx)
	if err != nil {
		return fmt.Errorf("connecting to database %q to check the statement: %w", t.Database, err)
	}
	defer conn.Release()
	sd, err := conn.Conn().PgConn().Prepare(ctx, "", t.SQL, nil)
	if err != nil {
		return fmt.Errorf("PostgreSQL does not accept the statement: %s", ClassifyError(ctx, err, db).Message)
	}
	if len(sd.ParamOIDs) != len(t.Parameters) {
		return fmt.Errorf("the statement has %d parameters ($1 … $%d) but %d are declared; declare one per $n, in order", len(sd.ParamOIDs), len(sd.ParamOIDs), len(t.Parameters))
	}
	for i, oid := range sd.ParamOIDs {
		var category, typname string
		var isArray bool
		if err := conn.QueryRow(ctx, "SELECT typcategory::text, typname::text, typcategory = 'A' FROM pg_catalog.pg_type WHERE oid = $1", oid).Scan(&category, &typname, &isArray); err != nil {
			return fmt.Errorf("reading the type of $%d: %w", i+1, err)
		}
		p := t.Parameters[i]
		if !jsonTypeFits(p.Type, category[0], isArray) {
			return fmt.Errorf("parameter %d (%q) is declared %s, but PostgreSQL takes $%d as %s: declare a type that fits, or cast $%d in the statement (e.g. $%d::text)", i+1, p.Name, p.Type, i+1, typname, i+1, i+1)
		}
	}
	return nil
}

// runCustom binds a call's arguments to t's statement in declared order and runs it: a read in a
// READ ONLY transaction, a write guarded like execute_sql in write mode.
func runCustom(ctx context.Context, req *request, t CustomTool) (Result, *Error) {
	params := make([]any, len(t.Parameters))
	for i, p := range t.Parameters {
		v, ok := req.args[p.Name]
		if !ok {
			v = p.Default
		}
		params[i] = v
	}
	format := req.format(strArg(req.args, "format"))
	if t.Mode != "write" {
		limit := req.db.Policy.DefaultLimit
		st := wire.Stmt{SQL: t.SQL, Params: params, MaxRows: limit + 1, MaxBytes: req.maxBytes, Format: format}
		a, _ := req.in.(*customArgs)
		paged := len(t.order) > 0 && a != nil && a.pages != nil
		if paged {
			sql, kp, perr := customPageSQL(t, len(params), a.page, limit)
			if perr != nil {
				return nil, perr
			}
			st.SQL, st.Params, st.KeyCols = sql, append(params, kp...), len(t.order)
		}
		rs, err := req.readOn(ctx, req.session, st)
		if err != nil {
			return nil, req.statementError(ctx, err, stmtInfo{sql: t.SQL, paramCols: paramNames(t), paramArgs: true, readOnly: true})
		}
		res := rowsResult(t.Name, "", rs, limit, 0, req.maxBytes)
		res.Command = rs.Tag
		if paged && rs.Truncated && rs.RowCount > 0 {
			res.NextPage = a.next(t.Name, req.args, rs, true, 0)
			res.Hint = fmt.Sprintf("More rows match than the %d shown; call again with page_token set to next_page for the next page.", rs.RowCount)
		}
		return res, nil
	}
	dry := boolArg(req.args, "dry_run")
	st := writeStmt{approval: req.approval, budget: req.budget, op: t.Name, sql: t.SQL, params: params, keepRows: req.db.Policy.DefaultLimit, maxBytes: req.maxBytes,
		free: true, allowDDL: req.allowDDL, ddlFix: req.ddlFix, maxAffected: req.db.Policy.MaxAffectedRows, who: req.who(), format: format, dryRun: dry}
	if dry {
		st.keepRows, st.maxAffected = previewRows, 0 // a dry run reports the count; the cap applies when it is applied
	}
	out, err := runWriteOn(ctx, req.db, req.session, st)
	if err != nil {
		return nil, req.statementError(ctx, err, stmtInfo{sql: t.SQL, paramCols: paramNames(t), paramArgs: true})
	}
	res := writeResult(t.Name, "", out, dry, req.maxBytes)
	res.Command = out.tag
	if dry {
		noteOverCap(res, out.affected, req.db.Policy.MaxAffectedRows)
	}
	return res, nil
}

func paramNames(t CustomTool) []string {
	out := make([]string, len(t.Parameters))
	for i, p := range t.Parameters {
		out[i] = p.Name
	}
	return out
}
