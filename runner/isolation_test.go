package runner_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestTokenMaxResponseBytesCutsReads: a token's max_response_bytes in the config file cuts its
// reads below the database's cap, with truncated set; another token reads everything.
func TestTokenMaxResponseBytesCutsReads(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE notes (id int PRIMARY KEY, body text); INSERT INTO notes SELECT i, repeat('x', 200) FROM generate_series(1, 100) i`)
	const small, big = "small-cap-token-0123456789", "no-cap-token-0123456789ab"
	f := runnertest.NewServerFixture(t, runnertest.ConfigDoc(t, fmt.Sprintf(`{"tokens": [
	    {"name": "small", "token": %q, "scopes": ["read"], "max_response_bytes": 4096},
	    {"name": "big", "token": %q, "scopes": ["read"]}],
	  "databases": {"default": {"url": %q}}}`, small, big, db.RoleDSN(t, "cap"))))
	status, body, _ := f.Call(t, small, "select_query", `{"table":"notes","order_by":"id"}`)
	n, _ := body["rowCount"].(float64)
	if status != 200 || body["truncated"] != true || n < 1 || n >= 100 || !strings.Contains(fmt.Sprint(body["hint"]), "byte") {
		t.Fatalf("capped token: %d rowCount=%v truncated=%v hint=%v", status, body["rowCount"], body["truncated"], body["hint"])
	}
	if status, body, _ := f.Call(t, big, "select_query", `{"table":"notes"}`); status != 200 || body["truncated"] != false || body["rowCount"] != 100.0 {
		t.Fatalf("uncapped token: %d rowCount=%v truncated=%v", status, body["rowCount"], body["truncated"])
	}
}

// withParam adds a connection parameter to a URL or keyword/value connection string.
func withParam(t *testing.T, dsn, key, value string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal("test DSN is not a URL")
		}
		q := u.Query()
		q.Set(key, value)
		// pgconn does not read "+" in a query value as a space.
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
		return u.String()
	}
	return dsn + " " + key + "='" + value + "'"
}

// TestOwnConnectionsNameTheCallerNeverTheSecret: whatever application_name the DSN sets (directly
// or through options), a session's and a pg_transaction's transactions show pgtools' own name for
// the caller in pg_stat_activity (issue 38: the database sees who acts): the principal's name and
// the tool, never the token's secret.
func TestOwnConnectionsNameTheCallerNeverTheSecret(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	dsn := db.RoleDSN(t, "appname")
	role := db.RoleName("appname")
	dsn = withParam(t, dsn, "application_name", "dsn-app-name")
	dsn = withParam(t, dsn, "options", "-c application_name=dsn-options-name")
	const secret = "alice-secret-token-0123456789"
	cfg := &config.Config{Tokens: []auth.Token{{Secret: secret, Name: "alice-principal", Scopes: []string{"read", "write"}}},
		Databases: map[string]config.DatabaseConfig{"default": {URL: dsn}}}
	f := runnertest.NewServerFixture(t, cfg)
	if status, body, _ := f.Call(t, secret, "pg_tx", `{"action":"begin","read_only":true}`); status != 200 {
		t.Fatalf("begin: %d %v", status, body)
	}
	done := make(chan map[string]any, 1)
	go func() {
		_, body, _ := f.Call(t, secret, "pg_transaction", `{"operations":[{"sql":"select pg_sleep(1)"}]}`)
		done <- body
	}()
	admin := db.Pool(t)
	backend := func(cond string) string {
		rows, err := admin.Query(t.Context(), `select application_name from pg_stat_activity
			where datname = current_database() and usename = $1 and `+cond, role)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var names []string
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		return strings.Join(names, ",")
	}
	var session, tx string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && tx == ""; time.Sleep(20 * time.Millisecond) {
		tx = backend("state = 'active' and query like '%pg_sleep%'")
	}
	session = backend("state = 'idle in transaction'")
	if session != "pgtools-session/alice-principal/pg_tx" || tx != "pgtools/alice-principal/pg_transaction" {
		t.Errorf("application_name of the session connection %q, of the pg_transaction connection %q; want pgtools-session/alice-principal/pg_tx and pgtools/alice-principal/pg_transaction", session, tx)
	}
	if all := backend("true"); strings.Contains(all, "secret") || strings.Contains(all, "dsn-") {
		t.Errorf("a backend's application_name shows the token's secret or the DSN's name: %s", all)
	}
	if body := <-done; body["success"] != true {
		t.Fatalf("pg_transaction: %v", body)
	}
}

// TestRolePerTokenIsolatesBackends is issue 12's cross-principal attack: a read token reading a
// write token's statement text in pg_stat_activity and terminating its session's backend. With
// one database entry (one role) for both it works, which is why check-config warns; with the
// docs/identity.md's layout (a database entry and role per token) PostgreSQL refuses both.
func TestRolePerTokenIsolatesBackends(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY, status text); INSERT INTO orders VALUES (1, 'paid')`)
	dsnA, dsnB := db.RoleDSN(t, "tok_a"), db.RoleDSN(t, "tok_b")
	const tokA, tokB = "token-a-reader-0123456789", "token-b-writer-0123456789"
	activeSessions := func() int64 {
		return db.QueryInt(t, `select count(*) from pg_stat_activity where datname = current_database()
			and application_name like 'pgtools-session/%' and state = 'active'`)
	}
	// Only this test's database: other tests' sessions run on the same server.
	const snoop = `{"database":%q,"sql":"select query from pg_stat_activity where datname = current_database() and application_name like 'pgtools-session/%%'"}`
	const killSQL = `{"database":%q,"sql":"select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and application_name like 'pgtools-session/%%'"}`

	// attack opens B's session, runs a slow statement with a literal in it, and while it runs
	// lets A read pg_stat_activity and try to terminate the session's backend. It returns what A
	// read, A's terminate answer and B's statement answer.
	attack := func(t *testing.T, cfg *config.Config, dbA, dbB string) (seen string, killStatus int, kill, victim map[string]any) {
		f := runnertest.NewServerFixture(t, cfg)
		status, body, _ := f.Call(t, tokB, "pg_tx", fmt.Sprintf(`{"action":"begin","database":%q}`, dbB))
		if status != 200 {
			t.Fatalf("B begin: %d %v", status, body)
		}
		id := body["session_id"].(string)
		done := make(chan map[string]any, 1)
		go func() {
			_, body, _ := f.Call(t, tokB, "execute_sql", fmt.Sprintf(`{"database":%q,"session_id":%q,"sql":"select pg_sleep(2), 'b-secret-literal' as tag"}`, dbB, id))
			done <- body
		}()
		for deadline := time.Now().Add(5 * time.Second); activeSessions() == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("B's statement never showed up as active")
			}
		}
		status, body, _ = f.Call(t, tokA, "execute_sql", fmt.Sprintf(snoop, dbA))
		if status != 200 {
			t.Fatalf("A reading pg_stat_activity: %d %v", status, body)
		}
		seen = fmt.Sprint(body["data"])
		killStatus, kill, _ = f.Call(t, tokA, "execute_sql", fmt.Sprintf(killSQL, dbA))
		return seen, killStatus, kill, <-done
	}

	t.Run("one shared role", func(t *testing.T) {
		cfg := &config.Config{Databases: map[string]config.DatabaseConfig{"default": {URL: dsnB}},
			Tokens: []auth.Token{{Secret: tokA, Name: "a", Scopes: []string{"read"}}, {Secret: tokB, Name: "b", Scopes: []string{"read", "write"}}}}
		if len(cfg.SharedRoleNotes()) != 1 {
			t.Errorf("no note for tokens sharing a role: %q", cfg.SharedRoleNotes())
		}
		seen, status, _, victim := attack(t, cfg, "default", "default")
		if !strings.Contains(seen, "b-secret-literal") || status != 200 || victim["errorType"] != "connection_error" {
			t.Fatalf("expected the attack to work on a shared role: seen %s, terminate %d, victim %v", seen, status, victim)
		}
	})
	t.Run("a role per token", func(t *testing.T) {
		cfg := &config.Config{Databases: map[string]config.DatabaseConfig{"a": {URL: dsnA}, "b": {URL: dsnB}},
			Tokens: []auth.Token{{Secret: tokA, Name: "a", Scopes: []string{"read"}, Databases: []string{"a"}},
				{Secret: tokB, Name: "b", Scopes: []string{"read", "write"}, Databases: []string{"b"}}}}
		if notes := cfg.SharedRoleNotes(); len(notes) != 0 {
			t.Errorf("notes for the recommended layout: %q", notes)
		}
		seen, status, kill, victim := attack(t, cfg, "a", "b")
		if strings.Contains(seen, "b-secret-literal") || !strings.Contains(seen, "<insufficient privilege>") {
			t.Errorf("A read B's statement: %s", seen)
		}
		if status != 403 || kill["errorType"] != "permission_denied" || kill["sqlState"] != "42501" {
			t.Errorf("A terminating B's backend: %d %v", status, kill)
		}
		if victim["success"] != true {
			t.Errorf("B's statement: %v", victim)
		}
	})
}

