package tools

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools/wire"
)

// identity is who a transaction acts as (DESIGN §11): a PostgreSQL role, and the claims that
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
// transaction still runs as the login role: the database setup the README prescribes revokes
// set_config from agent roles, so that their SQL cannot forge claims or switch roles. Asserting
// again (sessions, batches) first returns to the login role for the rest of the transaction.
const (
	sqlRoleNone  = "SET LOCAL ROLE NONE"
	sqlSetClaims = "SELECT pg_catalog.set_config('request.jwt.claims', $1, true)"
)

// pipeline is the identity as statements for the read pipeline; reassert first returns to the
// login role (a session or batch whose earlier statement ran as the identity).
func (id identity) pipeline(reassert bool) []wire.Exec {
	if id.none() {
		return nil
	}
	out := make([]wire.Exec, 0, 3)
	if reassert {
		out = append(out, wire.Exec{SQL: sqlRoleNone})
	}
	if id.claims != nil {
		out = append(out, wire.Exec{SQL: sqlSetClaims, Params: [][]byte{id.claims}})
	}
	if id.role != "" {
		out = append(out, wire.Exec{SQL: "SET LOCAL ROLE " + pgx.Identifier{id.role}.Sanitize()})
	}
	return out
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
		lit := strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(string(id.claims))
		parts = append(parts, "SELECT pg_catalog.set_config('request.jwt.claims', E'"+lit+"', true)")
	}
	if id.role != "" {
		parts = append(parts, "SET LOCAL ROLE "+pgx.Identifier{id.role}.Sanitize())
	}
	return strings.Join(parts, "; ")
}

// prefix is sql(reassert) followed by "; ", or "" for none, to put before more statements.
func (id identity) prefix(reassert bool) string {
	if s := id.sql(reassert); s != "" {
		return s + "; "
	}
	return ""
}

// roleView is what one role may use of a catalog snapshot: the relations it can read (listed by
// describe_schema and offered in suggestions) and those it can reach at all (resolved; a role
// with INSERT but not SELECT may still insert).
type roleView struct {
	readable, usable map[string]bool // by relKey
}

const roleViewQuery = `
SELECT n.nspname, c.relname,
       has_schema_privilege($1, n.oid, 'USAGE') AND (has_table_privilege($1, c.oid, 'SELECT') OR has_any_column_privilege($1, c.oid, 'SELECT')),
       has_schema_privilege($1, n.oid, 'USAGE') AND (has_table_privilege($1, c.oid, 'SELECT,INSERT,UPDATE,DELETE') OR has_any_column_privilege($1, c.oid, 'SELECT,INSERT,UPDATE'))
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND NOT c.relispartition`

// roleViews caches each role's view of one snapshot; a reloaded catalog starts empty.
type roleViews struct {
	mu    sync.Mutex
	views map[string]*roleView
}

// viewFor returns role's view of snap, loading it on first use. The empty role is the login
// role, whose view is the snapshot's own.
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
	v := &roleView{readable: map[string]bool{}, usable: map[string]bool{}}
	for rows.Next() {
		var schema, name string
		var readable, usable bool
		if err := rows.Scan(&schema, &name, &readable, &usable); err != nil {
			return nil, fmt.Errorf("loading role %s's view of the catalog: %w", role, err)
		}
		v.readable[relKey(schema, name)] = readable
		v.usable[relKey(schema, name)] = usable || readable
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

// readable reports whether the view's role may read r (nil view: the login role, by the catalog).
func (v *roleView) readableRel(r *relation) bool {
	if v == nil {
		return r.canSelect
	}
	return v.readable[relKey(r.schema, r.name)]
}

func (v *roleView) usableRel(r *relation) bool {
	if v == nil {
		return true
	}
	return v.usable[relKey(r.schema, r.name)]
}

// CheckRole tells whether role can serve as an agent's role on db without a way out (DESIGN §11):
// the runner's login role must be a member of it; it must not be a superuser or bypass RLS; it
// must not execute set_config (which changes role and claims from within a query), use a
// procedural language (DO blocks and functions could change them out of sight), create objects in
// a schema, or belong to the built-in roles that read files, signal backends or read all data.
// The error names the SQL to run.
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
       coalesce(r.rolsuper OR r.rolbypassrls, false),
       r.rolname IS NOT NULL AND has_function_privilege(r.oid, 'pg_catalog.set_config(text,text,boolean)', 'EXECUTE'),
       coalesce((SELECT array_agg(l.lanname::text ORDER BY l.lanname) FROM pg_language l
                 WHERE l.lanname NOT IN ('sql', 'internal', 'c') AND has_language_privilege(r.oid, l.oid, 'USAGE')), '{}'),
       coalesce((SELECT array_agg(n.nspname::text ORDER BY n.nspname) FROM pg_namespace n
                 WHERE n.nspname NOT LIKE 'pg\_%' AND n.nspname <> 'information_schema' AND has_schema_privilege(r.oid, n.oid, 'CREATE')), '{}'),
       coalesce((SELECT array_agg(b.rolname::text ORDER BY b.rolname) FROM pg_roles b
                 WHERE b.rolname IN ('pg_signal_backend', 'pg_read_server_files', 'pg_write_server_files', 'pg_execute_server_program',
                                     'pg_read_all_data', 'pg_write_all_data', 'pg_read_all_settings', 'pg_read_all_stats', 'pg_monitor')
                   AND pg_has_role(r.oid, b.oid, 'MEMBER')), '{}'),
       session_user::text
FROM (SELECT $1::text AS name) x LEFT JOIN pg_roles r ON r.rolname = x.name`
	var exists, member, super, setConfig bool
	var langs, schemas, builtins []string
	var login string
	if err := db.Pool.QueryRow(ctx, q, role).Scan(&exists, &member, &super, &setConfig, &langs, &schemas, &builtins, &login); err != nil {
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
	if !member {
		add(fmt.Sprintf("the runner's login role %s is not a member of it (GRANT %s TO %s)", login, ident, loginIdent), "GRANT "+ident+" TO "+loginIdent)
	}
	if super {
		add(fmt.Sprintf("it is a superuser or bypasses row-level security (ALTER ROLE %s NOSUPERUSER NOBYPASSRLS)", ident), "ALTER ROLE "+ident+" NOSUPERUSER NOBYPASSRLS")
	}
	if setConfig {
		const fn = "pg_catalog.set_config(text, text, boolean)"
		add(fmt.Sprintf("it can execute set_config, which changes role and claims from inside a query (REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC; GRANT EXECUTE ON FUNCTION %s TO %s)", fn, fn, loginIdent),
			"REVOKE EXECUTE ON FUNCTION "+fn+" FROM PUBLIC", "REVOKE EXECUTE ON FUNCTION "+fn+" FROM "+ident, "GRANT EXECUTE ON FUNCTION "+fn+" TO "+loginIdent)
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
