package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
)

const grantsToken = "grants-token-0123456789abcdef"

// startOnce runs serve's start-up with cfg: nil once it listens (it is then stopped), else the
// error that stopped it; and what it logged.
func startOnce(t *testing.T, cfg *config.Config) (string, error) {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan string, 1)
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, cfg, newLogger(&logs, "info"), ready, reloader{}) }()
	select {
	case <-ready:
		cancel()
		<-errc
		return logs.String(), nil
	case err := <-errc:
		return logs.String(), err
	case <-time.After(90 * time.Second):
		t.Fatal("serve neither started nor failed")
	}
	return "", nil
}

// fixStatements are the SQL statements a refusal lists, one per indented line.
func fixStatements(err error) []string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if s := strings.TrimSpace(line); strings.HasPrefix(line, "    ") && strings.HasSuffix(s, ";") {
			out = append(out, s)
		}
	}
	return out
}

// grantsDB is a database with tables orders and secrets and a login role that can SELECT every
// table in public (now and later), as a deployment that relied on deny_tables would have it.
func grantsDB(t *testing.T) (db *pgtest.DB, login, dsn string) {
	t.Helper()
	db = pgtest.New(t)
	db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY); CREATE TABLE secrets (k text); INSERT INTO secrets VALUES ('s3cr3t')`)
	dsn = db.RoleDSN(t, "app")
	return db, db.RoleName("app"), dsn
}

// agentSetup is docs/identity.md's database setup for agent roles: role agent NOLOGIN, a member of
// the login role's, set_config and plpgsql taken from PUBLIC.
func agentSetup(t *testing.T, db *pgtest.DB, login string) string {
	t.Helper()
	agent := db.RoleName("agent")
	a, l := pgx.Identifier{agent}.Sanitize(), pgx.Identifier{login}.Sanitize()
	db.Exec(t, "CREATE ROLE "+a+" NOLOGIN; GRANT "+a+" TO "+l+"; GRANT USAGE ON SCHEMA public TO "+a+"; GRANT SELECT ON orders TO "+a+`;
		REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO `+l+`;
		REVOKE USAGE ON LANGUAGE plpgsql FROM PUBLIC; REVOKE CREATE ON SCHEMA public FROM PUBLIC;
		REVOKE EXECUTE ON FUNCTION pg_catalog.pg_prepared_statement() FROM PUBLIC`)
	return agent
}

func policyConfig(dsn string, pol tools.Policy, tokens ...auth.Token) *config.Config {
	if len(tokens) == 0 {
		tokens = []auth.Token{{Secret: grantsToken, Name: "agent", Scopes: []string{"read", "write"}}}
	}
	return &config.Config{Tokens: tokens, Databases: map[string]config.DatabaseConfig{"default": {URL: dsn, Policy: pol}}}
}

// mustRefuseThenStart: serve refuses cfg() naming every statement in want; running the
// statements it printed makes it start.
func mustRefuseThenStart(t *testing.T, db *pgtest.DB, cfg func() *config.Config, want ...string) {
	t.Helper()
	_, err := startOnce(t, cfg())
	if err == nil {
		t.Fatal("serve started although a role callers act as can reach what the configuration keeps from them")
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal does not name %q:\n%v", w, err)
		}
	}
	fixes := fixStatements(err)
	if len(fixes) == 0 {
		t.Fatalf("no SQL in the refusal:\n%v", err)
	}
	for _, s := range fixes {
		db.Exec(t, s)
	}
	if logs, err := startOnce(t, cfg()); err != nil {
		t.Fatalf("serve still refuses after the printed SQL ran:\n%v\n%s", err, logs)
	}
}

// TestServeRefusesDeniedTableTheLoginRoleReads: deny_tables is a grant. A login role that can
// read the denied table (the common setup: SELECT on every table) stops the start with the
// REVOKE that fixes it; after it the table really is out of reach of free SQL.
func TestServeRefusesDeniedTableTheLoginRoleReads(t *testing.T) {
	t.Parallel()
	db, login, dsn := grantsDB(t)
	cfg := func() *config.Config { return policyConfig(dsn, tools.Policy{DenyTables: []string{"secrets"}}) }
	mustRefuseThenStart(t, db, cfg, `REVOKE ALL ON TABLE "public"."secrets" FROM "`+login+`";`, "policy.deny_tables", `table_lists to "advisory"`)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var pe *pgconn.PgError
	if _, err := conn.Exec(context.Background(), "select k from secrets"); !errors.As(err, &pe) || pe.Code != "42501" {
		t.Fatalf("the denied table is still readable after the fix: %v", err)
	}
}

// TestServeRefusesTablesOutsideAllowTables: with allow_tables, every other table is denied; a
// grant through PUBLIC is named as such.
func TestServeRefusesTablesOutsideAllowTables(t *testing.T) {
	t.Parallel()
	db, login, dsn := grantsDB(t)
	db.Exec(t, "CREATE TABLE notes (body text); GRANT INSERT ON notes TO PUBLIC")
	cfg := func() *config.Config { return policyConfig(dsn, tools.Policy{AllowTables: []string{"orders"}}) }
	mustRefuseThenStart(t, db, cfg, `REVOKE ALL ON TABLE "public"."secrets" FROM "`+login+`";`,
		`REVOKE ALL ON TABLE "public"."notes" FROM PUBLIC;`, "is not in policy.allow_tables")
	if n := db.QueryInt(t, `select count(*) from information_schema.role_table_grants where table_name = 'orders' and grantee = $1`, login); n == 0 {
		t.Fatal("the fix took privileges on the allowed table")
	}
}

// TestServeRefusesOwnedDeniedTable: owning a denied table is access (the owner can grant itself
// anything), directly or as a member of the owning role; the fix hands it to the database owner.
func TestServeRefusesOwnedDeniedTable(t *testing.T) {
	t.Parallel()
	db, login, dsn := grantsDB(t)
	owners := db.RoleName("owners")
	db.Exec(t, `CREATE TABLE keys (k text); ALTER TABLE keys OWNER TO "`+login+`"; REVOKE ALL ON keys FROM "`+login+`";
		CREATE ROLE "`+owners+`" NOLOGIN; GRANT "`+owners+`" TO "`+login+`"; CREATE TABLE audit (a text); ALTER TABLE audit OWNER TO "`+owners+`";
		CREATE VIEW keys_view AS SELECT 1 AS one; ALTER VIEW keys_view OWNER TO "`+login+`"`)
	cfg := func() *config.Config {
		return policyConfig(dsn, tools.Policy{DenyTables: []string{"keys", "public.audit", "keys_view", "secrets"}})
	}
	mustRefuseThenStart(t, db, cfg, `ALTER TABLE "public"."keys" OWNER TO`, `ALTER TABLE "public"."audit" OWNER TO`,
		`ALTER VIEW "public"."keys_view" OWNER TO`, "owns")
}

// TestServeChecksTokenRolesNotTheLoginRole: tokens with roles of their own are checked as those
// roles; the login role (the authenticator) is then not one a caller acts as.
func TestServeChecksTokenRolesNotTheLoginRole(t *testing.T) {
	t.Parallel()
	db, login, dsn := grantsDB(t)
	agent := agentSetup(t, db, login)
	db.Exec(t, `GRANT SELECT (k) ON secrets TO "`+agent+`"`)
	cfg := func() *config.Config {
		return policyConfig(dsn, tools.Policy{DenyTables: []string{"secrets"}},
			auth.Token{Secret: grantsToken, Name: "reader", Scopes: []string{"read"}, Role: agent})
	}
	mustRefuseThenStart(t, db, cfg, `REVOKE ALL ON TABLE "public"."secrets" FROM "`+agent+`";`, "column privileges", "token reader")
}

// TestServeAdvisoryTableListsWarn: policy.table_lists "advisory" starts as before, warning that
// the lists check the table argument only and naming the REVOKE it did not insist on.
func TestServeAdvisoryTableListsWarn(t *testing.T) {
	t.Parallel()
	_, login, dsn := grantsDB(t)
	logs, err := startOnce(t, policyConfig(dsn, tools.Policy{DenyTables: []string{"secrets"}, TableLists: tools.TableListsAdvisory}))
	if err != nil {
		t.Fatalf("advisory table lists stopped the start: %v", err)
	}
	for _, want := range []string{`policy.table_lists is \"advisory\"`, `REVOKE ALL ON TABLE \"public\".\"secrets\" FROM \"` + login + `\";`, `"level":"warn"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the start-up log does not say %s:\n%s", want, logs)
		}
	}
}

