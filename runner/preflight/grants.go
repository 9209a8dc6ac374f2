package preflight

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools"
)

// GrantProblem is one way a database lets a role past what the configuration promises, with
// the SQL that closes it (docs/design.md §14: table rules are grants).
type GrantProblem struct {
	// Role is the role checked, as PostgreSQL names it (the login role's name when the caller
	// runs as the login role).
	Role string
	// Problem is one sentence: what the role can do that it should not.
	Problem string
	// Fix are the statements, quoted identifiers included, that close it when run by a
	// superuser (or the objects' owner), each without a trailing semicolon.
	Fix []string

	missing bool // the role does not exist (RoleProblems)
}

// Missing reports whether the problem is that the role does not exist: its Fix creates it, and
// nothing else about it can be checked until then.
func (p GrantProblem) Missing() bool { return p.missing }

// tablePrivileges are the table privileges PostgreSQL grants; a role holding any of them on a
// table the lists keep from callers can reach that table with SQL of its own.
var tablePrivileges = []string{"SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"}

// tableGrantsQuery lists, for role $1 (the login role when $1 is empty), every relation a
// caller could name, with what the role holds on it: table privileges, column privileges,
// ownership (membership in the owning role counts: the role could act as the owner), the
// roles (0 for PUBLIC) whose grants give it those privileges, and a partition's ancestors
// (reading a partition reads its parent's rows).
const tableGrantsQuery = `
WITH r AS (SELECT coalesce(nullif($1::text, ''), session_user)::name AS name)
SELECT n.nspname, c.relname, c.relkind::text,
       ARRAY[has_table_privilege(r.name, c.oid, 'SELECT'), has_table_privilege(r.name, c.oid, 'INSERT'),
             has_table_privilege(r.name, c.oid, 'UPDATE'), has_table_privilege(r.name, c.oid, 'DELETE'),
             has_table_privilege(r.name, c.oid, 'TRUNCATE'), has_table_privilege(r.name, c.oid, 'REFERENCES'),
             has_table_privilege(r.name, c.oid, 'TRIGGER')],
       has_any_column_privilege(r.name, c.oid, 'SELECT, INSERT, UPDATE, REFERENCES'),
       pg_has_role(r.name, c.relowner, 'MEMBER'),
       coalesce((SELECT array_agg(DISTINCT CASE WHEN g.grantee = 0 THEN '' ELSE pg_get_userbyid(g.grantee)::text END)
                 FROM (SELECT a.grantee FROM aclexplode(c.relacl) a
                       UNION SELECT a.grantee FROM pg_attribute att, aclexplode(att.attacl) a
                             WHERE att.attrelid = c.oid AND NOT att.attisdropped) g
                 WHERE g.grantee <> c.relowner AND (g.grantee = 0 OR pg_has_role(r.name, g.grantee, 'USAGE'))), '{}'),
       CASE WHEN c.relispartition THEN
         coalesce((SELECT array_agg(an.nspname || '.' || ac.relname) FROM pg_partition_ancestors(c.oid) p
                   JOIN pg_class ac ON ac.oid = p.relid JOIN pg_namespace an ON an.oid = ac.relnamespace
                   WHERE p.relid <> c.oid), '{}')
       ELSE '{}' END,
       r.name::text
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace CROSS JOIN r
WHERE c.relkind IN ('r', 'v', 'm', 'f', 'p')
  AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
ORDER BY 1, 2`

// roleFactsQuery is what makes every table readable to a role whatever its grants: superuser,
// and the predefined roles that read or write all data. The last column is the role that can
// take over ownership of a table: the database owner, else the bootstrap superuser, whichever
// the role is not a member of.
const roleFactsQuery = `
WITH r AS (SELECT coalesce(nullif($1::text, ''), session_user)::name AS name)
SELECT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = r.name), false),
       coalesce((SELECT string_agg(b.rolname, ', ' ORDER BY b.rolname) FROM pg_roles b
                 WHERE b.rolname IN ('pg_read_all_data', 'pg_write_all_data') AND pg_has_role(r.name, b.oid, 'MEMBER')), ''),
       coalesce((SELECT pg_get_userbyid(d.datdba)::text FROM pg_database d
                 WHERE d.datname = current_database() AND NOT pg_has_role(r.name, d.datdba, 'MEMBER')),
                pg_get_userbyid(10)::text)
FROM r`

