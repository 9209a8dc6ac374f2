package demodata_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgtools/pgtools/runner/demodata"
	"github.com/pgtools/pgtools/tools/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const testEvents = 10_000

// loaded returns a fresh database with the demo data and testEvents events.
func loaded(t testing.TB) *pgtest.DB {
	t.Helper()
	db := pgtest.New(t)
	var progress strings.Builder
	start := time.Now()
	if err := demodata.Load(context.Background(), db.DSN, demodata.Options{EventRows: testEvents, Progress: &progress}); err != nil {
		t.Fatalf("Load: %v", err)
	}
	t.Logf("Load with %d events took %s", testEvents, time.Since(start).Round(time.Millisecond))
	if want := "loading events (10000 rows)...\n"; !strings.Contains(progress.String(), want) {
		t.Errorf("progress lacks %q:\n%s", want, progress.String())
	}
	return db
}

func TestLoad(t *testing.T) {
	t.Parallel()
	db := loaded(t)

	for table, want := range map[string]int64{
		"customers": demodata.CustomerRows,
		"products":  demodata.ProductRows,
		"orders":    demodata.OrderRows,
		"events":    testEvents,
	} {
		if n := db.QueryInt(t, "select count(*) from "+table); n != want {
			t.Errorf("%s has %d rows, want %d", table, n, want)
		}
	}
	if n := db.QueryInt(t, "select count(*) from order_items"); n < 55_000 || n > 65_000 {
		t.Errorf("order_items has %d rows, want about 60,000", n)
	}

	// Relations hold (the foreign keys guarantee the first two; the
	// queries document what a reader of the data may rely on).
	for _, check := range []struct{ name, sql string }{
		{"orders without customer", "select count(*) from orders o left join customers c on c.id = o.customer_id where c.id is null"},
		{"items without product", "select count(*) from order_items i left join products p on p.id = i.product_id where p.id is null"},
		{"orders without items", "select count(*) from orders o where not exists (select from order_items i where i.order_id = o.id)"},
		{"orders whose total is not the sum of their items", `select count(*) from orders o
			where total <> (select sum(quantity * unit_price) from order_items i where i.order_id = o.id)`},
		{"orders placed before the customer existed", "select count(*) from orders o join customers c on c.id = o.customer_id where o.placed_at < c.created_at"},
		{"tables or columns of interest without a comment", `select count(*) from (values
			('customers'), ('products'), ('orders'), ('order_items'), ('events')) t(name)
			where obj_description(t.name::regclass, 'pg_class') is null`},
		{"tables never analyzed", `select count(*) from pg_stat_user_tables
			where relname in ('customers','products','orders','order_items','events') and last_analyze is null`},
	} {
		if n := db.QueryInt(t, check.sql); n != 0 {
			t.Errorf("%s: %d", check.name, n)
		}
	}
	for _, status := range []string{"pending", "paid", "shipped", "cancelled"} {
		if n := db.QueryInt(t, "select count(*) from orders where status = $1", status); n == 0 {
			t.Errorf("no %s orders", status)
		}
	}

	// The sequences are past the loaded ids: plain INSERTs work.
	db.Exec(t, `insert into customers (name, email) values ('New Customer', 'new@example.com');
		insert into events (kind) values ('page_view')`)
	if n := db.QueryInt(t, "select max(id) from customers"); n != demodata.CustomerRows+1 {
		t.Errorf("new customer id %d, want %d", n, demodata.CustomerRows+1)
	}
}

func TestLoadIsDeterministic(t *testing.T) {
	t.Parallel()
	a, b := loaded(t), loaded(t)
	const fingerprint = `select md5(string_agg(x, ',' order by x)) from (
		select format('%s', c) x from customers c
		union all select format('%s', p) from products p
		union all select format('%s', o) from orders o
		union all select format('%s', i) from order_items i
		union all select format('%s', e) from events e
		) s`
	var fa, fb string
	ctx := context.Background()
	if err := a.Pool(t).QueryRow(ctx, fingerprint).Scan(&fa); err != nil {
		t.Fatal(err)
	}
	if err := b.Pool(t).QueryRow(ctx, fingerprint).Scan(&fb); err != nil {
		t.Fatal(err)
	}
	if fa != fb {
		t.Errorf("two loads differ: %s vs %s", fa, fb)
	}
}

func TestLoadRefusesExistingTables(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, "create table orders (id int)")
	err := demodata.Load(context.Background(), db.DSN, demodata.Options{EventRows: 10})
	if err == nil || !strings.Contains(err.Error(), "already has orders") {
		t.Fatalf("Load into a database with an orders table: %v", err)
	}
	if n := db.QueryInt(t, "select count(*) from pg_tables where schemaname = 'public'"); n != 1 {
		t.Errorf("failed Load left %d tables, want 1", n)
	}
}

func TestCreateAppRole(t *testing.T) {
	t.Parallel()
	db := loaded(t)
	ctx := context.Background()
	role := db.RoleName("app")
	// Quotes and backslashes must survive quoting.
	const password = `pa'ss\w"ord`
	if err := demodata.CreateAppRole(ctx, db.DSN, role, password); err != nil {
		t.Fatalf("CreateAppRole: %v", err)
	}
	// Again, on the existing role, must work too (ALTER path).
	if err := demodata.CreateAppRole(ctx, db.DSN, role, password); err != nil {
		t.Fatalf("CreateAppRole on an existing role: %v", err)
	}
	if n := db.QueryInt(t, `select count(*) from pg_roles where rolname = $1 and rolcanlogin
		and not (rolsuper or rolcreatedb or rolcreaterole or rolreplication or rolbypassrls)`, role); n != 1 {
		t.Errorf("role %s lacks LOGIN or has extra attributes", role)
	}
	// The server stored the password we gave (the local cluster trusts
	// everyone, so logging in would not prove it).
	if n := db.QueryInt(t, `select count(*) from pg_authid where rolname = $1 and rolpassword is not null`, role); n != 1 {
		t.Errorf("role %s has no password", role)
	}

	conn, err := pgx.Connect(ctx, db.DSNFor(role, password))
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	defer conn.Close(ctx)

	var limit string
	if err := conn.QueryRow(ctx, "show temp_file_limit").Scan(&limit); err != nil || limit != "1GB" {
		t.Errorf("temp_file_limit of the app role: %q %v, want 1GB", limit, err)
	}
	allowed := []string{
		"select count(*) from events",
		"insert into customers (name, email) values ('App User', 'app@example.com')",
		"update orders set note = 'changed' where id = 1",
		"insert into orders (customer_id) values (1)",
		"delete from order_items where order_id = 1",
	}
	for _, sql := range allowed {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Errorf("%s as app role: %v", sql, err)
		}
	}
	denied := []string{
		"select pg_read_file('postgresql.conf')",
		"create table mine (id int)",
		"truncate events",
		"alter table customers add column x int",
		"create database mine",
	}
	for _, sql := range denied {
		_, err := conn.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s as app role: err = %v, want SQLSTATE 42501", sql, err)
		}
	}
}

// BenchmarkLoad loads the full dataset (1,000,000 events) into a fresh
// database per iteration.
func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		db := pgtest.New(b)
		b.StartTimer()
		if err := demodata.Load(context.Background(), db.DSN, demodata.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
