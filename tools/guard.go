package tools

import (
	"fmt"
)

// This file holds the limits an agent's SQL cannot switch off: which statements a path accepts at
// all, the timeouts asserted again before every statement of a session or a batch, the deadline
// of every call, and what a statement did, measured by its effect rather than by its command tag.

// readRefusedWords lead statements the read paths refuse before they run: none of them is a
// query, and PostgreSQL runs each inside a READ ONLY transaction, where it could hold locks for
// the statement's whole run (DO, LOCK), change settings or open cursors for later statements (SET,
// DECLARE), or call procedures. Statements that write (INSERT, CREATE, …) are left to PostgreSQL's
// READ ONLY refusal, whose answer tells the model to switch to a write, and a misspelt keyword to
// its syntax error.
var readRefusedWords = map[string]bool{"DO": true, "LOCK": true, "SET": true, "RESET": true, "CALL": true, "DECLARE": true,
	"FETCH": true, "MOVE": true, "CLOSE": true, "CHECKPOINT": true, "NOTIFY": true}

// sessionStateWords are statements refused on every path: COPY waits for client data (or streams
// data that is not rows) and ignores statement_timeout while it waits; the others leave state on
// the connection that outlives the statement (prepared statements, listeners, loaded libraries) or
// discard pgtools' own.
var sessionStateWords = map[string]bool{"COPY": true, "LOAD": true, "LISTEN": true, "UNLISTEN": true, "PREPARE": true,
	"EXECUTE": true, "DEALLOCATE": true, "DISCARD": true}

// leadingKeyword is the statement's first keyword, upper-cased ("" when it starts with anything
// else). Like transactionControl it is no parser: it only sorts statements into the classes a
// path refuses before anything runs.
func leadingKeyword(sql string) string {
	if w := leadingWords(sql, 1); len(w) == 1 {
		return w[0]
	}
	return ""
}

// checkFreeSQL refuses, before anything runs, an agent statement its path does not run. read is
// the READ ONLY path (execute_sql read); otherwise the statement is a write (execute_sql write,
// pg_transaction). inSession says the statement would run in a pg_tx session.
func checkFreeSQL(sql string, read, inSession bool) *Error {
	kw, txControl := leadingKeyword(sql), transactionControl(sql)
	switch {
	case txControl && inSession:
		return &Error{Type: ErrNotAllowed, Message: "Transaction control statements are not allowed inside a session; nothing was run",
			Suggestion: "Use pg_tx with the session_id to commit, roll back or set savepoints."}
	case txControl:
		if read {
			return &Error{Type: ErrReadOnlyViolation, Message: "Transaction control statements (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, SET TRANSACTION, …) are not allowed in execute_sql; nothing was run",
				Suggestion: "Send one query without BEGIN, COMMIT or ROLLBACK; use pg_tx to manage transactions."}
		}
		return txControlRefused()
	case changesIdentity(sql):
		return &Error{Type: ErrNotAllowed, Message: "Statements that change the role, the session authorization or request.* settings are not allowed; nothing was run",
			Suggestion: "Run your statement as the role you were given; pgtools sets the role and the claims for every call."}
	case sessionStateWords[kw]:
		return &Error{Type: ErrNotAllowed, Message: fmt.Sprintf("%s statements are not supported by pgtools; nothing was run", kw),
			Suggestion: sessionStateSuggestion(kw)}
	case read && readRefusedWords[kw]:
		return &Error{Type: ErrNotAllowed, Message: fmt.Sprintf("execute_sql in read mode runs one query (SELECT, WITH, VALUES, TABLE, SHOW or EXPLAIN), not %s; nothing was run", kw),
			Suggestion: "Rewrite it as one query. DO blocks, LOCK, SET, cursors and CALL are not available to reads; a statement that changes data needs mode \"write\" with autocommit: true or a session_id."}
	}
	return nil
}

// changesIdentity reports SET/RESET of the role, the session authorization or a request.* setting
// (request.jwt.claims), and RESET ALL, which would return to the login role: a caller acting as a
// role must not leave it (docs/design.md §11), and nobody may forge claims.
func changesIdentity(sql string) bool {
	w := leadingWords(sql, 3)
	if len(w) < 2 || (w[0] != "SET" && w[0] != "RESET") {
		return false
	}
	rest := w[1:]
	if rest[0] == "LOCAL" || rest[0] == "SESSION" {
		if rest[0] == "SESSION" && len(rest) > 1 && rest[1] == "AUTHORIZATION" {
			return true
		}
		rest = rest[1:]
	}
	if len(rest) == 0 {
		return false
	}
	switch rest[0] {
	case "ROLE", "REQUEST", "ALL", "SESSION_AUTHORIZATION":
		return true
	}
	return false
}

func sessionStateSuggestion(kw string) string {
	switch kw {
	case "COPY":
		return "Read rows with a SELECT (they come back as JSON, capped at the limit); write them with insert_data, which takes many rows per call."
	case "PREPARE", "EXECUTE", "DEALLOCATE":
		return "Send the statement itself with $1, $2 … placeholders and params; pgtools prepares and caches statements for you."
	}
	return "Send plain SELECT, INSERT, UPDATE, DELETE or MERGE statements; pgtools manages connections and their state."
}

func txControlRefused() *Error {
	return &Error{Type: ErrNotAllowed, Message: "Transaction control statements (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, SET TRANSACTION, …) are not allowed in execute_sql; nothing was run",
		Suggestion: `Use pg_tx to manage transactions ({"action":"begin"}, then session_id on each call, then {"action":"commit"}), or pg_transaction to run several statements atomically.`}
}
