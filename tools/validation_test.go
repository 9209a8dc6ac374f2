package tools

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/tools/words"
)

// hugeValue is a 1 MiB argument value, as the tester of issue 12 sent.
var hugeValue = strings.Repeat("x", 1<<20)

// assertNoEcho fails when an error repeats more of a value than a message may (words.MaxEchoRunes
// characters) or is long at all.
func assertNoEcho(t testing.TB, e *Error) {
	t.Helper()
	text := e.Message + " " + e.Suggestion
	if strings.Contains(text, strings.Repeat("x", words.MaxEchoRunes+1)) {
		t.Fatalf("error repeats more than %d characters of the value: %.300s…", words.MaxEchoRunes, text)
	}
	if len(text) > 1500 {
		t.Fatalf("error is %d bytes: %.300s…", len(text), text)
	}
}

// TestHugeArgumentsAreNotEchoed sends 1 MiB values and names where the old messages carried them
// back whole (schema pattern errors, unknown property names) or cut at 80 bytes (names the
// catalog could not resolve).
func TestHugeArgumentsAreNotEchoed(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{})
	cases := []struct {
		name, tool, args string
		want             ErrorType
		inMessage        string
	}{
		{"session_id", "select_query", `{"table":"orders","session_id":"` + hugeValue + `"}`, ErrInvalidArguments, "session_id: must be a session id"},
		{"pg_tx session_id", "pg_tx", `{"action":"commit","session_id":"` + hugeValue + `"}`, ErrInvalidArguments, "session_id"},
		{"savepoint name", "pg_tx", `{"action":"savepoint","name":"` + hugeValue + `"}`, ErrInvalidArguments, "name: must be a savepoint name"},
		{"unknown property", "select_query", `{"table":"orders","` + hugeValue + `":1}`, ErrInvalidArguments, "(1048576 characters)"},
		{"unknown property in a row", "insert_data", `{"table":"items","autocommit":true,"row":{"sku":"a"},"on_conflict":{"columns":"sku","action":"nothing","` + hugeValue + `":1}}`, ErrInvalidArguments, "(1048576 characters)"},
		{"table", "select_query", `{"table":"` + hugeValue + `"}`, ErrInvalidTable, "(1048576 characters)"},
		{"column", "select_query", `{"table":"orders","columns":"id,` + hugeValue + `"}`, ErrInvalidColumn, "(1048576 characters)"},
		{"database", "select_query", `{"table":"orders","database":"` + hugeValue + `"}`, ErrNotAllowed, "(1048576 characters)"},
		{"many bad rows", "insert_data", `{"table":"items","autocommit":true,"rows":[` + strings.Repeat(`"`+strings.Repeat("x", 1000)+`",`, 500) + `{}]}`, ErrInvalidArguments, "and 490 more arguments with errors"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := b.mustFail(t, c.want, c.tool, c.args)
			assertNoEcho(t, e)
			if !strings.Contains(e.Message, c.inMessage) {
				t.Fatalf("message lacks %q: %s", c.inMessage, e.Message)
			}
		})
	}
	t.Run("unicode is cut between characters", func(t *testing.T) {
		got := words.Quote(strings.Repeat("é", 100))
		if want := `"` + strings.Repeat("é", words.MaxEchoRunes) + `…" (100 characters)`; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
}

// TestValidationMessagesArePlain checks that a pattern failure reads as advice, not as the
// schema's regular expression.
func TestValidationMessagesArePlain(t *testing.T) {
	t.Parallel()
	reg := closedPortRegistry(t) // every case fails validation: no database is needed
	cases := []struct{ tool, args, want string }{
		{"delete_data", `{"table":"orders","where":"  ","autocommit":true}`, "where: must not be blank"},
		{"execute_sql", `{"sql":"\n"}`, "sql: must not be blank"},
		{"select_query", `{"table":"orders","session_id":"abc"}`, "session_id: must be a session id as pg_tx begin returned it (a UUID)"},
		{"pg_tx", `{"action":"savepoint","name":"1st"}`, "name: must be a savepoint name: letters, digits and underscores"},
		{"select_query", `{"table":"orders","params":"nope"}`, `params: must be a JSON array such as [42, "shipped"], or a string holding one`},
		{"select_query", `{"table":""}`, "table: must not be empty"},
		{"pg_transaction", `{"operations":[{"sql":" "}]}`, "operations/0/sql: must not be blank"},
	}
	for _, c := range cases {
		_, _, e := reg.Call(context.Background(), testPrincipal, c.tool, []byte(c.args))
		if e == nil || e.Type != ErrInvalidArguments {
			t.Fatalf("%s %s: got %v, want invalid_arguments", c.tool, c.args, e)
		}
		if !strings.Contains(e.Message, c.want) {
			t.Errorf("%s %s: message %q lacks %q", c.tool, c.args, e.Message, c.want)
		}
		for _, regex := range []string{"pattern", `\S`, "[0-9a-fA-F]", "[A-Za-z_]", "minLength", "got string"} {
			if strings.Contains(e.Message, regex) {
				t.Errorf("%s %s: message shows %q: %s", c.tool, c.args, regex, e.Message)
			}
		}
	}
}

// tooManyParams is a JSON array of n small integers.
func tooManyParams(n int) string {
	return "[" + strings.Repeat("1,", n-1) + "1]"
}

// TestTooManyParams: PostgreSQL's protocol binds at most 65,535 parameters per statement. More
// used to surface as connection_error (pgx refuses before sending); it is invalid_arguments that
// names the limit and the array-parameter way around it.
func TestTooManyParams(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{})
	params := tooManyParams(70000)
	cases := []struct{ name, tool, args, want string }{
		{"select_query", "select_query", `{"table":"orders","where":"id = 1","params":` + params + `}`, "params has 70000 values"},
		{"params as a string", "execute_sql", `{"sql":"select 1","params":"` + params + `"}`, "params has 70000 values"},
		{"delete_data", "delete_data", `{"table":"orders","where":"id = 1","params":` + params + `,"autocommit":true}`, "params has 70000 values"},
		{"pg_transaction", "pg_transaction", `{"operations":[{"sql":"select 1"},{"sql":"select 2","params":` + params + `}]}`, "Operation 1 failed: Invalid arguments: params has 70000 values"},
		{"insert_data rows × columns", "insert_data", `{"table":"items","autocommit":true,"rows":[` +
			strings.TrimSuffix(strings.Repeat(`{"sku":"a","qty":1,"price":1,"tags":null,"attrs":null,"seen_at":null,"customer_id":null},`, 10000), ",") + `]}`, "70000 values"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := b.mustFail(t, ErrInvalidArguments, c.tool, c.args)
			if !strings.Contains(e.Message, c.want) || !strings.Contains(e.Message, "65535") {
				t.Fatalf("message %q lacks %q and the limit", e.Message, c.want)
			}
		})
	}
	// The limit itself is allowed: 65,535 values bind and run.
	var sql strings.Builder
	sql.WriteString("select 1 where 1 in (")
	for i := 1; i <= maxBindParams; i++ {
		if i > 1 {
			sql.WriteByte(',')
		}
		fmt.Fprintf(&sql, "$%d::int", i)
	}
	sql.WriteString(")")
	out := b.mustCall(t, "execute_sql", `{"sql":"`+sql.String()+`","params":`+tooManyParams(maxBindParams)+`}`)
	if len(rows(t, out)) != 1 {
		t.Fatalf("65535 params: one row expected: %v", out)
	}
}

