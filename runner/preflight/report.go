package preflight

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/pgtools/pgtools/runner/config"
	"github.com/pgtools/pgtools/tools"
)

// GrantFinding is one problem the start-up check of grants found.
type GrantFinding struct {
	// Database is the configured database name.
	Database string
	// By names who acts as the role.
	By []string
	// Tables is true for a problem with the table lists (the others are statement text and
	// temp_file_limit).
	Tables bool
	GrantProblem
}

// GrantReport is what CheckGrants found: Refusals stop serve and mcp, Warnings are logged.
type GrantReport struct {
	Refusals, Warnings []GrantFinding
	// Advisory names the databases whose table lists are advisory (policy.table_lists).
	Advisory []string
}

// CheckGrants verifies on every database that the roles callers act as (uses, from
// config.Config.ActingRoles) cannot get past the configuration (docs/design.md §14): with
// enforced table lists, no such role may hold a privilege on, or own, a table allow_tables or
// deny_tables keeps from callers; a role many subjects share may not read other statements'
// text (pg_stat_statements, pg_stat_activity). Both refuse; an advisory table list, a missing
// temp_file_limit and a SECURITY DEFINER function a role can call that could change its role or
// claims (DefinerProblems) warn.
// The error is for a database that could not be checked, which also stops the start: an
// unverified promise is not kept.
func CheckGrants(ctx context.Context, uses map[string][]config.RoleUse, db func(name string) (*tools.Database, bool)) (GrantReport, error) {
	var rep GrantReport
	for _, name := range slices.Sorted(maps.Keys(uses)) {
		d, ok := db(name)
		if !ok {
			continue
		}
		lists := len(d.Policy.AllowTables) > 0 || len(d.Policy.DenyTables) > 0
		if lists && !d.Policy.TableListsAreGrants() {
			rep.Advisory = append(rep.Advisory, name)
		}
		for _, u := range uses[name] {
			var found []GrantProblem
			if lists {
				ps, err := checkWithin(ctx, func(ctx context.Context) ([]GrantProblem, error) { return CheckTableGrants(ctx, d, u.Role) })
				if err != nil {
					return rep, err
				}
				found = ps
			}
			tableProblems := len(found)
			if u.Shared {
				ps, err := checkWithin(ctx, func(ctx context.Context) ([]GrantProblem, error) {
					return CheckStatementText(ctx, d, u.Role)
				})
				if err != nil {
					return rep, err
				}
				found = append(found, ps...)
			}
			for i, p := range found {
				f := GrantFinding{Database: name, By: u.By, Tables: i < tableProblems, GrantProblem: p}
				if i < tableProblems && !d.Policy.TableListsAreGrants() {
					rep.Warnings = append(rep.Warnings, f)
				} else {
					rep.Refusals = append(rep.Refusals, f)
				}
			}
			if u.Role != "" { // the login role is the authenticator: it may call set_config anyway
				ps, err := checkWithin(ctx, func(ctx context.Context) ([]GrantProblem, error) { return DefinerProblems(ctx, d, u.Role) })
				if err != nil {
					return rep, err
				}
				for _, p := range ps {
					rep.Warnings = append(rep.Warnings, GrantFinding{Database: name, By: u.By, GrantProblem: p})
				}
			}
		}
		// Only a warning, so a database that does not answer in time is left for /readyz to report.
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		p, err := CheckTempFileLimit(tctx, d)
		cancel()
		if err == nil && p != nil {
			rep.Warnings = append(rep.Warnings, GrantFinding{Database: name, GrantProblem: *p})
		}
	}
	return rep, nil
}

// checkTimeout bounds one role's check on one database, so that a database that does not
// answer stops the start with an error instead of hanging it.
const checkTimeout = 30 * time.Second

func checkWithin(ctx context.Context, check func(context.Context) ([]GrantProblem, error)) ([]GrantProblem, error) {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	return check(ctx)
}

