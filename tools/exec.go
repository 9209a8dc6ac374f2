package tools

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"
)

// errPoolWait marks a call that never got a connection: it is reported apart from a statement
// timeout, because the fix differs (retry later vs narrow the query).
var errPoolWait = errors.New("timed out waiting for a free connection")

// errTxEscaped marks a statement that ended or steered the transaction it was run in (COMMIT,
// ROLLBACK, BEGIN, SAVEPOINT …).
var errTxEscaped = errors.New("statement ended the transaction")

// readStmt is one agent statement to run in a READ ONLY transaction.
type readStmt struct {
	sql      string
	params   []any
	maxRows  int  // rows to fetch at most (limit+1); the portal stops there, so the server does too
	maxBytes int  // size at which the JSON of the rows is cut
	unnamed  bool // parse every statement as the unnamed statement (Policy.DescribeExec)
}

// rowSet is the encoded result of a read.
type rowSet struct {
	data      []byte // JSON array of row objects
	rowCount  int
	truncated bool   // more rows existed than limit, or the byte cap was reached
	byBytes   bool   // truncated by the byte cap rather than by the row limit
	tag       string // PostgreSQL command tag
}

// The statements that frame every read. A read always rolls back (it has nothing to commit, and a
// rollback also undoes set_config(…, false), LISTEN and held cursors), then drops session-level
// advisory locks, which survive a rollback. Before the agent's statement runs, the read binds
// sqlUnlockAll without executing it: binding a query takes the transaction's first snapshot, and
// from then on PostgreSQL itself refuses SET TRANSACTION READ WRITE ("must be set before any
// query"), at the cost of a Bind instead of a whole SAVEPOINT.
const (
	sqlBeginRead = "BEGIN READ ONLY"
	sqlSavepoint = "SAVEPOINT pgtools_stmt"
	sqlRollback  = "ROLLBACK"
	sqlUnlockAll = "SELECT pg_advisory_unlock_all()"
)

// readFrame is what surrounds an agent's read: statements before it, statements after it (in the
// same round trip), and the statements that end the frame when the read failed and PostgreSQL
// skipped the rest of the group. final is the transaction status the frame must leave.
type readFrame struct {
	pre, post, recover []string
	snapshot           string // bound, not executed, after pre: takes the transaction's first snapshot
	final              byte
}

// statelessRead frames a read on a pooled connection: its own READ ONLY transaction.
var statelessRead = readFrame{
	pre:      []string{sqlBeginRead},
	snapshot: sqlUnlockAll,
	post:     []string{sqlRollback, sqlUnlockAll},
	recover:  []string{sqlRollback, sqlUnlockAll},
	final:    'I',
}

// sessionReadFrame frames a read inside a session's open transaction: a savepoint made read-only,
// with the policy's timeouts asserted again (an earlier statement of the session may have changed
// them), then rolled back, so the read can change nothing and a failure leaves the session usable.
// Session-level advisory locks the read took are released: they would outlive the statement.
func sessionReadFrame(p *Policy) readFrame {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	end := []string{"ROLLBACK TO SAVEPOINT pgtools_stmt", "RELEASE SAVEPOINT pgtools_stmt", sqlUnlockAll}
	return readFrame{
		pre: []string{sqlSavepoint, "SET LOCAL transaction_read_only = on",
			"SET LOCAL statement_timeout = " + ms(p.StatementTimeout), "SET LOCAL lock_timeout = " + ms(p.LockTimeout)},
		post:    end,
		recover: end,
		final:   'T',
	}
}

// safeTags are command tags after which a pooled connection can be reused: nothing a successful
// statement with another tag did (PREPARE, LOAD, DEALLOCATE …) is trusted to have left the
// session as it was.
var safeTags = map[string]bool{"SELECT": true, "SHOW": true, "EXPLAIN": true, "FETCH": true, "": true}

