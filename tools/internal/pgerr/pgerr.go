// Package pgerr is the one error shape of pgtools (Error: errorType, message, suggestion,
// SQLSTATE) and the classification of every failure from running a statement into it: by
// context first, then by SQLSTATE (exact code, then class) and typed network errors, never by
// matching message text. Values PostgreSQL echoes in messages and details are masked here when
// asked; masking the caller's own argument values is the tools package's job, which knows them.
package pgerr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"

	"github.com/pgtools/pgtools/tools/internal/wire"
)

// ErrPoolWait marks a call that never got a connection: it is reported apart from a statement
// timeout, because the fix differs (retry later vs narrow the query).
var ErrPoolWait = errors.New("timed out waiting for a free connection")

// ErrorType is the category of a failed call. A model reads it to decide how to fix its next call;
// transports map it to a status (HTTP) or an isError result (MCP).
type ErrorType string

// The error categories of docs/design.md §4.
const (
	ErrConnection           ErrorType = "connection_error"
	ErrAuthentication       ErrorType = "authentication_error"
	ErrInvalidTable         ErrorType = "invalid_table"
	ErrInvalidColumn        ErrorType = "invalid_column"
	ErrSyntax               ErrorType = "syntax_error"
	ErrConstraint           ErrorType = "constraint_violation"
	ErrPermissionDenied     ErrorType = "permission_denied"
	ErrTimeout              ErrorType = "timeout"
	ErrInvalidArguments     ErrorType = "invalid_arguments"
	ErrWriteIntentRequired  ErrorType = "write_intent_required"
	ErrSessionNotFound      ErrorType = "session_not_found"
	ErrSessionExpired       ErrorType = "session_expired"
	ErrSessionLimitReached  ErrorType = "session_limit_reached"
	ErrReadOnlyViolation    ErrorType = "read_only_violation"
	ErrNotAllowed           ErrorType = "not_allowed"
	ErrConfirmationRequired ErrorType = "confirmation_required"
	ErrTooManyRows          ErrorType = "too_many_rows"
	ErrCommitOutcomeUnknown ErrorType = "commit_outcome_unknown"
	ErrRateLimited          ErrorType = "rate_limited"
	ErrTooExpensive         ErrorType = "too_expensive"     // a plan estimate over max_estimated_cost/_rows
	ErrApprovalRequired     ErrorType = "approval_required" // policy.require_approval: a person must approve the measured effect first
	ErrApprovalMismatch     ErrorType = "approval_mismatch" // the approved effect is not what the statement would do now
	ErrInternal             ErrorType = "internal_error"
	// ErrUnknownTool is not a contract category of a tool call but of routing: the tool name
	// itself is unknown. Transports answer it with 404.
	ErrUnknownTool ErrorType = "unknown_tool"
)

// Error is the one shape every failure takes, from every transport. Its fields are what a model
// reads; none of them may contain a DSN, a password, the full SQL text or a parameter value.
type Error struct {
	Operation  string    `json:"operation,omitempty"`
	Table      string    `json:"table,omitempty"`
	Message    string    `json:"error"`
	Type       ErrorType `json:"errorType"`
	Suggestion string    `json:"suggestion"`
	SQLState   string    `json:"sqlState,omitempty"`
	// FailedOperation is the index of the failing operation of pg_transaction.
	FailedOperation *int `json:"failedOperation,omitempty"`
	// Plan is the summary of the refused statement's plan (too_expensive), as explain_query
	// answers it.
	Plan json.RawMessage `json:"plan,omitempty"`
	// Approval is the approval request a call waits for (approval_required), or the approval
	// whose effect no longer matches (approval_mismatch), as the caller may see it.
	Approval json.RawMessage `json:"approval,omitempty"`
}

// Error implements the error interface with the model-facing message.
func (e *Error) Error() string { return string(e.Type) + ": " + e.Message }

// MarshalJSON writes the error object with "success": false first, as every transport sends it.
func (e *Error) MarshalJSON() ([]byte, error) {
	type plain Error
	b, err := wire.Marshal((*plain)(e))
	if err != nil {
		return nil, err
	}
	return append([]byte(`{"success":false,`), b[1:]...), nil
}

// Errorf builds an Error of type t with a formatted message and a suggestion.
func Errorf(t ErrorType, suggestion, format string, args ...any) *Error {
	return &Error{Type: t, Message: fmt.Sprintf(format, args...), Suggestion: suggestion}
}

