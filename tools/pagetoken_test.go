package tools

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pgtools/pgtools/tools/page"
)

// pagingBundle is a bundle whose registry signs page tokens with key, dated by a clock the test
// moves, and serves the bundle's database also as "other".
type pagingBundle struct {
	*bundle
	now atomic.Int64 // Unix seconds
}

var testPageKey = []byte("0123456789abcdef0123456789abcdef")

func newPagingBundle(t testing.TB, setup string) *pagingBundle {
	t.Helper()
	b := newBundle(t, Policy{MaxLimit: 10000})
	if setup != "" {
		b.db.Exec(t, setup)
	}
	pb := &pagingBundle{bundle: b}
	pb.now.Store(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC).Unix())
	pb.reg = pb.registry(t, testPageKey)
	return pb
}

// clock is the time the bundle's registries date their tokens by.
func (pb *pagingBundle) clock() time.Time { return time.Unix(pb.now.Load(), 0) }

// registry is another registry over the same databases (another replica) signing with key.
func (pb *pagingBundle) registry(t testing.TB, key []byte) *Registry {
	t.Helper()
	other := NewDatabase("other", pb.tdb.Pool, pb.tdb.Policy)
	reg, err := NewRegistry(context.Background(), Options{Databases: []*Database{pb.tdb, other},
		Pages: page.Tokens{Key: key, TTL: time.Minute, Now: pb.clock}})
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// readAll pages through select_query's args with page_token until an answer is not truncated,
// and returns every row in the order read. between runs after every page.
func readAll(t testing.TB, reg *Registry, p Principal, args string, between func()) (all []map[string]any, pages int) {
	t.Helper()
	return readPages(t, reg, p, "select_query", args, 1000, between)
}

// readPages is readAll for any paging tool, failing past maxPages pages.
func readPages(t testing.TB, reg *Registry, p Principal, tool, args string, maxPages int, between func()) (all []map[string]any, pages int) {
	t.Helper()
	call := args
	for {
		res, _, e := reg.Call(context.Background(), p, tool, []byte(call))
		if e != nil {
			t.Fatalf("page %d: %s", pages+1, errorJSON(t, e))
		}
		rr := res.(*RowsResult)
		pages++
		var data []map[string]any
		decodeExact(t, rr.Rows.Data, &data)
		if len(data) != rr.RowCount {
			t.Fatalf("page %d: %d rows, rowCount %d", pages, len(data), rr.RowCount)
		}
		all = append(all, data...)
		if !rr.Truncated {
			if rr.NextPage != "" {
				t.Fatalf("page %d: next_page on an answer that is not truncated", pages)
			}
			return all, pages
		}
		if rr.NextPage == "" || !strings.Contains(rr.Hint, "next_page") {
			t.Fatalf("page %d: truncated without next_page, or a hint that does not name it: %q", pages, rr.Hint)
		}
		if pages > maxPages {
			t.Fatalf("more than %d pages", maxPages)
		}
		if between != nil {
			between()
		}
		call = `{"page_token":"` + rr.NextPage + `"}`
	}
}

// TestPageTokensUnderChurn: 10,000 rows read in pages of 1,000 while another client inserts
// and deletes rows all the time (and at least once between any two pages, in the part already
// read and the part still ahead): every row that existed throughout is read exactly once, and
// no row twice. Offset paging fails this: a delete ahead of the offset skips rows.
func TestPageTokensUnderChurn(t *testing.T) {
	t.Parallel()
	pb := newPagingBundle(t, `
CREATE TABLE events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, grp int NOT NULL, note text);
INSERT INTO events (grp, note) SELECT i % 97, CASE WHEN i % 5 = 0 THEN NULL ELSE 'n' || (i % 13) END FROM generate_series(1, 10000) i;`)
	for _, c := range []struct{ name, order string }{
		{"by the key", ""},
		{"by a non-unique column, descending", "grp desc"},
		{"by nullable and mixed directions", "note nulls first, grp desc"},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Not parallel: the subtests share the table and each owns the churn while it reads.
			initial := map[string]bool{}
			for _, id := range queryStrings(t, pb.bundle, "SELECT id::text FROM events") {
				initial[id] = true
			}
			var (
				rounds  atomic.Int64
				mu      sync.Mutex
				deleted = map[string]bool{}
				stop    = make(chan struct{})
				done    = make(chan struct{})
			)
			go func() {
				defer close(done)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					// New rows land anywhere in the order; deleted ones anywhere too.
					pb.db.Exec(t, fmt.Sprintf(`INSERT INTO events (grp, note) VALUES (%d, NULL), (%d, 'n%d')`, i%97, (i*31)%97, i%13))
					var ids []string
					for _, id := range queryStrings(t, pb.bundle, `DELETE FROM events WHERE id IN (SELECT id FROM events ORDER BY random() LIMIT 3) RETURNING id::text`) {
						ids = append(ids, id)
					}
					mu.Lock()
					for _, id := range ids {
						deleted[id] = true
					}
					mu.Unlock()
					rounds.Add(1)
				}
			}()
			args := `{"table":"events","limit":1000`
			if c.order != "" {
				args += `,"order_by":"` + c.order + `"`
			}
			args += "}"
			all, pages := readAll(t, pb.reg, testPrincipal, args, func() {
				// Wait for a full round of churn after this page was read.
				for r := rounds.Load(); rounds.Load() < r+2; {
					time.Sleep(time.Millisecond)
				}
			})
			close(stop)
			<-done
			if pages < 10 {
				t.Fatalf("%d pages for 10,000 rows in pages of 1,000", pages)
			}
			ids := make([]string, 0, len(initial))
			for id := range initial {
				ids = append(ids, id)
			}
			missing := readOnce(t, all, ids, deleted)
			if missing > 0 {
				t.Fatalf("%d rows that existed throughout were not read (of %d read, %d deleted meanwhile)", missing, len(all), len(deleted))
			}
			if len(deleted) < pages {
				t.Fatalf("only %d rows deleted over %d pages: the churn did not run between pages", len(deleted), pages)
			}
		})
	}
}