// txControlTags are the command tags of transaction-control statements. PostgreSQL runs BEGIN,
// SAVEPOINT, RELEASE or COMMIT AND CHAIN inside the read transaction without an error, and
// nothing written survives the ROLLBACK, but a read that reported success for them would tell
// the model it steered a transaction; they are refused like a plain COMMIT.
var txControlTags = map[string]bool{"BEGIN": true, "START TRANSACTION": true, "COMMIT": true, "ROLLBACK": true,
	"SAVEPOINT": true, "RELEASE": true, "PREPARE TRANSACTION": true, "COMMIT PREPARED": true, "ROLLBACK PREPARED": true}

// acquire takes a connection from the stateless pool, waiting at most poolWait.
func (db *Database) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	wait := db.Policy.PoolWait
	if wait <= 0 {
		wait = 5 * time.Second
	}
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, err := db.Pool.Acquire(actx)
	if err != nil {
		if ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
			return nil, errPoolWait
		}
		return nil, fmt.Errorf("acquiring a connection: %w", err)
	}
	return conn, nil
}

// release returns conn to the pool, or destroys it when its session state cannot be trusted.
func release(conn *pgxpool.Conn, destroy bool) {
	if destroy {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Conn().Close(ctx)
		cancel()
	}
	conn.Release()
}

// runRead runs one agent statement in a READ ONLY transaction on a pooled connection. BEGIN, the
// statement and the ROLLBACK travel in one round trip; the statement goes through the extended
// protocol, so PostgreSQL rejects more than one statement, and its portal is executed with a row
// limit, so PostgreSQL stops producing rows at maxRows.
func (db *Database) runRead(ctx context.Context, st readStmt) (*rowSet, error) {
	conn, err := db.acquire(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := withCallDeadline(ctx, &db.Policy)
	defer cancel()
	pc := conn.Conn().PgConn()
	st.unnamed = db.Policy.DescribeExec
	rs, destroy, err := readOn(ctx, pc, st, statelessRead)
	if errors.Is(err, errRetry) && !destroy {
		// A cached plan went stale (the table changed shape); run it once more, freshly parsed.
		rs, destroy, err = readOn(ctx, pc, st, statelessRead)
		if errors.Is(err, errRetry) {
			err = errors.New("the statement's result type keeps changing")
		}
	}
	release(conn, destroy || pc.IsClosed())
	return rs, err
}

// readOn runs st on pc; destroy reports that pc must not be reused.
func readOn(ctx context.Context, pc *pgconn.PgConn, st readStmt, fr readFrame) (rs *rowSet, destroy bool, err error) {
	var oids []uint32
	if needsTypes(st.params) {
		// Array parameters bind differently for array and json types: ask the server first.
		sd, err := pc.Prepare(ctx, "", st.sql, nil)
		if err != nil {
			return nil, pc.IsClosed(), err
		}
		oids = sd.ParamOIDs
	}
	values, err := encodeParams(st.params, oids)
	if err != nil {
		return nil, false, &Error{Type: ErrInvalidArguments, Message: "Invalid arguments: " + err.Error(),
			Suggestion: "Params may be strings, numbers, booleans, null, objects or arrays."}
	}

	cache := stmtCacheOf(pc)
	cache.unnamed = st.unnamed
	fe := pc.Frontend()
	// One group, one Sync, one round trip: BEGIN, the snapshot, the agent's statement with its
	// portal's row limit, ROLLBACK and the advisory-lock release. If the statement fails, the rest
	// of the group is skipped and endRead runs the ending in a second round trip.
	for _, sql := range fr.pre {
		cache.sendExec(fe, sql, nil, false, 0)
	}
	if fr.snapshot != "" {
		cache.sendBind(fe, fr.snapshot)
	}
	userStmt, userCached := cache.sendExec(fe, st.sql, values, true, st.maxRows)
	for _, sql := range fr.post {
		cache.sendExec(fe, sql, nil, false, 0)
	}
	cache.sendCloses(fe)
	fe.SendSync(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		return nil, true, err
	}

	// One cancel watch for the whole call: on cancellation, ask the server to cancel the statement
	// and bound the wait for its answer by a read deadline.
	stop := context.AfterFunc(ctx, func() {
		_ = pc.Conn().SetDeadline(time.Now().Add(3 * time.Second))
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = pc.CancelRequest(cctx)
	})
	rs, destroy, err = readResults(pc, st, len(fr.pre), &userStmt.enc)
	// Settle the cache first: statements parsed in a group that failed may not exist, and the
	// recovery below must not bind to them.
	cache.settle(err != nil && !errors.Is(err, errTxEscaped))
	if !destroy && pc.TxStatus() != fr.final {
		// The group stopped at an error before its ending.
		endErr := endRead(pc, cache, fr)
		cache.settle(endErr != nil)
		if endErr != nil {
			destroy = true
			if err == nil {
				err = endErr
			}
		}
	}
	if userCached && isPlanChange(err) {
		cache.evict(st.sql)
		err = errRetry
	}
	if !stop() {
		// The cancel ran or is running: it may still set a deadline on this connection or its
		// request may hit the next statement. Never reuse the connection.
		destroy = true
	}
	return rs, destroy, err
}

// endRead runs a frame's recovery after a failed statement (stateless: roll back and release
// advisory locks; session: roll back to the savepoint), in one round trip.
func endRead(pc *pgconn.PgConn, cache *stmtCache, fr readFrame) error {
	fe := pc.Frontend()
	for _, sql := range fr.recover {
		cache.sendExec(fe, sql, nil, false, 0)
	}
	fe.SendSync(&pgproto3.Sync{})
	if err := fe.Flush(); err != nil {
		return err
	}
	var firstErr error
	for {
		msg, err := pc.ReceiveMessage(context.Background())
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			if firstErr == nil {
				firstErr = pgconn.ErrorResponseToPgError(m)
			}
		case *pgproto3.ReadyForQuery:
			if firstErr == nil && m.TxStatus != fr.final {
				firstErr = fmt.Errorf("transaction status %c after ending a failed read, want %c", m.TxStatus, fr.final)
			}
			return firstErr
		}
	}
}

