package runner

import (
	"context"
	"fmt"

	"github.com/pgtools/pgtools/tools"
)

// CheckRoles runs tools.CheckRole for every role a principal may act as on every database it may
// use (MappedRoles) and returns the first failure, naming the database and the role; the
// check's own error names the GRANT or REVOKE to run. serve refuses to start on it: a role that
// could change its role or claims would void row-level security for every caller.
func CheckRoles(ctx context.Context, c *Config, db func(name string) (*tools.Database, bool)) error {
	mapped := c.MappedRoles()
	for _, name := range sortedKeys(mapped) {
		d, ok := db(name)
		if !ok {
			continue
		}
		for _, role := range mapped[name] {
			if err := tools.CheckRole(ctx, d, role); err != nil {
				return fmt.Errorf("database %q, role %q: %w", name, role, err)
			}
		}
	}
	return nil
}

// DefinerWarnings lists, for every role CheckRoles checks, the SECURITY DEFINER functions it can
// call whose owner can change settings or bypasses row-level security (tools.DefinerWarning), one
// warning per database and role. serve logs them at start; they do not stop it, since such
// helpers are often part of the application. A database that cannot be asked is skipped: the
// role check before it has already reported it.
func DefinerWarnings(ctx context.Context, c *Config, db func(name string) (*tools.Database, bool)) []string {
	var out []string
	mapped := c.MappedRoles()
	for _, name := range sortedKeys(mapped) {
		d, ok := db(name)
		if !ok {
			continue
		}
		for _, role := range mapped[name] {
			fns, err := tools.DefinerFunctions(ctx, d, role)
			if err != nil {
				out = append(out, err.Error())
				continue
			}
			if w := tools.DefinerWarning(name, role, fns); w != "" {
				out = append(out, w)
			}
		}
	}
	return out
}
