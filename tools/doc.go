// Package tools hosts the PostgreSQL tools an agent calls (select_query, describe_schema,
// execute_sql, insert_data, update_data, delete_data, pg_tx, pg_transaction and operator-defined
// tools) and the one pipeline every call takes, whatever its transport. Each built-in tool is
// one definition in the tool table (tooltable.go: name, gate, typed arguments, handler), checked
// against schemas/ when the registry is built; operator-defined tools get their gate in custom.go.
//
//  1. Registry.Call parses the arguments once and validates them against the tool's schema
//     (schemas/*.json), then fills the tool's typed argument struct from them (toolargs.go).
//  2. It routes once: the session that session_id names fixes the database, else the database
//     argument does (authorize.go: route).
//  3. authorize applies every gate of the tool's declarative gate: database access, disabled
//     tools, write scope, read-only sessions, stated intent for writes, DDL.
//  4. The tool's handler (one file per tool) runs its statement: reads in a READ ONLY
//     transaction (database.go), writes under the guards of guard.go and write.go, statements in
//     a session under its database's policy (session.go).
//  5. The answer is the tool's own result type (result.go), encoded with its keys in declared
//     order; a failure is a categorized *Error with a suggestion (errors.go, explain.go), its
//     echoed values masked (mask.go).
//  6. Beside the answer, Call returns its Outcome: the database and session route chose, which
//     logs, metrics, the audit log and traces name. Registry.Preview routes a call the same
//     way without running it, for a human's confirmation (preview.go).
//
// Below it, by layer: tools/internal/wire speaks PostgreSQL's extended protocol (the pipeline, statement
// cache, binding and row encoder), tools/session owns pg_tx sessions and their manager,
// tools/internal/pgerr holds the error object and the classification of PostgreSQL errors,
// tools/catalog caches the catalog and each role's view of it, and tools/discovery lists and
// searches that view, a page at a time, for describe_schema (describe_schema.go).
package tools
