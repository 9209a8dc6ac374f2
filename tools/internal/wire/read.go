package wire

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// ErrTxEscaped marks a statement that ended or steered the transaction it was run in (COMMIT,
// ROLLBACK, BEGIN, SAVEPOINT …).
var ErrTxEscaped = errors.New("statement ended the transaction")

// ErrIdentityChanged marks a statement after which the transaction no longer acted as the call
// set it to (Stmt.Check did not answer true): its rows were dropped and the transaction rolled back.
var ErrIdentityChanged = errors.New("the statement changed the role or the claims it runs with")

// ErrCopyOut marks a statement that answered with COPY data instead of rows (COPY … TO STDOUT):
// nothing of it is returned.
var ErrCopyOut = errors.New("COPY output is not returned")

// Stmt is one agent statement to run in a READ ONLY transaction.
type Stmt struct {
	SQL      string
	Params   []any
	MaxRows  int    // rows to fetch at most (limit+1); the portal stops there, so the server does too
	MaxBytes int    // size at which the JSON of the rows is cut
	Unnamed  bool   // parse every statement as the unnamed statement (pgx's describe-exec mode)
	Format   Format // how the rows are written
	// Setup runs after the frame's opening statements and before the agent's, in the same round
	// trip: the caller's identity (claims, role) for instance.
	Setup []Exec
	// Check, when set, runs right after the agent's statement in the same round trip and must
	// answer one row whose one value is true; otherwise no row is returned and Read fails with
	// ErrIdentityChanged. Rows are held until then: none leaves before the check passed.
	Check *Exec
	// KeyCols is how many trailing result columns are the row's paging key: they are not
	// written into the rows, and the last row kept (RowSet.LastKey) remembers them.
	KeyCols int
}

// Exec is one of pgtools' own statements with its bound parameters (text format).
type Exec struct {
	SQL    string
	Params [][]byte
}

// RowSet is the encoded result of a read.
type RowSet struct {
	Format    Format // how Data is written (set before rows are added)
	Data      []byte // the rows: a JSON array, or for CSV a JSON string
	Columns   []byte // for Columns: a JSON array of the column names
	RowCount  int
	Truncated bool   // more rows existed than limit, or the byte cap was reached
	ByBytes   bool   // truncated by the byte cap rather than by the row limit
	Tag       string // PostgreSQL command tag
	// LastKey holds the Stmt.KeyCols values (text format, nil for NULL) of the last row in
	// Data, for the page that continues after it; nil when no row was kept or no key asked for.
	LastKey [][]byte
	opened  bool
}

// The statements that frame every read. A read always rolls back (it has nothing to commit, and a
// rollback also undoes set_config(…, false), LISTEN and held cursors), then drops session-level
// advisory locks, which survive a rollback. Before the agent's statement runs, the read binds
// SQLUnlockAll without executing it: binding a query takes the transaction's first snapshot, and
// from then on PostgreSQL itself refuses SET TRANSACTION READ WRITE ("must be set before any
// query"), at the cost of a Bind instead of a whole SAVEPOINT.
const (
	sqlBeginRead = "BEGIN READ ONLY"
	SQLSavepoint = "SAVEPOINT pgtools_stmt"
	sqlRollback  = "ROLLBACK"
	SQLUnlockAll = "SELECT pg_advisory_unlock_all()"
)

// Frame is what surrounds an agent's read: statements before it, statements after it (in the
// same round trip), and the statements that end the frame when the read failed and PostgreSQL
// skipped the rest of the group. final is the transaction status the frame must leave.
type Frame struct {
	pre, post, recover []string
	snapshot           string // bound, not executed, after pre: takes the transaction's first snapshot
	final              byte
}

// StatelessRead frames a read on a pooled connection: its own READ ONLY transaction.
var StatelessRead = Frame{
	pre:      []string{sqlBeginRead},
	snapshot: SQLUnlockAll,
	post:     []string{sqlRollback, SQLUnlockAll},
	recover:  []string{sqlRollback, SQLUnlockAll},
	final:    'I',
}

// SessionFrame frames a read inside a session's open transaction: a savepoint made read-only,
// with the statement and lock timeouts asserted again (an earlier statement of the session may
// have changed them), then rolled back, so the read can change nothing and a failure leaves the
// session usable. Session-level advisory locks the read took are released: they would outlive the
// statement.
func SessionFrame(statementTimeout, lockTimeout time.Duration) Frame {
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	end := []string{"ROLLBACK TO SAVEPOINT pgtools_stmt", "RELEASE SAVEPOINT pgtools_stmt", SQLUnlockAll}
	return Frame{
		pre: []string{SQLSavepoint, "SET LOCAL transaction_read_only = on",
			"SET LOCAL statement_timeout = " + ms(statementTimeout), "SET LOCAL lock_timeout = " + ms(lockTimeout)},
		post:    end,
		recover: end,
		final:   'T',
	}
}

// SafeTags are command tags after which a pooled connection can be reused: nothing a successful
// statement with another tag did (PREPARE, LOAD, DEALLOCATE …) is trusted to have left the
// session as it was.
var SafeTags = map[string]bool{"SELECT": true, "SHOW": true, "EXPLAIN": true, "FETCH": true, "": true}

