package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgtools/pgtools/tools/internal/pgerr"
	"github.com/pgtools/pgtools/tools/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const catalogFixture = `
CREATE TABLE orders (id int PRIMARY KEY, note text);
ALTER TABLE orders ADD COLUMN customer_id int NOT NULL DEFAULT 0;
CREATE TABLE by_code (code text NOT NULL, region int NOT NULL, extra text, UNIQUE (region, code), UNIQUE (extra));
CREATE TABLE loose (a int, b int);
CREATE VIEW recent AS SELECT id FROM orders;
COMMENT ON TABLE orders IS 'What was bought';
CREATE SCHEMA s2;
CREATE TABLE s2.wide (` + "c1 int, c2 int, c3 int" + `);`

// newCache is a cache over a fresh database holding catalogFixture; withSpare lets loads use a
// second connection.
func newCache(t *testing.T, withSpare bool) (*Cache, *pgtest.DB, *pgxpool.Pool) {
	t.Helper()
	db := pgtest.New(t)
	db.Exec(t, catalogFixture)
	pool := db.Pool(t)
	c := New(pool.Acquire, func(string, string) bool { return true }, 10*time.Millisecond)
	if withSpare {
		c.WithSpare(pool.Acquire)
	}
	return c, db, pool
}

// describeSnapshot is what a snapshot says of each relation, for comparing two loads.
func describeSnapshot(s *Snapshot) []string {
	var out []string
	for key, r := range s.Rels {
		out = append(out, fmt.Sprintf("%q kind %c cols %v types %v arrays %v notnull %v key %v comment %q", key, r.Kind, r.Columns, r.ColTypes, r.ColArray, r.ColNotNull, r.Key, r.Comment))
	}
	slices.Sort(out)
	return out
}

// TestLoadReadsTheCatalog: columns in attnum order (one added later included), the primary key,
// else the shortest unique index over NOT NULL columns, no key for a view or a table without
// one; and a load on two connections (one importing the other's snapshot) reads exactly what a
// load on one reads.
func TestLoadReadsTheCatalog(t *testing.T) {
	t.Parallel()
	c, _, pool := newCache(t, false)
	one, err := c.load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	orders := one.Rels[RelKey("public", "orders")]
	if !slices.Equal(orders.Columns, []string{"id", "note", "customer_id"}) || !slices.Equal(orders.Key, []string{"id"}) || orders.Comment != "What was bought" {
		t.Fatalf("orders: %+v", orders)
	}
	if k := one.Rels[RelKey("public", "by_code")].Key; !slices.Equal(k, []string{"region", "code"}) {
		t.Fatalf("by_code's key %v", k)
	}
	if one.Rels[RelKey("public", "loose")].Key != nil || one.Rels[RelKey("public", "recent")].Key != nil {
		t.Fatal("a key where there is none")
	}
	two := New(pool.Acquire, func(string, string) bool { return true }, time.Millisecond).WithSpare(pool.Acquire)
	both, err := two.load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a, b := describeSnapshot(one), describeSnapshot(both); !slices.Equal(a, b) {
		t.Fatalf("one connection:\n%v\ntwo:\n%v", a, b)
	}
}

// TestBigCatalogReloadsInTheBackground: a catalog whose load takes long is served from the cache
// past its refresh age, reloaded in the background (a table created meanwhile shows up without a
// caller waiting), and dropped at once by Invalidate.
func TestBigCatalogReloadsInTheBackground(t *testing.T) {
	t.Parallel()
	c, db, _ := newCache(t, true)
	ctx := context.Background()
	first, err := c.Fresh(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// As if it had taken two seconds to load, a minute ago.
	old := aged(first, 2*time.Second, time.Minute)
	c.cur.Store(old)
	db.Exec(t, "CREATE TABLE late (i int)")
	got, err := c.Fresh(ctx)
	if err != nil || got != old {
		t.Fatalf("a big, old catalog was not served from the cache: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.cur.Load() == old && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := c.cur.Load(); s == old || s.Rels[RelKey("public", "late")] == nil {
		t.Fatal("the background reload did not replace the snapshot")
	}
	// Young enough: no reload at all.
	young := aged(c.cur.Load(), 2*time.Second, 0)
	c.cur.Store(young)
	if got, _ := c.Fresh(ctx); got != young || c.reloading.Load() {
		t.Fatal("a young big catalog was reloaded")
	}
	c.Invalidate()
	if got, _ := c.Fresh(ctx); got == young {
		t.Fatal("Invalidate kept the snapshot")
	}
}

// TestMissOnBigCatalogAsksPostgreSQL: on a big catalog, a name that exists nowhere is answered at
// once, without reloading; one created since the load is found by a reload.
func TestMissOnBigCatalogAsksPostgreSQL(t *testing.T) {
	t.Parallel()
	c, db, _ := newCache(t, false)
	ctx := context.Background()
	snap, err := c.Snapshot(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	big := aged(snap, time.Second, 0)
	c.cur.Store(big)
	_, err = c.ResolveTable(ctx, "", "ordres")
	var pe *pgerr.Error
	if !errors.As(err, &pe) || pe.Type != pgerr.ErrInvalidTable || c.cur.Load() != big {
		t.Fatalf("a typo: %v, snapshot replaced %v", err, c.cur.Load() != big)
	}
	if pe.Suggestion == "" || !slices.Contains([]string{`Did you mean "orders"? Available tables: by_code, loose, orders, recent, s2.wide`}, pe.Suggestion) {
		t.Fatalf("suggestion %q", pe.Suggestion)
	}
	db.Exec(t, "CREATE TABLE newcomer (i int)")
	if r, err := c.ResolveTable(ctx, "", "newcomer"); err != nil || r.Name != "newcomer" {
		t.Fatalf("a table created since the load: %v", err)
	}
}

// aged is a copy of s as if its load had taken took, age ago.
func aged(s *Snapshot, took, age time.Duration) *Snapshot {
	return &Snapshot{Rels: s.Rels, SearchPath: s.SearchPath, took: took, loaded: time.Now().Add(-age)}
}

func TestValidSnapshotID(t *testing.T) {
	for id, want := range map[string]bool{"00000003-0000001B-1": true, "": false, "x'; DROP": false, "00000003-0000001B-1'": false} {
		if validSnapshotID(id) != want {
			t.Errorf("validSnapshotID(%q) != %v", id, want)
		}
	}
}