// TestTableListsFailClosed walks every value policy.table_lists can hold, and one it cannot: only
// "advisory" lets the lists be argument checks.
func TestTableListsFailClosed(t *testing.T) {
	t.Parallel()
	for v, grants := range map[string]bool{"": true, tools.TableListsEnforced: true, tools.TableListsAdvisory: false, "Advisory": true, "off": true} {
		if got := (tools.Policy{TableLists: v}).TableListsAreGrants(); got != grants {
			t.Errorf("table_lists %q: grants %v, want %v", v, got, grants)
		}
	}
	if got := (tools.Policy{}).WithDefaults().TableLists; got != tools.TableListsEnforced {
		t.Errorf("default table_lists %q", got)
	}
}

// TestServeTempFileLimitWarning: a login role without temp_file_limit starts with a warning
// naming the ALTER ROLE; with the limit set there is none.
func TestServeTempFileLimitWarning(t *testing.T) {
	t.Parallel()
	db, login, dsn := grantsDB(t)
	logs, err := startOnce(t, policyConfig(dsn, tools.Policy{}))
	if err != nil {
		t.Fatal(err)
	}
	want := `ALTER ROLE \"` + login + `\" SET temp_file_limit = '1GB';`
	if !strings.Contains(logs, want) {
		t.Fatalf("no temp_file_limit warning naming %s:\n%s", want, logs)
	}
	db.Exec(t, `ALTER ROLE "`+login+`" SET temp_file_limit = '1GB'`)
	if logs, err = startOnce(t, policyConfig(dsn, tools.Policy{})); err != nil || strings.Contains(logs, "temp_file_limit") {
		t.Fatalf("with temp_file_limit set: %v\n%s", err, logs)
	}
}