// txControlTags are the command tags of transaction-control statements. PostgreSQL runs BEGIN,
// SAVEPOINT, RELEASE or COMMIT AND CHAIN inside the read transaction without an error, and
// nothing written survives the ROLLBACK, but a read that reported success for them would tell
// the model it steered a transaction; they are refused like a plain COMMIT.
var txControlTags = map[string]bool{"BEGIN": true, "START TRANSACTION": true, "COMMIT": true, "ROLLBACK": true,
	"SAVEPOINT": true, "RELEASE": true, "PREPARE TRANSACTION": true, "COMMIT PREPARED": true, "ROLLBACK PREPARED": true}

// Read runs st on pc; destroy reports that pc must not be reused. When a cached plan went stale
// (the table changed shape), the statement runs once more, freshly parsed; a plan that changes
// again is an error.
func Read(ctx context.Context, pc *pgconn.PgConn, st Stmt, fr Frame) (rs *RowSet, destroy bool, err error) {
	rs, destroy, err = readOnce(ctx, pc, st, fr)
	if errors.Is(err, ErrRetry) && !destroy {
		rs, destroy, err = readOnce(ctx, pc, st, fr)
		if errors.Is(err, ErrRetry) {
			err = errors.New("the statement's result type keeps changing")
		}
	}
	return rs, destroy, err
}

