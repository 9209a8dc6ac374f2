package tools

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Policy.TransactionTimeout bounds a call, not a statement: a pg_transaction of many statements,
// each within statement_timeout, could otherwise hold its locks for minutes. The bound is kept
// by the server where it can be: every statement of the call runs with a statement_timeout no
// longer than what is left of the call's bound, so PostgreSQL cancels it itself and the
// transaction (or the session's savepoint) is rolled back on a connection that stays sound. The
// call's context deadline, a margin later, is the backstop, and on PostgreSQL 17 and later so is
// the server's own transaction_timeout for a pg_transaction.

// txBound is the time bound of one pg_transaction call, started at its BEGIN.
type txBound struct {
	policy   Policy // the database's, for the call's statements
	deadline time.Time
	bounded  bool // the last operation's statement timeout was cut to the call's bound
}

func newTxBound(p *Policy) *txBound {
	return &txBound{policy: *p, deadline: time.Now().Add(p.TransactionTimeout)}
}

// next is the policy the next operation runs under: the database's, with the statement timeout
// cut to what is left of the call's bound (at least 1 ms: 0 would turn the timeout off).
func (b *txBound) next() *Policy {
	p := b.policy
	left := time.Until(b.deadline)
	b.bounded = left < p.StatementTimeout
	if b.bounded {
		p.StatementTimeout = max(left, time.Millisecond)
	}
	return &p
}

// serverSQL is the statement that arms PostgreSQL's own transaction_timeout as a backstop, a
// margin past the runner's bound, on servers that have it (17 and later); "" on older ones.
func (b *txBound) serverSQL(pc *pgconn.PgConn) string {
	if serverMajor(pc) < 17 {
		return ""
	}
	ms := (b.policy.TransactionTimeout + callDeadlineMargin).Milliseconds()
	return "; SET LOCAL transaction_timeout = " + strconv.FormatInt(ms, 10)
}

// exceeded reports, for an operation that failed with err, whether the call's bound ended it:
// the caller did not cancel, and the statement was cancelled under a timeout cut to the bound (or
// once the bound had passed). It then returns the answer: a timeout naming the setting; any other
// failure keeps its own answer. The call's transaction must be rolled back by then; the message
// says so.
func (b *txBound) exceeded(ctx context.Context, err error, db *Database) *Error {
	if ctx.Err() != nil || !cancelledByTimeout(err) {
		return nil
	}
	if b.bounded || !time.Now().Before(b.deadline) {
		return txTimeoutError(db, "the locks it held were released with the rollback") // failedAt says the rest
	}
	return nil
}

// txTimeoutError is the answer for a pg_transaction call that ran past its bound.
func txTimeoutError(db *Database, outcome string) *Error {
	return errorf(ErrTimeout,
		fmt.Sprintf("Send fewer or faster operations per call: split the work into several pg_transaction calls (each is atomic on its own), or narrow slow statements. If the work must be one transaction, ask the operator to raise policy.transaction_timeout_ms of database %q.", db.Name),
		"The transaction ran past its time limit of %s for the whole call (policy.transaction_timeout_ms); %s", db.Policy.TransactionTimeout, outcome)
}

// sessionCallTimeout returns the answer for a session call that err ended at its bound (the
// transaction timeout, shorter than the statement timeout, fired, and the caller did not
// cancel), else nil. The statement was cancelled on the server and rolled back to the savepoint
// taken before it; the session and its earlier work stay as they were.
func sessionCallTimeout(ctx context.Context, p *Policy, s *Session, err error) error {
	if err == nil || ctx.Err() != nil || p.TransactionTimeout >= p.StatementTimeout || !cancelledByTimeout(err) {
		return err
	}
	return errorf(ErrTimeout,
		fmt.Sprintf("Narrow the statement (a tighter where, a smaller limit) or split it into smaller calls; if it must run longer, ask the operator to raise policy.transaction_timeout_ms. Session %s stays open and usable: commit or roll back its earlier work with pg_tx as planned.", s.ID),
		"The call ran past its time limit of %s (policy.transaction_timeout_ms): its statement was cancelled on the server and rolled back to the savepoint before it, releasing the locks it took; the session's earlier work is kept", p.TransactionTimeout)
}

// cancelledByTimeout reports whether err is a statement the server cancelled (57014: its
// statement_timeout, or a cancel request after the call's deadline) or the deadline itself.
func cancelledByTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57014" || errors.Is(err, context.DeadlineExceeded)
}

// serverMajor is the PostgreSQL major version pc reports (server_version, sent at startup), 0
// when it cannot be read.
func serverMajor(pc *pgconn.PgConn) int {
	v := pc.ParameterStatus("server_version")
	n := 0
	for i := 0; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		n = n*10 + int(v[i]-'0')
	}
	return n
}
