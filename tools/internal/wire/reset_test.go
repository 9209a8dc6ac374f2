package wire_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/tools/internal/wire"
	"github.com/pgtools/pgtools/tools/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// leaveState leaves session-level state of every kind the reset clears, inside whatever
// transaction pc is in (or none).
const leaveState = `SELECT set_config('search_path', 'elsewhere', false), set_config('app.x', '1', false),
	pg_advisory_lock(42), nextval('s');
	SET SESSION work_mem = '7MB';
	CREATE TEMP TABLE tt (i int);
	DECLARE c CURSOR WITH HOLD FOR SELECT 1`

// stateLeft reads what of leaveState is still there, as one string; "" when nothing is.
const stateLeft = `SELECT concat_ws(' ',
	CASE WHEN current_setting('search_path') <> '"$user", public' THEN 'search_path' END,
	CASE WHEN coalesce(current_setting('app.x', true), '') <> '' THEN 'app.x' END,
	CASE WHEN current_setting('work_mem') <> '4MB' THEN 'work_mem' END,
	CASE WHEN EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) THEN 'advisory' END,
	CASE WHEN EXISTS (SELECT 1 FROM pg_class WHERE relpersistence = 't') THEN 'temp' END,
	CASE WHEN EXISTS (SELECT 1 FROM pg_cursors WHERE is_holdable) THEN 'cursor' END)`

func connect(t *testing.T) *pgconn.PgConn {
	t.Helper()
	db := pgtest.New(t)
	db.Exec(t, "CREATE SEQUENCE s")
	ctx := context.Background()
	pc, err := pgconn.Connect(ctx, db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close(context.Background()) })
	return pc
}

func exec(t *testing.T, pc *pgconn.PgConn, sql string) []*pgconn.Result {
	t.Helper()
	res, err := pc.Exec(context.Background(), sql).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return res
}

// assertClean fails unless pc is out of any transaction with none of leaveState left, currval
// included (which no query can read without failing).
func assertClean(t *testing.T, pc *pgconn.PgConn) {
	t.Helper()
	if st := pc.TxStatus(); st != 'I' {
		t.Fatalf("transaction status %q, want I", st)
	}
	res := exec(t, pc, stateLeft)
	if left := string(res[0].Rows[0][0]); left != "" {
		t.Errorf("left on the connection: %s", left)
	}
	_, err := pc.Exec(context.Background(), "SELECT currval('s')").ReadAll()
	if pe, ok := err.(*pgconn.PgError); !ok || pe.Code != "55000" {
		t.Errorf("currval after the reset: %v, want 55000", err)
	}
}

// TestRollbackCleanFromEveryStatus: whatever state the transaction is in — open, aborted, or
// already ended by a statement — RollbackClean leaves the connection outside any transaction
// with nothing of the session state the transaction (or one before it) left.
func TestRollbackCleanFromEveryStatus(t *testing.T) {
	t.Parallel()
	cases := map[string]func(pc *pgconn.PgConn){
		"open": func(pc *pgconn.PgConn) {
			exec(t, pc, "BEGIN; "+leaveState)
		},
		"aborted": func(pc *pgconn.PgConn) {
			exec(t, pc, "BEGIN; "+leaveState)
			_, _ = pc.Exec(context.Background(), "SELECT 1 / (pg_backend_pid() - pg_backend_pid())").ReadAll()
			if pc.TxStatus() != 'E' {
				t.Fatalf("status %q, want E", pc.TxStatus())
			}
		},
		"no transaction": func(pc *pgconn.PgConn) {
			exec(t, pc, "BEGIN; "+leaveState+"; COMMIT")
		},
	}
	for name, setup := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			pc := connect(t)
			setup(pc)
			if err := wire.RollbackClean(context.Background(), pc); err != nil {
				t.Fatal(err)
			}
			assertClean(t, pc)
		})
	}
}

// TestCommitCleanInsideTheTransaction: SQLCommitClean commits the transaction's work and leaves
// none of its session state, in a READ ONLY transaction too, and RESET ALL inside the
// transaction keeps the role the caller set with SET LOCAL ROLE until COMMIT.
func TestCommitCleanInsideTheTransaction(t *testing.T) {
	t.Parallel()
	pc := connect(t)
	exec(t, pc, "CREATE TABLE kept (i int); CREATE ROLE reset_probe_role; GRANT USAGE ON SEQUENCE s TO reset_probe_role; GRANT INSERT ON kept TO reset_probe_role")
	t.Cleanup(func() {
		_, _ = pc.Exec(context.Background(), "DROP OWNED BY reset_probe_role; DROP ROLE reset_probe_role").ReadAll()
	})
	exec(t, pc, "BEGIN; "+leaveState+"; SET LOCAL ROLE reset_probe_role; INSERT INTO public.kept VALUES (1); "+wire.SQLResetSession)
	if who := string(exec(t, pc, "SELECT current_user")[0].Rows[0][0]); who != "reset_probe_role" {
		t.Fatalf("after the reset, inside the transaction, current_user is %s, want reset_probe_role", who)
	}
	exec(t, pc, "COMMIT")
	assertClean(t, pc)
	if n := string(exec(t, pc, "SELECT count(*) FROM kept")[0].Rows[0][0]); n != "1" {
		t.Fatalf("%s rows committed, want 1", n)
	}

	exec(t, pc, "BEGIN READ ONLY; SELECT set_config('search_path', 'elsewhere', false), set_config('app.x', '1', false), pg_advisory_lock(42)")
	exec(t, pc, wire.SQLCommitClean)
	assertClean(t, pc)
}