// readOnce fails t when a row of all (by its id) was read twice, and counts the rows of want
// that were neither read nor deleted meanwhile.
func readOnce(t testing.TB, all []map[string]any, want []string, deleted map[string]bool) (missing int) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range all {
		seen[fmt.Sprint(r["id"])]++
	}
	for id, n := range seen {
		if n > 1 {
			t.Fatalf("row %s read %d times", id, n)
		}
	}
	for _, id := range want {
		if seen[id] == 0 && !deleted[id] {
			missing++
		}
	}
	return missing
}

func queryStrings(t testing.TB, b *bundle, sql string) []string {
	t.Helper()
	rows, err := b.db.Pool(t).Query(context.Background(), sql)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPageTokensFollowEveryOrder: for orders of mixed directions over nullable columns of
// several types (NULLS FIRST and LAST, explicit and default), pages of every size read exactly
// the rows of one unpaged call, in its order. Ties on the caller's order are broken by the key.
func TestPageTokensFollowEveryOrder(t *testing.T) {
	t.Parallel()
	pb := newPagingBundle(t, `
CREATE TABLE mixed (id uuid PRIMARY KEY, a int, b text, c timestamptz, d numeric, e text NOT NULL);
INSERT INTO mixed SELECT md5(i::text)::uuid,
  CASE WHEN i % 4 = 0 THEN NULL ELSE i % 3 END,
  CASE WHEN i % 5 = 0 THEN NULL WHEN i % 7 = 0 THEN '' ELSE chr(65 + i % 4) END,
  CASE WHEN i % 6 = 0 THEN NULL ELSE timestamptz '2026-01-01 00:00:00.123456+00' + (i % 4) * interval '1 microsecond' END,
  CASE WHEN i % 9 = 0 THEN NULL ELSE (i % 3) / 7.0 END,
  'x' || (i % 2)
FROM generate_series(1, 60) i;`)
	orders := []string{
		"", "a", "a desc", "a nulls first", "a desc nulls last", "b, a desc", "b desc nulls last, c",
		"c desc, d nulls first", "d, b, a", "e, a desc nulls last", "e desc", "id desc", "e, id",
	}
	for _, order := range orders {
		t.Run(order, func(t *testing.T) {
			t.Parallel()
			args := `{"table":"mixed","order_by":"` + order + `","columns":"id"`
			want, _ := readAll(t, pb.reg, testPrincipal, args+`,"limit":1000}`, nil)
			if len(want) != 60 {
				t.Fatalf("one call read %d rows, want 60", len(want))
			}
			for _, size := range []int{1, 2, 7} {
				got, pages := readAll(t, pb.reg, testPrincipal, fmt.Sprintf(`%s,"limit":%d}`, args, size), nil)
				if pages < 60/size {
					t.Fatalf("limit %d: %d pages", size, pages)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("limit %d: pages read\n%v\nwant\n%v", size, got, want)
				}
			}
		})
	}
}

// TestPageTokenRefusals: a token changed in any byte, expired, issued to another caller, sent
// with another database or other arguments, or with offset, is refused as invalid_arguments with
// a suggestion, and nothing is read.
func TestPageTokenRefusals(t *testing.T) {
	t.Parallel()
	pb := newPagingBundle(t, "")
	first := `{"table":"orders","where":"total > $1","params":[10],"order_by":"placed_at desc","limit":5}`
	res, e := callResult(t, pb.bundle, "select_query", first)
	if e != nil {
		t.Fatal(errorJSON(t, e))
	}
	tok := res.NextPage
	if tok == "" {
		t.Fatal("no next_page")
	}
	if len(tok) > 240 {
		t.Errorf("a token for a short call is %d characters long", len(tok))
	}
	withToken := func(tk, extra string) string { return `{"page_token":"` + tk + `"` + extra + `}` }
	// The token is good: alone, and with the same arguments repeated and another limit.
	for _, args := range []string{withToken(tok, ""), withToken(tok, `,"table":"orders","where":" total > $1 ","params":"[10]","order_by":"placed_at desc","limit":2,"database":"default"`)} {
		if _, e := callResult(t, pb.bundle, "select_query", args); e != nil {
			t.Fatalf("%s: %s", args, errorJSON(t, e))
		}
	}

	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	flipped := func(i int) string {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x20
		return base64.RawURLEncoding.EncodeToString(b)
	}
	cases := []struct {
		name, args string
		as         *Principal
		clock      time.Duration
		inMessage  string
		inFix      string
	}{
		{"tampered version", withToken(flipped(0), ""), nil, 0, "not a token", "exactly"},
		{"tampered payload", withToken(flipped(len(raw)/2), ""), nil, 0, "changed", "exactly"},
		{"tampered signature", withToken(flipped(len(raw)-1), ""), nil, 0, "changed", "key_file"},
		{"not base64", withToken("%%%", ""), nil, 0, "not a token", "without page_token"},
		{"expired", withToken(tok, ""), nil, 61 * time.Second, "expired", "without page_token"},
		{"another caller", withToken(tok, ""), &Principal{Name: "someone-else", Scopes: []string{"read"}}, 0, "another caller", "without page_token"},
		{"another role", withToken(tok, ""), &Principal{Name: testPrincipal.Name, Scopes: []string{"read"}, Role: "x"}, 0, "another caller", "without page_token"},
		{"other claims", withToken(tok, ""), &Principal{Name: testPrincipal.Name, Scopes: []string{"read"}, Claims: []byte(`{"tenant":2}`)}, 0, "another caller", "without page_token"},
		{"another database", withToken(tok, `,"database":"other"`), nil, 0, "database", "page_token alone"},
		{"another table", withToken(tok, `,"table":"customers"`), nil, 0, "table", "page_token alone"},
		{"other params", withToken(tok, `,"params":[11]`), nil, 0, "params", "page_token alone"},
		{"another order", withToken(tok, `,"order_by":"placed_at"`), nil, 0, "order_by", "page_token alone"},
		{"other columns", withToken(tok, `,"columns":"id"`), nil, 0, "columns", "page_token alone"},
		{"with offset", withToken(tok, `,"offset":5`), nil, 0, "offset", "without offset"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Not parallel: the expired case moves the shared clock.
			p := testPrincipal
			if c.as != nil {
				p = *c.as
			}
			pb.now.Add(int64(c.clock / time.Second))
			defer pb.now.Add(-int64(c.clock / time.Second))
			res, _, e := pb.reg.Call(context.Background(), p, "select_query", []byte(c.args))
			if e == nil {
				t.Fatalf("accepted: %v", res)
			}
			if e.Type != ErrInvalidArguments || !strings.Contains(e.Message, c.inMessage) || !strings.Contains(e.Suggestion, c.inFix) {
				t.Fatalf("got %s, want invalid_arguments naming %q with a fix naming %q", errorJSON(t, e), c.inMessage, c.inFix)
			}
			if strings.Contains(e.Message+e.Suggestion, tok[:20]) {
				t.Fatalf("the refusal repeats the token: %s", errorJSON(t, e))
			}
		})
	}

	// A runner with another key refuses the token; one with the same key continues it.
	if _, _, e := pb.registry(t, []byte("another key, also 32 bytes long!")).Call(context.Background(), testPrincipal, "select_query", []byte(withToken(tok, ""))); e == nil || e.Type != ErrInvalidArguments {
		t.Fatalf("a runner with another key accepted the token: %v", e)
	}
	replica := pb.registry(t, testPageKey)
	a, _ := readAll(t, pb.reg, testPrincipal, withToken(tok, ""), nil)
	b, _ := readAll(t, replica, testPrincipal, withToken(tok, ""), nil)
	if len(a) == 0 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("the replica continued differently: %d rows here, %d there", len(a), len(b))
	}
}

