package preflight

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools"
)

// TestCheckGrantsTableLists: with enforced table lists, a role a caller acts as that can read a
// denied table is a refusal naming the REVOKE that closes it; with advisory lists the same
// finding is a warning and the database is named as advisory.
func TestCheckGrantsTableLists(t *testing.T) {
	t.Parallel()
	pol := tools.Policy{DenyTables: []string{"secrets"}}
	s := newSetup(t, pol)
	// pgtest grants the login role SELECT on every table of public, as a deployment that relied
	// on deny_tables would have it.
	s.db.Exec(t, `CREATE TABLE orders (id int PRIMARY KEY); CREATE TABLE secrets (k text)`)
	uses := map[string][]config.RoleUse{"default": {{By: []string{"token a"}}}}
	ctx := context.Background()
	revoke := `REVOKE ALL ON TABLE "public"."secrets" FROM ` + quoteIdent(s.login)
	problem := "role " + s.login + " holds SELECT on table public.secrets, which policy.deny_tables lists"

	rep, err := CheckGrants(ctx, uses, func(name string) (*tools.Database, bool) { return s.tdb, name == "default" })
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Refusals) != 1 || len(rep.Advisory) != 0 {
		t.Fatalf("enforced lists: refusals %+v, advisory %v", rep.Refusals, rep.Advisory)
	}
	f := rep.Refusals[0]
	if f.Database != "default" || !f.Tables || f.Problem != problem || !slices.Equal(f.Fix, []string{revoke}) || !slices.Equal(f.By, []string{"token a"}) {
		t.Fatalf("refusal %+v, want %q fixed by %q", f, problem, revoke)
	}
	msg := rep.Err().Error()
	for _, want := range []string{"(1 problem(s))", `policy.table_lists to "advisory"`,
		"\n  databases.default: " + problem + " (used by token a).", "\n    " + revoke + ";"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not hold %q:\n%s", want, msg)
		}
	}
	if sql := rep.SQL(); !strings.HasPrefix(sql, "-- database \"default\"\n-- "+problem+"\n"+revoke+";\n") {
		t.Errorf("SQL:\n%s", sql)
	}

	pol.TableLists = tools.TableListsAdvisory
	advisory := tools.NewDatabase("default", s.tdb.Pool, pol)
	rep, err = CheckGrants(ctx, uses, func(name string) (*tools.Database, bool) { return advisory, name == "default" })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Err() != nil || !slices.Equal(rep.Advisory, []string{"default"}) {
		t.Fatalf("advisory lists: refusals %+v, advisory %v", rep.Refusals, rep.Advisory)
	}
	lines := rep.WarningLines()
	if len(lines) < 2 || !strings.HasPrefix(lines[0], `databases.default: policy.table_lists is "advisory"`) ||
		lines[1] != "databases.default: "+problem+" (used by token a). Fix: "+revoke+";" {
		t.Fatalf("warning lines:\n%s", strings.Join(lines, "\n"))
	}
}

// TestCheckSetupMissingRole: check-config --database reports a role that does not exist with the
// SQL that creates it, and checks the other roles' grants as serve would.
func TestCheckSetupMissingRole(t *testing.T) {
	t.Parallel()
	s := newSetup(t, tools.Policy{DenyTables: []string{"secrets"}})
	s.db.Exec(t, `CREATE TABLE secrets (k text)`)
	missing := s.db.RoleName("absent")
	uses := map[string][]config.RoleUse{"default": {{By: []string{"token a"}}, {Role: missing, By: []string{"token b"}}}}
	rep, err := CheckSetup(context.Background(), uses, func(name string) (*tools.Database, bool) { return s.tdb, name == "default" })
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, f := range rep.Refusals {
		problems = append(problems, f.Problem)
	}
	want := []string{"role " + missing + ": role " + missing + " does not exist",
		"role " + s.login + " holds SELECT on table public.secrets, which policy.deny_tables lists"}
	if !slices.Equal(problems, want) {
		t.Fatalf("refusals:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
	if sql := rep.SQL(); !strings.Contains(sql, "CREATE ROLE "+quoteIdent(missing)+" NOLOGIN;\nGRANT "+quoteIdent(missing)+" TO "+quoteIdent(s.login)+";\n") {
		t.Errorf("SQL does not create the role:\n%s", sql)
	}
}
