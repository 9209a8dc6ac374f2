// Package preflight checks each configured database before pgtools serves it, so that what the
// configuration promises holds in PostgreSQL itself (docs/design.md §11 and §14):
//
//   - Agent roles cannot escape (roles.go): the login role can become each role a caller acts
//     as, and that role is no superuser, does not bypass row-level security, cannot call
//     set_config, use a procedural language, create objects in a schema or read the statements
//     other callers prepared, and belongs to none of the built-in roles that reach past its
//     grants. CheckRole refuses such a role; RoleProblems lists its findings one by one.
//   - Table lists hold as grants (grants.go: CheckTableGrants): no role a caller acts as holds a
//     privilege on, or owns, a table that allow_tables or deny_tables keeps from callers.
//   - Other callers' statement text is not readable (CheckStatementText): a role many subjects
//     share cannot read what the others ran through pg_stat_statements or pg_stat_activity.
//   - Temporary files are bounded (CheckTempFileLimit): the login role has a temp_file_limit.
//   - SECURITY DEFINER functions are named (definer.go: DefinerProblems): those an agent role can
//     call whose owner can change role or claims, or bypasses row-level security.
//
// report.go runs them for the roles config.Config.ActingRoles lists, database by database.
// pgtools serve runs CheckRoles and then CheckGrants at start and at each reload, pgtools mcp
// runs CheckGrants for its one caller: a GrantReport's refusals stop them, its warnings are
// logged. CheckSetup is everything pgtools check-config --database reports, with the GRANT and
// REVOKE statements that make the databases match the configuration (GrantReport.SQL).
//
// Every check only reads, through the database's pool as the runner's login role; each problem
// names the statements, run by a superuser or the objects' owner, that fix it. The functions are
// safe for concurrent use.
package preflight
