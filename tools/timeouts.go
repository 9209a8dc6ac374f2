package tools

import (
	"context"
	"strconv"
	"time"
)

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