// extensionAvailable reports whether the server has the files of extension name.
func extensionAvailable(t *testing.T, db *pgtest.DB, name string) bool {
	return db.QueryInt(t, "select count(*) from pg_available_extensions where name = $1", name) > 0
}

// TestServeRefusesSharedRoleThatReadsStatements: subjects of one act_as role must not read each
// other's statements. Acting as the login role, pg_stat_activity and the functions behind it show
// every runner connection's text; the refusal names the REVOKEs, and those REVOKEs (all three:
// the view alone leaves the functions) are what closes it on this PostgreSQL, tried here source
// by source.
func TestServeRefusesSharedRoleThatReadsStatements(t *testing.T) {
	t.Parallel()
	db, _, dsn := grantsDB(t)
	cfg := func() *config.Config {
		return policyConfig(dsn, tools.Policy{},
			auth.Token{Secret: grantsToken, Name: "hub", Scopes: []string{"read"}, ActAs: true})
	}
	probes := map[string]string{
		"pg_stat_activity":             "select count(*) from pg_stat_activity where query like '%marker_' || 'bob%'",
		"pg_stat_get_activity":         "select count(*) from pg_stat_get_activity(null) where query like '%marker_' || 'bob%'",
		"pg_stat_get_backend_activity": "select count(*) from pg_stat_get_backend_idset() s where pg_stat_get_backend_activity(s) like '%marker_' || 'bob%'",
	}
	// Another connection of the login role (another subject's call) runs a statement.
	ctx := context.Background()
	bob, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close(ctx)
	running := make(chan error, 1)
	go func() {
		_, err := bob.Exec(ctx, "select pg_sleep(3), 'marker_bob'")
		running <- err
	}()
	alice, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close(ctx)
	time.Sleep(500 * time.Millisecond)
	for name, q := range probes {
		var n int
		if err := alice.QueryRow(ctx, q).Scan(&n); err != nil || n != 1 {
			t.Errorf("%s before the fix: %d %v; want bob's statement visible", name, n, err)
		}
	}
	if err := <-running; err != nil {
		t.Fatal(err)
	}
	mustRefuseThenStart(t, db, cfg,
		"REVOKE SELECT ON TABLE pg_catalog.pg_stat_activity FROM PUBLIC;",
		"REVOKE EXECUTE ON FUNCTION pg_catalog.pg_stat_get_activity(integer) FROM PUBLIC;",
		"REVOKE EXECUTE ON FUNCTION pg_catalog.pg_stat_get_backend_activity(integer) FROM PUBLIC;", "token hub (act_as)")
	after, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close(ctx)
	for name, q := range probes {
		var pe *pgconn.PgError
		var n int
		if err := after.QueryRow(ctx, q).Scan(&n); !errors.As(err, &pe) || pe.Code != "42501" {
			t.Errorf("%s after the fix: %d %v; want permission denied", name, n, err)
		}
	}
}

