package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/words"
)

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
	// An operator-defined tool is its own kind, with a gate built here rather than in the
	// tool table, checked the same way. Its mode picks its argument type, which says whether
	// it writes.
	newArgs := customArgsFor(t.Mode)
	k := newArgs().access()
	write := k != readsOnly
	var g gate
	scope := "read"
	var pv previewer
	tool := t
	run := bind(func(ctx context.Context, req *request, a *customReadArgs) (Result, *Error) {
		return runCustomRead(ctx, req, tool, a)
	})
	if write {
		g, scope, pv = gate{intent: true, readOnlyFix: noWritesFix}, "write", previewCustom
		run = bind(func(ctx context.Context, req *request, a *customWriteArgs) (Result, *Error) {
			return runCustomWrite(ctx, req, tool, a)
		})
	}
	if err := g.check(k); err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	r.tools[t.Name] = &toolEntry{
		info:      ToolInfo{Name: t.Name, Description: t.Description, InputSchema: raw, ReadOnly: !write, Destructive: write},
		plain:     withoutApprovalID(raw),
		operation: t.Name, scope: scope, props: schemaProperties(raw), schema: sch, gate: g, database: t.Database, preview: pv,
		newArgs: newArgs, access: k, run: run,
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
	if e := checkFreeSQL(t.SQL, customArgsFor(t.Mode)().access() == readsOnly, false); e != nil {
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

// customParams binds a call's parameters to t's statement in declared order: each as given,
// an absent one as its default.
func customParams(t CustomTool, a *customArgs) []any {
	params := make([]any, len(t.Parameters))
	for i, p := range t.Parameters {
		v, ok := a.Params[p.Name]
		if !ok {
			v = p.Default
		}
		params[i] = v
	}
	return params
}

// runCustomRead runs a call of t, a read tool, in a READ ONLY transaction.
func runCustomRead(ctx context.Context, req *request, t CustomTool, a *customReadArgs) (Result, *Error) {
	params := customParams(t, &a.customArgs)
	limit := req.db.Policy.DefaultLimit
	st := wire.Stmt{SQL: t.SQL, Params: params, MaxRows: limit + 1, MaxBytes: req.maxBytes, Format: req.format(a.Format)}
	paged := len(t.order) > 0 && req.paged()
	if paged {
		sql, kp, perr := customPageSQL(t, len(params), req.pageState(), limit)
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
		res.NextPage = req.nextPage(t.Name, a.pageArgs(), rs, true, 0)
		res.Hint = fmt.Sprintf("More rows match than the %d shown; call again with page_token set to next_page for the next page.", rs.RowCount)
	}
	return res, nil
}

// runCustomWrite runs a call of t, a write tool, guarded like execute_sql in write mode.
func runCustomWrite(ctx context.Context, req *request, t CustomTool, a *customWriteArgs) (Result, *Error) {
	params := customParams(t, &a.customArgs)
	dry := a.DryRun
	st := writeStmt{approval: req.approval, budget: req.budget, op: t.Name, sql: t.SQL, params: params, keepRows: req.db.Policy.DefaultLimit, maxBytes: req.maxBytes,
		free: true, allowDDL: req.allowDDL, ddlFix: req.ddlFix, maxAffected: req.db.Policy.MaxAffectedRows, who: req.who(), format: req.format(a.Format), dryRun: dry}
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
