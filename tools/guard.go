package tools

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
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

// callDeadlineMargin is how long past the statement timeout a call's context deadline falls: the
// server's own timeout answers first with its SQLSTATE; the deadline cancels on the server if it
// does not (a timeout the statement found a way around, a server that stopped answering).
const callDeadlineMargin = 2 * time.Second

// withCallDeadline bounds one statement's run (after its connection was acquired, so a wait for
// a connection is never counted as statement time) by the policy's statement timeout plus a margin.
func withCallDeadline(ctx context.Context, p *Policy) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.StatementTimeout+callDeadlineMargin)
}

// timeoutsSQL asserts the policy's statement and lock timeouts for the rest of the transaction.
// Sessions and pg_transaction run it before every agent statement: a statement may have changed
// them (SET, set_config(…, false)), and what it changed must not hold for the next one.
func timeoutsSQL(p *Policy) string {
	return "SET LOCAL statement_timeout = " + strconv.FormatInt(p.StatementTimeout.Milliseconds(), 10) +
		"; SET LOCAL lock_timeout = " + strconv.FormatInt(p.LockTimeout.Milliseconds(), 10)
}

// effectsSQL reads what the current transaction has done so far, from PostgreSQL's own
// per-transaction counters (which include open subtransactions, so a session's savepoint is
// seen): rows written to the system catalogs that DDL changes, rows updated or deleted in user
// tables, and whether counting is on at all. Compared before and after an agent's statement, the
// difference is what that statement did, whatever its command tag says: CREATE TABLE AS and SELECT
// INTO report SELECT, and a writable CTE or an INSERT … SELECT wrapping an UPDATE reports the
// outer command's rows only. One pass over pg_class gives both sums: the user-table sum is what
// pg_stat_xact_user_tables' n_tup_upd + n_tup_del add up to (tables, matviews and partitioned
// tables outside pg_catalog and information_schema; TOAST tables are relkind t), without that
// view's join and aggregation, which made a reading cost several times a plain statement.
const effectsSQL = `SELECT coalesce(sum(pg_catalog.pg_stat_get_xact_tuples_inserted(c.oid) + pg_catalog.pg_stat_get_xact_tuples_updated(c.oid) + pg_catalog.pg_stat_get_xact_tuples_deleted(c.oid))
    FILTER (WHERE c.oid = ANY ('{pg_catalog.pg_class,pg_catalog.pg_attribute,pg_catalog.pg_type,pg_catalog.pg_proc,pg_catalog.pg_namespace,pg_catalog.pg_constraint,pg_catalog.pg_index,pg_catalog.pg_trigger,pg_catalog.pg_rewrite,pg_catalog.pg_policy,pg_catalog.pg_extension,pg_catalog.pg_description,pg_catalog.pg_attrdef,pg_catalog.pg_sequence,pg_catalog.pg_depend,pg_catalog.pg_authid,pg_catalog.pg_auth_members,pg_catalog.pg_database,pg_catalog.pg_shdepend,pg_catalog.pg_default_acl,pg_catalog.pg_event_trigger,pg_catalog.pg_publication,pg_catalog.pg_subscription}'::pg_catalog.regclass[])), 0),
 coalesce(sum(pg_catalog.pg_stat_get_xact_tuples_updated(c.oid) + pg_catalog.pg_stat_get_xact_tuples_deleted(c.oid))
    FILTER (WHERE c.relkind IN ('r', 'm', 'p') AND c.relnamespace <> 'pg_catalog'::pg_catalog.regnamespace
      AND c.relnamespace IS DISTINCT FROM pg_catalog.to_regnamespace('information_schema')), 0),
 current_setting('track_counts')::bool,
 current_user::text, coalesce(current_setting('request.jwt.claims', true), '')
 FROM pg_catalog.pg_class c`

// effects is one reading of effectsSQL.
type effects struct {
	catalog int64  // catalog rows written
	changed int64  // user-table rows updated or deleted
	user    string // the role the transaction runs as
	claims  string // request.jwt.claims
}

// sub is what happened between an earlier reading and this one.
func (e effects) sub(before effects) effects {
	return effects{catalog: e.catalog - before.catalog, changed: e.changed - before.changed}
}

// sameIdentity reports whether the transaction still acts as it did at the earlier reading.
func (e effects) sameIdentity(before effects) bool {
	return e.user == before.user && e.claims == before.claims
}

// execReading runs pgtools' own fixed SQL whose last statement is effectsSQL, through the simple
// protocol (one round trip for BEGIN, SAVEPOINT or SET LOCAL and the reading), and returns the
// reading.
func execReading(ctx context.Context, pc *pgconn.PgConn, sql string) (effects, error) {
	results, err := pc.Exec(ctx, sql).ReadAll()
	if err != nil {
		return effects{}, err
	}
	if len(results) == 0 {
		return effects{}, fmt.Errorf("reading the transaction's effects: no result")
	}
	return effectsOf(results[len(results)-1].Rows)
}

// effectsOf decodes the rows effectsSQL returned.
func effectsOf(rows [][][]byte) (effects, error) {
	if len(rows) != 1 || len(rows[0]) != 5 {
		return effects{}, fmt.Errorf("reading the transaction's effects: no row")
	}
	row := rows[0]
	if string(row[2]) != "t" {
		return effects{}, &Error{Type: ErrInternal, Message: "The database has track_counts off, so pgtools cannot tell what a statement changed; the statement was not run",
			Suggestion: "The operator must turn track_counts on (its default) for pgtools to run agent-written writes."}
	}
	e := effects{user: string(row[3]), claims: string(row[4])}
	var err error
	if e.catalog, err = strconv.ParseInt(string(row[0]), 10, 64); err == nil {
		e.changed, err = strconv.ParseInt(string(row[1]), 10, 64)
	}
	if err != nil {
		return effects{}, fmt.Errorf("reading the transaction's effects: %w", err)
	}
	return e, nil
}