// TestServeRefusesSharedRoleThatReadsPgStatStatements: with pg_stat_statements installed, an
// act_as role (not the login role) reads the statements every other subject of the role ran;
// the refusal names the REVOKEs of its views and functions. CREATE EXTENSION needs no
// shared_preload_libraries: the check is about privileges, not the statistics.
func TestServeRefusesSharedRoleThatReadsPgStatStatements(t *testing.T) {
	t.Parallel()
	db, login, dsn := grantsDB(t)
	if !extensionAvailable(t, db, "pg_stat_statements") {
		t.Skip("the server has no pg_stat_statements extension files (postgresql-contrib)")
	}
	agent := agentSetup(t, db, login)
	db.Exec(t, "CREATE EXTENSION pg_stat_statements")
	cfg := func() *config.Config {
		return policyConfig(dsn, tools.Policy{},
			auth.Token{Secret: grantsToken, Name: "hub", Scopes: []string{"read"}, Role: agent, ActAs: true})
	}
	mustRefuseThenStart(t, db, cfg,
		`REVOKE EXECUTE ON FUNCTION "public".pg_stat_statements(boolean) FROM PUBLIC;`,
		`REVOKE SELECT ON TABLE "public".pg_stat_statements FROM PUBLIC;`,
		`REVOKE SELECT ON TABLE "public".pg_stat_statements_info FROM PUBLIC;`,
		`REVOKE EXECUTE ON FUNCTION "public".pg_stat_statements_info() FROM PUBLIC;`, agent)
}