// TestPageTokenWithoutKeyGoesByOffset: a table without a primary key or unique NOT NULL index,
// and a table whose key the caller's role may not read, page by an offset kept in the token,
// and the hint says so; the pages still cover the table once when it does not change.
func TestPageTokenWithoutKeyGoesByOffset(t *testing.T) {
	t.Parallel()
	pb := newPagingBundle(t, `
CREATE TABLE nokey (n int, label text UNIQUE);
INSERT INTO nokey SELECT i, 'l' || i FROM generate_series(1, 25) i;
CREATE TABLE hidden_key (id int PRIMARY KEY, label text);
INSERT INTO hidden_key SELECT i, 'l' || i FROM generate_series(1, 25) i;
CREATE ROLE paging_reader;
GRANT SELECT (label) ON hidden_key TO paging_reader;
GRANT SELECT ON nokey TO paging_reader;`)
	pb.db.Exec(t, `GRANT paging_reader TO `+quoteIdent(pb.db.RoleName("agent")))
	reader := Principal{Name: "reader", Scopes: []string{"read"}, Role: "paging_reader"}
	for _, c := range []struct {
		name, args string
		p          Principal
	}{
		{"no key", `{"table":"nokey","order_by":"n","limit":10}`, testPrincipal},
		{"key not readable", `{"table":"hidden_key","order_by":"label","limit":10}`, reader},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, _, e := pb.reg.Call(context.Background(), c.p, "select_query", []byte(c.args))
			if e != nil {
				t.Fatal(errorJSON(t, e))
			}
			if rr := res.(*RowsResult); !strings.Contains(rr.Hint, "goes by offset") || rr.NextPage == "" {
				t.Fatalf("hint %q, next_page %q", rr.Hint, rr.NextPage)
			}
			all, pages := readAll(t, pb.reg, c.p, c.args, nil)
			seen := map[string]bool{}
			for _, r := range all {
				seen[fmt.Sprint(r["label"])] = true
			}
			if pages != 3 || len(all) != 25 || len(seen) != 25 {
				t.Fatalf("%d pages, %d rows, %d distinct", pages, len(all), len(seen))
			}
		})
	}
	t.Run("keyed table hint has no offset warning", func(t *testing.T) {
		res, e := callResult(t, pb.bundle, "select_query", `{"table":"hidden_key","limit":10}`)
		if e != nil {
			t.Fatal(errorJSON(t, e))
		}
		if strings.Contains(res.Hint, "offset") {
			t.Fatalf("hint %q", res.Hint)
		}
	})
}

