package tools

import (
	"strings"

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
