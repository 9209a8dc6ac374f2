#!/usr/bin/env bash
# Runs once, when the postgres container initializes an empty data directory
# (/docker-entrypoint-initdb.d). It creates a small sample schema and the role pgtools connects as:
# LOGIN, no superuser, no CREATEDB/CREATEROLE/REPLICATION/BYPASSRLS, membership in nothing, and
# only SELECT/INSERT/UPDATE/DELETE on the sample tables. READ ONLY transactions do not stop
# functions such as pg_read_file for a superuser; a role like this one gets permission_denied.
#
# The password comes from a Docker secret file, never from the environment or the command line.
set -euo pipefail

role="${PGTOOLS_DB_USER:-pgtools_app}"
password_file="${PGTOOLS_DB_PASSWORD_FILE:-/run/secrets/pgtools_db_password}"
password="$(tr -d '\r\n' < "$password_file")"
if [ "${#password}" -lt 12 ]; then
  echo "01-pgtools-role.sh: the password in $password_file is shorter than 12 characters" >&2
  exit 1
fi

psql -v ON_ERROR_STOP=1 --no-psqlrc --username "${POSTGRES_USER:-postgres}" --dbname "${POSTGRES_DB:-postgres}" \
  -v role="$role" -v password="$password" <<'SQL'
CREATE TABLE IF NOT EXISTS customers (
  id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name       text NOT NULL,
  email      text NOT NULL UNIQUE,
  country    text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE customers IS 'People who placed orders';
CREATE TABLE IF NOT EXISTS orders (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  customer_id bigint NOT NULL REFERENCES customers (id),
  status      text NOT NULL CHECK (status IN ('open', 'paid', 'shipped', 'cancelled')),
  total       numeric(10, 2) NOT NULL CHECK (total >= 0),
  placed_at   timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE orders IS 'One row per order; total in EUR';
INSERT INTO customers (name, email, country)
SELECT 'Customer ' || i, 'customer' || i || '@example.com', (ARRAY['DE', 'FR', 'NL', 'US'])[1 + i % 4]
FROM generate_series(1, 50) AS i
ON CONFLICT (email) DO NOTHING;
INSERT INTO orders (customer_id, status, total)
SELECT 1 + i % 50, (ARRAY['open', 'paid', 'shipped', 'cancelled'])[1 + i % 4], round((10 + i * 3.7)::numeric % 500, 2)
FROM generate_series(1, 200) AS i
WHERE NOT EXISTS (SELECT FROM orders);

-- The runner's role. format(%I/%L) quotes the name and the password; psql's :'…' passes them as
-- literals, so neither is interpolated into SQL text.
SELECT format('CREATE ROLE %I WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD %L',
              :'role', :'password')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'role') \gexec
SELECT format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), :'role') \gexec
SELECT format('GRANT USAGE ON SCHEMA public TO %I', :'role') \gexec
SELECT format('GRANT SELECT, INSERT, UPDATE, DELETE ON customers, orders TO %I', :'role') \gexec
-- Bounds the temporary files one statement may write (pgtools warns at start without it).
SELECT format('ALTER ROLE %I SET temp_file_limit = %L', :'role', '1GB') \gexec
-- Nobody but the owner creates objects in public (the default since PostgreSQL 15; explicit for older ones).
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
SQL
echo "01-pgtools-role.sh: created role $role with SELECT/INSERT/UPDATE/DELETE on customers, orders"