// readResults reads the answers to the group sent by readOn, up to its ReadyForQuery. Only the
// agent's statement is described, so only it sends a RowDescription; its rows are the DataRows
// that arrive while it is the current execution.
func readResults(pc *pgconn.PgConn, st readStmt, execUser int, enc *rowEncoder) (*rowSet, bool, error) {
	execRollback := execUser + 1
	var (
		rs      = &rowSet{}
		userErr error
		sysErr  error
		done    int // executions finished
		escaped bool
		full    bool
		copyOut bool // COPY … TO STDOUT: its data is not rows; refused after the fact
	)
	rs.data = append(make([]byte, 0, 1024), '[')
	for {
		msg, err := pc.ReceiveMessage(context.Background())
		if err != nil {
			// A FATAL error (terminated backend, shutdown) says more than the closed socket.
			for _, e := range []error{sysErr, userErr} {
				if e != nil {
					return nil, true, e
				}
			}
			return nil, true, err
		}
		switch m := msg.(type) {
		case *pgproto3.ReadyForQuery:
			rs.data = append(rs.data, ']')
			destroy := !safeTags[rs.tag]
			switch {
			case userErr != nil:
				return nil, destroy || sysErr != nil, userErr
			case sysErr != nil:
				return nil, true, fmt.Errorf("framing the read transaction: %w", sysErr)
			case escaped || txControlTags[rs.tag]:
				return nil, true, errTxEscaped
			case copyOut:
				return nil, true, &Error{Type: ErrNotAllowed, Message: "COPY is not supported; its output is not returned",
					Suggestion: "Use a SELECT: rows come back as JSON, capped at the limit."}
			}
			return rs, destroy, nil
		case *pgproto3.ErrorResponse:
			pgErr := pgconn.ErrorResponseToPgError(m)
			if done == execUser && userErr == nil {
				userErr = pgErr
			} else if sysErr == nil {
				sysErr = pgErr
			}
		case *pgproto3.NoticeResponse:
			// "there is no transaction in progress" from our ROLLBACK: the agent's statement
			// ended the transaction (COMMIT, ROLLBACK, …).
			if done == execRollback && m.Code == "25P01" {
				escaped = true
			}
		case *pgproto3.RowDescription:
			if done == execUser {
				if !enc.matches(m.Fields) {
					enc.init(m.Fields)
				}
			}
		case *pgproto3.DataRow:
			if done != execUser || full {
				continue
			}
			if st.maxRows > 0 && rs.rowCount == st.maxRows-1 {
				// The limit+1-th row only proves there are more.
				rs.truncated = true
				full = true
				continue
			}
			n := len(rs.data)
			if rs.rowCount > 0 {
				rs.data = append(rs.data, ',')
			}
			rs.data = enc.appendRow(rs.data, m.Values)
			if st.maxBytes > 0 && len(rs.data) > st.maxBytes-1 {
				rs.data = rs.data[:n]
				rs.truncated, rs.byBytes, full = true, true, true
				continue
			}
			rs.rowCount++
		case *pgproto3.CommandComplete:
			if done == execUser {
				rs.tag = commandVerb(m.CommandTag)
			}
			done++
		case *pgproto3.PortalSuspended:
			if done == execUser {
				rs.tag = "SELECT"
			}
			done++
		case *pgproto3.EmptyQueryResponse:
			done++
		case *pgproto3.CopyOutResponse:
			if done == execUser {
				copyOut = true
			}
		}
	}
}

