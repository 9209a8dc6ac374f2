package tools

import (
	"encoding/json"
	"testing"
)

// TestNoSessionStateLeaksBetweenCalls: with a pool of one connection, whatever one call did to
// its session (settings, advisory locks, prepared statements, LISTEN, held cursors) is gone for
// the next call: rolled back, released, or the connection was replaced.
func TestNoSessionStateLeaksBetweenCalls(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		first string // execute_sql sql of the call that changes session state
		// firstFails is set when PostgreSQL refuses the first statement; its refusal type.
		firstFails ErrorType
		next       string // execute_sql sql run next; returns one row
		want       string // JSON of that row; ignored when nextFails is set
		nextFails  ErrorType
		// samePID requires both calls to run on the same backend, which makes the check
		// meaningful: the state would have survived if the runner did not undo it.
		samePID bool
	}{
		{name: "set_config search_path", first: "SELECT set_config('search_path', 'pg_catalog', false), pg_backend_pid() AS pid",
			next: "SELECT current_setting('search_path') AS v, pg_backend_pid() AS pid", want: `{"v":"\"$user\", public"}`, samePID: true},
		{name: "set_config statement_timeout", first: "SELECT set_config('statement_timeout', '1', false), pg_backend_pid() AS pid",
			next: "SELECT current_setting('statement_timeout') AS v, pg_sleep(0.05)::text AS s, pg_backend_pid() AS pid", want: `{"v":"30s","s":""}`, samePID: true},
		{name: "set_config application_name", first: "SELECT set_config('application_name', 'hijacked', false), pg_backend_pid() AS pid",
			// The next call sees its own name (pgtools, the principal, the tool), set in its transaction.
			next: "SELECT current_setting('application_name') AS v, pg_backend_pid() AS pid", want: `{"v":"pgtools/tester/execute_sql"}`, samePID: true},
		{name: "SET search_path", first: "SET search_path = pg_catalog", firstFails: ErrNotAllowed,
			next: "SELECT current_setting('search_path') AS v", want: `{"v":"\"$user\", public"}`},
		{name: "advisory lock", first: "SELECT pg_advisory_lock(42), pg_backend_pid() AS pid",
			next: "SELECT count(*) AS v, pg_backend_pid() AS pid FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()", want: `{"v":0}`, samePID: true},
		{name: "shared advisory lock", first: "SELECT pg_advisory_lock_shared(42), pg_backend_pid() AS pid",
			next: "SELECT count(*) AS v, pg_backend_pid() AS pid FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()", want: `{"v":0}`, samePID: true},
		{name: "prepared statement", first: "PREPARE p AS SELECT 1", firstFails: ErrNotAllowed,
			next: "EXECUTE p", nextFails: ErrNotAllowed},
		{name: "listen", first: "LISTEN pgtools_leak", firstFails: ErrNotAllowed,
			next: "SELECT count(*) AS v FROM pg_listening_channels()", want: `{"v":0}`},
		{name: "held cursor", first: "DECLARE c CURSOR WITH HOLD FOR SELECT 1", firstFails: ErrNotAllowed,
			// pg_cursors also lists the protocol-level portal of the query itself.
			next: "SELECT count(*) AS v FROM pg_cursors WHERE name = 'c'", want: `{"v":0}`},
		{name: "fetch from the held cursor", first: "DECLARE c CURSOR WITH HOLD FOR SELECT 1", firstFails: ErrNotAllowed,
			next: "FETCH c", nextFails: ErrNotAllowed},
		{name: "temp table", first: "CREATE TEMP TABLE tt (i int)", firstFails: ErrReadOnlyViolation,
			next: "SELECT count(*) AS v FROM pg_class WHERE relpersistence = 't'", want: `{"v":0}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newBundleConns(t, Policy{}, 1)
			var firstPID any
			if c.firstFails != "" {
				b.mustFail(t, c.firstFails, "execute_sql", argsJSON(t, map[string]any{"sql": c.first}))
			} else {
				out := b.mustCall(t, "execute_sql", argsJSON(t, map[string]any{"sql": c.first}))
				if rs := rows(t, out); len(rs) == 1 {
					firstPID = rs[0]["pid"]
				}
			}
			args := argsJSON(t, map[string]any{"sql": c.next})
			if c.nextFails != "" {
				b.mustFail(t, c.nextFails, "execute_sql", args)
				return
			}
			rs := rows(t, b.mustCall(t, "execute_sql", args))
			if len(rs) != 1 {
				t.Fatalf("want one row, got %v", rs)
			}
			if c.samePID && (firstPID == nil || rs[0]["pid"] != firstPID) {
				t.Fatalf("the calls ran on backends %v and %v: the check proves nothing", firstPID, rs[0]["pid"])
			}
			delete(rs[0], "pid")
			var want map[string]any
			if err := json.Unmarshal([]byte(c.want), &want); err != nil {
				t.Fatal(err)
			}
			assertJSONEqual(t, rs[0], want)
		})
	}
}

// TestAdvisoryLockReleasedForOthers: a session-level advisory lock taken by a call does not
// outlive it, as another session sees.
func TestAdvisoryLockReleasedForOthers(t *testing.T) {
	t.Parallel()
	b := newBundleConns(t, Policy{}, 1)
	b.mustCall(t, "execute_sql", `{"sql":"SELECT pg_advisory_lock(42), pg_advisory_lock(43)"}`)
	// The transaction-level variant is released when the superuser's statement ends, so the
	// check itself leaves no lock behind.
	if got := b.db.QueryInt(t, "SELECT pg_try_advisory_xact_lock(42)::int + pg_try_advisory_xact_lock(43)::int"); got != 2 {
		t.Fatalf("advisory locks still held by the pooled connection (%d of 2 free)", got)
	}
}

// TestPooledConnectionIsReused keeps TestNoSessionStateLeaksBetweenCalls honest: plain reads do
// reuse the single connection, so a leak would be visible.
func TestPooledConnectionIsReused(t *testing.T) {
	t.Parallel()
	b := newBundleConns(t, Policy{}, 1)
	first := rows(t, b.mustCall(t, "execute_sql", `{"sql":"SELECT pg_backend_pid() AS pid"}`))[0]["pid"]
	b.mustCall(t, "select_query", `{"table":"orders","limit":1}`)
	second := rows(t, b.mustCall(t, "execute_sql", `{"sql":"SELECT pg_backend_pid() AS pid"}`))[0]["pid"]
	if first != second {
		t.Fatalf("backend changed from %v to %v between plain reads", first, second)
	}
}
