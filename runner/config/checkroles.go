package config

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/pgtools/pgtools/tools"
)

// CheckRoles runs tools.CheckRole for every role a principal may act as on every database it may
// use (MappedRoles) and returns the first failure, naming the database and the role; the
// check's own error names the GRANT or REVOKE to run. serve refuses to start on it: a role that
// could change its role or claims would void row-level security for every caller.
func CheckRoles(ctx context.Context, c *Config, db func(name string) (*tools.Database, bool)) error {
	mapped := c.MappedRoles()
	for _, name := range slices.Sorted(maps.Keys(mapped)) {
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
