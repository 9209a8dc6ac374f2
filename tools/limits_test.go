package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRowLimitIsExact: truncated is true exactly when more rows exist than the limit, and the
// hint and next_page say how to get the next page, which starts right after the last row.
func TestRowLimitIsExact(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{MaxLimit: 500})
	cases := []struct {
		name      string
		args      string
		rows      int
		truncated bool
		firstID   int64
		lastID    int64
		hint      string // a fragment the hint must contain; "" means no hint
	}{
		{"limit equals row count", `{"table":"orders","columns":"id","order_by":"id","limit":300}`, 300, false, 1, 300, ""},
		{"limit one below", `{"table":"orders","columns":"id","order_by":"id","limit":299}`, 299, true, 1, 299, "page_token set to next_page"},
		{"limit above row count", `{"table":"orders","columns":"id","order_by":"id","limit":301}`, 300, false, 1, 300, ""},
		{"limit at the hard cap", `{"table":"orders","columns":"id","order_by":"id","limit":500}`, 300, false, 1, 300, ""},
		{"first page", `{"table":"orders","columns":"id","order_by":"id","limit":100}`, 100, true, 1, 100, "page_token set to next_page"},
		{"second page", `{"table":"orders","columns":"id","order_by":"id","limit":100,"offset":100}`, 100, true, 101, 200, "page_token set to next_page"},
		{"last page", `{"table":"orders","columns":"id","order_by":"id","limit":100,"offset":200}`, 100, false, 201, 300, ""},
		{"past the end", `{"table":"orders","columns":"id","order_by":"id","limit":100,"offset":300}`, 0, false, 0, 0, ""},
		{"descending page", `{"table":"orders","columns":"id","order_by":"id desc","limit":10,"offset":5}`, 10, true, 295, 286, "page_token set to next_page"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, e := callResult(t, b, "select_query", c.args)
			if e != nil {
				t.Fatal(errorJSON(t, e))
			}
			var data []map[string]json.Number
			decodeExact(t, res.Rows.Data, &data)
			if len(data) != c.rows || res.RowCount != c.rows || res.Truncated != c.truncated {
				t.Fatalf("rows %d, rowCount %d, truncated %v; want %d rows, truncated %v", len(data), res.RowCount, res.Truncated, c.rows, c.truncated)
			}
			if c.rows > 0 {
				if data[0]["id"] != json.Number(itoa(c.firstID)) || data[len(data)-1]["id"] != json.Number(itoa(c.lastID)) {
					t.Fatalf("ids %s..%s, want %d..%d", data[0]["id"], data[len(data)-1]["id"], c.firstID, c.lastID)
				}
			}
			switch {
			case c.hint == "" && res.Hint != "":
				t.Fatalf("unexpected hint %q", res.Hint)
			case c.hint != "" && !strings.Contains(res.Hint, c.hint):
				t.Fatalf("hint %q does not contain %q", res.Hint, c.hint)
			}
			if (res.NextPage != "") != c.truncated {
				t.Fatalf("next_page %q on an answer truncated %v", res.NextPage, c.truncated)
			}
			if !c.truncated {
				return
			}
			next, e := callResult(t, b, "select_query", `{"page_token":"`+res.NextPage+`","limit":1}`)
			if e != nil {
				t.Fatal(errorJSON(t, e))
			}
			var first []map[string]json.Number
			decodeExact(t, next.Rows.Data, &first)
			step := int64(1)
			if c.firstID > c.lastID {
				step = -1
			}
			if len(first) != 1 || first[0]["id"] != json.Number(itoa(c.lastID+step)) {
				t.Fatalf("the next page starts at %v, want id %d", first, c.lastID+step)
			}
		})
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestLimitAboveHardCapRefused: the hard cap is a refusal, not a silent clamp.
func TestLimitAboveHardCapRefused(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{MaxLimit: 500})
	e := b.mustFail(t, ErrInvalidArguments, "select_query", `{"table":"orders","limit":501}`)
	if !strings.Contains(e.Message, "500") || !strings.Contains(e.Suggestion, "next_page") {
		t.Fatalf("the refusal does not name the cap and paging: %s", errorJSON(t, e))
	}
}

// TestExecuteSQLRowCapStopsTheServer: free SQL returns at most DefaultLimit rows and PostgreSQL
// stops producing the rest (a streamed 30,000,000-row series comes back in milliseconds).
func TestExecuteSQLRowCapStopsTheServer(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{DefaultLimit: 1000})
	res, e := callResult(t, b, "execute_sql", `{"sql":"select * from generate_series(1, 100000) i"}`)
	if e != nil {
		t.Fatal(errorJSON(t, e))
	}
	var data []map[string]json.Number
	decodeExact(t, res.Rows.Data, &data)
	if len(data) != 1000 || res.RowCount != 1000 || !res.Truncated {
		t.Fatalf("rows %d, rowCount %d, truncated %v", len(data), res.RowCount, res.Truncated)
	}
	if data[0]["i"] != "1" || data[999]["i"] != "1000" {
		t.Fatalf("rows %s..%s", data[0]["i"], data[999]["i"])
	}
	if res.Hint == "" {
		t.Fatal("truncated without a hint")
	}
	// A set-returning function in the select list streams its rows (a FROM generate_series
	// would materialise them first), so the time shows whether the server stopped at the cap:
	// about 3 ms here, against seconds to produce and drain 30 million rows.
	start := time.Now()
	res, e = callResult(t, b, "execute_sql", `{"sql":"select generate_series(1, 30000000) AS i"}`)
	if e != nil {
		t.Fatal(errorJSON(t, e))
	}
	if res.RowCount != 1000 || !res.Truncated {
		t.Fatalf("streamed series: rowCount %d, truncated %v", res.RowCount, res.Truncated)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v: the server produced every row instead of stopping at the cap", d)
	}

	// Exactly DefaultLimit rows are not truncated.
	res, e = callResult(t, b, "execute_sql", `{"sql":"select i from generate_series(1, 1000) i"}`)
	if e != nil {
		t.Fatal(errorJSON(t, e))
	}
	if res.RowCount != 1000 || res.Truncated {
		t.Fatalf("1000 of 1000: rowCount %d, truncated %v", res.RowCount, res.Truncated)
	}
}