// TestServerSharesConnectionsBetweenTokens: serve's wiring (Build) gives each of two
// tokens half of max_sessions and of max_transactions by default, answered with 429.
func TestServerSharesConnectionsBetweenTokens(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	const tokA, tokB = "token-a-share-0123456789", "token-b-share-0123456789"
	cfg := &config.Config{Databases: map[string]config.DatabaseConfig{"default": {URL: db.RoleDSN(t, "share")}}, Sessions: config.Sessions{MaxSessions: 2, MaxTransactions: 2},
		Tokens: []auth.Token{{Secret: tokA, Name: "a", Scopes: []string{"read", "write"}}, {Secret: tokB, Name: "b", Scopes: []string{"read", "write"}}}}
	f := runnertest.NewServerFixture(t, cfg)
	if status, body, _ := f.Call(t, tokA, "pg_tx", `{"action":"begin","read_only":true}`); status != 200 {
		t.Fatalf("A's first session: %d %v", status, body)
	}
	status, body, _ := f.Call(t, tokA, "pg_tx", `{"action":"begin","read_only":true}`)
	if status != 429 || body["errorType"] != "session_limit_reached" || !strings.Contains(fmt.Sprint(body["error"]), "1 of your 1") {
		t.Fatalf("A's second session: %d %v", status, body)
	}
	if status, body, _ := f.Call(t, tokB, "pg_tx", `{"action":"begin"}`); status != 200 {
		t.Fatalf("B's session: %d %v", status, body)
	}
	statuses := make(chan int, 2)
	for i := 0; i < 2; i++ {
		go func() {
			status, _, _ := f.Call(t, tokA, "pg_transaction", `{"operations":[{"sql":"select pg_sleep(0.5)"}]}`)
			statuses <- status
		}()
	}
	got := map[int]int{}
	for i := 0; i < 2; i++ {
		got[<-statuses]++
	}
	if got[200] != 1 || got[429] != 1 {
		t.Fatalf("two concurrent pg_transaction calls of one token with a share of 1: statuses %v", got)
	}
}
