package tools

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/internal/wire"
)

// identity is who a transaction acts as (docs/design.md §11): a PostgreSQL role, and the claims that
// row-level security policies read from request.jwt.claims. The zero value is the runner's login
// role with no claims.
type identity struct {
	role   string
	claims []byte
}

// identityOf is p's identity. A role without claims gets the empty claim set: once a pooled
// connection has run a call with claims, request.jwt.claims reads the empty string (not NULL) in later
// transactions, which a policy's ::jsonb cast rejects, so every call as a role sets it.
func identityOf(p Principal) identity {
	id := identity{role: p.Role, claims: p.Claims}
	if id.role != "" && id.claims == nil {
		id.claims = []byte("{}")
	}
	return id
}

func (id identity) none() bool { return id.role == "" && id.claims == nil }

// The statements that put a transaction in an identity. The claims are set first, while the
// transaction still runs as the login role: the database setup docs/identity.md prescribes revokes
// set_config from agent roles, so that their SQL cannot forge claims or switch roles. Asserting
// again (sessions, batches) first returns to the login role for the rest of the transaction.
// For the read pipeline, claims and role travel as one statement (one Bind and Execute, and one
// cached statement for every role, where SET LOCAL ROLE would need one per role name):
// set_config('role', …, true) is SET LOCAL ROLE, membership check included, and its arguments
// are evaluated left to right, so the claims are set while the login role still runs.
const (
	sqlRoleNone    = "SET LOCAL ROLE NONE"
	sqlSetClaims   = "SELECT pg_catalog.set_config('request.jwt.claims', $1, true)"
	sqlSetIdentity = "SELECT pg_catalog.set_config('request.jwt.claims', $1, true), pg_catalog.set_config('role', $2, true)"
)

// pipeline is the identity as statements for the read pipeline; reassert first returns to the
// login role (a session or batch whose earlier statement ran as the identity).
func (id identity) pipeline(reassert bool) []wire.Exec {
	if id.none() {
		return nil
	}
	out := make([]wire.Exec, 0, 2)
	if reassert {
		out = append(out, wire.Exec{SQL: sqlRoleNone})
	}
	if id.role == "" {
		return append(out, wire.Exec{SQL: sqlSetClaims, Params: [][]byte{id.claims}})
	}
	// A role always comes with claims (identityOf).
	return append(out, wire.Exec{SQL: sqlSetIdentity, Params: [][]byte{id.claims, []byte(id.role)}})
}

// sql is the identity as simple-protocol text to append after "; " (no trailing separator), or ""
// for none. The claims are a literal here: E” with quotes and backslashes doubled reads the same
// whatever standard_conforming_strings says.
func (id identity) sql(reassert bool) string {
	if id.none() {
		return ""
	}
	var parts []string
	if reassert {
		parts = append(parts, sqlRoleNone)
	}
	if id.claims != nil {
		parts = append(parts, "SELECT pg_catalog.set_config('request.jwt.claims', "+quoteLiteral(string(id.claims))+", true)")
	}
	if id.role != "" {
		parts = append(parts, "SET LOCAL ROLE "+pgx.Identifier{id.role}.Sanitize())
	}
	return strings.Join(parts, "; ")
}

