package wire

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// SQLResetSession clears the session-level state an agent's SQL can leave on a connection, and it
// runs inside the transaction, before COMMIT or ROLLBACK: a pooler in transaction mode
// (PgBouncer, Supavisor, …) hands the server connection to its next client as soon as the
// transaction ends, so a reset sent after COMMIT arrives too late, and closing our side of the
// connection closes nothing on the server's. Every part is allowed in a transaction block, in a
// READ ONLY transaction and as an agent role:
//
//   - CLOSE ALL: cursors, WITH HOLD ones included, which would outlive the transaction.
//   - UNLISTEN *: transactional, so it takes effect at COMMIT (LISTEN is refused anyway).
//   - pg_advisory_unlock_all(): session-level advisory locks, which neither COMMIT nor ROLLBACK
//     releases.
//   - DISCARD TEMP: temp tables (DISCARD ALL is not allowed in a transaction block).
//   - DISCARD SEQUENCES: currval/lastval, which survive a rollback too.
//   - RESET ALL, last: settings changed with SET SESSION or set_config(…, false). Inside a
//     transaction it is transactional and, being a SET, holds at COMMIT; role and
//     session_authorization are not reset by RESET ALL, so the statements before it and the
//     commit still run as the caller's role.
//
// What this cannot clear in a transaction is refused before it runs on every path: PREPARE,
// EXECUTE, DEALLOCATE, DISCARD, LISTEN, LOAD (package tools, checkFreeSQL), and SET ROLE,
// SET SESSION AUTHORIZATION and RESET ALL from an agent. pgtools' own named statements (the
// statement cache) are not deallocated: through a transaction pooler the prescribed describe-exec
// mode makes none, and on a direct connection they are pgtools' own cache.
const SQLResetSession = "CLOSE ALL; UNLISTEN *; SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES; RESET ALL"

// SQLCommitClean commits the open transaction after clearing its session-level state, in one
// round trip. SET CONSTRAINTS ALL IMMEDIATE first fires the deferred triggers and checks the
// deferred constraints, so nothing runs at COMMIT after the reset (a deferred trigger could set
// state of its own) and the triggers still see the caller's settings. When any part fails,
// PostgreSQL skips the rest of the message, COMMIT included, and the transaction is left aborted.
const SQLCommitClean = "SET CONSTRAINTS ALL IMMEDIATE; " + SQLResetSession + "; COMMIT"

// RollbackClean rolls back pc's transaction and clears its session-level state (SQLResetSession)
// before the connection can be handed on, in one round trip. Where the transaction is still
// usable the reset runs inside it, before ROLLBACK. An aborted transaction runs nothing but
// ROLLBACK, so there the reset follows it in the same simple-protocol message: PostgreSQL answers
// a message with one ReadyForQuery, at its end, and a transaction pooler moves a server connection
// only at a ReadyForQuery that reports no open transaction. A nil error means the connection is
// out of any transaction and clean; otherwise the caller must destroy it.
func RollbackClean(ctx context.Context, pc *pgconn.PgConn) error {
	var sql string
	switch st := pc.TxStatus(); st {
	case 'T':
		sql = SQLResetSession + "; ROLLBACK"
	case 'E':
		sql = "ROLLBACK; " + SQLResetSession
	case 'I':
		sql = SQLResetSession // a statement ended the transaction itself; the state is still there
	default:
		return fmt.Errorf("the connection's transaction status is unknown (%q)", st)
	}
	if _, err := pc.Exec(ctx, sql).ReadAll(); err != nil {
		return err
	}
	if st := pc.TxStatus(); st != 'I' {
		return fmt.Errorf("the connection is still in a transaction (status %q) after the rollback", st)
	}
	return nil
}
