package pgtest

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestRewriteDSN(t *testing.T) {
	// ParseConfig fills a missing password from the environment.
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", "/nonexistent")
	for _, dsn := range []string{
		"postgres://admin:s3cret@db.example:5433/postgres?sslmode=disable",
		"postgresql://admin@db.example:5433/postgres?sslmode=disable&user=admin&dbname=postgres",
		"host=db.example port=5433 user=admin password=s3cret dbname=postgres sslmode=disable",
	} {
		t.Run(dsn, func(t *testing.T) {
			withDB, err := withDatabase(dsn, "pgtools_test_x")
			if err != nil {
				t.Fatal(err)
			}
			got, err := withUser(withDB, "reader_x", `p'w\d`)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := pgconn.ParseConfig(got)
			if err != nil {
				t.Fatalf("ParseConfig(%q): %v", got, err)
			}
			if cfg.Host != "db.example" || cfg.Port != 5433 || cfg.Database != "pgtools_test_x" ||
				cfg.User != "reader_x" || cfg.Password != `p'w\d` || cfg.TLSConfig != nil {
				t.Errorf("%q parses to host %s port %d db %s user %s password %q tls %v",
					got, cfg.Host, cfg.Port, cfg.Database, cfg.User, cfg.Password, cfg.TLSConfig != nil)
			}

			noPassword, err := withUser(withDB, "reader_x", "")
			if err != nil {
				t.Fatal(err)
			}
			if cfg, err := pgconn.ParseConfig(noPassword); err != nil || cfg.Password != "" || cfg.User != "reader_x" {
				t.Errorf("%q: user %v password %q err %v", noPassword, cfg.User, cfg.Password, err)
			}
		})
	}
}