// CheckTableGrants tells whether role (the runner's login role when "") can reach, by its own
// privileges, a table db's policy keeps from callers with AllowTables or DenyTables: any table
// privilege, a column privilege, or ownership (directly or through membership in the owning
// role). A partition counts as its partitioned ancestors. Each problem names the REVOKE or
// ALTER ... OWNER statements that close it. With no table lists there is nothing to check.
func CheckTableGrants(ctx context.Context, db *tools.Database, role string) ([]GrantProblem, error) {
	pol := &db.Policy
	if len(pol.AllowTables) == 0 && len(pol.DenyTables) == 0 {
		return nil, nil
	}
	var super bool
	var allData, newOwner string
	if err := db.Pool.QueryRow(ctx, roleFactsQuery, role).Scan(&super, &allData, &newOwner); err != nil {
		return nil, fmt.Errorf("checking role %s's privileges on database %s: %w", roleLabel(role), db.Name, err)
	}
	rows, err := db.Pool.Query(ctx, tableGrantsQuery, role)
	if err != nil {
		return nil, fmt.Errorf("checking role %s's table privileges on database %s: %w", roleLabel(role), db.Name, err)
	}
	type rel struct {
		schema, name, kind string
		privs              []bool
		column, owns       bool
		holders, ancestors []string
	}
	var rels []rel
	var roleName string
	for rows.Next() {
		var r rel
		if err := rows.Scan(&r.schema, &r.name, &r.kind, &r.privs, &r.column, &r.owns, &r.holders, &r.ancestors, &roleName); err != nil {
			rows.Close()
			return nil, fmt.Errorf("checking role %s's table privileges on database %s: %w", roleLabel(role), db.Name, err)
		}
		rels = append(rels, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("checking role %s's table privileges on database %s: %w", roleLabel(role), db.Name, err)
	}
	var problems []GrantProblem
	if super || allData != "" {
		// No REVOKE on a table takes these away: the role itself must change.
		var fix []string
		what := "is a superuser"
		if super {
			fix = append(fix, "ALTER ROLE "+pgx.Identifier{roleName}.Sanitize()+" NOSUPERUSER")
		} else {
			what = "is a member of " + allData
			for _, b := range strings.Split(allData, ", ") {
				fix = append(fix, "REVOKE "+b+" FROM "+pgx.Identifier{roleName}.Sanitize())
			}
		}
		problems = append(problems, GrantProblem{Role: roleName, Fix: fix,
			Problem: fmt.Sprintf("role %s %s, so it can read and write every table, those the table lists keep from callers included", roleName, what)})
	}
	for _, r := range rels {
		why := listReason(pol, r.schema, r.name)
		for _, a := range r.ancestors {
			if why != "" {
				break
			}
			if s, n, ok := strings.Cut(a, "."); ok && listReason(pol, s, n) != "" {
				why = "a partition of " + a + ", which " + listReason(pol, s, n)
			}
		}
		if why == "" {
			continue
		}
		var held []string
		for i, ok := range r.privs {
			if ok {
				held = append(held, tablePrivileges[i])
			}
		}
		if len(held) == 0 && !r.column && !r.owns {
			continue
		}
		target := pgx.Identifier{r.schema, r.name}.Sanitize()
		var fix []string
		if r.owns {
			fix = append(fix, "ALTER "+relKindWord(r.kind)+" "+target+" OWNER TO "+pgx.Identifier{newOwner}.Sanitize())
		}
		for _, h := range r.holders {
			grantee := "PUBLIC"
			if h != "" {
				grantee = pgx.Identifier{h}.Sanitize()
			}
			fix = append(fix, "REVOKE ALL ON TABLE "+target+" FROM "+grantee)
		}
		if len(fix) == 0 {
			// Held through superuser or pg_read_all_data, whose fix is listed once above.
			continue
		}
		rel := relKindNoun(r.kind) + " " + r.schema + "." + r.name
		var what string
		switch {
		case r.owns:
			what = "owns " + rel + " (directly or as a member of its owner), which " + why
		case len(held) > 0:
			what = "holds " + strings.Join(held, ", ") + " on " + rel + ", which " + why
		default:
			what = "holds column privileges on " + rel + ", which " + why
		}
		problems = append(problems, GrantProblem{Role: roleName, Fix: fix, Problem: "role " + roleName + " " + what})
	}
	return problems, nil
}

// listReason says which of p's lists keeps schema.name from callers, or "" when none does.
func listReason(p *tools.Policy, schema, name string) string {
	if !p.ListsDeny(schema, name) {
		return ""
	}
	for _, t := range p.DenyTables {
		if t == schema+"."+name || t == name {
			return "policy.deny_tables lists"
		}
	}
	return "is not in policy.allow_tables"
}

func relKindWord(kind string) string {
	switch kind {
	case "v":
		return "VIEW"
	case "m":
		return "MATERIALIZED VIEW"
	case "f":
		return "FOREIGN TABLE"
	}
	return "TABLE"
}

func relKindNoun(kind string) string {
	return strings.ToLower(relKindWord(kind))
}

func roleLabel(role string) string {
	if role == "" {
		return "(the login role)"
	}
	return role
}

// statTextSource is one way PostgreSQL shows a role the text of statements other backends ran.
type statTextSource struct {
	// object is the name to_regclass or to_regprocedure resolves, schema-qualified; for an
	// extension's objects the schema comes from pg_extension.
	object string
	// function is true for a function (EXECUTE), false for a view (SELECT).
	function bool
	// extension is the extension that provides the object, "" for pg_catalog's.
	extension string
	// runnerBackends is true when the source shows only backends whose login (session) user
	// the role has the privileges of: under SET ROLE a caller then sees nothing unless its role
	// has the login role's privileges (or is the login role). pg_stat_statements instead keys
	// entries by the role that ran them, so every subject of one role sees the others'.
	runnerBackends bool
}

// statTextSources are every view and function that reads statement text, checked on PostgreSQL
// 15 (TestStatTextSourcesResolve checks that each resolves): revoking pg_stat_activity alone leaves
// pg_stat_get_activity and pg_stat_get_backend_activity callable; the pg_stat_statements view
// calls its function with the caller's EXECUTE privilege.
var statTextSources = []statTextSource{
	{object: "pg_catalog.pg_stat_activity", runnerBackends: true},
	{object: "pg_catalog.pg_stat_get_activity(integer)", function: true, runnerBackends: true},
	{object: "pg_catalog.pg_stat_get_backend_activity(integer)", function: true, runnerBackends: true},
	{object: "pg_stat_statements", extension: "pg_stat_statements"},
	{object: "pg_stat_statements_info", extension: "pg_stat_statements"},
	{object: "pg_stat_statements(boolean)", function: true, extension: "pg_stat_statements"},
	{object: "pg_stat_statements_info()", function: true, extension: "pg_stat_statements"},
}

// statTextQuery tells whether role $1 (the login role when empty) can use object $2 (a view when
// $3 is false, a function when true), whether it has the privileges of the login role, and
// which roles' grants give it the object (0 for PUBLIC; a NULL ACL is the default one).
const statTextQuery = `
WITH r AS (SELECT coalesce(nullif($1::text, ''), session_user)::name AS name),
     o AS (SELECT CASE WHEN $3 THEN to_regprocedure($2)::oid ELSE to_regclass($2)::oid END AS oid)
SELECT o.oid IS NOT NULL,
       coalesce(CASE WHEN $3 THEN has_function_privilege(r.name, o.oid, 'EXECUTE') ELSE has_table_privilege(r.name, o.oid, 'SELECT') END, false),
       pg_has_role(r.name, session_user, 'USAGE'),
       coalesce((SELECT array_agg(DISTINCT CASE WHEN a.grantee = 0 THEN '' ELSE pg_get_userbyid(a.grantee)::text END)
                 FROM (SELECT coalesce(p.proacl, acldefault('f', p.proowner)) AS acl, p.proowner AS owner FROM pg_proc p WHERE $3 AND p.oid = o.oid
                       UNION ALL SELECT coalesce(c.relacl, acldefault('r', c.relowner)), c.relowner FROM pg_class c WHERE NOT $3 AND c.oid = o.oid) x,
                      aclexplode(x.acl) a
                 WHERE a.grantee <> x.owner AND (a.grantee = 0 OR pg_has_role(r.name, a.grantee, 'USAGE'))), '{}'),
       r.name::text
FROM r, o`

// CheckStatementText tells whether role (the login role when "") can read the text of
// statements that other subjects of the same role, or the runner's other connections, ran:
// through pg_stat_statements (when the extension is installed in db), which PostgreSQL shows a
// role for the statements that role ran, and through pg_stat_activity and the functions behind
// it when the role has the login role's privileges. It matters for roles that many subjects
// share (act_as tokens, JWTs). Each problem names the REVOKE statements that close it.
func CheckStatementText(ctx context.Context, db *tools.Database, role string) ([]GrantProblem, error) {
	var extSchema string
	err := db.Pool.QueryRow(ctx, `SELECT coalesce((SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
		WHERE e.extname = 'pg_stat_statements'), '')`).Scan(&extSchema)
	if err != nil {
		return nil, fmt.Errorf("checking for pg_stat_statements on database %s: %w", db.Name, err)
	}
	var problems []GrantProblem
	for _, src := range statTextSources {
		object := src.object
		if src.extension != "" {
			if extSchema == "" {
				continue
			}
			object = pgx.Identifier{extSchema}.Sanitize() + "." + object
		}
		var exists, can, runnerPrivs bool
		var holders []string
		var roleName string
		if err := db.Pool.QueryRow(ctx, statTextQuery, role, object, src.function).Scan(&exists, &can, &runnerPrivs, &holders, &roleName); err != nil {
			return nil, fmt.Errorf("checking role %s's access to %s on database %s: %w", roleLabel(role), object, db.Name, err)
		}
		if !exists || !can || (src.runnerBackends && !runnerPrivs) {
			continue
		}
		slices.Sort(holders)
		verb, kw, what := "SELECT", "TABLE", "view"
		if src.function {
			verb, kw, what = "EXECUTE", "FUNCTION", "function"
		}
		var fix []string
		for _, h := range holders {
			grantee := "PUBLIC"
			if h != "" {
				grantee = pgx.Identifier{h}.Sanitize()
			}
			fix = append(fix, "REVOKE "+verb+" ON "+kw+" "+object+" FROM "+grantee)
		}
		if len(fix) == 0 {
			fix = append(fix, "-- "+roleName+" holds it through superuser or ownership; connect as a role without either")
		}
		whose := "the statements other subjects of the role ran"
		if src.runnerBackends {
			whose = "the statements of the runner's other connections, other subjects' included"
		}
		problems = append(problems, GrantProblem{Role: roleName, Fix: fix,
			Problem: fmt.Sprintf("role %s can read %s through %s %s", roleName, whose, what, object)})
	}
	return problems, nil
}

// CheckTempFileLimit returns a problem when the runner's connections to db run without
// temp_file_limit, so that one statement can fill the disk with temporary files within its
// statement timeout. Only the login role's setting counts: SET ROLE does not apply the settings
// of the role it switches to, and temp_file_limit is a superuser setting no caller can change.
func CheckTempFileLimit(ctx context.Context, db *tools.Database) (*GrantProblem, error) {
	var limit, login string
	if err := db.Pool.QueryRow(ctx, `SELECT current_setting('temp_file_limit'), session_user::text`).Scan(&limit, &login); err != nil {
		return nil, fmt.Errorf("reading temp_file_limit on database %s: %w", db.Name, err)
	}
	if limit != "-1" {
		return nil, nil
	}
	return &GrantProblem{Role: login,
		Problem: fmt.Sprintf("the runner's login role %s has no temp_file_limit, so one statement can write temporary files until the disk is full", login),
		Fix:     []string{"ALTER ROLE " + pgx.Identifier{login}.Sanitize() + " SET temp_file_limit = '1GB'"}}, nil
}