// TestCheckConfigDatabasePrintsSQL: check-config --database connects, and prints the SQL that
// makes the databases match the configuration (exit 1 while there is some); once it ran, it says
// there is nothing to change.
func TestCheckConfigDatabasePrintsSQL(t *testing.T) {
	t.Parallel()
	db, login, dsn := grantsDB(t)
	reader := db.RoleName("reader")
	file := filepath.Join(t.TempDir(), "pgtools.json")
	os.WriteFile(file, []byte(`{"databases": {"default": {"url": "`+dsn+`", "policy": {"deny_tables": ["secrets"]}}},
		"tokens": [{"name": "agent", "token": "`+grantsToken+`", "scopes": ["read"]},
		           {"name": "reader", "token": "reader-`+grantsToken+`", "scopes": ["read"], "role": "`+reader+`"}]}`), 0o600)
	check := func() (int, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"check-config", "--database", "--config", file}, &out, &errOut, envOf(nil))
		if strings.Contains(out.String()+errOut.String(), dsn) {
			t.Fatal("check-config printed the connection string")
		}
		return code, out.String() + errOut.String()
	}
	code, out := check()
	var version string
	if err := db.Pool(t).QueryRow(context.Background(), "SELECT current_setting('server_version')").Scan(&version); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`database "default": PostgreSQL ` + version + "\n", `REVOKE ALL ON TABLE "public"."secrets" FROM "` + login + `";`, `ALTER ROLE "` + login + `" SET temp_file_limit`,
		`CREATE ROLE "` + reader + `" NOLOGIN;`, `GRANT "` + reader + `" TO "` + login + `";`} {
		if code != 1 || !strings.Contains(out, want) {
			t.Errorf("exit %d, want 1 and %s:\n%s", code, want, out)
		}
	}
	// A role it had to create is checked on the next run (set_config, plpgsql); the SQL of each
	// run, executed, leads to one with nothing to change.
	for pass := 0; code != 0 && pass < 3; pass++ {
		for _, line := range strings.Split(out, "\n") {
			if line != "" && !strings.HasPrefix(line, "--") && !strings.HasPrefix(line, "pgtools check-config:") {
				db.Exec(t, line)
			}
		}
		code, out = check()
	}
	if code != 0 || strings.Contains(out, "REVOKE") || !strings.Contains(out, "-- nothing to change") {
		t.Fatalf("after the SQL ran: exit %d\n%s", code, out)
	}
	// A SECURITY DEFINER helper the reader role can call, owned by a superuser, is a warning (serve
	// starts) with the REVOKE that takes it away; run, it leaves nothing to change again.
	db.Exec(t, `CREATE FUNCTION set_tenant(t int) RETURNS text LANGUAGE sql SECURITY DEFINER
		AS $$ SELECT pg_catalog.set_config('request.jwt.claims', json_build_object('tenant', t)::text, false) $$`)
	code, out = check()
	revoke := `REVOKE EXECUTE ON FUNCTION set_tenant(integer) FROM PUBLIC, "` + reader + `";`
	if code != 0 || !strings.Contains(out, revoke) || !strings.Contains(out, "warning:") || !strings.Contains(out, "SECURITY DEFINER function set_tenant(integer)") {
		t.Fatalf("with a definer function: exit %d, want 0 with a warning and %s:\n%s", code, revoke, out)
	}
	db.Exec(t, strings.TrimSuffix(revoke, ";"))
	if code, out = check(); code != 0 || !strings.Contains(out, "-- nothing to change") {
		t.Fatalf("after the REVOKE: exit %d\n%s", code, out)
	}
}

// TestExampleConfigsHaveNoNotes: the project's own example configs follow its advice (a role per
// token), so check-config has no note on them but the custom tools' (which says when their
// statements are checked, not that anything is amiss).
func TestExampleConfigsHaveNoNotes(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join(examplesDir, "config", "*.json"))
	if err != nil || len(files) < 2 {
		t.Fatalf("example configs: %v %v", files, err)
	}
	for _, file := range files {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{"check-config", "--no-secrets", "--config", file}, &out, &errOut, envOf(nil)); code != 0 {
			t.Errorf("%s: exit %d:\n%s", file, code, errOut.String())
			continue
		}
		for _, line := range strings.Split(errOut.String(), "\n") {
			if strings.Contains(line, "note:") && !strings.Contains(line, "custom tool(s):") {
				t.Errorf("%s: %s", filepath.Base(file), line)
			}
		}
	}
}

// TestMCPRefusesDeniedTableTheLoginRoleReads: pgtools mcp runs its client as the login role, so
// the same check stops it. --table-lists takes enforced or advisory only.
func TestMCPRefusesDeniedTableTheLoginRoleReads(t *testing.T) {
	t.Parallel()
	_, login, dsn := grantsDB(t)
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"mcp", "--database-url", dsn, "--deny-tables", "secrets"}, &out, &errOut, envOf(nil))
	if want := `REVOKE ALL ON TABLE \"public\".\"secrets\" FROM \"` + login + `\";`; code != 1 || !strings.Contains(errOut.String(), want) {
		t.Fatalf("exit %d, want 1 naming %s:\n%s", code, want, errOut.String())
	}
	errOut.Reset()
	if code := run(context.Background(), []string{"serve", "--database-url", dsn, "--table-lists", "loose"}, &out, &errOut, envOf(nil)); code != 2 || !strings.Contains(errOut.String(), "--table-lists") {
		t.Fatalf("--table-lists loose: exit %d %s", code, errOut.String())
	}
}
