package tools

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// identityBundle is a database set up as docs/design.md §11 prescribes: the pool logs in as an
// authenticator that is a member of the agent role tenant; set_config is revoked from PUBLIC and
// granted back to the authenticator; no procedural language for PUBLIC; table docs has a
// row-level security policy on request.jwt.claims' tenant, and table secret is not granted to
// the agent role at all.
type identityBundle struct {
	*bundle
	role   string
	tenant func(n int) Principal
}

func newIdentityBundle(t *testing.T) *identityBundle {
	t.Helper()
	b := newBundleConns(t, Policy{}, 1) // one connection: a leak from one call to the next would show
	auth := quoteIdent(b.db.RoleName("agent"))
	role := b.db.RoleName("tenant")
	b.db.Exec(t, fmt.Sprintf(`
		CREATE ROLE %[1]s NOLOGIN;
		GRANT %[1]s TO %[2]s;
		CREATE TABLE docs (id int PRIMARY KEY, tenant int NOT NULL, body text);
		INSERT INTO docs SELECT i, 1 + i %% 2, 'doc ' || i FROM generate_series(1, 10) i;
		ALTER TABLE docs ENABLE ROW LEVEL SECURITY;
		CREATE POLICY by_tenant ON docs USING (tenant = (current_setting('request.jwt.claims', true)::jsonb ->> 'tenant')::int)
		  WITH CHECK (tenant = (current_setting('request.jwt.claims', true)::jsonb ->> 'tenant')::int);
		GRANT SELECT, INSERT, UPDATE, DELETE ON docs TO %[1]s;
		CREATE TABLE secret (id int, payload text); INSERT INTO secret VALUES (1, 'launch codes');
		CREATE VIEW secret_view AS SELECT * FROM secret;
		REVOKE SELECT ON secret, secret_view FROM %[1]s;
		REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO %[2]s;
		REVOKE USAGE ON LANGUAGE plpgsql FROM PUBLIC;
		REVOKE EXECUTE ON FUNCTION pg_catalog.pg_prepared_statement() FROM PUBLIC;
		REVOKE CREATE ON SCHEMA public FROM PUBLIC`, quoteIdent(role), auth))
	t.Cleanup(func() {
		// Roles are cluster-wide: drop this test's once its database is gone (best effort).
		b.db.Exec(t, fmt.Sprintf("REASSIGN OWNED BY %[1]s TO CURRENT_USER; DROP OWNED BY %[1]s", quoteIdent(role)))
	})
	return &identityBundle{bundle: b, role: role, tenant: func(n int) Principal {
		return Principal{Name: fmt.Sprintf("tenant-%d", n), Scopes: []string{"read", "write"}, Role: role,
			Claims: []byte(fmt.Sprintf(`{"sub":"user-%d","tenant":%d}`, n, n))}
	}}
}

func (ib *identityBundle) ids(t *testing.T, p Principal, tool, args string) string {
	t.Helper()
	out, e := ib.callAs(t, p, tool, args)
	if e != nil {
		t.Fatalf("%s %s as %s: %s (%s) — %s", tool, args, p.Name, e.Message, e.Type, e.Suggestion)
	}
	var ids []string
	for _, r := range rows(t, out) {
		ids = append(ids, fmt.Sprint(r["id"]))
	}
	return strings.Join(ids, ",")
}

