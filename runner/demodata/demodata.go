// Package demodata creates the pgtools demo dataset, a small online shop,
// and the least-privilege role the runner connects as.
//
// The dataset (schema.sql) has customers, products, orders and order_items
// with foreign keys, checks, arrays, jsonb and comments, plus events, a
// large append-only table (1,000,000 rows by default) for testing result
// caps and timeouts. The data is pseudo-random but deterministic: every
// Load with the same Options produces the same rows, so tests and
// benchmarks can pin results.
//
// `pgtools demo` loads it into a throwaway cluster (package localpg); tests
// load it into a database from package pgtest.
package demodata

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/jackc/pgx/v5"
)

//go:embed schema.sql
var schemaSQL string

// Row counts of the fixed-size tables. order_items has 1 to 5 lines per
// order, about 3 on average.
const (
	// CustomerRows is the number of customers Load creates.
	CustomerRows = 2_000
	// ProductRows is the number of products Load creates.
	ProductRows = 500
	// OrderRows is the number of orders Load creates.
	OrderRows = 20_000
	// DefaultEventRows is the number of events Load creates when
	// Options.EventRows is 0.
	DefaultEventRows = 1_000_000
)

// Tables returns the names of the tables Load creates in schema public,
// referenced tables before the tables referencing them.
func Tables() []string {
	return []string{"customers", "products", "orders", "order_items", "events"}
}

// CreateAppRole creates the role the runner connects as, or updates it if
// it exists, and grants it exactly what the runner needs in the database
// adminDSN points at: LOGIN (NOSUPERUSER NOCREATEDB NOCREATEROLE
// NOREPLICATION NOBYPASSRLS), CONNECT on that database, USAGE on schema
// public, SELECT, INSERT, UPDATE, DELETE on all tables in public and USAGE,
// SELECT on all sequences in public — on those that exist now, so call it
// after Load — and a temp_file_limit of 1GB for its sessions (SET ROLE keeps
// the login role's, so it bounds every caller's temporary files). Nothing
// else: in particular no superuser-only functions such as pg_read_file. It does not revoke anything an existing role already
// has (memberships, other grants).
//
// adminDSN must log in as a superuser. An empty password leaves the role
// without one (it can log in only where authentication is trust or peer).
// The password travels as a bind parameter and is quoted by the server
// (format %L), but the resulting CREATE/ALTER ROLE statement carries it and
// is logged if the server logs DDL.
func CreateAppRole(ctx context.Context, adminDSN, role, password string) error {
	if role == "" {
		return fmt.Errorf("demodata: empty role name")
	}
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return fmt.Errorf("demodata: connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var exists bool
		var database, passwordClause string
		// A role password cannot be a bind parameter of CREATE ROLE: have
		// the server quote it as a literal instead.
		if err := tx.QueryRow(ctx, `
			SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1),
			       current_database(),
			       CASE WHEN $2::text = '' THEN 'PASSWORD NULL' ELSE format('PASSWORD %L', $2::text) END`,
			role, password).Scan(&exists, &database, &passwordClause); err != nil {
			return err
		}
		verb := "CREATE"
		if exists {
			verb = "ALTER"
		}
		ident := pgx.Identifier{role}.Sanitize()
		for _, sql := range []string{
			verb + " ROLE " + ident + " WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS " + passwordClause,
			"GRANT CONNECT ON DATABASE " + pgx.Identifier{database}.Sanitize() + " TO " + ident,
			"GRANT USAGE ON SCHEMA public TO " + ident,
			"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO " + ident,
			"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO " + ident,
			"ALTER ROLE " + ident + " SET temp_file_limit = '1GB'",
		} {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("demodata: creating role %s: %w", role, err)
	}
	return nil
}
