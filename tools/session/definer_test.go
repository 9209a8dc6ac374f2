package session_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// TestClaimsChangedByDefinerFunction: an ordinary application helper, SECURITY DEFINER and
// owned by a role that may call set_config, lets the agent role switch its claims inside a
// statement. Whatever path the statement takes — a read, a read in a session, a batch, a DML
// tool's where, a dry run, an operator's read tool — no row of another tenant reaches the caller
// and nothing of the statement commits: the call is not_allowed. Tenant 0 sees every row, so a
// write that switches to it passes the policy's checks of new rows: only pgtools' check stands
// between it and the other tenants' rows.
func TestClaimsChangedByDefinerFunction(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{}, tools.Policy{})
	role := f.db.RoleName("tenant")
	f.db.Exec(t, fmt.Sprintf(`
		CREATE ROLE %[1]q NOLOGIN; GRANT %[1]q TO %[2]q;
		CREATE TABLE notes (id int PRIMARY KEY, tenant int NOT NULL, body text NOT NULL);
		INSERT INTO notes SELECT i, 1 + i %% 3, 'note ' || i FROM generate_series(1, 9) i;
		ALTER TABLE notes ENABLE ROW LEVEL SECURITY;
		CREATE POLICY by_tenant ON notes USING ((current_setting('request.jwt.claims', true)::jsonb ->> 'tenant')::int IN (tenant, 0));
		GRANT SELECT, UPDATE, DELETE ON notes TO %[1]q;
		REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO %[2]q;
		REVOKE USAGE ON LANGUAGE plpgsql FROM PUBLIC;
		REVOKE EXECUTE ON FUNCTION pg_catalog.pg_prepared_statement() FROM PUBLIC;
		CREATE FUNCTION set_tenant(t int) RETURNS text LANGUAGE sql SECURITY DEFINER
		  AS $$ SELECT pg_catalog.set_config('request.jwt.claims', json_build_object('tenant', t)::text, false) $$;
		REVOKE EXECUTE ON FUNCTION set_tenant(int) FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION set_tenant(int) TO %[1]q`, role, f.role))
	t.Cleanup(func() { f.db.Exec(t, fmt.Sprintf("DROP OWNED BY %q", role)) })
	// The same registry as the fixture's, plus the custom tool, over the same sessions.
	f.reg = toolstest.RegistryWith(t, f.db.RoleDSN(t, "sess"), tools.Policy{}, 4, tools.Options{Sessions: f.mgr,
		CustomTools: []tools.CustomTool{{Name: "notes_by_id",
			Description: "Notes from an id on.", SQL: "SELECT id, tenant, body FROM notes WHERE id >= $1 AND set_tenant(2) IS NOT NULL ORDER BY id",
			Parameters: []tools.CustomParam{{Name: "from", Type: "integer", Required: true}}}}})
	alice := tools.Principal{Name: "app:alice", Scopes: []string{"read", "write"}, Role: role, Claims: []byte(`{"sub":"alice","tenant":1}`)}
	before := f.notes(t)
	readOnly := f.begin(t, alice, `,"read_only":true`)
	readWrite := f.begin(t, alice, "")
	cases := []struct{ tool, args string }{
		{"select_query", `{"table":"notes","where":"set_tenant(2) is not null"}`},
		{"select_query", `{"table":"notes","columns":"id, body","where":"(select set_tenant(2)) is not null"}`},
		{"select_query", `{"table":"notes","where":"set_tenant(2) is not null","format":"csv"}`},
		{"execute_sql", `{"sql":"select set_tenant(2) as t, id, body from notes"}`},
		{"execute_sql", `{"sql":"select id, body from notes where (select set_tenant(2)) is not null"}`},
		{"execute_sql", `{"sql":"select id, body from notes, lateral (select set_tenant(3)) x"}`},
		{"select_query", fmt.Sprintf(`{"table":"notes","where":"set_tenant(2) is not null","session_id":%q}`, readOnly)},
		{"execute_sql", fmt.Sprintf(`{"sql":"select set_tenant(2) as t, id, body from notes","session_id":%q}`, readOnly)},
		{"select_query", fmt.Sprintf(`{"table":"notes","where":"set_tenant(2) is not null","session_id":%q}`, readWrite)},
		{"execute_sql", fmt.Sprintf(`{"sql":"select set_tenant(2) as t, id, body from notes","session_id":%q}`, readWrite)},
		{"pg_transaction", `{"operations":[{"sql":"select set_tenant(2) as t, id, body from notes"}]}`},
		{"pg_transaction", `{"operations":[{"sql":"select 1"},{"sql":"update notes set body = 'taken' where set_tenant(0) is not null returning id, body"}]}`},
		{"update_data", `{"table":"notes","set":{"body":"taken"},"where":"set_tenant(0) is not null","autocommit":true}`},
		{"update_data", `{"table":"notes","set":{"body":"taken"},"where":"set_tenant(0) is not null","dry_run":true,"autocommit":true}`},
		{"delete_data", `{"table":"notes","where":"set_tenant(0) is not null","returning":"id, body","autocommit":true}`},
		{"update_data", fmt.Sprintf(`{"table":"notes","set":{"body":"taken"},"where":"set_tenant(0) is not null","session_id":%q}`, readWrite)},
		{"execute_sql", `{"sql":"update notes set body = 'taken' where set_tenant(0) is not null returning id, body","mode":"write","autocommit":true}`},
		{"notes_by_id", `{"from":1}`},
	}
	for _, c := range cases {
		out, e := f.call(t, alice, c.tool, c.args)
		if e == nil {
			t.Errorf("%s %s: succeeded, want not_allowed: %v", c.tool, c.args, out)
			continue
		}
		if e.Type != tools.ErrNotAllowed || !strings.Contains(e.Message, "role or the claims") {
			t.Errorf("%s %s: %s: %s, want not_allowed naming the role or the claims", c.tool, c.args, e.Type, e.Message)
		}
		if e.Suggestion == "" {
			t.Errorf("%s %s: no suggestion", c.tool, c.args)
		}
		if strings.Contains(e.Message+e.Suggestion, "note ") {
			t.Errorf("%s %s: the error carries a row: %s", c.tool, c.args, e.Message)
		}
	}
	// Both sessions are still usable and still act for tenant 1; nothing was written anywhere.
	for _, id := range []string{readOnly, readWrite} {
		out := f.must(t, alice, "execute_sql", fmt.Sprintf(`{"sql":"select string_agg(id::text, ',' order by id) as ids from notes","session_id":%q}`, id))
		if got := out["data"].([]any)[0].(map[string]any)["ids"]; got != "3,6,9" {
			t.Errorf("session %s reads %v after the attempts, want tenant 1's 3,6,9", id, got)
		}
	}
	f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, readWrite))
	f.must(t, alice, "pg_tx", fmt.Sprintf(`{"action":"rollback","session_id":%q}`, readOnly))
	if after := f.notes(t); after != before {
		t.Fatalf("notes changed: %s -> %s", before, after)
	}
	// A statement that keeps the caller's claims still runs.
	out := f.must(t, alice, "select_query", `{"table":"notes","columns":"id","order_by":"id"}`)
	if n := len(out["data"].([]any)); n != 3 {
		t.Fatalf("tenant 1 reads %d notes, want 3", n)
	}
}

func (f *fixture) notes(t *testing.T) string {
	t.Helper()
	var s string
	if err := f.db.Pool(t).QueryRow(context.Background(), "select string_agg(id || '=' || body, ',' order by id) from notes").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}
