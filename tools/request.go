package tools

import (
	"time"

	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/page"
	"github.com/pgtools/pgtools/tools/plan"
)

// request is one validated call as a handler sees it.
type request struct {
	sessions  SessionStore
	txLimit   *TxLimiter // bound on pg_transaction connections; nil: none
	principal Principal
	tool      string // the tool's wire name, for the application_name the database shows
	db        *Database
	session   *Session // the session session_id names, locked for the call (nil: stateless)
	allowDDL  bool     // the database allows DDL and the principal has the ddl scope
	ddlFix    string   // without allowDDL: the suggestion naming what would allow DDL
	in        toolArgs // the validated arguments, decoded into the tool's struct (*selectArgs, …)
	given     []string // the names of the arguments the call gave, sorted (what is shown of the call)
	started   time.Time
	maxBytes  int           // response byte cap: the database's, lowered by the principal's and the call's
	budget    plan.Budget   // plan estimate bound: the database's, lowered by the principal's and the call's
	lookAhead bool          // the read's SQL asks for one row past its limit (select_query): not counted by the budget
	approval  *approvalGate // the approval rules a write answers to, and the approval it claimed (nil: none)
	pages     *pager        // how the call continues a read and is continued (nil: the tool does not page)
}

// pager is what a call of a tool that pages needs beside its arguments: the page token it was
// given, opened (nil: a first page), what the tool's tokens carry, and the signer of the token
// that continues it.
type pager struct {
	state  *page.State
	spec   *page.Spec
	signer *page.Signer
}

// format is the row format of the call: its format argument (validated by the schema), else the
// principal's default, else the database's.
func (req *request) format(arg string) wire.Format {
	for _, s := range []string{arg, req.principal.DefaultFormat, req.db.Policy.DefaultFormat} {
		if f, ok := wire.ParseFormat(s); ok && s != "" {
			return f
		}
	}
	return wire.Objects
}

// who is the identity the call acts as: its session's (fixed at begin), else its principal's,
// named for the database by its connection, the principal and the tool (appName).
func (req *request) who() identity {
	if req.session != nil {
		return sessionIdentity(req.session).named(appName(appSession, req.principal.Name, req.tool))
	}
	return identityOf(req.principal).named(appName(appPooled, req.principal.Name, req.tool))
}
