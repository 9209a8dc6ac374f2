package preflight

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools"
)

// definerQuery lists the SECURITY DEFINER functions a role may call whose owner could change the
// role or the claims of the caller's transaction (a superuser, or a role that may execute
// set_config) or reads past row-level security (BYPASSRLS). Functions in the system schemas are
// PostgreSQL's own.
const definerQuery = `
SELECT p.oid::pg_catalog.regprocedure::text, o.rolname::text,
       o.rolsuper OR pg_catalog.has_function_privilege(o.oid, 'pg_catalog.set_config(text,text,boolean)', 'EXECUTE'),
       o.rolsuper OR o.rolbypassrls
FROM pg_catalog.pg_proc p
JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
JOIN pg_catalog.pg_roles o ON o.oid = p.proowner
WHERE p.prosecdef
  AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND pg_catalog.has_schema_privilege($1, n.oid, 'USAGE')
  AND pg_catalog.has_function_privilege($1, p.oid, 'EXECUTE')
  AND (o.rolsuper OR o.rolbypassrls OR pg_catalog.has_function_privilege(o.oid, 'pg_catalog.set_config(text,text,boolean)', 'EXECUTE'))
ORDER BY 1`

// DefinerFunction is a SECURITY DEFINER function an agent role can call, run with the rights
// of an owner that can change settings or bypasses row-level security.
type DefinerFunction struct {
	Signature    string // e.g. public.set_tenant(integer)
	Owner        string
	SetsSettings bool // the owner may call set_config: the function can switch role or claims
	BypassesRLS  bool // the owner reads past row-level security
}

// DefinerFunctions lists what a statement of role could call on db to change the role or the
// claims it runs with, or to read rows its policies hide. pgtools checks role and claims after
// every statement and refuses the call when they changed (docs/design.md §14), but a function that
// changes them and another that restores them within one statement, or one that returns rows
// it read past RLS, is beyond that check: the start-up check and check-config name them as
// warnings, with the REVOKE that removes them from the role.
func DefinerFunctions(ctx context.Context, db *tools.Database, role string) ([]DefinerFunction, error) {
	rows, err := db.Pool.Query(ctx, definerQuery, role)
	if err != nil {
		return nil, fmt.Errorf("listing SECURITY DEFINER functions role %s can call on database %s: %w", role, db.Name, err)
	}
	fns, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DefinerFunction, error) {
		var f DefinerFunction
		err := r.Scan(&f.Signature, &f.Owner, &f.SetsSettings, &f.BypassesRLS)
		return f, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing SECURITY DEFINER functions role %s can call on database %s: %w", role, db.Name, err)
	}
	return fns, nil
}

// DefinerProblems is DefinerFunctions as warnings of the start-up grants check: one per
// function, naming what its owner can do, with the REVOKE that takes it from role (and PUBLIC).
func DefinerProblems(ctx context.Context, db *tools.Database, role string) ([]GrantProblem, error) {
	fns, err := DefinerFunctions(ctx, db, role)
	if err != nil {
		return nil, err
	}
	out := make([]GrantProblem, 0, len(fns))
	for _, f := range fns {
		var can []string
		if f.SetsSettings {
			can = append(can, "can change settings such as request.jwt.claims and role")
		}
		if f.BypassesRLS {
			can = append(can, "bypasses row-level security")
		}
		out = append(out, GrantProblem{Role: role,
			Problem: fmt.Sprintf("role %s can call the SECURITY DEFINER function %s, whose owner %s %s: pgtools refuses a call whose statement changed its role or claims, "+
				"but such a function can still return rows the role's policies hide, or switch the claims and switch them back within one statement; unless the role must call it, revoke it (or give it an owner without set_config and BYPASSRLS)",
				role, f.Signature, f.Owner, strings.Join(can, " and ")),
			Fix: []string{fmt.Sprintf("REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC, %s", f.Signature, pgx.Identifier{role}.Sanitize())}})
	}
	return out, nil
}
