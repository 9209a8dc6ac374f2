package preflight

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/pgtools/pgtools/tools"
)

// TestStatTextSourcesResolve walks every statement-text source CheckStatementText knows: each
// must name an object this PostgreSQL has, since one that does not resolve is skipped, and a
// misspelt signature would leave that source unchecked.
func TestStatTextSourcesResolve(t *testing.T) {
	t.Parallel()
	b := newSetup(t, tools.Policy{})
	ext := b.db.QueryInt(t, "select count(*) from pg_available_extensions where name = 'pg_stat_statements'") > 0
	if ext {
		b.db.Exec(t, "CREATE EXTENSION pg_stat_statements")
	}
	for _, src := range statTextSources {
		if src.extension != "" && !ext {
			t.Logf("%s not checked: the server has no pg_stat_statements extension files", src.object)
			continue
		}
		object := src.object
		if src.extension != "" {
			object = pgx.Identifier{"public"}.Sanitize() + "." + object
		}
		q := "select to_regclass($1) is not null"
		if src.function {
			q = "select to_regprocedure($1) is not null"
		}
		var ok bool
		if err := b.tdb.Pool.QueryRow(context.Background(), q, object).Scan(&ok); err != nil || !ok {
			t.Errorf("%s does not resolve: %v", object, err)
		}
	}
}
