package preflight

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools"
)

// TestDefinerFunctionsNamed: the SECURITY DEFINER functions an agent role can call whose owner
// can change settings or bypasses RLS are listed, with the REVOKE that removes them; functions
// that are not SECURITY DEFINER, that the role cannot call, or whose owner can do neither, are not.
func TestDefinerFunctionsNamed(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tools.Policy{})
	agent := s.agentRole(t, "tenant")
	plain := s.db.RoleName("plainowner")
	role := quoteIdent(agent)
	s.db.Exec(t, fmt.Sprintf(`
		CREATE FUNCTION set_tenant(t int) RETURNS text LANGUAGE sql SECURITY DEFINER
		  AS $$ SELECT pg_catalog.set_config('request.jwt.claims', json_build_object('tenant', t)::text, false) $$;
		CREATE FUNCTION invoker_helper() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;
		CREATE FUNCTION not_granted() RETURNS int LANGUAGE sql SECURITY DEFINER AS $$ SELECT 1 $$;
		REVOKE EXECUTE ON FUNCTION not_granted() FROM PUBLIC;
		CREATE ROLE %[1]s NOLOGIN;
		CREATE FUNCTION harmless_definer() RETURNS int LANGUAGE sql SECURITY DEFINER AS $$ SELECT 1 $$;
		ALTER FUNCTION harmless_definer() OWNER TO %[1]s;
		GRANT EXECUTE ON FUNCTION set_tenant(int), invoker_helper(), harmless_definer() TO %[2]s`, quoteIdent(plain), role))
	t.Cleanup(func() {
		s.db.Exec(t, fmt.Sprintf("DROP FUNCTION harmless_definer(); DROP ROLE %s", quoteIdent(plain)))
	})
	ctx := context.Background()
	fns, err := DefinerFunctions(ctx, s.tdb, agent)
	if err != nil {
		t.Fatal(err)
	}
	if len(fns) != 1 || fns[0].Signature != "set_tenant(integer)" || !fns[0].SetsSettings || !fns[0].BypassesRLS {
		t.Fatalf("definer functions: %+v, want only set_tenant(integer), owned by a superuser", fns)
	}
	ps, err := DefinerProblems(ctx, s.tdb, agent)
	if err != nil || len(ps) != 1 || len(ps[0].Fix) != 1 {
		t.Fatalf("problems: %+v %v", ps, err)
	}
	revoke := fmt.Sprintf("REVOKE EXECUTE ON FUNCTION set_tenant(integer) FROM PUBLIC, %s", role)
	for _, want := range []string{"set_tenant(integer)", "can change settings", "bypasses row-level security"} {
		if !strings.Contains(ps[0].Problem, want) {
			t.Errorf("problem does not name %q: %s", want, ps[0].Problem)
		}
	}
	if ps[0].Fix[0] != revoke {
		t.Errorf("fix %q, want %q", ps[0].Fix[0], revoke)
	}
	// The REVOKE it names removes the function from the role.
	s.db.Exec(t, revoke)
	if fns, err := DefinerFunctions(ctx, s.tdb, agent); err != nil || len(fns) != 0 {
		t.Fatalf("after the REVOKE: %+v %v", fns, err)
	}
}
