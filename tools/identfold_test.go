package tools

import (
	"strings"
	"testing"
)

// lookAlikeSQL makes tables and columns whose names differ from kv only in ways PostgreSQL does
// not ignore: a Kelvin sign (U+212A, which Unicode folds to k), upper case, a space inside a
// quoted name. Every row says which table it lives in.
const lookAlikeSQL = `
CREATE TABLE kv (id int PRIMARY KEY, kv text, "\u212Av" text, "Key" text, key text, tag text);
INSERT INTO kv VALUES (1, 'plain kv', 'kelvin column', 'upper Key', 'lower key', 'kv');
CREATE TABLE "\u212Av" (id int PRIMARY KEY, kv text, tag text);
INSERT INTO "\u212Av" VALUES (2, 'in kelvin table', 'kelvin');
CREATE TABLE "KV" (id int PRIMARY KEY, kv text, tag text);
INSERT INTO "KV" VALUES (3, 'in upper table', 'KV');
CREATE TABLE "Mixed Case" ("Id" int PRIMARY KEY, "Full Name" text, tag text);
INSERT INTO "Mixed Case" VALUES (4, 'mixed', 'Mixed Case');
`

// newLookAlikeBundle is a write bundle with the look-alike tables, writable by the agent role.
func newLookAlikeBundle(t *testing.T) *bundle {
	t.Helper()
	b, _ := newWriteBundle(t, Policy{})
	b.db.Exec(t, unescapeSQL(lookAlikeSQL))
	b.db.Exec(t, "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO "+quoteIdent(b.db.RoleName("agent")))
	return b
}

// unescapeSQL turns the \u212A escapes of the fixtures into the character, so the SQL text
// carries the real name (a Go raw string keeps the escape as written).
func unescapeSQL(s string) string { return strings.ReplaceAll(s, `\u212A`, "\u212A") }

// TestIdentifiersResolveAsPostgres: each spelling reads the relation and column PostgreSQL would
// read for it. Unquoted names fold A–Z only, quoted ones are verbatim, nothing is trimmed and no
// Unicode folding applies, so a Kelvin-sign table is not shadowed by kv (issue 12).
func TestIdentifiersResolveAsPostgres(t *testing.T) {
	t.Parallel()
	b := newLookAlikeBundle(t)
	cases := []struct {
		name      string
		table     string
		columns   any
		wantTag   string // the tag column of the one row read
		wantValue string // the first selected column's value, when set
	}{
		{"plain", "kv", "tag", "kv", ""},
		{"kelvin sign table", "\u212Av", "tag", "kelvin", ""},
		{"quoted kelvin sign table", `"` + "\u212Av" + `"`, "tag", "kelvin", ""},
		{"unquoted upper case folds", "KV", "tag", "kv", ""},
		{"quoted upper case is verbatim", `"KV"`, "tag", "KV", ""},
		{"qualified quoted", `public."KV"`, "tag", "KV", ""},
		{"quoted schema, unquoted table", `"public".Kv`, "tag", "kv", ""},
		{"quoted with a space", `"Mixed Case"`, `"Full Name", tag`, "Mixed Case", "mixed"},
		{"quoted column with a space in an array", `public."Mixed Case"`, []any{`"Full Name"`, "TAG"}, "Mixed Case", "mixed"},
		{"kelvin sign column", "kv", "\u212Av, tag", "kv", "kelvin column"},
		{"unquoted column folds", "kv", "Key,tag", "kv", "lower key"},
		{"quoted column is verbatim", "kv", `"Key", tag`, "kv", "upper Key"},
		{"ascii spaces separate list items", "kv", " kv ,\ttag ", "kv", "plain kv"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			out := b.mustCall(t, "select_query", argsJSON(t, map[string]any{"table": c.table, "columns": c.columns}))
			rs := rows(t, out)
			if len(rs) != 1 || rs[0]["tag"] != c.wantTag {
				t.Fatalf("read %v, want the row tagged %q", rs, c.wantTag)
			}
			if c.wantValue != "" {
				for k, v := range rs[0] {
					if k != "tag" && v != c.wantValue {
						t.Fatalf("column %q = %v, want %q", k, v, c.wantValue)
					}
				}
			}
		})
	}
	t.Run("order_by folds and keeps quotes", func(t *testing.T) {
		t.Parallel()
		out := b.mustCall(t, "select_query", `{"table":"kv","columns":"tag","order_by":"KEY desc, \"Key\" asc nulls last"}`)
		if rs := rows(t, out); len(rs) != 1 {
			t.Fatalf("unexpected: %v", out)
		}
	})
}