// commandVerb returns the verb of a command tag: "SELECT 3" → "SELECT", "CREATE TABLE" → "CREATE TABLE".
func commandVerb(tag []byte) string {
	end := len(tag)
	for end > 0 && (tag[end-1] >= '0' && tag[end-1] <= '9' || tag[end-1] == ' ') {
		end--
	}
	return string(tag[:end])
}

// rowEncoder writes rows as JSON objects keyed by column name.
type rowEncoder struct {
	keys  []string // `"name":` ready to append
	encs  []valueEncoder
	names []string // the fields it was built for
	oids  []uint32
}

// matches reports whether the encoder was built for these fields (same names and types), so a
// cached statement's encoder can be reused.
func (e *rowEncoder) matches(fields []pgproto3.FieldDescription) bool {
	if len(e.oids) != len(fields) || e.oids == nil {
		return false
	}
	for i, f := range fields {
		if e.oids[i] != f.DataTypeOID || e.names[i] != string(f.Name) {
			return false
		}
	}
	return true
}

func (e *rowEncoder) init(fields []pgproto3.FieldDescription) {
	e.oids = make([]uint32, len(fields))
	e.names = make([]string, len(fields))
	for i, f := range fields {
		e.oids[i], e.names[i] = f.DataTypeOID, string(f.Name)
	}
	e.keys = make([]string, len(fields))
	e.encs = make([]valueEncoder, len(fields))
	used := make(map[string]bool, len(fields))
	for i, f := range fields {
		name := string(f.Name)
		// Duplicate names (select 1, 2 → two "?column?") would make an invalid JSON object, and
		// a renamed duplicate must not take a name a later column has (select 1 a, 2 a, 3 a_2).
		if used[name] {
			base := name
			for n := 2; used[name]; n++ {
				name = fmt.Sprintf("%s_%d", base, n)
			}
		}
		used[name] = true
		e.keys[i] = string(appendStringS(nil, name)) + ":"
		e.encs[i] = encoderFor(f.DataTypeOID)
	}
}

func (e *rowEncoder) appendRow(dst []byte, values [][]byte) []byte {
	dst = append(dst, '{')
	for i, v := range values {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e.keys[i]...)
		if v == nil {
			dst = append(dst, "null"...)
		} else {
			dst = e.encs[i](dst, v)
		}
	}
	return append(dst, '}')
}