// Context says what kind of statement failed, because one SQLSTATE can call for different
// advice on the read path and on the write path.
type Context struct {
	ReadOnly bool   // the statement ran in a READ ONLY transaction
	Database string // configured database name, for messages
}

// Classify turns any error from running a statement into an *Error. The context is checked first:
// with server-side cancellation a deadline surfaces as SQLSTATE 57014, not as a context error.
func Classify(ctx context.Context, err error, cc Context, maskValues bool) *Error {
	var te *Error
	if errors.As(err, &te) {
		return te
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			return Errorf(ErrTimeout, "Narrow the query (add a where clause or a smaller limit) or ask the operator for a longer statement_timeout_ms.",
				"The statement was cancelled: it ran past its time limit")
		}
		return Errorf(ErrTimeout, "Retry the call if it is still needed.", "The call was cancelled before it finished")
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return classifyPg(pgErr, cc, maskValues)
	}
	var pe *wire.ParamError
	if errors.As(err, &pe) {
		return Errorf(ErrInvalidArguments, "Values may be strings, numbers, booleans, null, objects or arrays.", "Invalid arguments: %s", pe.Error())
	}
	if errors.Is(err, wire.ErrIdentityChanged) {
		return IdentityChanged()
	}
	if errors.Is(err, wire.ErrCopyOut) {
		return Errorf(ErrNotAllowed, "Use a SELECT: rows come back as JSON, capped at the limit.", "COPY is not supported; its output is not returned")
	}
	if errors.Is(err, ErrPoolWait) {
		return Errorf(ErrTimeout, "All database connections are busy; retry in a moment, or ask the operator to raise max_conns.",
			"Timed out waiting for a free connection to database %q (the statement never started)", cc.Database)
	}
	if pgconn.Timeout(err) {
		return Errorf(ErrTimeout, "Retry the call; if it keeps failing, narrow the query.", "The database did not answer in time")
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || errors.Is(err, puddle.ErrClosedPool) || isNetworkError(err) {
		return Errorf(ErrConnection, "The database is unreachable right now; retry in a few seconds. If it persists, the operator should check that PostgreSQL is up.",
			"Cannot reach database %q", cc.Database)
	}
	return Errorf(ErrInternal, "Retry the call; if it fails again, report it to the operator with the time of the call.",
		"Internal error while running the statement")
}

// IdentityChanged is the answer to a statement after which the transaction no longer acted as
// the call set it (role or request.jwt.claims): it was rolled back and nothing it read or
// returned reaches the caller.
func IdentityChanged() *Error {
	return Errorf(ErrNotAllowed, "Run statements as the role you were given: SET ROLE, set_config('role', …), changes to request.jwt.claims and functions that make them (such as a SECURITY DEFINER helper that sets the tenant) are refused.",
		"The statement changed the role or the claims it runs with (for instance through a SECURITY DEFINER function); it was rolled back and none of its rows were returned")
}