// TestPageTokenCarriesNoValueIntoSQL: the last row's values come back as bound parameters, so a
// key holding quotes, backslashes and SQL continues like any other.
func TestPageTokenCarriesNoValueIntoSQL(t *testing.T) {
	t.Parallel()
	pb := newPagingBundle(t, `
CREATE TABLE tricky (k text PRIMARY KEY);
INSERT INTO tricky VALUES ($$a'); DROP TABLE tricky; --$$), ('b\'), ('c"'), (''), (' '), ('d$1');`)
	all, pages := readAll(t, pb.reg, testPrincipal, `{"table":"tricky","limit":1}`, nil)
	if pages != 6 || len(all) != 6 {
		t.Fatalf("%d pages, %d rows: %v", pages, len(all), all)
	}
	res, _ := callResult(t, pb.bundle, "select_query", `{"table":"tricky","limit":1}`)
	signer, err := page.NewSigner(page.Tokens{Key: testPageKey, TTL: time.Minute, Now: pb.clock})
	if err != nil {
		t.Fatal(err)
	}
	st, e := signer.Open(pageWho(testPrincipal), "select_query", res.NextPage)
	if e != nil || len(st.After) != 1 || st.After[0] == nil || *st.After[0] != "" {
		t.Fatalf("the first key is the empty string, not NULL: %+v (%v)", st, e)
	}
}

// TestPageArgKeysCoverEveryCarriedArgument: every argument a token carries has its own short
// name, so none is dropped or confused with another.
func TestPageArgKeysCoverEveryCarriedArgument(t *testing.T) {
	t.Parallel()
	short := map[string]string{}
	for _, k := range append(append([]string{}, pageBound...), pageCarried...) {
		s, ok := pageArgKeys[k]
		if !ok || s == "" {
			t.Fatalf("argument %s has no short name", k)
		}
		if other, dup := short[s]; dup || selectPages.Key(k) != s {
			t.Fatalf("%s and %s share the short name %s", k, other, s)
		}
		short[s] = k
		// Every argument a token fixes can be compared: an unknown one would refuse every call.
		if _, ok := normalizedArg(k, nil); !ok {
			t.Fatalf("argument %s has no normalization", k)
		}
	}
	if len(short) != len(pageArgKeys) {
		t.Fatalf("pageArgKeys names arguments a token does not carry: %v", pageArgKeys)
	}
}
