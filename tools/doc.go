// Package tools hosts the PostgreSQL tools an agent calls (the built-in ones schemas/ defines,
// select_query, execute_sql, pg_tx and the rest, and operator-defined tools) and the one
// pipeline every call takes, whatever its transport. Each built-in tool is one definition in
// the tool table (tooltable.go: name, gate, typed arguments, handler), checked against schemas/
// when the registry is built (build.go); operator-defined tools (customtool.go) get their gate
// and handler in custom.go.
//
//  1. Registry.Call (call.go) parses the arguments once and validates them against the tool's
//     schema (schemas/*.json; the wording of invalid_arguments is validation.go), then decodes
//     them with encoding/json into the tool's typed argument struct (args.go). From there the
//     struct is the only carrier of the arguments: every later step reads it through toolArgs,
//     whose methods say where the call runs, whether it writes, the intent it states and the
//     approval it claims. The argument type is the one place that decides whether a tool
//     writes; NewRegistry refuses a schema that says otherwise. (The parsed map lives on only
//     to mask a failure's echoes of the caller's values, which may predate the struct.)
//  2. It routes once: the session the arguments name fixes the database, else the database
//     argument does (authorize.go: route).
//  3. authorize applies the tool's gate (gate.go) to what its arguments say: database access,
//     disabled tools, write scope, read-only databases, stated intent for writes, DDL; a call
//     of a tool that approval rules judge gets its approval gate (approvalgate.go).
//  4. The tool's handler (one file per tool) runs its statement as the request's identity
//     (request.go, identity.go): reads in a READ ONLY transaction (exec.go, budgetgate.go),
//     writes under the guards of guard.go and write.go with their effects read back
//     (effects.go), statements in a session under its database's policy (session.go).
//  5. The answer is the tool's own result type (result.go), encoded with its keys in declared
//     order; a failure is a categorized *Error with a suggestion (errors.go, stmterror.go), its
//     echoed values masked (mask.go).
//  6. Beside the answer, Call returns its Outcome (registry.go): the database and session route
//     chose, which logs, metrics, the audit log (audit.go) and traces (observer.go) name.
//     Registry.Preview routes a call the same way without running it, for a human's
//     confirmation (preview.go).
//
// The files are layered: a file uses only names of files below it (registry.go's types and
// request.go below the pipeline, the handlers above them, call.go and build.go on top).
//
// Below it, in packages that know nothing of the registry or the request: tools/catalog keeps
// each database's catalog and each role's view of it, and resolves and suggests names;
// tools/discovery lists and searches that view, a page at a time, for describe_schema;
// tools/approval holds the require_approval rules, the effect they judge and the store of
// approval requests; tools/page signs and opens the page tokens of truncated reads and builds
// the keyset order they continue by; tools/plan reads the plans of agent statements and judges
// them against cost budgets; tools/session owns pg_tx sessions and their manager;
// tools/internal/wire speaks PostgreSQL's extended protocol (the pipeline, statement cache,
// binding and row encoder); tools/internal/pgerr holds the error object and the classification
// of PostgreSQL errors; tools/internal/ident reads names as PostgreSQL reads them; tools/words
// spells what a message repeats of a caller's input.
package tools
