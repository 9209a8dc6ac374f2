package session_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/session"
)

// spareQueries returns the last statement text and state of each idle spare of the fixture's
// database, as pg_stat_activity shows them.
func spareQueries(t *testing.T, f *fixture) (queries []string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.db.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT query || ' [' || state || coalesce(', xid ' || backend_xid::text, '') || ']' FROM pg_stat_activity
		WHERE datname = current_database() AND application_name = 'pgtools-spare' ORDER BY pid`)
	if err != nil {
		t.Fatal(err)
	}
	qs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

// TestSparesPlanTheTablesSessionsUse: after sessions wrote to a table, the spares opened next
// plan a statement of the same kind on it, as the session's role and with an empty claim set
// (not the caller's claims, and never the caller's SQL), in a transaction they leave; a session
// on such a spare acts as its own identity; and a warm-up that fails (the table was dropped)
// costs only the warming: the spare is kept and the next session works.
func TestSparesPlanTheTablesSessionsUse(t *testing.T) {
	t.Parallel()
	f := newFixture(t, session.Config{MaxSessions: 4}, tools.Policy{})
	role := f.db.RoleName("warm")
	f.db.Exec(t, fmt.Sprintf(`CREATE ROLE %[1]q NOLOGIN; GRANT %[1]q TO %[2]q;
		CREATE TABLE "Warm ""Notes""" (id bigserial PRIMARY KEY, tenant int NOT NULL, body text NOT NULL);
		ALTER TABLE "Warm ""Notes""" ENABLE ROW LEVEL SECURITY;
		CREATE POLICY by_tenant ON "Warm ""Notes""" USING (tenant = (current_setting('request.jwt.claims', true)::jsonb ->> 'tenant')::int);
		GRANT SELECT, INSERT, UPDATE ON "Warm ""Notes""" TO %[1]q; GRANT USAGE ON SEQUENCE "Warm ""Notes""_id_seq" TO %[1]q`, role, f.role))
	t.Cleanup(func() { f.db.Exec(t, fmt.Sprintf("DROP OWNED BY %q", role)) })
	p := tools.Principal{Name: "app:user-7", Scopes: []string{"read", "write"}, Role: role, Claims: []byte(`{"sub":"user-7","tenant":7,"secret":"s3cr3t"}`)}

	const table = `"Warm ""Notes"""`
	id := f.begin(t, p, "")
	f.must(t, p, "insert_data", fmt.Sprintf(`{"table":%q,"row":{"tenant":7,"body":"hello"},"session_id":%q}`, table, id))
	f.must(t, p, "update_data", fmt.Sprintf(`{"table":%q,"set":{"body":"changed"},"where":"body = 'hello'","session_id":%q}`, table, id))
	f.must(t, p, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))

	// The next begin takes a spare opened before the table was used and sets the database's
	// warm-up; the spares opened after it plan the table.
	id = f.begin(t, p, "")
	f.must(t, p, "pg_tx", fmt.Sprintf(`{"action":"rollback","session_id":%q}`, id))
	var warmed []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		f.mgr.WaitSpares()
		warmed = warmed[:0]
		for _, q := range spareQueries(t, f) {
			if strings.Contains(q, `EXPLAIN INSERT INTO "public"."Warm ""Notes"""`) {
				warmed = append(warmed, q)
			}
		}
		if len(warmed) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(warmed) == 0 {
		t.Fatalf("no spare planned the table sessions wrote to; spares ran: %q", spareQueries(t, f))
	}
	for _, q := range warmed {
		for _, want := range []string{`SET LOCAL ROLE "` + role + `"`, `EXPLAIN UPDATE "public"."Warm ""Notes"""`, "set_config('request.jwt.claims', '{}', true)", "ROLLBACK [idle]"} {
			if !strings.Contains(q, want) {
				t.Errorf("a spare's warm-up lacks %q: %s", want, q)
			}
		}
		for _, leak := range []string{"s3cr3t", "user-7", "hello", "changed"} {
			if strings.Contains(q, leak) {
				t.Errorf("a spare's warm-up carries the caller's %q: %s", leak, q)
			}
		}
	}

	// A session on a warmed spare acts as its own principal: its claims, its role, its rows.
	other := tools.Principal{Name: "app:user-8", Scopes: []string{"read", "write"}, Role: role, Claims: []byte(`{"sub":"user-8","tenant":8}`)}
	id = f.begin(t, other, "")
	out := f.must(t, other, "execute_sql", fmt.Sprintf(`{"sql":"select current_user::text as u, current_setting('request.jwt.claims', true) as c, (select count(*) from \"Warm \"\"Notes\"\"\") as n","session_id":%q}`, id))
	row := out["data"].([]any)[0].(map[string]any)
	if row["u"] != role || row["c"] != `{"sub":"user-8","tenant":8}` || fmt.Sprint(row["n"]) != "0" {
		t.Fatalf("a session on a warmed spare reads %v, want role %s, its own claims and none of tenant 7's rows", row, role)
	}
	f.must(t, other, "pg_tx", fmt.Sprintf(`{"action":"rollback","session_id":%q}`, id))

	// The table goes: the warm-up's plan fails, the spares stay, sessions go on.
	f.db.Exec(t, `DROP TABLE "Warm ""Notes"""`)
	f.mgr.WaitSpares()
	for i := 0; i < 3; i++ {
		id = f.begin(t, p, "")
		f.must(t, p, "execute_sql", fmt.Sprintf(`{"sql":"select 1 as one","session_id":%q}`, id))
		f.must(t, p, "pg_tx", fmt.Sprintf(`{"action":"commit","session_id":%q}`, id))
		f.mgr.WaitSpares()
	}
	if n := len(spareQueries(t, f)); n == 0 {
		t.Fatalf("no spare left after the warmed table was dropped")
	}
}
