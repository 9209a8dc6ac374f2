package preflight

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools"
)

// TestCheckRoleAcceptsPrescribedSetup: a role set up as docs/identity.md prescribes passes, with
// no finding to report.
func TestCheckRoleAcceptsPrescribedSetup(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tools.Policy{})
	role := s.agentRole(t, "tenant")
	if err := CheckRole(context.Background(), s.tdb, role); err != nil {
		t.Fatalf("CheckRole on the prescribed setup: %v", err)
	}
	if ps, err := RoleProblems(context.Background(), s.tdb, role); err != nil || len(ps) != 0 {
		t.Fatalf("RoleProblems on the prescribed setup: %+v %v", ps, err)
	}
}

func TestCheckRoleNamesTheFix(t *testing.T) {
	t.Parallel()
	b := newSetup(t, tools.Policy{})
	role := b.db.RoleName("loose")
	b.db.Exec(t, fmt.Sprintf("CREATE ROLE %[1]s NOLOGIN; GRANT %[1]s TO %[2]s; GRANT CREATE ON SCHEMA public TO %[1]s", quoteIdent(role), quoteIdent(b.login)))
	err := CheckRole(context.Background(), b.tdb, role)
	if err == nil {
		t.Fatal("a role that can run set_config, plpgsql and create objects passed")
	}
	for _, want := range []string{"REVOKE EXECUTE ON FUNCTION pg_catalog.set_config", "plpgsql", "REVOKE CREATE ON SCHEMA public",
		"REVOKE EXECUTE ON FUNCTION pg_catalog.pg_prepared_statement() FROM PUBLIC"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
	if err := CheckRole(context.Background(), b.tdb, "no_such_role_"+role); err == nil || !strings.Contains(err.Error(), "CREATE ROLE") {
		t.Fatalf("missing role: %v", err)
	}
	notMember := b.db.RoleName("stranger")
	b.db.Exec(t, "CREATE ROLE "+quoteIdent(notMember)+" NOLOGIN")
	if err := CheckRole(context.Background(), b.tdb, notMember); err == nil || !strings.Contains(err.Error(), "not a member") {
		t.Fatalf("role the login role cannot become: %v", err)
	}
}

// TestCheckRolesNamesDatabaseAndRole: CheckRoles checks every role a token may act as on the
// databases the token may use, and its refusal names the database and the role before the
// check's own words.
func TestCheckRolesNamesDatabaseAndRole(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tools.Policy{})
	good := s.agentRole(t, "tenant")
	stranger := s.db.RoleName("stranger")
	s.db.Exec(t, "CREATE ROLE "+quoteIdent(stranger)+" NOLOGIN")
	cfg := func(roles ...string) *config.Config {
		c := &config.Config{Databases: map[string]config.DatabaseConfig{"default": {URL: "postgres://unused@h/d"}}}
		for i, r := range roles {
			c.Tokens = append(c.Tokens, auth.Token{Name: "t" + string(rune('a'+i)), Role: r})
		}
		return c
	}
	byName := func(name string) (*tools.Database, bool) { return s.tdb, name == "default" }
	ctx := context.Background()
	if err := CheckRoles(ctx, cfg(good), byName); err != nil {
		t.Fatalf("the prescribed role was refused: %v", err)
	}
	err := CheckRoles(ctx, cfg(good, stranger), byName)
	if err == nil || !strings.HasPrefix(err.Error(), `database "default", role "`+stranger+`": `) || !strings.Contains(err.Error(), "not a member") {
		t.Fatalf("a role the login role cannot become: %v", err)
	}
	// A database the caller has no handle for is not checked.
	if err := CheckRoles(ctx, cfg(stranger), func(string) (*tools.Database, bool) { return nil, false }); err != nil {
		t.Fatalf("a database without a handle was checked: %v", err)
	}
}