func isNetworkError(err error) bool {
	// pgconn marks its connection-level failures (closed or busy connection, failed send or
	// receive) as safe to retry; the rest are the socket's own errors. Typed checks only: a
	// message is never matched.
	var safe interface{ SafeToRetry() bool }
	var opErr *net.OpError
	return errors.As(err, &safe) || errors.As(err, &opErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// classifyPg maps a PostgreSQL error by SQLSTATE (exact code first, then class).
func classifyPg(e *pgconn.PgError, cc Context, maskValues bool) *Error {
	msg := pgMessage(e, maskValues)
	out := &Error{SQLState: e.Code, Message: msg}
	if (e.Code == "42P05" || e.Code == "26000") && strings.Contains(e.Message, `"`+wire.StmtNamePrefix) {
		// pgtools' own prepared statements are missing or doubled on the server connection: a
		// pooler in transaction mode hands each transaction another server connection.
		out.Type = ErrConnection
		out.Message = "The database connection does not keep pgtools' prepared statements between transactions (a pooler in transaction mode, such as PgBouncer before 1.21 or Supavisor)"
		out.Suggestion = "The operator must set prepared_statements: false for this database (--prepared-statements=false), or enable max_prepared_statements on PgBouncer 1.21+; retrying will not help."
		return out
	}
	switch e.Code {
	case "42P01": // undefined_table
		out.Type, out.Suggestion = ErrInvalidTable, "Call describe_schema without arguments to list the tables you can use."
	case "42703": // undefined_column
		out.Type, out.Suggestion = ErrInvalidColumn, "Call describe_schema with this table to list its columns."
		if e.TableName != "" {
			out.Table = e.TableName
		}
	case "42601", "42P02", "42804", "42883", "42P18", "42725", "42803", "42P10", "42P09", "42846", "42P08", "42P22", "26000", "34000":
		// syntax error, undefined parameter, datatype mismatch, undefined function, indeterminate
		// datatype, ambiguous function, grouping error, invalid column reference, ambiguous alias,
		// cannot coerce, ambiguous parameter, indeterminate collation, unknown prepared statement,
		// unknown cursor.
		out.Type, out.Suggestion = ErrSyntax, syntaxSuggestion(e)
	case "08P01":
		// protocol_violation at ERROR level (the connection survives): the only part of the
		// protocol the caller controls is the number of values bound, so this is Bind's "bind
		// message supplies 1 parameters, but prepared statement … requires 2". PostgreSQL's text
		// names pgtools' internal statement, which means nothing to the model.
		if e.SeverityUnlocalized == "ERROR" || e.Severity == "ERROR" {
			out.Type = ErrSyntax
			out.Message = "The number of values in params does not match the $n placeholders in the statement"
			out.Suggestion = "Pass exactly one value per placeholder: params is a JSON array whose first element binds to $1, the second to $2, and so on; a statement without placeholders takes no params."
		}
	case "25006": // read_only_sql_transaction
		out.Type = ErrReadOnlyViolation
		out.Suggestion = "This call runs in a READ ONLY transaction, so PostgreSQL refused the write. To change data use insert_data, update_data, delete_data or execute_sql with mode \"write\", and state your intent with session_id or autocommit: true."
	case "25001", "25P01", "25P02", "25008", "25P04", "2D000", "0B000", "3B000", "3B001":
		// Transaction state: a statement tried to steer or escape the transaction.
		if cc.ReadOnly {
			out.Type = ErrReadOnlyViolation
			out.Suggestion = "Reads run in their own READ ONLY transaction; transaction control and statements that cannot run inside a transaction block are refused. Use pg_tx to manage transactions."
		} else {
			out.Type = ErrNotAllowed
			out.Suggestion = "Statements that control or cannot run inside a transaction block are refused; use pg_tx to manage transactions."
		}
	case "57014": // query_canceled without our deadline: the server cancelled it (statement_timeout)
		out.Type = ErrTimeout
		out.Suggestion = "Narrow the query (add a where clause or a smaller limit) or ask the operator for a longer statement_timeout_ms."
	case "55P03": // lock_not_available (lock_timeout)
		out.Type = ErrTimeout
		out.Suggestion = "Another transaction holds a lock on these rows; retry in a moment."
	case "40001", "40P01": // serialization failure, deadlock
		out.Type = ErrTimeout
		out.Suggestion = "The transaction conflicted with a concurrent one; retry the call."
	case "28000", "28P01":
		out.Type = ErrAuthentication
		out.Message = "The runner could not authenticate to the database"
		out.Suggestion = "The operator must fix the runner's database credentials; retrying will not help."
	case "42501": // insufficient_privilege
		out.Type = ErrPermissionDenied
		out.Suggestion = "The runner's database role is not allowed to do this. Use a table or function the role can access (describe_schema lists them), or ask the operator to grant the privilege."
	case "3D000", "3F000": // invalid catalog name, invalid schema name
		out.Type, out.Suggestion = ErrInvalidTable, "Call describe_schema without arguments to list the schemas and tables you can use."
	case "55000": // object not in prerequisite state: e.g. PREPARE TRANSACTION with it disabled
		out.Type = ErrNotAllowed
		out.Suggestion = "PostgreSQL cannot run this statement in the current state; transaction control belongs to pg_tx."
	case "53300", "57P01", "57P02", "57P03", "08000", "08003", "08006", "08001", "08004":
		out.Type = ErrConnection
		out.Suggestion = "The database is unavailable or restarting; retry in a few seconds."
	}
	if out.Type != "" {
		return out
	}
	switch e.Code[:2] {
	case "23":
		out.Type = ErrConstraint
		out.Suggestion = constraintSuggestion(e)
	case "22": // data exception: bad input value for a type, division by zero, out of range …
		out.Type = ErrSyntax
		out.Suggestion = "A value does not fit its column or operator type. Check the params: numbers as numbers, timestamps as ISO 8601 strings, and one value per $n placeholder."
	case "42":
		out.Type, out.Suggestion = ErrSyntax, syntaxSuggestion(e)
	case "08", "57":
		out.Type = ErrConnection
		out.Suggestion = "The database connection failed; retry in a few seconds."
	case "53", "54":
		out.Type = ErrNotAllowed
		out.Suggestion = "The statement exceeded a database resource limit; narrow it."
	case "0A":
		out.Type = ErrNotAllowed
		out.Suggestion = "PostgreSQL does not support this statement in this form; rewrite it."
	default:
		out.Type = ErrInternal
		out.Suggestion = "The database reported an unexpected error; check the statement, and report it if it persists."
	}
	return out
}

func syntaxSuggestion(e *pgconn.PgError) string {
	switch e.Code {
	case "42P02":
		return "Every $n placeholder needs a value: pass params as a JSON array whose first element is $1."
	case "42P18", "42P08":
		return "PostgreSQL cannot infer the type of a placeholder; add a cast such as $1::int or $1::text."
	case "42883":
		return "No function or operator matches these argument types; add explicit casts (for example $1::int) or check the function name."
	case "42804":
		return "A value's type does not match; add an explicit cast or pass a value of the column's type."
	}
	if e.Hint != "" {
		return "Fix the SQL and call again. PostgreSQL's hint: " + e.Hint
	}
	return "Fix the SQL syntax near the reported token and call again; send exactly one statement, with values as $1, $2 … placeholders bound through params."
}

func constraintSuggestion(e *pgconn.PgError) string {
	switch e.Code {
	case "23505":
		return fmt.Sprintf("A row with the same value already exists (constraint %s). Use a different value, update the existing row, or insert with on_conflict.", e.ConstraintName)
	case "23503":
		return fmt.Sprintf("The referenced row does not exist, or other rows still reference this one (constraint %s). Check the referenced key first with select_query.", e.ConstraintName)
	case "23502":
		return fmt.Sprintf("Column %q may not be null: provide a value for it.", e.ColumnName)
	case "23514":
		return fmt.Sprintf("A value breaks check constraint %s; describe_schema shows the table's columns and constraints.", e.ConstraintName)
	}
	return "The change breaks a constraint of the table; check the values and call again."
}

var (
	// keyValues matches "Key (email)=(a@b.c)" in constraint details.
	keyValues = regexp.MustCompile(`\)=\((.*)\)`)
	// failingRow matches "Failing row contains (...)".
	failingRow = regexp.MustCompile(`(?s)(Failing row contains )\(.*\)`)
	// quotedValue matches a trailing quoted value in data-exception messages such as
	// `invalid input syntax for type integer: "abc"`.
	quotedValue = regexp.MustCompile(`: "(?s:.*)"$`)
	// quotedAny matches any other quoted text in a data-exception message, which echoes (part
	// of) a value: `value "123…" is out of range for type integer`, `invalid value "SECR" for "YYYY"`.
	quotedAny = regexp.MustCompile(`"[^"]*"`)
)

// pgMessage returns PostgreSQL's message with its detail, with echoed values masked when mask is
// set. Messages name columns, constraints and types, which help the model and are kept.
func pgMessage(e *pgconn.PgError, mask bool) string {
	msg := e.Message
	detail := e.Detail
	if mask {
		if e.Code[:2] == "22" {
			msg = quotedValue.ReplaceAllString(msg, `: "***"`)
			msg = quotedAny.ReplaceAllString(msg, `"***"`)
		}
		detail = keyValues.ReplaceAllString(detail, `)=(***)`)
		detail = failingRow.ReplaceAllString(detail, `${1}(***)`)
		if e.Code[:2] == "22" || e.Code[:2] == "23" {
			// Any other detail of a data or constraint error may echo a value.
			if detail != "" && !strings.Contains(detail, "***") {
				detail = ""
			}
		}
	}
	if detail != "" {
		msg += ". " + detail
	}
	return capitalize(msg)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	if s[0] >= 'a' && s[0] <= 'z' {
		return string(s[0]-'a'+'A') + s[1:]
	}
	return s
}