// TestLookAlikeIdentifiersRefused: names that only look like kv — a no-break space, an
// ideographic space, ASCII spaces around a single name, the Kelvin sign where no such table
// exists, an unquoted name with a space — are refused with kv (or the real name) suggested, for
// every identifier argument.
func TestLookAlikeIdentifiersRefused(t *testing.T) {
	t.Parallel()
	b := newLookAlikeBundle(t)
	b.db.Exec(t, `DROP TABLE "`+"\u212Av"+`"; ALTER TABLE kv DROP COLUMN "`+"\u212Av"+`"`)
	type tc struct {
		name, tool string
		args       map[string]any
		want       ErrorType
		suggest    string // must appear in the suggestion
	}
	var cases []tc
	for _, bad := range []string{"kv\u00A0", "\u3000kv", " kv", "kv ", "\u212Av", "kv\t", "public. kv", " public.kv"} {
		cases = append(cases,
			tc{"select table " + bad, "select_query", map[string]any{"table": bad}, ErrInvalidTable, `"kv"`},
			tc{"describe table " + bad, "describe_schema", map[string]any{"table": bad}, ErrInvalidTable, `"kv"`},
			tc{"insert table " + bad, "insert_data", map[string]any{"table": bad, "row": map[string]any{"id": 9}, "autocommit": true}, ErrInvalidTable, `"kv"`},
		)
	}
	for _, bad := range []string{"kv\u00A0", "\u3000kv", "\u212Av", "kv\u2003"} {
		cases = append(cases,
			tc{"columns string " + bad, "select_query", map[string]any{"table": "kv", "columns": "id, " + bad}, ErrInvalidColumn, `"kv"`},
			tc{"columns array " + bad, "select_query", map[string]any{"table": "kv", "columns": []any{"id", bad}}, ErrInvalidColumn, `"kv"`},
			tc{"order_by " + bad, "select_query", map[string]any{"table": "kv", "order_by": bad}, ErrInvalidColumn, `"kv"`},
			tc{"order_by with direction " + bad, "select_query", map[string]any{"table": "kv", "order_by": bad + " desc"}, ErrInvalidColumn, `"kv"`},
			tc{"row key " + bad, "insert_data", map[string]any{"table": "kv", "row": map[string]any{"id": 9, bad: "x"}, "autocommit": true}, ErrInvalidColumn, `"kv"`},
			tc{"returning " + bad, "insert_data", map[string]any{"table": "kv", "row": map[string]any{"id": 9}, "returning": bad, "autocommit": true}, ErrInvalidColumn, `"kv"`},
			tc{"set key " + bad, "update_data", map[string]any{"table": "kv", "set": map[string]any{bad: "x"}, "where": "id = 1", "autocommit": true}, ErrInvalidColumn, `"kv"`},
			tc{"on_conflict column " + bad, "insert_data", map[string]any{"table": "kv", "row": map[string]any{"id": 9, "kv": "x"},
				"on_conflict": map[string]any{"columns": []any{bad}, "action": "nothing"}, "autocommit": true}, ErrInvalidColumn, `"kv"`},
			tc{"on_conflict update column " + bad, "insert_data", map[string]any{"table": "kv", "row": map[string]any{"id": 9, "kv": "x"},
				"on_conflict": map[string]any{"columns": "id", "action": "update", "update_columns": bad}, "autocommit": true}, ErrInvalidColumn, `"kv"`},
			tc{"delete returning " + bad, "delete_data", map[string]any{"table": "kv", "where": "id = 1", "returning": []any{bad}, "autocommit": true}, ErrInvalidColumn, `"kv"`},
		)
	}
	cases = append(cases,
		tc{"unquoted name with a space", "select_query", map[string]any{"table": "Mixed Case"}, ErrInvalidTable, `"\"Mixed Case\""`},
		tc{"quoted name in the wrong case", "select_query", map[string]any{"table": `"mixed case"`}, ErrInvalidTable, `"\"Mixed Case\""`},
		tc{"unquoted column with a space", "select_query", map[string]any{"table": `"Mixed Case"`, "columns": "Full Name"}, ErrInvalidColumn, `"\"Full Name\""`},
		tc{"quoted column in the wrong case", "select_query", map[string]any{"table": "kv", "columns": `"KV"`}, ErrInvalidColumn, `"kv"`},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := b.refused(t, c.tool, argsJSON(t, c.args))
			if e.Type != c.want {
				t.Fatalf("got %s (%s), want %s", e.Type, e.Message, c.want)
			}
			if !strings.Contains(e.Suggestion, "Did you mean") || !strings.Contains(e.Suggestion, c.suggest) {
				t.Fatalf("suggestion does not name %s: %s", c.suggest, e.Suggestion)
			}
		})
	}
	b.countAtEnd(t, "SELECT count(*) FROM kv", 1, "a refused call wrote")
}

