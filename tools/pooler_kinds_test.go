package tools

import (
	"fmt"
	"testing"
)

// sessionStateKind is one kind of state an agent statement can leave on its connection beyond
// its transaction, and what must come of it: refused before it runs, or cleared before the
// transaction ends.
type sessionStateKind struct {
	name    string
	leave   string    // the agent statement that leaves the state
	refused ErrorType // refused with this type on every write path ("" when it runs)
	check   string    // run by the next caller; one row with column v ("" when refused)
	want    string    // v on a clean connection
	// checkFails is the SQLSTATE the check fails with on a clean connection (instead of want).
	checkFails string
}

// sessionStateKinds lists every kind of session state pgtools knows of. Each is either cleared
// by wire.SQLResetSession inside the transaction or refused by checkFreeSQL; the test below also
// requires a refused case for every statement of sessionStateWords, so a word added there without
// a case here fails.
var sessionStateKinds = []sessionStateKind{
	{name: "set_config search_path", leave: "SELECT set_config('search_path', 'inventory, public', false) AS v",
		check: "SELECT current_setting('search_path') AS v", want: `"$user", public`},
	{name: "set_config custom", leave: "SELECT set_config('app.x', '1', false) AS v",
		check: "SELECT coalesce(current_setting('app.x', true), '') AS v", want: ""},
	{name: "SET SESSION", leave: "SET SESSION work_mem = '7MB'",
		check: "SELECT current_setting('work_mem') AS v", want: "4MB"},
	{name: "SET SESSION CHARACTERISTICS", leave: "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", refused: ErrNotAllowed},
	{name: "advisory lock", leave: "SELECT pg_advisory_lock(42)::text AS v",
		check: "SELECT count(*)::text AS v FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())", want: "0"},
	{name: "shared advisory lock", leave: "SELECT pg_advisory_lock_shared(42)::text AS v",
		check: "SELECT count(*)::text AS v FROM pg_locks WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())", want: "0"},
	{name: "temp table", leave: "CREATE TEMP TABLE tt (i int)",
		check: "SELECT count(*)::text AS v FROM pg_class WHERE relpersistence = 't'", want: "0"},
	{name: "held cursor", leave: "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
		check: "SELECT count(*)::text AS v FROM pg_cursors WHERE is_holdable", want: "0"},
	{name: "sequence state", leave: "SELECT nextval('counter') AS v", check: "SELECT currval('counter') AS v", checkFails: "55000"},
	{name: "SET ROLE", leave: "SET ROLE postgres", refused: ErrNotAllowed},
	{name: "SET SESSION AUTHORIZATION", leave: "SET SESSION AUTHORIZATION postgres", refused: ErrNotAllowed},
	{name: "RESET ALL", leave: "RESET ALL", refused: ErrNotAllowed},
	{name: "COPY", leave: "COPY customers TO STDOUT", refused: ErrNotAllowed},
	{name: "LOAD", leave: "LOAD 'auto_explain'", refused: ErrNotAllowed},
	{name: "LISTEN", leave: "LISTEN pgtools_leak", refused: ErrNotAllowed},
	{name: "UNLISTEN", leave: "UNLISTEN *", refused: ErrNotAllowed},
	{name: "PREPARE", leave: "PREPARE p AS SELECT 1", refused: ErrNotAllowed},
	{name: "EXECUTE", leave: "EXECUTE p", refused: ErrNotAllowed},
	{name: "DEALLOCATE", leave: "DEALLOCATE ALL", refused: ErrNotAllowed},
	{name: "DISCARD", leave: "DISCARD ALL", refused: ErrNotAllowed},
}

// TestEverySessionStateIsClearedOrRefused walks sessionStateKinds through an autocommit write, a
// pg_transaction batch and a session commit, behind PgBouncer in transaction mode with one server
// connection: the next call of another caller runs on the same server connection right after, so
// only a reset inside the writer's transaction can have cleared it.
func TestEverySessionStateIsClearedOrRefused(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{}
	for _, k := range sessionStateKinds {
		if k.refused != "" {
			covered[leadingKeyword(k.leave)] = true
		}
	}
	for w := range sessionStateWords {
		if !covered[w] {
			t.Errorf("sessionStateWords refuses %s, but sessionStateKinds has no case that shows it", w)
		}
	}
	for _, k := range sessionStateKinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			f := newPoolerFixture(t, func(b *bundle) string { return b.db.PgBouncer(t, b.db.RoleDSN(t, "agent"), 1) })
			pid := func() any {
				out, e := f.read(t, "SELECT pg_backend_pid() AS pid")
				if e != nil {
					t.Fatalf("reader: %s: %s", e.Type, e.Message)
				}
				return rows(t, out)[0]["pid"]
			}
			first := pid()
			paths := []struct {
				name string
				run  func() *Error
			}{
				{"autocommit write", func() *Error {
					_, e := f.write(t, poolWriter, "execute_sql", map[string]any{"sql": k.leave, "mode": "write", "autocommit": true})
					return e
				}},
				{"pg_transaction", func() *Error {
					_, e := f.write(t, poolWriter, "pg_transaction", map[string]any{"operations": []any{map[string]any{"sql": k.leave}}})
					return e
				}},
				{"session commit", func() *Error {
					out, e := f.write(t, poolWriter, "pg_tx", map[string]any{"action": "begin"})
					if e != nil {
						t.Fatalf("pg_tx begin: %s: %s", e.Type, e.Message)
					}
					id := out["session_id"].(string)
					_, e = f.write(t, poolWriter, "execute_sql", map[string]any{"sql": k.leave, "mode": "write", "session_id": id})
					if _, ce := f.write(t, poolWriter, "pg_tx", map[string]any{"action": "commit", "session_id": id}); ce != nil {
						t.Fatalf("pg_tx commit: %s: %s", ce.Type, ce.Message)
					}
					return e
				}},
			}
			for _, p := range paths {
				e := p.run()
				switch {
				case k.refused != "" && (e == nil || e.Type != k.refused):
					t.Errorf("%s: %q answered %v, want %s", p.name, k.leave, e, k.refused)
				case k.refused == "" && e != nil:
					t.Errorf("%s: %q: %s: %s", p.name, k.leave, e.Type, e.Message)
				}
				if k.check == "" {
					continue
				}
				out, ce := f.read(t, k.check)
				switch {
				case k.checkFails != "" && (ce == nil || ce.SQLState != k.checkFails):
					t.Errorf("%s: the next caller's %q: %v, want SQLSTATE %s", p.name, k.check, describeOutcome(out, ce), k.checkFails)
				case k.checkFails == "" && ce != nil:
					t.Errorf("%s: the next caller's %q: %s: %s", p.name, k.check, ce.Type, ce.Message)
				case k.checkFails == "" && fmt.Sprint(rows(t, out)[0]["v"]) != k.want:
					t.Errorf("%s: the next caller sees %v, want %q", p.name, rows(t, out)[0]["v"], k.want)
				}
			}
			if now := pid(); now != first {
				t.Fatalf("the server connection changed from backend %v to %v: the checks may prove nothing", first, now)
			}
		})
	}
}

func describeOutcome(out map[string]any, e *Error) string {
	if e != nil {
		return fmt.Sprintf("%s (%s: %s)", e.Type, e.SQLState, e.Message)
	}
	return fmt.Sprintf("success %v", out["data"])
}