// Err is the refusal serve and mcp stop on: every problem with the SQL that fixes it; nil when
// there is none.
func (r GrantReport) Err() error {
	if len(r.Refusals) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the databases' grants do not keep the configuration's promises (%d problem(s)); run the SQL below as a superuser (or the objects' owner), then start again", len(r.Refusals))
	if hasTableFinding(r.Refusals) {
		b.WriteString(`; to keep allow_tables/deny_tables as checks of the table argument only, set the database's policy.table_lists to "advisory"`)
	}
	b.WriteString(":")
	for _, f := range r.Refusals {
		b.WriteString("\n  " + f.line())
		for _, s := range f.Fix {
			b.WriteString("\n    " + statement(s))
		}
	}
	return errors.New(b.String())
}

// WarningLines are the lines serve and mcp log as warnings: one per advisory database, then one
// per warning with its fix.
func (r GrantReport) WarningLines() []string {
	var out []string
	for _, name := range r.Advisory {
		out = append(out, fmt.Sprintf("databases.%s: policy.table_lists is \"advisory\": allow_tables and deny_tables check only the table argument; "+
			"where, execute_sql, pg_transaction and sessions reach every table the callers' roles can (see the grants check below or pgtools check-config --database)", name))
	}
	for _, f := range r.Warnings {
		line := f.line()
		if len(f.Fix) > 0 {
			var fix []string
			for _, s := range f.Fix {
				fix = append(fix, statement(s))
			}
			line += " Fix: " + strings.Join(fix, " ")
		}
		out = append(out, line)
	}
	return out
}

// SQL is the script that makes the databases match the configuration: every refusal's and
// warning's statements, grouped by database with a comment naming the problem; "" when there
// is nothing to do.
func (r GrantReport) SQL() string {
	var b strings.Builder
	last := ""
	for _, f := range append(slices.Clone(r.Refusals), r.Warnings...) {
		if f.Database != last {
			if last != "" {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "-- database %q\n", f.Database)
			last = f.Database
		}
		fmt.Fprintf(&b, "-- %s\n", f.Problem)
		for _, s := range f.Fix {
			b.WriteString(statement(s) + "\n")
		}
	}
	return b.String()
}

func (f GrantFinding) line() string {
	s := "databases." + f.Database + ": " + f.Problem
	if len(f.By) > 0 {
		s += " (used by " + strings.Join(f.By, ", ") + ")"
	}
	return s + "."
}

// statement ends a statement with a semicolon; comments stay as they are.
func statement(s string) string {
	if strings.HasPrefix(s, "--") {
		return s
	}
	return s + ";"
}

func hasTableFinding(fs []GrantFinding) bool {
	return slices.ContainsFunc(fs, func(f GrantFinding) bool { return f.Tables })
}

// CheckSetup is CheckGrants preceded by the role check serve also runs (RoleProblems, as
// CheckRoles): everything pgtools check-config --database reports, with the SQL that makes the
// databases match the configuration (GrantReport.SQL).
func CheckSetup(ctx context.Context, uses map[string][]config.RoleUse, db func(name string) (*tools.Database, bool)) (GrantReport, error) {
	var rep GrantReport
	// A role that does not exist yet has no privileges to check: the grants check skips it.
	existing := map[string][]config.RoleUse{}
	for _, name := range slices.Sorted(maps.Keys(uses)) {
		d, ok := db(name)
		if !ok {
			continue
		}
		for _, u := range uses[name] {
			if u.Role == "" {
				existing[name] = append(existing[name], u)
				continue
			}
			ps, err := RoleProblems(ctx, d, u.Role)
			if err != nil {
				return rep, err
			}
			missing := false
			for _, p := range ps {
				missing = missing || p.Missing()
				p.Problem = "role " + u.Role + ": " + p.Problem
				rep.Refusals = append(rep.Refusals, GrantFinding{Database: name, By: u.By, GrantProblem: p})
			}
			if !missing {
				existing[name] = append(existing[name], u)
			}
		}
	}
	g, err := CheckGrants(ctx, existing, db)
	rep.Refusals = append(rep.Refusals, g.Refusals...)
	rep.Warnings, rep.Advisory = g.Warnings, g.Advisory
	return rep, err
}