// TestResponseByteCap: the JSON of the rows never exceeds MaxResponseBytes; the cut is reported
// as truncation with a hint that names the cap, and rowCount counts the rows actually sent.
func TestResponseByteCap(t *testing.T) {
	t.Parallel()
	const byteCap = 2048
	b := newBundle(t, Policy{MaxResponseBytes: byteCap})
	for _, c := range []struct{ name, tool, args string }{
		{"select_query", "select_query", `{"table":"orders"}`},
		{"select_query wide rows", "select_query", `{"table":"customers","order_by":"id"}`},
		{"execute_sql", "execute_sql", `{"sql":"select i, repeat('x', i) AS pad from generate_series(1, 200) i"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, e := callResult(t, b, c.tool, c.args)
			if e != nil {
				t.Fatal(errorJSON(t, e))
			}
			if len(res.Rows.Data) > byteCap {
				t.Fatalf("data is %d bytes, cap %d", len(res.Rows.Data), byteCap)
			}
			var data []any
			decodeExact(t, res.Rows.Data, &data)
			remarshalled, err := json.Marshal(data)
			if err != nil {
				t.Fatal(err)
			}
			if len(remarshalled) > byteCap {
				t.Fatalf("re-marshalled data is %d bytes, cap %d", len(remarshalled), byteCap)
			}
			if !res.Truncated || res.RowCount != len(data) || len(data) == 0 {
				t.Fatalf("truncated %v, rowCount %d, rows %d", res.Truncated, res.RowCount, len(data))
			}
			if !strings.Contains(res.Hint, "2048-byte") {
				t.Fatalf("hint does not name the byte cap: %q", res.Hint)
			}
			// A select's next_page continues right after the last row kept.
			if c.tool == "select_query" {
				if res.NextPage == "" || !strings.Contains(res.Hint, "next_page") {
					t.Fatalf("no next_page, or a hint that does not name it: %q", res.Hint)
				}
				next, e := callResult(t, b, c.tool, `{"page_token":"`+res.NextPage+`","columns":"id","limit":1}`)
				if e == nil {
					t.Fatalf("page_token with other columns was accepted")
				}
				next, e = callResult(t, b, c.tool, `{"page_token":"`+res.NextPage+`","limit":1}`)
				if e != nil {
					t.Fatal(errorJSON(t, e))
				}
				var got []map[string]any
				decodeExact(t, next.Rows.Data, &got)
				lastID := data[len(data)-1].(map[string]any)["id"].(json.Number)
				if len(got) != 1 || fmt.Sprint(got[0]["id"]) != itoa(mustInt(t, lastID)+1) {
					t.Fatalf("after id %s the next page starts with %v", lastID, got)
				}
			}
			// The next row would not have fitted: the cut is not premature.
			if len(res.Rows.Data) < byteCap/2 {
				t.Fatalf("only %d of %d bytes used", len(res.Rows.Data), byteCap)
			}
		})
	}
	t.Run("a single row larger than the cap", func(t *testing.T) {
		t.Parallel()
		res, e := callResult(t, b, "execute_sql", `{"sql":"select repeat('y', 5000) AS big"}`)
		if e != nil {
			t.Fatal(errorJSON(t, e))
		}
		if string(res.Rows.Data) != "[]" || res.RowCount != 0 || !res.Truncated || res.Hint == "" {
			t.Fatalf("data %.40s…, rowCount %d, truncated %v, hint %q", res.Rows.Data, res.RowCount, res.Truncated, res.Hint)
		}
	})
	t.Run("select_query whose first row is larger than the cap", func(t *testing.T) {
		// No next_page: a page after nothing would be cut the same way; the hint says what helps.
		b.db.Exec(t, `CREATE TABLE wide (id int PRIMARY KEY, pad text); INSERT INTO wide VALUES (1, repeat('y', 5000)), (2, 'z')`)
		res, e := callResult(t, b, "select_query", `{"table":"wide"}`)
		if e != nil {
			t.Fatal(errorJSON(t, e))
		}
		if res.RowCount != 0 || !res.Truncated || res.NextPage != "" || !strings.Contains(res.Hint, "select fewer columns") || strings.Contains(res.Hint, "offset") {
			t.Fatalf("rowCount %d, truncated %v, next_page %q, hint %q", res.RowCount, res.Truncated, res.NextPage, res.Hint)
		}
	})
}

func mustInt(t testing.TB, n json.Number) int64 {
	t.Helper()
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return i
}