func TestRowLevelSecurityPerCaller(t *testing.T) {
	t.Parallel()
	ib := newIdentityBundle(t)
	a, b := ib.tenant(1), ib.tenant(2)
	// Tenant 1 owns the even ids (1 + i % 2 = 1 for even i), tenant 2 the odd ones.
	if got := ib.ids(t, a, "select_query", `{"table":"docs","order_by":"id"}`); got != "2,4,6,8,10" {
		t.Fatalf("tenant 1 reads %s", got)
	}
	if got := ib.ids(t, b, "execute_sql", `{"sql":"select id from docs order by id"}`); got != "1,3,5,7,9" {
		t.Fatalf("tenant 2 reads %s", got)
	}
	// Writes touch only the caller's rows, whatever the where says.
	out, e := ib.callAs(t, a, "execute_sql", `{"sql":"update docs set body = 'mine' where true","mode":"write","autocommit":true}`)
	if e != nil || out["affectedRows"].(float64) != 5 {
		t.Fatalf("update: %v %v", out, e)
	}
	ib.mustCallAs(t, b, "delete_data", `{"table":"docs","where":"id < 4","autocommit":true}`)
	ib.mustCallAs(t, b, "pg_transaction", `{"operations":[{"sql":"update docs set body = 'batch' where id > 0"},{"sql":"select count(*) from docs"}]}`)
	var bodies string
	if err := ib.db.Pool(t).QueryRow(context.Background(), "select string_agg(id || '=' || body, ',' order by id) from docs").Scan(&bodies); err != nil {
		t.Fatal(err)
	}
	if bodies != "2=mine,4=mine,5=batch,6=mine,7=batch,8=mine,9=batch,10=mine" {
		t.Fatalf("rows after both tenants wrote: %s", bodies)
	}
	// A row outside the caller's tenant is refused by the policy's WITH CHECK, and nothing lands.
	e = ib.mustFailAs(t, a, ErrConstraint, "insert_data", `{"table":"docs","row":{"id":100,"tenant":2,"body":"forged"},"autocommit":true}`)
	if e.SQLState != "42501" && e.SQLState[:2] != "23" {
		t.Logf("WITH CHECK refusal: %s", e.SQLState)
	}
	if n := ib.db.QueryInt(t, "select count(*) from docs where id = 100"); n != 0 {
		t.Fatal("a row violating WITH CHECK landed")
	}
}

func (b *bundle) mustCallAs(t *testing.T, p Principal, tool, args string) map[string]any {
	t.Helper()
	out, e := b.callAs(t, p, tool, args)
	if e != nil {
		t.Fatalf("%s %s as %s: %s (%s)", tool, args, p.Name, e.Message, e.Type)
	}
	return out
}

// mustFailAs fails unless the call fails; want may be "" to accept any category.
func (b *bundle) mustFailAs(t *testing.T, p Principal, want ErrorType, tool, args string) *Error {
	t.Helper()
	out, e := b.callAs(t, p, tool, args)
	if e == nil {
		t.Fatalf("%s %s as %s succeeded: %v", tool, args, p.Name, out)
	}
	if want != "" && e.Type != want && !(want == ErrConstraint && e.Type == ErrPermissionDenied) {
		t.Fatalf("%s %s as %s: %s (%s), want %s", tool, args, p.Name, e.Type, e.Message, want)
	}
	return e
}