// quoteLiteral is s as an escape string literal (E-prefixed), read the same whatever
// standard_conforming_strings says.
func quoteLiteral(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// The statements that check, after an agent's statement, that the transaction still acts as the
// call set it: a SECURITY DEFINER function owned by a role that may call set_config can switch
// the role or the claims from inside a statement, for the rest of the transaction. Operators are
// qualified so that a search_path changed the same way cannot redirect the comparison.
const (
	sqlCheckRole   = "SELECT current_user OPERATOR(pg_catalog.=) $1::pg_catalog.name AND pg_catalog.current_setting('request.jwt.claims', true) OPERATOR(pg_catalog.=) $2::pg_catalog.text"
	sqlCheckClaims = "SELECT current_user OPERATOR(pg_catalog.=) session_user AND pg_catalog.current_setting('request.jwt.claims', true) OPERATOR(pg_catalog.=) $1::pg_catalog.text"
)

// check is the statement that answers true while the transaction acts as id, or nil for none
// (the login role with no claims: nothing to keep). A role always comes with claims (identityOf).
func (id identity) check() *wire.Exec {
	switch {
	case id.none():
		return nil
	case id.role == "":
		return &wire.Exec{SQL: sqlCheckClaims, Params: [][]byte{id.claims}}
	}
	return &wire.Exec{SQL: sqlCheckRole, Params: [][]byte{[]byte(id.role), id.claims}}
}

// prefix is sql(reassert) followed by "; ", or "" for none, to put before more statements.
func (id identity) prefix(reassert bool) string {
	if s := id.sql(reassert); s != "" {
		return s + "; "
	}
	return ""
}

// roleView is what one role may use of a catalog snapshot: the relations it can read (listed by
// describe_schema and offered in suggestions), those it can reach at all (resolved; a role with
// INSERT but not SELECT may still insert), and the role's own copy of each relation whose columns
// or row-level security differ from the snapshot's.
//
// The columns a role sees are those information_schema.columns shows it: the columns it holds
// SELECT, INSERT, UPDATE or REFERENCES on (per column or for the whole table), or all of them when
// it has the privileges of the owner. One set serves every tool: a column the role may insert but
// not read is named to it (an insert needs the name), and PostgreSQL refuses the wrong kind of use
// with permission_denied. Any other column is answered as one that does not exist.
type roleView struct {
	readable, usable map[string]bool // by relKey
	// rels holds the role's relation for each relation it may use: the snapshot's own where the
	// role sees it whole, else a copy (forRole). A relation missing here has no columns (rel).
	rels map[string]*relation // by relKey
}

// roleViewQuery loads a role's view in one query. cols is NULL where the role may use every column
// (the owner, a table-level privilege, or a relation it cannot use at all), so that the common
// case costs no per-column check; readCols, likewise NULL where it may read every column, lists
// those it holds SELECT on.
const roleViewQuery = `
WITH u AS (SELECT coalesce((SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = $1), false) AS bypass)
SELECT n.nspname, c.relname, p.readable, p.usable,
       c.relrowsecurity AND NOT u.bypass AND (c.relforcerowsecurity OR NOT p.owner),
       CASE WHEN p.owner OR NOT (p.readable OR p.usable) OR has_table_privilege($1, c.oid, 'SELECT,INSERT,UPDATE,REFERENCES') THEN NULL
            ELSE ARRAY(SELECT a.attname::text FROM pg_attribute a
                       WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                         AND has_column_privilege($1, c.oid, a.attnum, 'SELECT,INSERT,UPDATE,REFERENCES')
                       ORDER BY a.attnum) END,
       CASE WHEN p.owner OR NOT (p.readable OR p.usable) OR has_table_privilege($1, c.oid, 'SELECT') THEN NULL
            ELSE ARRAY(SELECT a.attname::text FROM pg_attribute a
                       WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                         AND has_column_privilege($1, c.oid, a.attnum, 'SELECT')
                       ORDER BY a.attnum) END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace CROSS JOIN u
CROSS JOIN LATERAL (SELECT pg_has_role($1, c.relowner, 'USAGE') AS owner,
       has_schema_privilege($1, n.oid, 'USAGE') AND (has_table_privilege($1, c.oid, 'SELECT') OR has_any_column_privilege($1, c.oid, 'SELECT')) AS readable,
       has_schema_privilege($1, n.oid, 'USAGE') AND (has_table_privilege($1, c.oid, 'SELECT,INSERT,UPDATE,DELETE') OR has_any_column_privilege($1, c.oid, 'SELECT,INSERT,UPDATE')) AS usable) p
WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND NOT c.relispartition`

// roleViews caches each role's view of one snapshot; a reloaded catalog starts empty.
type roleViews struct {
	mu    sync.Mutex
	views map[string]*roleView
}

// viewFor returns role's view of snap, loading it on first use (one query per role and
// snapshot). The empty role is the login role, whose view is the snapshot's own.
func (db *Database) viewFor(ctx context.Context, snap *catalogSnapshot, role string) (*roleView, error) {
	if role == "" {
		return nil, nil
	}
	snap.roles.mu.Lock()
	defer snap.roles.mu.Unlock()
	if v, ok := snap.roles.views[role]; ok {
		return v, nil
	}
	conn, err := db.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, roleViewQuery, role)
	if err != nil {
		return nil, fmt.Errorf("loading role %s's view of the catalog: %w", role, err)
	}
	defer rows.Close()
	v := &roleView{readable: map[string]bool{}, usable: map[string]bool{}, rels: map[string]*relation{}}
	for rows.Next() {
		var schema, name string
		var readable, usable, rowSecurity bool
		var cols, readCols []string // nil: every column
		if err := rows.Scan(&schema, &name, &readable, &usable, &rowSecurity, &cols, &readCols); err != nil {
			return nil, fmt.Errorf("loading role %s's view of the catalog: %w", role, err)
		}
		key := RelKey(schema, name)
		v.readable[key] = readable
		v.usable[key] = usable || readable
		switch r := snap.Rels[key]; {
		case r == nil || !v.usable[key]:
		case cols != nil || readCols != nil || rowSecurity != r.RowSecurity:
			v.rels[key] = r.forRole(cols, readCols, rowSecurity)
		default:
			v.rels[key] = r
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("loading role %s's view of the catalog: %w", role, err)
	}
	if snap.roles.views == nil {
		snap.roles.views = map[string]*roleView{}
	}
	snap.roles.views[role] = v
	return v, nil
}

// forRole is a copy of r as a role sees it: with only the columns named in cols (nil: all of
// them, in which case the copy is not restricted), those in readCols marked readable (nil: all),
// and the role's row-level security. A column the snapshot does not have (added since it was
// loaded) is left out, as it is for the login role.
func (r *relation) forRole(cols, readCols []string, rowSecurity bool) *relation {
	c := *r
	c.RowSecurity = rowSecurity
	set := func(names []string) map[string]bool {
		m := make(map[string]bool, len(names))
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	keep, read := set(cols), set(readCols)
	c.Restricted = cols != nil
	c.Columns, c.ColTypes, c.ColArray, c.ColNotNull, c.ColRead = nil, nil, nil, nil, nil
	for i, name := range r.Columns {
		if cols != nil && !keep[name] {
			continue
		}
		c.Columns = append(c.Columns, name)
		c.ColTypes = append(c.ColTypes, r.ColTypes[i])
		c.ColArray = append(c.ColArray, r.ColArray[i])
		c.ColNotNull = append(c.ColNotNull, r.ColNotNull[i])
		if readCols != nil {
			c.ColRead = append(c.ColRead, read[name])
		}
	}
	return &c
}

// Rel is the view's role's relation for r: r itself for the login role (nil view). A relation
// the view has no entry for is one the role may not use: it gets r with no columns, so that
// nothing of it is named or resolved.
func (v *roleView) Rel(r *relation) *relation {
	if v == nil {
		return r
	}
	if own := v.rels[RelKey(r.Schema, r.Name)]; own != nil {
		return own
	}
	return r.forRole([]string{}, []string{}, true)
}

// Readable reports whether the view's role may read r (nil view: the login role, by the catalog).
func (v *roleView) Readable(r *relation) bool {
	if v == nil {
		return r.CanSelect
	}
	return v.readable[RelKey(r.Schema, r.Name)]
}

// Usable reports whether the view's role may reach r at all (nil view: the login role, always).
func (v *roleView) Usable(r *relation) bool {
	if v == nil {
		return true
	}
	return v.usable[RelKey(r.Schema, r.Name)]
}

// CheckRole tells whether role can serve as an agent's role on db without a way out (docs/design.md §11):
// the runner's login role must be a member of it; it must not be a superuser or bypass RLS; it
// must not execute set_config (which changes role and claims from within a query), use a
// procedural language (DO blocks and functions could change them out of sight), create objects in
// a schema, read other callers' prepared statements (pg_prepared_statements), or belong to the
// built-in roles that read files, signal backends, read all data or maintain every relation
// (17's pg_maintain), with any membership options: one granted WITH INHERIT FALSE (16+) still
// lets the role SET ROLE to it. On 16+ the login role's membership must allow SET. The error names the SQL to run.
func CheckRole(ctx context.Context, db *Database, role string) error {
	problems, err := RoleProblems(ctx, db, role)
	if err != nil || len(problems) == 0 {
		return err
	}
	if len(problems) == 1 && problems[0].missing {
		return fmt.Errorf("role %s does not exist on database %s: %s", role, db.Name, strings.Join(problems[0].Fix, "; "))
	}
	lines := make([]string, len(problems))
	for i, p := range problems {
		lines[i] = p.Problem
	}
	return fmt.Errorf("role %s on database %s could escape the limits pgtools sets: %s", role, db.Name, strings.Join(lines, "; "))
}

// RoleProblems is CheckRole's findings one by one, each with the statements that fix it (for
// pgtools check-config --database); none when role is fit to act as.
func RoleProblems(ctx context.Context, db *Database, role string) ([]GrantProblem, error) {
	const q = `
SELECT r.rolname IS NOT NULL,
       coalesce(pg_has_role(session_user, r.oid, 'MEMBER'), false),
       coalesce(CASE WHEN current_setting('server_version_num')::int >= 160000 THEN pg_has_role(session_user, r.oid, 'SET')
                     ELSE pg_has_role(session_user, r.oid, 'MEMBER') END, false),
       coalesce(r.rolsuper OR r.rolbypassrls, false),
       r.rolname IS NOT NULL AND has_function_privilege(r.oid, 'pg_catalog.set_config(text,text,boolean)', 'EXECUTE'),
       coalesce((SELECT array_agg(l.lanname::text ORDER BY l.lanname) FROM pg_language l
                 WHERE l.lanname NOT IN ('sql', 'internal', 'c') AND has_language_privilege(r.oid, l.oid, 'USAGE')), '{}'),
       coalesce((SELECT array_agg(n.nspname::text ORDER BY n.nspname) FROM pg_namespace n
                 WHERE n.nspname NOT LIKE 'pg\_%' AND n.nspname <> 'information_schema' AND has_schema_privilege(r.oid, n.oid, 'CREATE')), '{}'),
       coalesce((SELECT array_agg(b.rolname::text ORDER BY b.rolname) FROM pg_roles b
                 WHERE b.rolname IN ('pg_signal_backend', 'pg_read_server_files', 'pg_write_server_files', 'pg_execute_server_program',
                                     'pg_read_all_data', 'pg_write_all_data', 'pg_read_all_settings', 'pg_read_all_stats', 'pg_monitor',
                                     'pg_checkpoint', 'pg_create_subscription', 'pg_maintain', 'pg_signal_autovacuum_worker')
                   AND pg_has_role(r.oid, b.oid, 'MEMBER')), '{}'),
       session_user::text,
       r.rolname IS NOT NULL AND has_function_privilege(r.oid, 'pg_catalog.pg_prepared_statement()', 'EXECUTE')
FROM (SELECT $1::text AS name) x LEFT JOIN pg_roles r ON r.rolname = x.name`
	var exists, member, canSet, super, setConfig, prepared bool
	var langs, schemas, builtins []string
	var login string
	if err := db.Pool.QueryRow(ctx, q, role).Scan(&exists, &member, &canSet, &super, &setConfig, &langs, &schemas, &builtins, &login, &prepared); err != nil {
		return nil, fmt.Errorf("checking role %s on database %s: %w", role, db.Name, err)
	}
	ident, loginIdent := pgx.Identifier{role}.Sanitize(), pgx.Identifier{login}.Sanitize()
	if !exists {
		return []GrantProblem{{Role: role, missing: true, Problem: fmt.Sprintf("role %s does not exist", role),
			Fix: []string{"CREATE ROLE " + ident + " NOLOGIN", "GRANT " + ident + " TO " + loginIdent}}}, nil
	}
	var problems []GrantProblem
	add := func(problem string, fix ...string) {
		problems = append(problems, GrantProblem{Role: role, Problem: problem, Fix: fix})
	}
	quoted := func(names []string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = pgx.Identifier{n}.Sanitize()
		}
		return out
	}
	switch {
	case !member:
		add(fmt.Sprintf("the runner's login role %s is not a member of it (GRANT %s TO %s)", login, ident, loginIdent), "GRANT "+ident+" TO "+loginIdent)
	case !canSet:
		// PostgreSQL 16+: a membership granted WITH SET FALSE (on the whole chain) lets the
		// login role hold the role's privileges but not become it, so every call would fail.
		add(fmt.Sprintf("the runner's login role %s is a member of it but cannot SET ROLE to it: the membership was granted WITH SET FALSE (GRANT %s TO %s WITH SET TRUE)", login, ident, loginIdent),
			"GRANT "+ident+" TO "+loginIdent+" WITH SET TRUE")
	}
	if super {
		add(fmt.Sprintf("it is a superuser or bypasses row-level security (ALTER ROLE %s NOSUPERUSER NOBYPASSRLS)", ident), "ALTER ROLE "+ident+" NOSUPERUSER NOBYPASSRLS")
	}
	if setConfig {
		const fn = "pg_catalog.set_config(text, text, boolean)"
		add(fmt.Sprintf("it can execute set_config, which changes role and claims from inside a query (REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC; GRANT EXECUTE ON FUNCTION %s TO %s)", fn, fn, loginIdent),
			"REVOKE EXECUTE ON FUNCTION "+fn+" FROM PUBLIC", "REVOKE EXECUTE ON FUNCTION "+fn+" FROM "+ident, "GRANT EXECUTE ON FUNCTION "+fn+" TO "+loginIdent)
	}
	if prepared {
		// Every caller of a database shares its pooled connections, whose cached statements
		// (pgtools' own, with the agent's where text in them) the view lists for any role.
		const fn = "pg_catalog.pg_prepared_statement()"
		add(fmt.Sprintf("it can read the statements other callers' calls prepared on the shared connections, their where text included, through pg_prepared_statements (REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC)", fn),
			"REVOKE EXECUTE ON FUNCTION "+fn+" FROM PUBLIC", "REVOKE EXECUTE ON FUNCTION "+fn+" FROM "+ident)
	}
	if len(langs) > 0 {
		list := strings.Join(quoted(langs), ", ")
		add(fmt.Sprintf("it can use the procedural language(s) %s (REVOKE USAGE ON LANGUAGE %s FROM PUBLIC, and from %s)", strings.Join(langs, ", "), strings.Join(langs, ", "), ident),
			"REVOKE USAGE ON LANGUAGE "+list+" FROM PUBLIC", "REVOKE USAGE ON LANGUAGE "+list+" FROM "+ident)
	}
	if len(schemas) > 0 {
		list := strings.Join(quoted(schemas), ", ")
		add(fmt.Sprintf("it can create objects in schema(s) %s (REVOKE CREATE ON SCHEMA %s FROM PUBLIC, and from %s)", strings.Join(schemas, ", "), strings.Join(schemas, ", "), ident),
			"REVOKE CREATE ON SCHEMA "+list+" FROM PUBLIC", "REVOKE CREATE ON SCHEMA "+list+" FROM "+ident)
	}
	if len(builtins) > 0 {
		add(fmt.Sprintf("it is a member of %s (REVOKE them FROM %s)", strings.Join(builtins, ", "), ident),
			"REVOKE "+strings.Join(quoted(builtins), ", ")+" FROM "+ident)
	}
	return problems, nil
}
