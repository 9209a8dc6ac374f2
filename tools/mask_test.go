package tools

import (
	"strings"
	"testing"
)

// TestMaskSurvivesNameTransformations: a bound value that PostgreSQL reads as a name comes back
// changed — quotes removed, doubled quotes halved, case folded, split on dots, cut to 63 bytes —
// and must still be masked (issue 12). Each case asserts that no fragment of the secret reaches
// the model, on the read path, the write path and pg_transaction.
func TestMaskSurvivesNameTransformations(t *testing.T) {
	t.Parallel()
	b, _ := newWriteBundle(t, Policy{})
	role := quoteIdent(b.db.RoleName("agent"))
	b.db.Exec(t, "CREATE TABLE refs (id int PRIMARY KEY, rel regclass, typ regtype); GRANT SELECT, INSERT, UPDATE ON refs TO "+role)
	long := "Sk" + strings.Repeat("Hunter2Xyzzy", 7) // 86 bytes: PostgreSQL keeps the first 63
	longMB := strings.Repeat("Ünïcødé", 12)          // 108 bytes: cut on a character boundary
	cases := []struct {
		name    string
		tool    string
		args    map[string]any
		secrets []string // none may appear, in any case
	}{
		{"quotes removed", "execute_sql", map[string]any{"sql": "select $1::regclass", "params": []any{`public."Hunter2Password"`}},
			[]string{"Hunter2Password"}},
		{"schema split off", "execute_sql", map[string]any{"sql": "select $1::regclass", "params": []any{"acme_4111111111111111.x"}},
			[]string{"4111111111111111"}},
		{"quoted schema split off", "execute_sql", map[string]any{"sql": "select $1::regclass", "params": []any{`"Acme 4111111111111111"."T"`}},
			[]string{"4111111111111111"}},
		{"truncated to 63 bytes", "execute_sql", map[string]any{"sql": "select $1::regclass", "params": []any{long}},
			[]string{long[:20], long[40:60]}},
		{"multibyte truncated", "execute_sql", map[string]any{"sql": "select $1::regclass", "params": []any{longMB}},
			[]string{"Ünïcødé"}},
		{"truncated and qualified", "execute_sql", map[string]any{"sql": "select $1::regclass", "params": []any{long + ".x.y"}},
			[]string{long[:20], long[40:60]}},
		{"doubled quotes halved", "execute_sql", map[string]any{"sql": "select $1::regclass", "params": []any{`"My""Secret""Rel"`}},
			[]string{"Secret"}},
		{"case folded", "execute_sql", map[string]any{"sql": "select $1::regclass", "params": []any{"PUBLIC.TopSecretRel"}},
			[]string{"TopSecretRel"}},
		{"whitespace around parts dropped", "execute_sql", map[string]any{"sql": "select $1::regclass", "params": []any{` "Hidden Schema" . rel `}},
			[]string{"Hidden Schema"}},
		{"type in an operator signature", "execute_sql", map[string]any{"sql": "select $1::regoperator", "params": []any{"+(int4, SecretType)"}},
			[]string{"SecretType"}},
		{"regtype schema", "execute_sql", map[string]any{"sql": "select $1::regtype", "params": []any{"Vault9876.TypeName"}},
			[]string{"Vault9876"}},
		{"regclass column on insert", "insert_data", map[string]any{"table": "refs", "row": map[string]any{"id": 1, "rel": `public."Hunter2Password"`}, "autocommit": true},
			[]string{"Hunter2Password"}},
		{"regtype column on update", "update_data", map[string]any{"table": "refs", "set": map[string]any{"typ": `"SecretSchema".t`}, "where": "true", "autocommit": true},
			[]string{"SecretSchema"}},
		{"pg_transaction params", "pg_transaction", map[string]any{"operations": []any{
			map[string]any{"sql": "select $1::regclass", "params": []any{"vault_4111111111111111.accounts"}}}},
			[]string{"4111111111111111"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := b.refused(t, c.tool, argsJSON(t, c.args))
			text := strings.ToLower(errorJSON(t, e))
			for _, s := range c.secrets {
				if strings.Contains(text, strings.ToLower(s)) {
					t.Fatalf("the error echoes %q: %s", s, errorJSON(t, e))
				}
			}
			if !strings.Contains(text, "***") {
				t.Fatalf("nothing masked: %s", errorJSON(t, e))
			}
		})
	}
}

// TestMaskKeepsShortAndUnrelatedNames: names shorter than four characters and names a value
// merely mentions stay readable, so the model still learns which object is missing.
func TestMaskKeepsShortAndUnrelatedNames(t *testing.T) {
	t.Parallel()
	b := newBundle(t, Policy{})
	for _, c := range []struct {
		name, sql string
		params    []any
		want      string // must appear in the message
	}{
		{"short value", "select $1::regclass", []any{"zq"}, `"zq"`},
		// regtype, not regclass: from PostgreSQL 16 a regclass names the whole missing relation,
		// never its schema alone; regtype still does on every supported major.
		{"short schema of a longer value", "select $1::regtype", []any{"zz.secrettype"}, `"zz"`},
		{"column named in free text", "select nosuch_col, $1::text from orders", []any{"please check nosuch and more"}, `"nosuch_col"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := b.refused(t, "execute_sql", argsJSON(t, map[string]any{"sql": c.sql, "params": c.params}))
			if !strings.Contains(e.Message, c.want) {
				t.Fatalf("message lost %s: %s", c.want, errorJSON(t, e))
			}
		})
	}
}

// TestRedactValueForms pins the rules on messages as PostgreSQL writes them: which quoted names
// count as a transformed value and which stay.
func TestRedactValueForms(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("abcdefghij", 8)
	cases := []redactCase{
		{"quotes removed", `{"params":["public.\"Hunter2Password\""]}`, `Relation "public.Hunter2Password" does not exist`, `Relation "***" does not exist`},
		{"schema part", `{"params":["acme_4111111111111111.x"]}`, `Schema "acme_4111111111111111" does not exist`, `Schema "***" does not exist`},
		{"truncated", `{"params":["` + long + `"]}`, `Relation "` + long[:63] + `" does not exist`, `Relation "***" does not exist`},
		{"truncated, other NAMEDATALEN", `{"params":["` + long + `"]}`, `Relation "` + long[:40] + `" does not exist`, `Relation "***" does not exist`},
		{"doubled quotes", `{"params":["\"a\"\"Secret\"\"b\""]}`, `Relation "a"Secret"b" does not exist`, `Relation "***" does not exist`},
		{"unquoted echo of a parsed name", `{"params":["A.\"Bee Cee\".Dee4"]}`, `cross-database references are not implemented: "a.Bee Cee.dee4"`, `cross-database references are not implemented: "***"`},
		{"signature token", `{"params":["+(int4,SecretType)"]}`, `type "secrettype" does not exist`, `type "***" does not exist`},
		{"short parts stay", `{"params":["ab.cd"]}`, `schema "ab" does not exist`, `schema "ab" does not exist`},
		{"prefix too short to be a cut", `{"params":["orders_with_more_text"]}`, `relation "orders" is locked`, `relation "orders" is locked`},
		{"free text is not split into names", `{"row":{"note":"check the status soon"}}`, `null value in column "status" violates`, `null value in column "status" violates`},
		{"three-character value", `{"params":["abc"]}`, `relation "abc" does not exist`, `relation "abc" does not exist`},
	}
	checkRedactions(t, cases)
}
