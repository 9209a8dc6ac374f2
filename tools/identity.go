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
	// app is the transaction's application_name (appName: pgtools, the principal, the tool), set
	// with the claims, or "" to leave the connection's own.
	app string
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

// named is id with app as its application_name.
func (id identity) named(app string) identity {
	id.app = app
	return id
}

// appNameMax is the longest application_name PostgreSQL keeps whole: NAMEDATALEN-1 bytes.
// pg_stat_activity and log_line_prefix's %a show a longer one cut to this length, possibly in
// the middle of a character.
const appNameMax = 63

// appToolMax is the most of appNameMax a tool's name takes; the principal gets the rest.
const appToolMax = 24

// The first part of a caller's application_name: the kind of connection the call runs on.
const (
	appPooled  = "pgtools"         // a connection of the database's pool (its own name between calls)
	appSession = "pgtools-session" // a session's dedicated connection (pg_tx)
)

// appName is the application_name of a call of tool by principal on a connection of kind (appPooled,
// appSession), as a database administrator sees it in pg_stat_activity and in log_line_prefix's
// %a: "pgtools/<principal>/<tool>", "pgtools-session/<principal>/<tool>". It is
// printable ASCII only and at most appNameMax bytes: every other character becomes '?' (what
// PostgreSQL itself would show for a non-ASCII byte), a tool name is cut to appToolMax bytes,
// and a principal name that does not fit is cut and ends in '~'. The principal's name is an
// identifier (a token's name, an act-as subject), never a secret. The tool is always the last
// part: tool names contain no '/'.
func appName(kind, principal, tool string) string {
	tool = printableASCII(tool)
	if len(tool) > appToolMax {
		tool = tool[:appToolMax]
	}
	prefix := kind + "/"
	room := appNameMax - len(prefix) - 1 - len(tool)
	who := printableASCII(principal)
	if len(who) > room && room > 0 {
		who = who[:room-1] + "~"
	}
	return prefix + who + "/" + tool
}

// printableASCII is s with every character outside printable ASCII (space to '~') replaced by
// '?', one per character (one per byte of invalid UTF-8).
func printableASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r > '~' {
			return '?'
		}
		return r
	}, s)
}

// The statements that put a transaction in an identity. The claims are set first, while the
// transaction still runs as the login role: the database setup docs/identity.md prescribes revokes
// set_config from agent roles, so that their SQL cannot forge claims or switch roles. Asserting
// again (sessions, batches) first returns to the login role for the rest of the transaction.
// For the read pipeline, claims and role travel as one statement (one Bind and Execute, and one
// cached statement for every role, where SET LOCAL ROLE would need one per role name):
// set_config('role', …, true) is SET LOCAL ROLE, membership check included, and its arguments
// are evaluated left to right, so the claims are set while the login role still runs.
// The application_name goes first, in the same statement: it too must be set while the login
// role runs, and it costs one more argument rather than one more statement.
const (
	sqlRoleNone       = "SET LOCAL ROLE NONE"
	sqlSetClaims      = "SELECT pg_catalog.set_config('request.jwt.claims', $1, true)"
	sqlSetIdentity    = "SELECT pg_catalog.set_config('request.jwt.claims', $1, true), pg_catalog.set_config('role', $2, true)"
	sqlSetApp         = "SELECT pg_catalog.set_config('application_name', $1, true)"
	sqlSetAppClaims   = "SELECT pg_catalog.set_config('application_name', $1, true), pg_catalog.set_config('request.jwt.claims', $2, true)"
	sqlSetAppIdentity = "SELECT pg_catalog.set_config('application_name', $1, true), pg_catalog.set_config('request.jwt.claims', $2, true), pg_catalog.set_config('role', $3, true)"
)

// pipeline is the identity as statements for the read pipeline; reassert first returns to the
// login role (a session or batch whose earlier statement ran as the identity).
func (id identity) pipeline(reassert bool) []wire.Exec {
	if id.none() && id.app == "" {
		return nil
	}
	out := make([]wire.Exec, 0, 2)
	if reassert && !id.none() { // the login role with no claims has nothing to return to
		out = append(out, wire.Exec{SQL: sqlRoleNone})
	}
	app := []byte(id.app)
	switch {
	case id.none():
		return append(out, wire.Exec{SQL: sqlSetApp, Params: [][]byte{app}})
	case id.role == "" && id.app == "":
		return append(out, wire.Exec{SQL: sqlSetClaims, Params: [][]byte{id.claims}})
	case id.role == "":
		return append(out, wire.Exec{SQL: sqlSetAppClaims, Params: [][]byte{app, id.claims}})
	case id.app == "":
		// A role always comes with claims (identityOf).
		return append(out, wire.Exec{SQL: sqlSetIdentity, Params: [][]byte{id.claims, []byte(id.role)}})
	}
	return append(out, wire.Exec{SQL: sqlSetAppIdentity, Params: [][]byte{app, id.claims, []byte(id.role)}})
}

// sql is the identity as simple-protocol text to append after "; " (no trailing separator), or ""
// for none with no application_name. The claims are a literal here: E” with quotes and backslashes doubled reads the same
// whatever standard_conforming_strings says.
func (id identity) sql(reassert bool) string {
	if id.none() && id.app == "" {
		return ""
	}
	var parts, sets []string
	if reassert && !id.none() {
		parts = append(parts, sqlRoleNone)
	}
	if id.app != "" {
		sets = append(sets, "pg_catalog.set_config('application_name', "+quoteLiteral(id.app)+", true)")
	}
	if id.claims != nil {
		sets = append(sets, "pg_catalog.set_config('request.jwt.claims', "+quoteLiteral(string(id.claims))+", true)")
	}
	if len(sets) > 0 {
		parts = append(parts, "SELECT "+strings.Join(sets, ", "))
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
