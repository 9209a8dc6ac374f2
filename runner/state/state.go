// Package state holds pgtools' fleet state in a PostgreSQL schema of its own (setting state,
// default schema pgtools): the approval requests of require_approval rules, which every replica
// lists, decides and uses (Approvals, an approval.Backend), and the registry of the live
// replicas with their tags and addresses (Register, Replicas, Owner), and the approvals page's
// sign-ins (PutSignIn, GetSignIn), so an approver signed in on one replica is on all. Open creates or upgrades
// the schema by numbered migrations, recorded in its schema_version row, when the login role
// may; otherwise it refuses with the SQL an administrator runs (SetupError). Times are the
// database's: every replica ages, expires and orders by one clock.
package state

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultSchema is the schema Open uses when given "".
const DefaultSchema = "pgtools"

// migrations are the schema's versions: migrations[i] takes it from version i to i+1. %[1]s is
// the quoted schema. A released migration never changes; a new one is appended.
var migrations = []string{
	// 1: approval requests, the replica registry and the approvals page's sign-ins.
	`CREATE TABLE %[1]s.approvals (
    id          text PRIMARY KEY,
    status      text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'used', 'mismatched')),
    principal   text NOT NULL,
    credential  text NOT NULL,
    database    text NOT NULL,
    tool        text NOT NULL,
    digest      text NOT NULL,
    arguments   json,
    effect      jsonb NOT NULL,
    rules       text[] NOT NULL,
    created     timestamptz NOT NULL,
    expires     timestamptz NOT NULL,
    approver    text,
    decided     timestamptz,
    measured    jsonb,
    claim       text,
    claimed_at  timestamptz
);
CREATE INDEX approvals_pending ON %[1]s.approvals (credential) WHERE status = 'pending';
CREATE INDEX approvals_expires ON %[1]s.approvals (expires);
CREATE TABLE %[1]s.replicas (
    replica_id  text PRIMARY KEY,
    tag         text NOT NULL,
    address     text NOT NULL,
    started     timestamptz NOT NULL,
    heartbeat   timestamptz NOT NULL
);
CREATE INDEX replicas_tag ON %[1]s.replicas (tag);
CREATE TABLE %[1]s.signins (
    key         bytea PRIMARY KEY,
    principal   jsonb NOT NULL,
    csrf        text NOT NULL,
    expires     timestamptz NOT NULL,
    flash       text NOT NULL DEFAULT '',
    flash_error boolean NOT NULL DEFAULT false
);
CREATE INDEX signins_expires ON %[1]s.signins (expires);
`,
}

// Version is the schema version this binary knows.
var Version = len(migrations)

// tables are the schema's tables the login role reads and writes.
var tables = []string{"schema_version", "approvals", "replicas", "signins"}

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ValidSchema reports whether s may name the state's schema: a lower-case identifier.
func ValidSchema(s string) bool { return schemaName.MatchString(s) }

// SetupError is Open's refusal when the schema is missing, old or unusable and the login role
// may not fix it: SQL is what an administrator runs (as the database's owner or a superuser)
// before pgtools starts.
type SetupError struct {
	Schema string
	Reason string
	SQL    string
}

func (e *SetupError) Error() string {
	return fmt.Sprintf("state schema %s: %s; an administrator runs this SQL in the state database, then pgtools starts:\n%s", e.Schema, e.Reason, e.SQL)
}

// ErrNewerSchema is wrapped by Open's refusal of a schema a newer pgtools made.
var ErrNewerSchema = errors.New("the state schema is newer than this pgtools")

// State is the fleet state in one schema, over a pool of the state database. It is safe for
// concurrent use.
type State struct {
	pool   *pgxpool.Pool
	schema string // quoted
	name   string

	dead time.Duration // how old a live replica's heartbeat may be (DefaultDead)

	mu  sync.Mutex
	reg *Replica // this process's registration, nil before Register and after Deregister
}

