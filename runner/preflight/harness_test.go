package preflight

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// setup is one test's fixtures: a database of its own, the superuser handle for setup and
// assertions, and the database as pgtools opens it, logged in as the least-privilege role
// agent (the runner's login role; pgtest grants it SELECT on the tables of schema public).
type setup struct {
	db    *pgtest.DB
	tdb   *tools.Database
	login string // the login role's name
}

// newSetup makes an empty database and opens it with policy as pgtools would.
func newSetup(t testing.TB, policy tools.Policy) *setup {
	t.Helper()
	db := pgtest.New(t)
	cfg, err := tools.PoolConfig(db.RoleDSN(t, "agent"), policy, 2)
	if err != nil {
		t.Fatal(err)
	}
	return &setup{db: db, tdb: tools.NewDatabase("default", pgtest.OpenPool(t, cfg), policy), login: db.RoleName("agent")}
}

// agentRole creates the NOLOGIN role RoleName(name) as docs/identity.md prescribes for agent
// roles: the login role is a member of it; set_config is revoked from PUBLIC and granted back
// to the login role; no procedural language, pg_prepared_statement or CREATE on schema public
// for PUBLIC. It returns the role's name.
func (s *setup) agentRole(t testing.TB, name string) string {
	t.Helper()
	role := s.db.RoleName(name)
	s.db.Exec(t, fmt.Sprintf(`
		CREATE ROLE %[1]s NOLOGIN;
		GRANT %[1]s TO %[2]s;
		REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC;
		GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO %[2]s;
		REVOKE USAGE ON LANGUAGE plpgsql FROM PUBLIC;
		REVOKE EXECUTE ON FUNCTION pg_catalog.pg_prepared_statement() FROM PUBLIC;
		REVOKE CREATE ON SCHEMA public FROM PUBLIC`, quoteIdent(role), quoteIdent(s.login)))
	return role
}

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }
