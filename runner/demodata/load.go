package demodata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configures Load. The zero value loads the full dataset silently.
type Options struct {
	// EventRows is the number of rows in the events table. Default 0:
	// DefaultEventRows (1,000,000; the whole Load then takes about 5 s on
	// 2 cores). Tests use a few thousand.
	EventRows int
	// Progress receives one line per step, e.g.
	// "loading events (1000000 rows)...". Default nil: silent.
	Progress io.Writer
}

// step is one statement of the load, announced on Options.Progress.
type step struct {
	label string // progress line, without the trailing "..."
	sql   string
	args  []any
}

// Load creates the demo tables in schema public of the database adminDSN
// points at, fills them and runs ANALYZE, all in one transaction (with
// synchronous_commit off): on error nothing is left behind. The database
// must not have any of the tables yet; Load never drops anything. adminDSN
// needs the right to create tables in public (on PostgreSQL 15 and later,
// the database owner or a superuser).
func Load(ctx context.Context, adminDSN string, opts Options) error {
	events := opts.EventRows
	if events == 0 {
		events = DefaultEventRows
	}
	if events < 0 {
		return fmt.Errorf("demodata: EventRows is %d, want >= 0", opts.EventRows)
	}
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}

	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return fmt.Errorf("demodata: connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var existing []string
	if err := conn.QueryRow(ctx, `
		SELECT coalesce(array_agg(relname::text ORDER BY relname), '{}')
		FROM pg_class
		WHERE relnamespace = 'public'::regnamespace AND relname = ANY ($1)`,
		Tables()).Scan(&existing); err != nil {
		return fmt.Errorf("demodata: checking for existing tables: %w", err)
	}
	if len(existing) > 0 {
		return fmt.Errorf("demodata: the database already has %s in schema public; Load needs a database without them",
			strings.Join(existing, ", "))
	}

	steps := []step{
		{label: "creating schema", sql: schemaSQL},
		{label: "", sql: rndFunc},
		{label: fmt.Sprintf("loading customers (%d rows)", CustomerRows), sql: customersSQL, args: []any{CustomerRows}},
		{label: fmt.Sprintf("loading products (%d rows)", ProductRows), sql: productsSQL, args: []any{ProductRows}},
		{label: "", sql: itemsSQL, args: []any{OrderRows, ProductRows}},
		{label: fmt.Sprintf("loading orders (%d rows)", OrderRows), sql: ordersSQL, args: []any{OrderRows, CustomerRows}},
		{label: "loading order_items (about 3 per order)", sql: orderItemsSQL},
		{label: fmt.Sprintf("loading events (%d rows)", events), sql: eventsSQL, args: []any{events, CustomerRows, ProductRows, OrderRows}},
		{label: "", sql: setvalSQL},
		{label: "analyzing", sql: "ANALYZE customers, products, orders, order_items, events"},
	}
	start := time.Now()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Nothing to wait for: if the server crashes, the demo is reloaded.
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			return err
		}
		for _, s := range steps {
			if s.label != "" {
				fmt.Fprintf(progress, "%s...\n", s.label)
			}
			if _, err := tx.Exec(ctx, s.sql, s.args...); err != nil {
				if s.label == "" {
					return err
				}
				return fmt.Errorf("%s: %w", s.label, err)
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("demodata: load interrupted: %w", err)
		}
		return fmt.Errorf("demodata: %w", err)
	}
	fmt.Fprintf(progress, "demo data loaded in %s\n", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// rndFunc defines the session's deterministic pseudo-random source:
// rnd(salt, i, n) is a number in [0, n) drawn from hash(i, seed(salt)). A
// different salt per column keeps the columns independent. The hash
// functions are the ones hash partitioning uses, so their values are the
// same on every platform and version (md5 would be too, but costs about
// 0.8 s per million calls; these are ten times cheaper). The salt's hash
// is folded to a constant at plan time. rnd lives in pg_temp, so nothing
// of it stays in the database.
const rndFunc = `
CREATE FUNCTION pg_temp.rnd(salt text, i bigint, n bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT (hashint8extended(i, hashtextextended(salt, 0)) & 9223372036854775807) % n $$`

// customersSQL: $1 = customers. Accounts opened in 2022 and 2023.
const customersSQL = `
INSERT INTO customers (id, name, email, country, created_at, vip) OVERRIDING SYSTEM VALUE
SELECT i,
       first || ' ' || last,
       lower(first || '.' || last || i) || '@example.com',
       CASE WHEN pg_temp.rnd('nocountry', i, 20) <> 0 THEN
         (ARRAY['DE','DE','DE','FR','FR','GB','GB','US','US','US','NL','ES','IT','PL','SE','AT','CH','CA','JP','BR'])
         [1 + pg_temp.rnd('country', i, 20)]
       END,
       timestamptz '2022-01-01 00:00:00+00' + pg_temp.rnd('created', i, 2 * 365 * 86400) * interval '1 second',
       pg_temp.rnd('vip', i, 10) = 0
FROM (
  SELECT i,
         (ARRAY['Anna','Ben','Clara','David','Emma','Felix','Greta','Hugo','Ida','Jonas',
                'Karla','Liam','Mia','Noah','Olivia','Paul','Rosa','Sami','Tara','Yusuf'])
         [1 + pg_temp.rnd('first', i, 20)] AS first,
         (ARRAY['Müller','Schmidt','Dubois','Smith','Jones','García','Rossi','Nowak','Jansen','Berg',
                'Novak','Silva','Tanaka','Kowalski','Martin','Weber','Costa','Larsen','Brown','Meyer'])
         [1 + pg_temp.rnd('last', i, 20)] AS last
  FROM generate_series(1, $1::bigint) AS i
  OFFSET 0
) AS s`

// productsSQL: $1 = products. Prices 1.00 to 500.99 EUR, a few free items,
// up to two distinct tags, attributes missing for one in ten.
const productsSQL = `
INSERT INTO products (id, sku, name, price, tags, attributes, created_at)
SELECT i,
       'SKU-' || lpad(i::text, 5, '0'),
       (ARRAY['Classic','Compact','Deluxe','Eco','Ergonomic','Foldable','Heavy-duty','Mini','Pro','Smart'])
       [1 + pg_temp.rnd('adj', i, 10)] || ' ' ||
       (ARRAY['backpack','blender','chair','desk lamp','kettle','keyboard','mug','notebook','speaker',
              'tent','thermos','umbrella','water bottle','headphones','jacket','scarf','teapot','toaster',
              'yoga mat','wall clock'])
       [1 + pg_temp.rnd('noun', i, 20)],
       CASE WHEN pg_temp.rnd('free', i, 100) = 0 THEN 0
            ELSE round(1 + pg_temp.rnd('price', i, 50000) / 100.0, 2) END,
       CASE WHEN t = 0 THEN '{}'::text[]
            WHEN t < 5 THEN ARRAY[tag[1 + t1]]
            ELSE ARRAY[tag[1 + t1], tag[1 + (t1 + 1 + pg_temp.rnd('tag2', i, 9)) % 10]] END,
       CASE WHEN pg_temp.rnd('noattr', i, 10) <> 0 THEN jsonb_strip_nulls(jsonb_build_object(
         'color', (ARRAY['black','white','red','blue','green','grey','yellow','orange'])[1 + pg_temp.rnd('color', i, 8)],
         'weight_g', 50 + pg_temp.rnd('weight', i, 5000),
         'in_stock', pg_temp.rnd('stock', i, 5) <> 0,
         'material', CASE WHEN pg_temp.rnd('hasmat', i, 3) = 0 THEN
           (ARRAY['steel','bamboo','cotton','glass','plastic','wool'])[1 + pg_temp.rnd('material', i, 6)] END))
       END,
       timestamptz '2021-06-01 00:00:00+00' + pg_temp.rnd('pcreated', i, 2 * 365 * 86400) * interval '1 second'
FROM (
  SELECT i, pg_temp.rnd('ntags', i, 10) AS t, pg_temp.rnd('tag1', i, 10) AS t1,
         ARRAY['new','sale','eco','bestseller','limited','gift','outdoor','kitchen','office','kids'] AS tag
  FROM generate_series(1, $1::bigint) AS i
  OFFSET 0
) AS s`

// itemsSQL: $1 = orders, $2 = products. Order lines, computed before the
// orders so each order's total is written once (no UPDATE, no dead rows).
// 1 to 5 lines per order; products k*97 apart modulo 500 are distinct
// within an order. One line in ten got a 20% discount.
const itemsSQL = `
CREATE TEMP TABLE demo_items ON COMMIT DROP AS
SELECT o AS order_id, p.id AS product_id,
       (1 + pg_temp.rnd('qty', o * 8 + k, 4))::integer AS quantity,
       CASE WHEN pg_temp.rnd('discount', o * 8 + k, 10) = 0 THEN round(p.price * 0.8, 2) ELSE p.price END AS unit_price
FROM generate_series(1, $1::bigint) AS o
CROSS JOIN LATERAL generate_series(1, 1 + pg_temp.rnd('lines', o, 5)) AS k
JOIN products AS p ON p.id = 1 + (pg_temp.rnd('product', o, $2::bigint) + k * 97) % $2::bigint`

// ordersSQL: $1 = orders, $2 = customers. Placed from 2024-01-01 over 18
// months; 8% cancelled, 12% pending, 40% paid, 40% shipped.
const ordersSQL = `
INSERT INTO orders (id, customer_id, status, total, placed_at, note) OVERRIDING SYSTEM VALUE
SELECT i,
       1 + pg_temp.rnd('customer', i, $2::bigint),
       CASE WHEN b < 8 THEN 'cancelled' WHEN b < 20 THEN 'pending' WHEN b < 60 THEN 'paid' ELSE 'shipped' END,
       t.total,
       timestamptz '2024-01-01 00:00:00+00' + pg_temp.rnd('placed', i, 547 * 86400) * interval '1 second',
       CASE pg_temp.rnd('note', i, 25)
         WHEN 0 THEN 'Please gift wrap.'
         WHEN 1 THEN 'Leave at the front door.'
         WHEN 2 THEN 'Deliver after 5 pm, please.'
       END
FROM (SELECT i, pg_temp.rnd('status', i, 100) AS b FROM generate_series(1, $1::bigint) AS i OFFSET 0) AS s
JOIN (SELECT order_id, sum(quantity * unit_price) AS total FROM demo_items GROUP BY order_id) AS t
  ON t.order_id = s.i
ORDER BY i`

// orderItemsSQL copies the lines computed by itemsSQL.
const orderItemsSQL = `
INSERT INTO order_items (order_id, product_id, quantity, unit_price)
SELECT order_id, product_id, quantity, unit_price FROM demo_items ORDER BY order_id, product_id`

// eventsSQL: $1 = events, $2 = customers, $3 = products, $4 = orders.
// Spread evenly over 2025, in id order; a third of the visitors are
// anonymous (customer_id null).
const eventsSQL = `
INSERT INTO events (id, kind, payload, created_at) OVERRIDING SYSTEM VALUE
SELECT i,
       CASE WHEN b < 55 THEN 'page_view' WHEN b < 75 THEN 'click' WHEN b < 85 THEN 'search'
            WHEN b < 93 THEN 'add_to_cart' WHEN b < 98 THEN 'checkout' ELSE 'error' END,
       CASE WHEN b < 55 THEN jsonb_build_object('path', '/products/' || p, 'customer_id', c, 'duration_ms', x % 5000)
            WHEN b < 75 THEN jsonb_build_object('path', '/products/' || p, 'customer_id', c,
                               'element', (ARRAY['add-to-cart','buy-now','gallery','reviews','size-guide'])[1 + x % 5])
            WHEN b < 85 THEN jsonb_build_object('customer_id', c, 'results', x % 120,
                               'query', (ARRAY['lamp','mug','eco bottle','tent','gift','sale','chair','black jacket'])[1 + x % 8])
            WHEN b < 93 THEN jsonb_build_object('customer_id', c, 'product_id', p, 'quantity', 1 + x % 3)
            WHEN b < 98 THEN jsonb_build_object('customer_id', c, 'order_id', 1 + x % $4::bigint)
            ELSE jsonb_build_object('path', '/checkout', 'status', (ARRAY[500, 502, 504, 404])[1 + x % 4],
                                    'message', (ARRAY['upstream timeout','payment provider unavailable','not found'])[1 + x % 3])
       END,
       timestamptz '2025-01-01 00:00:00+00' + ((i - 1) * 31536000 / $1::bigint) * interval '1 second'
FROM (
  SELECT i,
         pg_temp.rnd('kind', i, 100) AS b,
         pg_temp.rnd('x', i, 1000000) AS x,
         1 + pg_temp.rnd('page', i, $3::bigint) AS p,
         CASE WHEN pg_temp.rnd('anon', i, 3) <> 0 THEN 1 + pg_temp.rnd('visitor', i, $2::bigint) END AS c
  FROM generate_series(1, $1::bigint) AS i
  OFFSET 0
) AS s`

// setvalSQL moves the id sequences past the explicit ids Load inserted, so
// later INSERTs (the runner's) get fresh ids.
const setvalSQL = `
SELECT setval(pg_get_serial_sequence('customers', 'id'), (SELECT max(id) FROM customers));
SELECT setval(pg_get_serial_sequence('products', 'id'), (SELECT max(id) FROM products));
SELECT setval(pg_get_serial_sequence('orders', 'id'), (SELECT max(id) FROM orders));
SELECT setval(pg_get_serial_sequence('events', 'id'), (SELECT max(id) FROM events))`

// TenantRole is the NOLOGIN role the demo's act-as token runs as (docs/design.md §11).
const TenantRole = "pgtools_demo_tenant"

// CreateTenantRole sets the demo database up for identity as docs/identity.md prescribes: table
// tenant_notes under a row-level security policy on the caller's claims (sub), the NOLOGIN role
// TenantRole that may use it, granted to appRole (the runner's login role), and set_config and
// plpgsql taken away from PUBLIC (set_config given back to appRole) so that an agent acting as
// TenantRole cannot change its role or claims. Notes exist for subjects alice and bob.
func CreateTenantRole(ctx context.Context, adminDSN, appRole string) error {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return fmt.Errorf("demodata: connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tenant, app := pgx.Identifier{TenantRole}.Sanitize(), pgx.Identifier{appRole}.Sanitize()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", TenantRole).Scan(&exists); err != nil {
			return err
		}
		stmts := []string{}
		if !exists {
			stmts = append(stmts, "CREATE ROLE "+tenant+" NOLOGIN NOINHERIT")
		}
		stmts = append(stmts,
			"GRANT "+tenant+" TO "+app,
			`CREATE TABLE IF NOT EXISTS tenant_notes (id serial PRIMARY KEY, owner text NOT NULL, body text NOT NULL)`,
			`INSERT INTO tenant_notes (owner, body) SELECT * FROM (VALUES ('alice', 'Call the plumber'), ('alice', 'Renew the passport'),
			   ('bob', 'Buy a birthday present')) v WHERE NOT EXISTS (SELECT FROM tenant_notes)`,
			"ALTER TABLE tenant_notes ENABLE ROW LEVEL SECURITY",
			"DROP POLICY IF EXISTS own_notes ON tenant_notes",
			`CREATE POLICY own_notes ON tenant_notes
			   USING (owner = current_setting('request.jwt.claims', true)::jsonb ->> 'sub')
			   WITH CHECK (owner = current_setting('request.jwt.claims', true)::jsonb ->> 'sub')`,
			"GRANT USAGE ON SCHEMA public TO "+tenant,
			"GRANT SELECT, INSERT, UPDATE, DELETE ON tenant_notes TO "+tenant,
			"GRANT USAGE ON SEQUENCE tenant_notes_id_seq TO "+tenant,
			"REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC",
			"GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO "+app,
			"REVOKE USAGE ON LANGUAGE plpgsql FROM PUBLIC",
			"REVOKE CREATE ON SCHEMA public FROM PUBLIC",
			"REVOKE EXECUTE ON FUNCTION pg_catalog.pg_prepared_statement() FROM PUBLIC",
		)
		for _, sql := range stmts {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("%.60s…: %w", sql, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("demodata: setting up role %s: %w", TenantRole, err)
	}
	return nil
}

// AgentRole is the NOLOGIN role the demo's "demo" token runs as: one role per token, so that
// tokens neither share a role's statement statistics nor need the login role's grants.
const AgentRole = "pgtools_demo_agent"

// CreateAgentRole creates AgentRole as docs/identity.md's database setup prescribes for agent roles:
// NOLOGIN, granted to appRole (the runner's login role), with USAGE on schema public,
// SELECT/INSERT/UPDATE/DELETE on the tables of Tables and USAGE/SELECT on their sequences;
// nothing else. Call it after CreateTenantRole, which takes set_config and plpgsql from PUBLIC.
func CreateAgentRole(ctx context.Context, adminDSN, appRole string) error {
	conn, err := pgx.Connect(ctx, adminDSN)
	if err != nil {
		return fmt.Errorf("demodata: connecting: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	agent, app := pgx.Identifier{AgentRole}.Sanitize(), pgx.Identifier{appRole}.Sanitize()
	tables := make([]string, 0, len(Tables()))
	for _, t := range Tables() {
		tables = append(tables, pgx.Identifier{"public", t}.Sanitize())
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)", AgentRole).Scan(&exists); err != nil {
			return err
		}
		stmts := []string{}
		if !exists {
			stmts = append(stmts, "CREATE ROLE "+agent+" NOLOGIN NOINHERIT")
		}
		stmts = append(stmts,
			"GRANT "+agent+" TO "+app,
			"GRANT USAGE ON SCHEMA public TO "+agent,
			"GRANT SELECT, INSERT, UPDATE, DELETE ON "+strings.Join(tables, ", ")+" TO "+agent,
			"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO "+agent,
		)
		for _, sql := range stmts {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return fmt.Errorf("%.60s…: %w", sql, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("demodata: setting up role %s: %w", AgentRole, err)
	}
	return nil
}