// readOnce runs st on pc once; ErrRetry reports a stale cached plan, evicted already.
func readOnce(ctx context.Context, pc *pgconn.PgConn, st Stmt, fr Frame) (rs *RowSet, destroy bool, err error) {
	var oids []uint32
	if NeedsTypes(st.Params) {
		// Array parameters bind differently for array and json types: ask the server first.
		sd, err := pc.Prepare(ctx, "", st.SQL, nil)
		if err != nil {
			return nil, pc.IsClosed(), err
		}
		oids = sd.ParamOIDs
	}
	values, err := EncodeParams(st.Params, oids)
	if err != nil {
		return nil, false, err
	}

	cache := stmtCacheOf(pc)
	cache.unnamed = st.Unnamed
	fe := pc.Frontend()
	// One group, one Sync, one round trip: BEGIN, the snapshot, the agent's statement with its
	// portal's row limit, ROLLBACK and the advisory-lock release. If the statement fails, the rest
	// of the group is skipped and endRead runs the ending in a second round trip.
	for _, sql := range fr.pre {
		cache.sendExec(fe, sql, nil, false, 0)
	}
	for _, x := range st.Setup {
		cache.sendExec(fe, x.SQL, x.Params, false, 0)
	}
	if fr.snapshot != "" {
		cache.sendBind(fe, fr.snapshot)
	}
	userStmt, userCached := cache.sendExec(fe, st.SQL, values, true, st.MaxRows)
	if st.Check != nil {
		cache.sendExec(fe, st.Check.SQL, st.Check.Params, false, 0)
	}
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
	rs, destroy, err = readResults(pc, st, len(fr.pre)+len(st.Setup), &userStmt.enc)
	// Settle the cache first: statements parsed in a group that failed may not exist, and the
	// recovery below must not bind to them.
	cache.settle(err != nil && !errors.Is(err, ErrTxEscaped))
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
		cache.evict(st.SQL)
		err = ErrRetry
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
func endRead(pc *pgconn.PgConn, cache *stmtCache, fr Frame) error {
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

// readResults reads the answers to the group sent by Read, up to its ReadyForQuery. Only the
// agent's statement is described, so only it sends a RowDescription; its rows are the DataRows
// that arrive while it is the current execution.
func readResults(pc *pgconn.PgConn, st Stmt, execUser int, enc *RowEncoder) (*RowSet, bool, error) {
	execCheck, execRollback := -1, execUser+1
	if st.Check != nil {
		execCheck, execRollback = execUser+1, execUser+2
	}
	var (
		rs       = &RowSet{Format: st.Format, Data: make([]byte, 0, 1024)}
		userErr  error
		sysErr   error
		done     int // executions finished
		escaped  bool
		full     bool
		copyOut  bool // COPY … TO STDOUT: its data is not rows; refused after the fact
		checked  int  // rows of the check that answered true; exactly one passes
		checkBad bool
	)
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
			rs.close(enc)
			destroy := !SafeTags[rs.Tag]
			switch {
			case userErr != nil:
				return nil, destroy || sysErr != nil, userErr
			case st.Check != nil && !escaped && !txControlTags[rs.Tag] && (checked != 1 || checkBad):
				// Also when the check itself failed (the statement may have broken it on
				// purpose, e.g. with a tiny statement_timeout): the identity is unconfirmed.
				return nil, true, ErrIdentityChanged
			case sysErr != nil:
				return nil, true, fmt.Errorf("framing the read transaction: %w", sysErr)
			case escaped || txControlTags[rs.Tag]:
				return nil, true, ErrTxEscaped
			case copyOut:
				return nil, true, ErrCopyOut
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
				fields := m.Fields
				if st.KeyCols > 0 && len(fields) >= st.KeyCols {
					fields = fields[:len(fields)-st.KeyCols]
				}
				if !enc.matches(fields) {
					enc.Init(fields)
				}
			}
		case *pgproto3.DataRow:
			if done == execCheck {
				if len(m.Values) == 1 && string(m.Values[0]) == "t" {
					checked++
				} else {
					checkBad = true
				}
				continue
			}
			if done != execUser || full {
				continue
			}
			if st.MaxRows > 0 && rs.RowCount == st.MaxRows-1 {
				// The limit+1-th row only proves there are more.
				rs.Truncated = true
				full = true
				continue
			}
			values := m.Values
			var key [][]byte
			if st.KeyCols > 0 && len(values) >= st.KeyCols {
				values, key = values[:len(values)-st.KeyCols], values[len(values)-st.KeyCols:]
			}
			if !rs.appendRow(enc, values, st.MaxBytes) {
				full = true
			} else if key != nil {
				rs.keepKey(key)
			}
		case *pgproto3.CommandComplete:
			if done == execUser {
				rs.Tag = CommandVerb(m.CommandTag)
			}
			done++
		case *pgproto3.PortalSuspended:
			if done == execUser {
				rs.Tag = "SELECT"
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

// CommandVerb returns the verb of a command tag: "SELECT 3" → "SELECT", "CREATE TABLE" → "CREATE TABLE".
func CommandVerb(tag []byte) string {
	end := len(tag)
	for end > 0 && (tag[end-1] >= '0' && tag[end-1] <= '9' || tag[end-1] == ' ') {
		end--
	}
	return string(tag[:end])
}

// RowEncoder writes rows as JSON objects keyed by column name.
type RowEncoder struct {
	keys  []string // `"name":` ready to append
	encs  []valueEncoder
	names []string // the fields it was built for
	oids  []uint32
	// colNames are the names rows are keyed by: the fields' names, duplicates renamed.
	colNames []string
}

// matches reports whether the encoder was built for these fields (same names and types), so a
// cached statement's encoder can be reused.
func (e *RowEncoder) matches(fields []pgproto3.FieldDescription) bool {
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

func (e *RowEncoder) Init(fields []pgproto3.FieldDescription) {
	e.oids = make([]uint32, len(fields))
	e.names = make([]string, len(fields))
	for i, f := range fields {
		e.oids[i], e.names[i] = f.DataTypeOID, string(f.Name)
	}
	e.keys = make([]string, len(fields))
	e.encs = make([]valueEncoder, len(fields))
	e.colNames = make([]string, len(fields))
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
		e.colNames[i] = name
		e.keys[i] = string(AppendString(nil, name)) + ":"
		e.encs[i] = encoderFor(f.DataTypeOID)
	}
}

func (e *RowEncoder) AppendRow(dst []byte, values [][]byte) []byte {
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

// CollectRows reads a result's rows in format f (the first keepRows of them, cut at maxBytes of
// JSON; the rest are read and counted as truncation, not sent) and its command tag.
func CollectRows(rr *pgconn.ResultReader, f Format, keepRows, maxBytes int) (*RowSet, pgconn.CommandTag, error) {
	rs := &RowSet{Format: f}
	var enc RowEncoder
	fds := rr.FieldDescriptions()
	fields := make([]pgproto3.FieldDescription, len(fds))
	for i, f := range fds {
		fields[i] = pgproto3.FieldDescription{Name: []byte(f.Name), DataTypeOID: f.DataTypeOID}
	}
	enc.Init(fields)
	for rr.NextRow() {
		if rs.Truncated {
			continue
		}
		if rs.RowCount == keepRows {
			rs.Truncated = true
			continue
		}
		rs.appendRow(&enc, rr.Values(), maxBytes)
	}
	tag, err := rr.Close()
	if err != nil {
		return nil, tag, err
	}
	rs.close(&enc)
	return rs, tag, nil
}

// keepKey copies key (the message buffer it points into is reused) as LastKey, reusing
// LastKey's own buffers: a NULL stays nil, an empty value stays empty but not nil.
func (rs *RowSet) keepKey(key [][]byte) {
	if len(rs.LastKey) != len(key) {
		rs.LastKey = make([][]byte, len(key))
	}
	for i, v := range key {
		switch {
		case v == nil:
			rs.LastKey[i] = nil
		case rs.LastKey[i] == nil:
			rs.LastKey[i] = append(make([]byte, 0, len(v)), v...)
		default:
			rs.LastKey[i] = append(rs.LastKey[i][:0], v...)
		}
	}
}

// appendRow adds one row unless it would take the JSON past maxBytes (0: no cap), in which case
// the set is marked truncated by bytes and false is returned.
func (rs *RowSet) appendRow(enc *RowEncoder, values [][]byte, maxBytes int) bool {
	if !rs.opened {
		rs.open(enc)
	}
	n := len(rs.Data)
	rs.appendValues(enc, values)
	if maxBytes > 0 && len(rs.Data) > maxBytes-1 {
		rs.Data = rs.Data[:n]
		rs.Truncated, rs.ByBytes = true, true
		return false
	}
	rs.RowCount++
	return true
}