// TestLookAlikeNotShadowedBySearchPath: a Kelvin-sign table in public is read even when a kv
// table sits in a schema earlier on the role's search path (the "$user" schema), where PostgreSQL
// would never look for it under that name.
func TestLookAlikeNotShadowedBySearchPath(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	role := quoteIdent(b.db.RoleName("agent"))
	b.db.Exec(t, unescapeSQL(`CREATE SCHEMA `+role+`; GRANT USAGE ON SCHEMA `+role+` TO `+role+`;
		CREATE TABLE `+role+`.kv (tag text); INSERT INTO `+role+`.kv VALUES ('user schema kv');
		GRANT SELECT ON `+role+`.kv TO `+role+`;
		CREATE TABLE "\u212Av" (tag text); INSERT INTO "\u212Av" VALUES ('public kelvin')`))
	for name, want := range map[string]string{"\u212Av": "public kelvin", "kv": "user schema kv", "KV": "user schema kv"} {
		out := b.mustCall(t, "select_query", argsJSON(t, map[string]any{"table": name}))
		if rs := rows(t, out); len(rs) != 1 || rs[0]["tag"] != want {
			t.Errorf("%s read %v, want %q", name, rs, want)
		}
	}
}

// TestLookAlikeWrites: writes land in the table and column the name means, not in a look-alike.
func TestLookAlikeWrites(t *testing.T) {
	t.Parallel()
	b := newLookAlikeBundle(t)
	b.mustCall(t, "insert_data", argsJSON(t, map[string]any{"table": "\u212Av", "row": map[string]any{"id": 20, "tag": "new"}, "autocommit": true}))
	b.mustCall(t, "insert_data", argsJSON(t, map[string]any{"table": "kv", "row": map[string]any{"id": 21, "\u212Av": "kelvin value", "Key": "folded"}, "autocommit": true}))
	b.mustCall(t, "update_data", argsJSON(t, map[string]any{"table": "KV", "set": map[string]any{`"Key"`: "quoted"}, "where": "id = 21", "autocommit": true}))
	checks := map[string]int64{
		unescapeSQL(`SELECT count(*) FROM "\u212Av" WHERE id = 20`):                                        1,
		`SELECT count(*) FROM kv WHERE id = 20`:                                                            0,
		unescapeSQL(`SELECT count(*) FROM kv WHERE id = 21 AND "\u212Av" = 'kelvin value' AND kv IS NULL`): 1,
		`SELECT count(*) FROM kv WHERE id = 21 AND key = 'folded' AND "Key" = 'quoted'`:                    1,
		`SELECT count(*) FROM "KV"`:                                                                        1,
	}
	for q, want := range checks {
		if n := b.db.QueryInt(t, q); n != want {
			t.Errorf("%s = %d, want %d", q, n, want)
		}
	}
}