// Open brings schema (DefaultSchema when "") in pool's database to Version, creating or
// upgrading it when the login role may, and returns the state in it. It refuses a schema of a
// newer version (ErrNewerSchema), and a schema it may not create, upgrade or use with a
// *SetupError.
func Open(ctx context.Context, pool *pgxpool.Pool, schema string) (*State, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	if !ValidSchema(schema) {
		return nil, fmt.Errorf("state schema %q: use a lower-case identifier (letters, digits, _), e.g. %s", schema, DefaultSchema)
	}
	s := &State{pool: pool, schema: pgx.Identifier{schema}.Sanitize(), name: schema, dead: DefaultDead}
	v, err := s.version(ctx)
	if err != nil {
		return nil, err
	}
	if v > Version {
		return nil, fmt.Errorf("state schema %s is at version %d, but this pgtools knows versions up to %d: a newer pgtools upgraded it. Run that version (or newer) of pgtools; an older one never writes a newer schema: %w", schema, v, Version, ErrNewerSchema)
	}
	if v < Version {
		if err := s.migrate(ctx, v); err != nil {
			return nil, err
		}
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Check reports, without changing anything, what an administrator must run for pool's login
// role to use schema: "" when nothing (the schema is current and usable, or the role may
// create or upgrade it at start).
func Check(ctx context.Context, pool *pgxpool.Pool, schema string) (string, error) {
	if schema == "" {
		schema = DefaultSchema
	}
	s := &State{pool: pool, schema: pgx.Identifier{schema}.Sanitize(), name: schema}
	v, err := s.version(ctx)
	if err != nil {
		var se *SetupError
		if errors.As(err, &se) {
			return se.SQL, nil
		}
		return "", err
	}
	if v > Version {
		return "", fmt.Errorf("state schema %s is at version %d, newer than this pgtools (%d): %w", schema, v, Version, ErrNewerSchema)
	}
	if v < Version {
		var may bool
		q := `SELECT CASE WHEN $1 THEN has_database_privilege(current_database(), 'CREATE')
		          ELSE pg_has_role((SELECT nspowner FROM pg_namespace WHERE nspname = $2), 'USAGE') END`
		if err := pool.QueryRow(ctx, q, v == 0 && !s.schemaExists(ctx), schema).Scan(&may); err != nil {
			return "", fmt.Errorf("state schema %s: %w", schema, err)
		}
		if may {
			return "", nil
		}
		role, _ := s.role(ctx)
		return s.setupSQL(v, role), nil
	}
	if err := s.usable(ctx); err != nil {
		var se *SetupError
		if errors.As(err, &se) {
			return se.SQL, nil
		}
		return "", err
	}
	return "", nil
}

func (s *State) schemaExists(ctx context.Context) bool {
	var ok bool
	_ = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = $1)`, s.name).Scan(&ok)
	return ok
}

// Schema is the state's schema name.
func (s *State) Schema() string { return s.name }

// Pool is the state database's pool.
func (s *State) Pool() *pgxpool.Pool { return s.pool }

// version reads the schema's version: 0 when there is no schema or no version table.
func (s *State) version(ctx context.Context) (int, error) {
	var v int
	err := s.pool.QueryRow(ctx, `SELECT version FROM `+s.schema+`.schema_version`).Scan(&v)
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return v, nil
	case errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000"): // no table, no schema
		return 0, nil
	case errors.As(err, &pe) && pe.Code == "42501":
		role, _ := s.role(ctx)
		return 0, &SetupError{Schema: s.name, Reason: fmt.Sprintf("role %s may not read it (%s)", role, pe.Message), SQL: s.grantSQL(role)}
	}
	return 0, fmt.Errorf("state schema %s: reading its version: %w", s.name, err)
}

func (s *State) role(ctx context.Context) (string, error) {
	var r string
	err := s.pool.QueryRow(ctx, `SELECT current_user`).Scan(&r)
	return r, err
}

// bootstrap creates the schema and its version row (version 0) when missing.
func (s *State) bootstrap() string {
	return fmt.Sprintf(`CREATE SCHEMA IF NOT EXISTS %[1]s;
CREATE TABLE IF NOT EXISTS %[1]s.schema_version (
    version  integer NOT NULL,
    one_row  boolean PRIMARY KEY DEFAULT true CHECK (one_row)
);
INSERT INTO %[1]s.schema_version (version) VALUES (0) ON CONFLICT DO NOTHING;
`, s.schema)
}

// upgradeSQL takes the schema from version from to Version.
func (s *State) upgradeSQL(from int) string {
	var b strings.Builder
	for i := from; i < len(migrations); i++ {
		fmt.Fprintf(&b, "-- version %d\n", i+1)
		fmt.Fprintf(&b, migrations[i], s.schema)
	}
	fmt.Fprintf(&b, "UPDATE %s.schema_version SET version = %d;\n", s.schema, Version)
	return b.String()
}

// grantSQL lets role use the schema.
func (s *State) grantSQL(role string) string {
	r := pgx.Identifier{role}.Sanitize()
	return fmt.Sprintf("GRANT USAGE ON SCHEMA %[1]s TO %[2]s;\nGRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %[1]s TO %[2]s;\n", s.schema, r)
}

// setupSQL is what an administrator runs to bring the schema from version from to Version for
// role.
func (s *State) setupSQL(from int, role string) string {
	return "BEGIN;\n" + s.bootstrap() + s.upgradeSQL(from) + s.grantSQL(role) + "COMMIT;\n"
}

// migrateLock serializes the replicas that start at once and find the schema old.
const migrateLock = 0x7067746f6f6c73 // "pgtools"

// migrate brings the schema from version from to Version in one transaction.
func (s *State) migrate(ctx context.Context, from int) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.bootstrap()); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, `SELECT version FROM `+s.schema+`.schema_version FOR UPDATE`).Scan(&v); err != nil {
			return err
		}
		if v > Version {
			return fmt.Errorf("state schema %s is at version %d, newer than this pgtools (%d): %w", s.name, v, Version, ErrNewerSchema)
		}
		if v == Version { // another replica did it meanwhile
			return nil
		}
		_, err := tx.Exec(ctx, s.upgradeSQL(v))
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		role, _ := s.role(ctx)
		return &SetupError{Schema: s.name, Reason: fmt.Sprintf("it is at version %d, this pgtools needs version %d, and role %s may not change it (%s)", from, Version, role, pe.Message),
			SQL: s.setupSQL(from, role)}
	}
	if err != nil && !errors.Is(err, ErrNewerSchema) {
		return fmt.Errorf("state schema %s: upgrading from version %d to %d: %w", s.name, from, Version, err)
	}
	return err
}

// usable checks that the login role may read and write every table.
func (s *State) usable(ctx context.Context) error {
	var lacking []string
	for _, t := range tables {
		var ok bool
		// Several privileges in one has_table_privilege mean any of them: ask for each.
		err := s.pool.QueryRow(ctx, `SELECT has_table_privilege($1, 'SELECT') AND has_table_privilege($1, 'INSERT')
		    AND has_table_privilege($1, 'UPDATE') AND has_table_privilege($1, 'DELETE')`, s.schema+"."+t).Scan(&ok)
		if err != nil {
			return fmt.Errorf("state schema %s: checking privileges: %w", s.name, err)
		}
		if !ok {
			lacking = append(lacking, t)
		}
	}
	if len(lacking) == 0 {
		return nil
	}
	role, _ := s.role(ctx)
	return &SetupError{Schema: s.name, Reason: fmt.Sprintf("role %s may not read and write table(s) %s", role, strings.Join(lacking, ", ")), SQL: s.grantSQL(role)}
}