// TestNULIsNamed: PostgreSQL cannot take a NUL character in text. A call with one is refused
// before it reaches the database (the closed-port registry would answer connection_error
// otherwise), with the argument's path, instead of the misleading errors PostgreSQL and pgx give.
func TestNULIsNamed(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{})
	closed := closedPortRegistry(t)
	cases := []struct{ name, tool, args, path string }{
		{"where", "select_query", `{"table":"orders","where":"id = 1 \u0000"}`, "where contains"},
		{"sql", "execute_sql", `{"sql":"select '\u0000'"}`, "sql contains"},
		{"table", "select_query", `{"table":"ord\u0000ers"}`, "table contains"},
		{"columns string", "select_query", `{"table":"orders","columns":"id,\u0000"}`, "columns contains"},
		{"columns array", "select_query", `{"table":"orders","columns":["id","st\u0000"]}`, "columns/1 contains"},
		{"order_by", "select_query", `{"table":"orders","order_by":"id\u0000"}`, "order_by contains"},
		{"params", "select_query", `{"table":"orders","where":"status = $1","params":["a\u0000b"]}`, "params/0 contains"},
		{"params nested", "execute_sql", `{"sql":"select $1::text[]","params":[["ok","a\u0000"]]}`, "params/0/1 contains"},
		{"params as a string", "select_query", `{"table":"orders","where":"status = $1","params":"[\"a\\u0000b\"]"}`, "params/0 contains"},
		{"row value", "insert_data", `{"table":"items","autocommit":true,"row":{"sku":"a\u0000"}}`, "row/sku contains"},
		{"row key", "insert_data", `{"table":"items","autocommit":true,"row":{"sk\u0000u":"a"}}`, `the property name "sk\x00u" in row contains`},
		{"rows", "insert_data", `{"table":"items","autocommit":true,"rows":[{"sku":"a"},{"sku":"b\u0000"}]}`, "rows/1/sku contains"},
		{"set", "update_data", `{"table":"orders","set":{"status":"\u0000"},"where":"id = 1","autocommit":true}`, "set/status contains"},
		{"operations", "pg_transaction", `{"operations":[{"sql":"select 1"},{"sql":"select 2","params":["\u0000"]}]}`, "operations/1/params/0 contains"},
		{"operations params as a string", "pg_transaction", `{"operations":[{"sql":"select $1","params":"[\"\\u0000\"]"}]}`, "Operation 0 failed: Invalid arguments: params/0 contains"},
		{"several", "update_data", `{"table":"orders","set":{"status":"\u0000"},"where":"id = 1\u0000","autocommit":true}`, "set/status, where contain"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := b.mustFail(t, ErrInvalidArguments, c.tool, c.args)
			if !strings.Contains(e.Message, c.path) || !strings.Contains(e.Message, `a NUL character (\u0000), which PostgreSQL cannot accept in text`) {
				t.Fatalf("message %q does not name %q and the NUL character", e.Message, c.path)
			}
			if strings.ContainsRune(e.Message+e.Suggestion, 0) {
				t.Fatalf("the error itself carries a NUL: %q", e.Message)
			}
			if _, _, e := closed.Call(context.Background(), testPrincipal, c.tool, []byte(c.args)); e == nil || e.Type != ErrInvalidArguments {
				t.Fatalf("without a database: got %v, want invalid_arguments before any connection", e)
			}
		})
	}
}

