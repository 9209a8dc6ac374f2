package preflight

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
)

// TestCheckRoleMembershipSetOption: from PostgreSQL 16 a membership can be granted WITH SET
// FALSE; the login role is then a member of the agent's role but cannot become it, so every
// call as that role would fail. The start-up check must refuse it and name the GRANT that fixes
// it, and accept the same role once the membership allows SET.
func TestCheckRoleMembershipSetOption(t *testing.T) {
	t.Parallel()
	if pgtest.ServerVersionNum(t) < 160000 {
		t.Skip("membership options (WITH SET) are new in PostgreSQL 16")
	}
	b := newSetup(t, tools.Policy{})
	role, login := b.db.RoleName("setless"), b.login
	b.db.Exec(t, fmt.Sprintf("CREATE ROLE %[1]s NOLOGIN; GRANT %[1]s TO %[2]s WITH SET FALSE", quoteIdent(role), quoteIdent(login)))
	ctx := context.Background()
	// What the check guards against: the runner's own role switch is refused.
	tx, err := b.tdb.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(ctx, "SELECT pg_catalog.set_config('role', $1, true)", role)
	_ = tx.Rollback(ctx)
	if err == nil {
		t.Fatal("set_config('role') succeeded through a membership WITH SET FALSE")
	}
	problems, err := RoleProblems(ctx, b.tdb, role)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range problems {
		if strings.Contains(p.Problem, "SET FALSE") && strings.Contains(strings.Join(p.Fix, ";"), "WITH SET TRUE") {
			found = true
		}
	}
	if !found {
		t.Fatalf("a membership WITH SET FALSE is not reported with its fix: %+v", problems)
	}
	b.db.Exec(t, fmt.Sprintf("GRANT %[1]s TO %[2]s WITH SET TRUE", quoteIdent(role), quoteIdent(login)))
	problems, err = RoleProblems(ctx, b.tdb, role)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.Contains(p.Problem, "member") {
			t.Fatalf("membership reported after WITH SET TRUE: %s", p.Problem)
		}
	}
}

// TestCheckRoleBuiltinRolesByMajor: every built-in role that reaches beyond the agent's own
// grants is refused on the majors that have it, whichever membership options (16+) it came
// with: a membership WITH INHERIT FALSE still lets the role SET ROLE to it. 17's pg_maintain
// (VACUUM, REINDEX, LOCK TABLE on every relation) is one of them.
func TestCheckRoleBuiltinRolesByMajor(t *testing.T) {
	t.Parallel()
	v := pgtest.ServerVersionNum(t)
	b := newSetup(t, tools.Policy{})
	builtins := []struct {
		name  string
		since int
	}{
		{"pg_signal_backend", 0}, {"pg_read_server_files", 0}, {"pg_write_server_files", 0},
		{"pg_execute_server_program", 0}, {"pg_read_all_data", 140000}, {"pg_write_all_data", 140000},
		{"pg_read_all_settings", 0}, {"pg_read_all_stats", 0}, {"pg_monitor", 0},
		{"pg_checkpoint", 150000}, {"pg_create_subscription", 160000}, {"pg_maintain", 170000},
		{"pg_signal_autovacuum_worker", 180000},
	}
	options := []string{""}
	if v >= 160000 {
		options = append(options, " WITH INHERIT FALSE", " WITH INHERIT FALSE, SET FALSE")
	}
	for _, bi := range builtins {
		if v < bi.since {
			continue
		}
		for i, opt := range options {
			role := b.db.RoleName(fmt.Sprintf("%s_%d", strings.TrimPrefix(bi.name, "pg_"), i))
			b.db.Exec(t, fmt.Sprintf("CREATE ROLE %[1]s NOLOGIN; GRANT %[1]s TO %[2]s; GRANT %[3]s TO %[1]s%[4]s",
				quoteIdent(role), quoteIdent(b.login), bi.name, opt))
			err := CheckRole(context.Background(), b.tdb, role)
			if err == nil || !strings.Contains(err.Error(), bi.name) {
				t.Errorf("a role granted %s%s: %v", bi.name, opt, err)
			}
		}
	}
}
