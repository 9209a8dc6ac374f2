package session_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
)

// TestRowLevelSecurityInSessions: a session acts as the role and claims of the principal that
// began it, on every statement, even after a statement tried to leave them; another subject
// cannot use it.
func TestRowLevelSecurityInSessions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	role := f.db.RoleName("tenant")
	f.db.Exec(t, fmt.Sprintf(`
		CREATE ROLE %[1]q NOLOGIN; GRANT %[1]q TO %[2]q;
		CREATE TABLE docs (id int PRIMARY KEY, tenant int NOT NULL);
		INSERT INTO docs SELECT i, 1 + i %% 2 FROM generate_series(1, 10) i;
		ALTER TABLE docs ENABLE ROW LEVEL SECURITY;
		CREATE POLICY by_tenant ON docs USING (tenant = (current_setting('request.jwt.claims', true)::jsonb ->> 'tenant')::int);
		GRANT SELECT, DELETE ON docs TO %[1]q;
		REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO %[2]q;
		REVOKE USAGE ON LANGUAGE plpgsql FROM PUBLIC;
		REVOKE EXECUTE ON FUNCTION pg_catalog.pg_prepared_statement() FROM PUBLIC`, role, f.role))
	t.Cleanup(func() { f.db.Exec(t, fmt.Sprintf("DROP OWNED BY %q", role)) })
	tenant := func(n int) tools.Principal {
		return tools.Principal{Name: fmt.Sprintf("app:user-%d", n), Scopes: []string{"read", "write"}, Role: role,
			Claims: []byte(fmt.Sprintf(`{"sub":"user-%d","tenant":%d}`, n, n))}
	}
	a, b := tenant(1), tenant(2)
	ids := func(p tools.Principal, args string) string {
		t.Helper()
		out := f.must(t, p, "execute_sql", args)
		var got []string
		for _, r := range out["data"].([]any) {
			got = append(got, fmt.Sprint(r.(map[string]any)["id"]))
		}
		return strings.Join(got, ",")
	}
	id := f.begin(t, a, "")
	q := fmt.Sprintf(`{"sql":"select id from docs order by id","session_id":%q}`, id)
	if got := ids(a, q); got != "2,4,6,8,10" {
		t.Fatalf("tenant 1 reads %s in its session", got)
	}
	for _, sql := range []string{"RESET ROLE", "SET ROLE NONE", "select set_config('role', 'none', false)",
		"select set_config('request.jwt.claims', '{\"tenant\":2}', false)"} {
		if _, e := f.call(t, a, "execute_sql", fmt.Sprintf(`{"sql":%q,"mode":"write","session_id":%q}`, sql, id)); e == nil {
			t.Fatalf("%s ran in the session", sql)
		}
	}
	if got := ids(a, q); got != "2,4,6,8,10" {
		t.Fatalf("tenant 1 reads %s after the escapes", got)
	}
	f.must(t, a, "execute_sql", fmt.Sprintf(`{"sql":"delete from docs where id <= 4","mode":"write","session_id":%q}`, id))
	f.fail(t, tools.ErrSessionNotFound, b, "execute_sql", q)
	f.must(t, a, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))
	if got := f.db.QueryInt(t, "select count(*) from docs"); got != 8 {
		t.Fatalf("%d rows left; the session deletes only tenant 1's ids 2 and 4", got)
	}
}