// TestIdentityEscapesRefused tries, as the agent role, every way out of its role and claims;
// each is refused with nothing from another tenant or table visible, and nothing carried over.
func TestIdentityEscapesRefused(t *testing.T) {
	t.Parallel()
	ib := newIdentityBundle(t)
	a := ib.tenant(1)
	cases := []struct{ tool, args string }{
		{"execute_sql", `{"sql":"SET ROLE NONE","mode":"write","autocommit":true}`},
		{"execute_sql", `{"sql":"RESET ROLE","mode":"write","autocommit":true}`},
		{"execute_sql", `{"sql":"set local role none","mode":"write","autocommit":true}`},
		{"execute_sql", `{"sql":"SET SESSION AUTHORIZATION DEFAULT","mode":"write","autocommit":true}`},
		{"execute_sql", `{"sql":"RESET ALL","mode":"write","autocommit":true}`},
		{"execute_sql", `{"sql":"SET request.jwt.claims = '{\"tenant\":2}'","mode":"write","autocommit":true}`},
		{"execute_sql", `{"sql":"SET \"request.jwt.claims\" = '{\"tenant\":2}'","mode":"write","autocommit":true}`},
		{"execute_sql", `{"sql":"SET ROLE NONE"}`},
		{"execute_sql", `{"sql":"select set_config('role', 'none', false), (select count(*) from docs)"}`},
		{"execute_sql", `{"sql":"with x as (select set_config('request.jwt.claims', '{\"tenant\":2}', true)) select * from x, docs"}`},
		{"execute_sql", `{"sql":"select set_config('request.jwt.claims', '{\"tenant\":2}', false)","mode":"write","autocommit":true}`},
		{"select_query", `{"table":"docs","where":"set_config('role', 'none', true) IS NOT NULL"}`},
		{"execute_sql", `{"sql":"DO $$ BEGIN EXECUTE 'SET ROLE NONE'; END $$"}`},
		{"execute_sql", `{"sql":"DO $$ BEGIN RAISE EXCEPTION '%', (SELECT string_agg(payload, ',') FROM secret); END $$","mode":"write","autocommit":true}`},
		{"pg_transaction", `{"operations":[{"sql":"select set_config('request.jwt.claims', '{\"tenant\":2}', true)"},{"sql":"select id from docs"}]}`},
		{"select_query", `{"table":"secret"}`},
		{"select_query", `{"table":"secret_view"}`},
		{"select_query", `{"table":"docs","where":"exists (select 1 from secret)"}`},
		{"execute_sql", `{"sql":"select d.id, s.payload from docs d join secret s on true"}`},
		{"execute_sql", `{"sql":"select * from secret_view"}`},
	}
	for _, c := range cases {
		e := ib.mustFailAs(t, a, "", c.tool, c.args)
		for _, leak := range []string{"launch codes", `"tenant":2`} {
			if strings.Contains(e.Message+e.Suggestion, leak) {
				t.Fatalf("%s %s leaked %q: %s", c.tool, c.args, leak, errorJSON(t, e))
			}
		}
	}
	// Nothing carried over: the one pooled connection answers the next calls as tenant 1, then
	// as the login role with no claims.
	if got := ib.ids(t, a, "select_query", `{"table":"docs","order_by":"id"}`); got != "2,4,6,8,10" {
		t.Fatalf("tenant 1 reads %s after the escapes", got)
	}
	out := ib.mustCallAs(t, testPrincipal, "execute_sql", `{"sql":"select current_user::text as u, coalesce(current_setting('request.jwt.claims', true), '') as c"}`)
	if r := rows(t, out)[0]; r["u"] != ib.db.RoleName("agent") || r["c"] != "" {
		t.Fatalf("the login role's next call sees %v", r)
	}
	// Neither describe_schema nor a suggestion shows the role a table it cannot read.
	out = ib.mustCallAs(t, a, "describe_schema", `{}`)
	if strings.Contains(fmt.Sprint(out["data"]), "secret") {
		t.Fatalf("describe_schema shows the role %v", out["data"])
	}
	e := ib.mustFailAs(t, a, ErrInvalidTable, "select_query", `{"table":"secrte"}`)
	if strings.Contains(e.Suggestion, "secret") {
		t.Fatalf("suggestion names an unreadable table: %s", e.Suggestion)
	}
}

// TestRoleWithoutClaimsAfterOneWith: on a pooled connection that served a call with claims,
// request.jwt.claims reads the empty string afterwards, which a policy's ::jsonb cast rejects; a role without
// claims therefore gets the empty claim set, and the policy simply matches nothing.
func TestRoleWithoutClaimsAfterOneWith(t *testing.T) {
	t.Parallel()
	ib := newIdentityBundle(t)
	ib.ids(t, ib.tenant(1), "select_query", `{"table":"docs"}`)
	bare := Principal{Name: "service", Scopes: []string{"read"}, Role: ib.role}
	if got := ib.ids(t, bare, "select_query", `{"table":"docs"}`); got != "" {
		t.Fatalf("a role without claims read %q", got)
	}
}

// TestPreparedStatementsStayPrivate: callers of one database share its pooled connections, and the
// statements pgtools caches there carry each caller's where text. Another caller's role cannot
// list them (pg_prepared_statements), on the one connection both calls use.
func TestPreparedStatementsStayPrivate(t *testing.T) {
	t.Parallel()
	ib := newIdentityBundle(t)
	a, b := ib.tenant(1), ib.tenant(2)
	ib.ids(t, a, "select_query", `{"table":"docs","where":"body = 'doc 4 of alice-secret-marker'"}`)
	for _, sql := range []string{"select name, statement from pg_prepared_statements", "select * from pg_catalog.pg_prepared_statement()"} {
		out, e := ib.callAs(t, b, "execute_sql", fmt.Sprintf(`{"sql":%q}`, sql))
		if e == nil {
			t.Fatalf("%s as another tenant: %v", sql, out)
		}
		if e.Type != ErrPermissionDenied || strings.Contains(e.Message+e.Suggestion, "alice-secret-marker") {
			t.Fatalf("%s: %s (%s)", sql, e.Type, e.Message)
		}
	}
}