// TestHugeValueCostIsBounded: a failed call with a 1 MiB value costs about what decoding it
// costs. Before, the value was copied into the message (the runner's memory grew with every such
// request) and masking compiled it into a regular expression, 460 MiB for one call. Not parallel,
// so other tests' allocations do not count.
func TestHugeValueCostIsBounded(t *testing.T) {
	reg := closedPortRegistry(t)
	for _, args := range []string{
		`{"table":"orders","session_id":"` + hugeValue + `"}`,
		`{"table":"orders","params":["` + hugeValue + `"],"limit":0}`,
		`{"table":"orders","` + hugeValue + `":1}`,
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, _, e := reg.Call(context.Background(), testPrincipal, "select_query", []byte(args))
		runtime.ReadMemStats(&after)
		if e == nil || e.Type != ErrInvalidArguments {
			t.Fatalf("got %v, want invalid_arguments", e)
		}
		assertNoEcho(t, e)
		if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
			t.Errorf("%.60s…: one call allocated %d MiB", args, n>>20)
		}
	}
}

// TestPostgresEchoesAreClipped: PostgreSQL's own messages quote the offending token whole
// (`syntax error at or near "<200 KB>"`); every failed call passes through clipEchoes, so the
// token comes back as a prefix, while names a real catalog can hold (63 bytes) stay whole.
func TestPostgresEchoesAreClipped(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	token := strings.Repeat("x", 200000)
	for _, c := range []struct{ tool, args string }{
		{"execute_sql", `{"sql":"` + token + `"}`},
		{"pg_transaction", `{"operations":[{"sql":"` + token + `"}]}`},
	} {
		e := b.mustFail(t, ErrSyntax, c.tool, c.args)
		assertNoEcho(t, e)
		if !strings.Contains(e.Message, `…" (200000 characters)`) {
			t.Errorf("%s: the cut is not marked: %s", c.tool, e.Message)
		}
	}
	name := strings.Repeat("n", 63)
	b.db.Exec(t, `CREATE TABLE `+name+` (id int); GRANT SELECT ON `+name+` TO `+quoteIdent(b.db.RoleName("agent")))
	e := b.mustFail(t, ErrInvalidColumn, "execute_sql", `{"sql":"select nope from `+name+`"}`)
	if got := words.ClipQuoted(`Table "` + name + `"`); got != `Table "`+name+`"` || strings.Contains(e.Message+e.Suggestion, "characters)") {
		t.Fatalf("a 63-byte name was cut: %q / %s", got, e.Message)
	}
}
