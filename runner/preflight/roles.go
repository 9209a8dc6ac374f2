package preflight

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools"
)

// CheckRoles runs CheckRole for every role a principal may act as on every database it may
// use (MappedRoles) and returns the first failure, naming the database and the role; the
// check's own error names the GRANT or REVOKE to run. serve refuses to start on it: a role that
// could change its role or claims would void row-level security for every caller.
func CheckRoles(ctx context.Context, c *config.Config, db func(name string) (*tools.Database, bool)) error {
	mapped := c.MappedRoles()
	for _, name := range slices.Sorted(maps.Keys(mapped)) {
		d, ok := db(name)
		if !ok {
			continue
		}
		for _, role := range mapped[name] {
			if err := CheckRole(ctx, d, role); err != nil {
				return fmt.Errorf("database %q, role %q: %w", name, role, err)
			}
		}
	}
	return nil
}

// CheckRole tells whether role can serve as an agent's role on db without a way out (docs/design.md §11):
// the runner's login role must be a member of it; it must not be a superuser or bypass RLS; it
// must not execute set_config (which changes role and claims from within a query), use a
// procedural language (DO blocks and functions could change them out of sight), create objects in
// a schema, read other callers' prepared statements (pg_prepared_statements), or belong to the
// built-in roles that read files, signal backends, read all data or maintain every relation
// (17's pg_maintain), with any membership options: one granted WITH INHERIT FALSE (16+) still
// lets the role SET ROLE to it. On 16+ the login role's membership must allow SET. The error names the SQL to run.
func CheckRole(ctx context.Context, db *tools.Database, role string) error {
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
func RoleProblems(ctx context.Context, db *tools.Database, role string) ([]GrantProblem, error) {
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
