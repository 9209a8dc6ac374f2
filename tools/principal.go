package tools

import (
	"slices"

	"github.com/pgtools/pgtools/tools/approval"
)

// Principal is who makes a call: an API token, an MCP client or a task broker. Sessions and
// scopes are bound to it.
type Principal struct {
	// Name identifies the principal in logs, audit lines and session ownership.
	Name string
	// Scopes are the granted scopes: "read", "write", "ddl".
	Scopes []string
	// Databases limits the databases the principal may use; empty means all.
	Databases []string
	// MaxResponseBytes lowers every database's response byte cap for this principal (0: the
	// database's cap applies).
	MaxResponseBytes int
	// MaxEstimatedCost and MaxEstimatedRows lower every database's plan budget for this
	// principal (0: the database's applies); they cannot raise or lift it.
	MaxEstimatedCost float64
	MaxEstimatedRows int64
	// Role is the PostgreSQL role every transaction of this principal's calls runs as
	// (SET LOCAL ROLE, asserted again before every statement of a session or batch); "" runs as
	// the runner's login role. The login role must be a member of it (docs/design.md §11).
	Role string
	// DefaultFormat is the row format of this principal's calls that give none, before the
	// database's ("" for the database's).
	DefaultFormat string
	// Claims is a JSON object visible to SQL as the transaction-local setting request.jwt.claims
	// (for row-level security policies); nil sets nothing.
	Claims []byte
	// Tools, when set, is the only tools (wire names) the principal may list and call; empty
	// allows every tool its scopes and databases permit.
	Tools []string
	// Quota names the owner whose shares of the session slots, pg_transaction connections and
	// concurrent calls this principal counts against first: the API token an end user is acted
	// for, or the JWT issuer's name. Its subjects then share the owner's quota, each within a
	// subject share of its own, so spreading calls over many subjects does not lift the bound.
	// "" means Name: the principal is its own owner.
	Quota string
	// Grant is how Scopes were configured (default GrantToken), so a refusal for a missing
	// scope names the fix the caller can act on: a token, or pgtools mcp's --scopes.
	Grant Grant
	// RequireApproval adds approval rules to every database's for this principal's calls (they
	// can add rules, never lift the database's).
	RequireApproval []approval.Rule
	// Credential names the secret the principal proves itself with, when several principals
	// share one: an act-as token's subjects all hold the token's. "" means Name. An approval is
	// never given with the credential that asked for it.
	Credential string
}

// credential is the secret p holds: Credential, else Name.
func (p Principal) credential() string {
	if p.Credential != "" {
		return p.Credential
	}
	return p.Name
}

// QuotaOwner is the name p's quota is counted under: Quota, or Name when p is its own owner.
func (p Principal) QuotaOwner() string {
	if p.Quota != "" {
		return p.Quota
	}
	return p.Name
}

// IsSubject reports whether p is one of several end users sharing another owner's quota (an
// act-as subject or a JWT's sub), so a subject share applies to it within the owner's.
func (p Principal) IsSubject() bool { return p.Quota != "" && p.Quota != p.Name }

// Can reports whether the principal holds scope.
func (p Principal) Can(scope string) bool { return slices.Contains(p.Scopes, scope) }

// allows reports whether p's tool allow-list permits tool.
func (p Principal) allows(tool string) bool {
	return len(p.Tools) == 0 || slices.Contains(p.Tools, tool)
}

func (p Principal) mayUse(db string) bool {
	return len(p.Databases) == 0 || slices.Contains(p.Databases, db)
}

// Grant is how a principal's scopes were configured, so that a refusal names the change that
// lifts it. Its zero value, GrantToken, fits every caller that presents a token.
type Grant string

const (
	// GrantToken is a principal of a token: an API token, an act-as token's end user, a JWT, an
	// n8n broker task. The operator issues tokens, so the fix is a token with other scopes.
	GrantToken Grant = ""
	// GrantMCPFlags is the client of pgtools mcp over stdio. There is no token: its scopes are
	// the --scopes flag, set where the MCP client's configuration starts pgtools.
	GrantMCPFlags Grant = "pgtools-mcp-flags"
)
