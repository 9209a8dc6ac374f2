package schemas

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const (
	draft2020 = "https://json-schema.org/draft/2020-12/schema"
	idPrefix  = "https://pgtools.dev/schemas/"
	uuid      = "3f2b8c1e-9a4d-4e7b-8c2a-1d5e6f7a8b9c"
)

// compile compiles one schema document the way the runner does: through
// jsonschema.UnmarshalJSON (json.Number for numbers) and AddResource.
func compile(tb testing.TB, url string, raw []byte) *jsonschema.Schema {
	tb.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		tb.Fatalf("%s: parse: %v", url, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(url, doc); err != nil {
		tb.Fatalf("%s: add resource: %v", url, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		tb.Fatalf("%s: compile: %v", url, err)
	}
	return sch
}

// toolSchema returns the compiled schema of a tool.
func toolSchema(tb testing.TB, name string) *jsonschema.Schema {
	tb.Helper()
	raw, ok := Validation(name)
	if !ok {
		tb.Fatalf("Validation(%q) not found", name)
	}
	return compile(tb, idPrefix+name+".json", raw)
}

// decode parses a schema into a generic map for structural checks.
func decode(tb testing.TB, raw []byte) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		tb.Fatalf("decode: %v", err)
	}
	return m
}

// TestToolNames checks the list read from the files: every tool file once, each named as its
// file, in the order of their "order" values, which are distinct (the canonical order itself is
// pinned where it is served: tools' TestToolsFor).
func TestToolNames(t *testing.T) {
	t.Parallel()
	names := ToolNames()
	if len(names) == 0 {
		t.Fatal("ToolNames() is empty")
	}
	orders := map[int]string{}
	last := 0
	for _, name := range names {
		meta := readMeta(name)
		if meta.Name != name {
			t.Errorf("%s.json: %s.name = %q, want the file's name", name, metaKey, meta.Name)
		}
		if other, dup := orders[meta.Order]; dup {
			t.Errorf("%s.json: %s.order %d is also %s's", name, metaKey, meta.Order, other)
		}
		orders[meta.Order] = name
		if meta.Order <= last {
			t.Errorf("%s (order %d) comes after order %d", name, meta.Order, last)
		}
		last = meta.Order
	}
	// The result is a fresh slice: changing it must not change the next one.
	first := names[0]
	ToolNames()[0] = "changed"
	if ToolNames()[0] != first {
		t.Fatal("ToolNames returns shared state")
	}
}

func TestTool(t *testing.T) {
	t.Parallel()
	for _, name := range ToolNames() {
		raw, ok := Tool(name)
		if !ok || len(raw) == 0 {
			t.Errorf("Tool(%q) = %d bytes, %v", name, len(raw), ok)
		}
	}
	for _, name := range []string{"", "config.schema", "config", "SELECT_QUERY", "select_query.json", "../select_query", "unknown"} {
		if raw, ok := Tool(name); ok || raw != nil {
			t.Errorf("Tool(%q) = %d bytes, %v; want nil, false", name, len(raw), ok)
		}
	}
	// Callers get a copy: modifying it leaves the embedded schema intact.
	raw, _ := Tool("pg_tx")
	raw[0] = 'x'
	if again, _ := Tool("pg_tx"); again[0] != '{' {
		t.Fatal("Tool returns shared bytes")
	}
}

// TestEmbeddedFiles checks that every embedded file is a tool schema or the
// config schema, so a stray or misnamed file cannot hide.
func TestEmbeddedFiles(t *testing.T) {
	t.Parallel()
	got, err := fs.Glob(files, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, n := range ToolNames() {
		want = append(want, n+".json")
	}
	want = append(want, configFile)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("embedded files = %v, want %v", got, want)
	}
}

func TestCompile(t *testing.T) {
	t.Parallel()
	for _, name := range ToolNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			toolSchema(t, name)
		})
	}
	t.Run("config", func(t *testing.T) {
		t.Parallel()
		compile(t, idPrefix+configFile, Config())
	})
}

// TestToolConventions pins the rules every tool schema follows: header
// fields, a closed top-level object, the common database property and a
// description on every property.
func TestToolConventions(t *testing.T) {
	t.Parallel()
	for _, name := range ToolNames() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// The conventions hold for the file, the source; Tool serves it without its header.
			m := decode(t, mustRead(name+".json"))
			checks := map[string]any{
				"$schema":              draft2020,
				"$id":                  idPrefix + name + ".json",
				"title":                name,
				"type":                 "object",
				"additionalProperties": false,
			}
			for k, want := range checks {
				if m[k] != want {
					t.Errorf("%s = %v, want %v", k, m[k], want)
				}
			}
			desc, _ := m["description"].(string)
			if len(desc) < 60 || len(desc) > 600 {
				t.Errorf("description has %d characters, want 60..600: %q", len(desc), desc)
			}
			if n := strings.Count(desc, ". ") + 1; n > 3 {
				t.Errorf("description has %d sentences, want at most 3", n)
			}
			props, _ := m["properties"].(map[string]any)
			db, _ := props["database"].(map[string]any)
			if db["type"] != "string" || db["default"] != "default" || db["minLength"] != 1.0 {
				t.Errorf("database property = %v", db)
			}
			checkDescriptions(t, m, "")
		})
	}
}

// checkDescriptions reports every property, at any depth reachable through
// properties, items, additionalProperties, $defs and anyOf/oneOf branches,
// that lacks a non-empty description. Conditional subschemas (if, then) only
// restate properties and are skipped.
func checkDescriptions(tb testing.TB, node map[string]any, ptr string) {
	tb.Helper()
	if props, ok := node["properties"].(map[string]any); ok {
		for k, v := range props {
			p, _ := v.(map[string]any)
			if d, _ := p["description"].(string); strings.TrimSpace(d) == "" {
				tb.Errorf("%s/properties/%s has no description", ptr, k)
			}
			checkDescriptions(tb, p, ptr+"/properties/"+k)
		}
	}
	for _, kw := range []string{"items", "additionalProperties"} {
		if sub, ok := node[kw].(map[string]any); ok {
			checkDescriptions(tb, sub, ptr+"/"+kw)
		}
	}
	if defs, ok := node["$defs"].(map[string]any); ok {
		for k, v := range defs {
			sub, _ := v.(map[string]any)
			checkDescriptions(tb, sub, ptr+"/$defs/"+k)
		}
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		if arr, ok := node[kw].([]any); ok {
			for _, v := range arr {
				if sub, ok := v.(map[string]any); ok {
					checkDescriptions(tb, sub, ptr+"/"+kw)
				}
			}
		}
	}
}

// openObjects returns the JSON pointers of every object schema that does not
// set additionalProperties, i.e. accepts arbitrary keys.
func openObjects(node map[string]any, ptr string) []string {
	var out []string
	if node["type"] == "object" {
		if _, ok := node["additionalProperties"]; !ok {
			out = append(out, ptr)
		}
	}
	for k, v := range node {
		switch v := v.(type) {
		case map[string]any:
			out = append(out, openObjects(v, ptr+"/"+k)...)
		case []any:
			for _, e := range v {
				if sub, ok := e.(map[string]any); ok {
					out = append(out, openObjects(sub, ptr+"/"+k)...)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestClosedObjects checks that only the column: value objects (and, in the
// config, the operator's fixed claims, whose names are the operator's)
// accept arbitrary keys; every other object rejects unknown properties.
func TestClosedObjects(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"insert_data": {"/properties/row", "/properties/rows/items"},
		"update_data": {"/properties/set"},
		"config":      {"/$defs/token/properties/act_as_claims"},
	}
	for _, name := range append(ToolNames(), "config") {
		raw, ok := Tool(name)
		if name == "config" {
			raw, ok = Config(), true
		}
		if !ok {
			t.Fatalf("no schema %q", name)
		}
		if got := openObjects(decode(t, raw), ""); !slices.Equal(got, want[name]) {
			t.Errorf("%s: open objects = %v, want %v", name, got, want[name])
		}
	}
}

func TestConfigConventions(t *testing.T) {
	t.Parallel()
	m := decode(t, Config())
	if m["$schema"] != draft2020 || m["$id"] != idPrefix+configFile || m["additionalProperties"] != false {
		t.Errorf("config header = %v %v %v", m["$schema"], m["$id"], m["additionalProperties"])
	}
	checkDescriptions(t, m, "")

	// The policy's list of tools must stay in step with ToolNames.
	defs := m["$defs"].(map[string]any)
	policy := defs["policy"].(map[string]any)["properties"].(map[string]any)
	var enum []string
	for _, v := range policy["disabled_tools"].(map[string]any)["items"].(map[string]any)["enum"].([]any) {
		enum = append(enum, v.(string))
	}
	if !slices.Equal(enum, ToolNames()) {
		t.Errorf("disabled_tools enum = %v, want %v", enum, ToolNames())
	}
}

// validationCase is one argument document and whether the schema accepts it.
type validationCase struct {
	name  string
	doc   string
	valid bool
}

func runCases(t *testing.T, sch *jsonschema.Schema, cases []validationCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(tc.doc))
			if err != nil {
				t.Fatalf("bad test document %s: %v", tc.doc, err)
			}
			err = sch.Validate(doc)
			if tc.valid && err != nil {
				t.Errorf("want valid, got %v", err)
			}
			if !tc.valid && err == nil {
				t.Errorf("want invalid, got valid: %s", tc.doc)
			}
		})
	}
}

func TestToolArguments(t *testing.T) {
	t.Parallel()
	cases := map[string][]validationCase{
		"select_query": {
			{"minimal", `{"table":"orders"}`, true},
			{"qualified table", `{"table":"sales.orders","database":"analytics"}`, true},
			{"full", `{"table":"orders","columns":["id","total"],"where":"status = $1 AND total > $2","params":["shipped",100],"order_by":"created_at desc, id","limit":50,"offset":100,"session_id":"` + uuid + `"}`, true},
			{"columns as string", `{"table":"orders","columns":"id, total"}`, true},
			{"params as string", `{"table":"orders","where":"id = $1","params":"[1, \"a\", null, true, {\"k\": 1}]"}`, true},
			{"params of every type", `{"table":"orders","params":[1, 1.5, "x", true, null, {"a": 1}, [1, 2]]}`, true},
			{"empty params string", `{"table":"orders","params":""}`, true},
			{"uppercase uuid", `{"table":"orders","session_id":"3F2B8C1E-9A4D-4E7B-8C2A-1D5E6F7A8B9C"}`, true},
			{"large limit is the handler's call", `{"table":"orders","limit":1000000}`, true},
			{"integral float limit", `{"table":"orders","limit":10.0}`, true},
			{"missing table", `{"columns":"id"}`, false},
			{"empty table", `{"table":""}`, false},
			{"unknown property", `{"table":"orders","filter":"id = 1"}`, false},
			{"limit 0", `{"table":"orders","limit":0}`, false},
			{"negative offset", `{"table":"orders","offset":-1}`, false},
			{"fractional limit", `{"table":"orders","limit":1.5}`, false},
			{"limit as string", `{"table":"orders","limit":"10"}`, false},
			{"columns as number", `{"table":"orders","columns":5}`, false},
			{"empty column name", `{"table":"orders","columns":["id",""]}`, false},
			{"non-string column", `{"table":"orders","columns":["id",1]}`, false},
			{"params as object", `{"table":"orders","params":{"a":1}}`, false},
			{"params string not an array", `{"table":"orders","params":"42"}`, false},
			{"bad session id", `{"table":"orders","session_id":"abc"}`, false},
			{"session id with braces", `{"table":"orders","session_id":"{` + uuid + `}"}`, false},
			{"empty database", `{"table":"orders","database":""}`, false},
			{"database as number", `{"table":"orders","database":1}`, false},
			{"not an object", `["orders"]`, false},
		},
		"insert_data": {
			{"one row", `{"table":"users","row":{"name":"Ann"},"autocommit":true}`, true},
			{"many rows", `{"table":"users","rows":[{"name":"Ann"},{"name":"Bob"}],"session_id":"` + uuid + `"}`, true},
			{"upsert", `{"table":"users","row":{"email":"a@b.c"},"returning":"id","on_conflict":{"columns":"email","action":"update","update_columns":["name"]}}`, true},
			{"on conflict nothing", `{"table":"users","rows":[{"email":"a@b.c"}],"on_conflict":{"columns":["tenant_id","email"],"action":"nothing"}}`, true},
			{"returning array", `{"table":"users","row":{"a":1},"returning":["id","created_at"]}`, true},
			// Exactly one of row and rows is the handler's rule (a top-level oneOf is flattened
			// by agent frameworks), so both shapes pass the schema.
			{"neither row nor rows", `{"table":"users","autocommit":true}`, true},
			{"both row and rows", `{"table":"users","row":{"a":1},"rows":[{"a":2}]}`, true},
			{"empty rows", `{"table":"users","rows":[]}`, false},
			{"rows not objects", `{"table":"users","rows":[1,2]}`, false},
			{"row as array", `{"table":"users","row":[{"a":1}]}`, false},
			{"missing table", `{"row":{"a":1}}`, false},
			{"bad action", `{"table":"users","row":{"a":1},"on_conflict":{"columns":"email","action":"replace"}}`, false},
			{"conflict without columns", `{"table":"users","row":{"a":1},"on_conflict":{"action":"nothing"}}`, false},
			{"conflict without action", `{"table":"users","row":{"a":1},"on_conflict":{"columns":"email"}}`, false},
			{"conflict empty columns", `{"table":"users","row":{"a":1},"on_conflict":{"columns":[],"action":"nothing"}}`, false},
			{"conflict blank columns", `{"table":"users","row":{"a":1},"on_conflict":{"columns":"  ","action":"nothing"}}`, false},
			{"conflict unknown property", `{"table":"users","row":{"a":1},"on_conflict":{"columns":"email","action":"nothing","where":"x"}}`, false},
			{"autocommit as string", `{"table":"users","row":{"a":1},"autocommit":"true"}`, false},
			{"unknown property", `{"table":"users","row":{"a":1},"dry_run":true}`, false},
		},
		"update_data": {
			{"minimal", `{"table":"orders","set":{"status":"shipped"},"where":"id = $1","params":[7],"autocommit":true}`, true},
			{"full", `{"table":"orders","set":{"status":"shipped","note":null},"where":"id = $1","params":"[7]","returning":"id,status","dry_run":true,"max_affected_rows":10,"session_id":"` + uuid + `","database":"default"}`, true},
			{"missing where", `{"table":"orders","set":{"status":"x"}}`, false},
			{"empty where", `{"table":"orders","set":{"status":"x"},"where":""}`, false},
			{"blank where", `{"table":"orders","set":{"status":"x"},"where":" \n\t "}`, false},
			{"missing set", `{"table":"orders","where":"id = 1"}`, false},
			{"empty set", `{"table":"orders","set":{},"where":"id = 1"}`, false},
			{"set as string", `{"table":"orders","set":"status = 'x'","where":"id = 1"}`, false},
			{"max_affected_rows 0", `{"table":"orders","set":{"a":1},"where":"id = 1","max_affected_rows":0}`, false},
			{"dry_run as string", `{"table":"orders","set":{"a":1},"where":"id = 1","dry_run":"yes"}`, false},
			{"unknown property", `{"table":"orders","set":{"a":1},"where":"id = 1","limit":1}`, false},
		},
		"delete_data": {
			{"minimal", `{"table":"orders","where":"id = $1","params":[7],"autocommit":true}`, true},
			{"full", `{"table":"sales.orders","where":"created_at < $1","params":["2020-01-01"],"returning":["id"],"dry_run":true,"max_affected_rows":500,"session_id":"` + uuid + `"}`, true},
			{"missing where", `{"table":"orders"}`, false},
			{"empty where", `{"table":"orders","where":""}`, false},
			{"blank where", `{"table":"orders","where":"   "}`, false},
			{"missing table", `{"where":"id = 1"}`, false},
			{"max_affected_rows negative", `{"table":"orders","where":"id = 1","max_affected_rows":-5}`, false},
			{"where as boolean", `{"table":"orders","where":true}`, false},
			{"unknown property", `{"table":"orders","where":"id = 1","set":{"a":1}}`, false},
		},
		"execute_sql": {
			{"minimal", `{"sql":"SELECT 1"}`, true},
			{"write", `{"sql":"UPDATE t SET a = $1","params":[1],"mode":"write","autocommit":true}`, true},
			{"destructive", `{"sql":"DROP TABLE t","mode":"write","confirm_destructive":true,"session_id":"` + uuid + `"}`, true},
			{"missing sql", `{"mode":"read"}`, false},
			{"empty sql", `{"sql":""}`, false},
			{"blank sql", `{"sql":"  \n "}`, false},
			{"bad mode", `{"sql":"SELECT 1","mode":"admin"}`, false},
			{"confirm as string", `{"sql":"SELECT 1","confirm_destructive":"true"}`, false},
			{"unknown property", `{"sql":"SELECT 1","query":"SELECT 2"}`, false},
		},
		"describe_schema": {
			{"empty", `{}`, true},
			{"table", `{"table":"orders"}`, true},
			{"schema and table", `{"schema":"sales","table":"orders","database":"analytics"}`, true},
			{"empty table", `{"table":""}`, false},
			{"empty schema", `{"schema":""}`, false},
			{"unknown property", `{"columns":"id"}`, false},
		},
		"pg_tx": {
			{"begin", `{"action":"begin"}`, true},
			{"begin full", `{"action":"begin","isolation_level":"serializable","read_only":true,"database":"default"}`, true},
			{"list", `{"action":"list"}`, true},
			{"commit", `{"action":"commit","session_id":"` + uuid + `"}`, true},
			{"rollback", `{"action":"rollback","session_id":"` + uuid + `"}`, true},
			{"savepoint", `{"action":"savepoint","session_id":"` + uuid + `","name":"before_update"}`, true},
			{"release", `{"action":"release","session_id":"` + uuid + `","name":"_sp1"}`, true},
			{"rollback_to", `{"action":"rollback_to","session_id":"` + uuid + `","name":"sp"}`, true},
			{"missing action", `{"session_id":"` + uuid + `"}`, false},
			{"bad action", `{"action":"abort","session_id":"` + uuid + `"}`, false},
			// session_id and name per action are the handler's rules, not the schema's (no top-level if/then).
			{"commit without session", `{"action":"commit"}`, true},
			{"rollback without session", `{"action":"rollback"}`, true},
			{"savepoint without name", `{"action":"savepoint","session_id":"` + uuid + `"}`, true},
			{"release without session", `{"action":"release","name":"sp"}`, true},
			{"rollback_to without name", `{"action":"rollback_to","session_id":"` + uuid + `"}`, true},
			{"name starting with digit", `{"action":"savepoint","session_id":"` + uuid + `","name":"1sp"}`, false},
			{"name with quote", `{"action":"savepoint","session_id":"` + uuid + `","name":"sp\"; drop"}`, false},
			{"name too long", `{"action":"savepoint","session_id":"` + uuid + `","name":"` + strings.Repeat("a", 64) + `"}`, false},
			{"bad isolation", `{"action":"begin","isolation_level":"read uncommitted"}`, false},
			{"read_only as string", `{"action":"begin","read_only":"true"}`, false},
			{"bad session id", `{"action":"commit","session_id":"3f2b8c1e9a4d4e7b8c2a1d5e6f7a8b9c"}`, false},
			{"unknown property", `{"action":"begin","timeout":5}`, false},
		},
		"explain_query": {
			{"sql", `{"sql":"select * from orders where id = $1","params":[1]}`, true},
			{"params as string", `{"sql":"select $1","params":"[1]","database":"default"}`, true},
			{"missing sql", `{"params":[1]}`, false},
			{"blank sql", `{"sql":"  "}`, false},
			{"session_id", `{"sql":"select 1","session_id":"` + uuid + `"}`, false},
			{"verbose", `{"sql":"select 1","verbose":true}`, false},
		},
		"pg_transaction": {
			{"one", `{"operations":[{"sql":"SELECT 1"}]}`, true},
			{"full", `{"operations":[{"sql":"UPDATE a SET b = b - $1 WHERE id = $2","params":[100,1]},{"sql":"UPDATE a SET b = b + $1 WHERE id = $2","params":"[100,2]"}],"action":"transaction","database":"default"}`, true},
			{"hundred", `{"operations":[` + repeatOps(100) + `]}`, true},
			{"hundred and one", `{"operations":[` + repeatOps(101) + `]}`, false},
			{"missing operations", `{"action":"transaction"}`, false},
			{"empty operations", `{"operations":[]}`, false},
			{"operation without sql", `{"operations":[{"params":[1]}]}`, false},
			{"blank sql", `{"operations":[{"sql":" "}]}`, false},
			{"operation as string", `{"operations":["SELECT 1"]}`, false},
			{"operation unknown property", `{"operations":[{"sql":"SELECT 1","mode":"write"}]}`, false},
			{"bad action", `{"operations":[{"sql":"SELECT 1"}],"action":"batch"}`, false},
			{"unknown property", `{"operations":[{"sql":"SELECT 1"}],"session_id":"` + uuid + `"}`, false},
		},
	}
	for _, name := range ToolNames() {
		if len(cases[name]) == 0 {
			t.Errorf("no cases for %s", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runCases(t, toolSchema(t, name), cases[name])
		})
	}
}

// repeatOps returns n comma-separated pg_transaction operations.
func repeatOps(n int) string {
	ops := make([]string, n)
	for i := range ops {
		ops[i] = `{"sql":"SELECT 1"}`
	}
	return strings.Join(ops, ",")
}

func TestConfigDocuments(t *testing.T) {
	t.Parallel()
	const db = `"databases":{"default":{"url":"postgres://pgtools@localhost/app"}}`
	runCases(t, compile(t, idPrefix+configFile, Config()), []validationCase{
		{"minimal", `{` + db + `}`, true},
		{"full", `{
			"$schema": "https://pgtools.dev/schemas/config.schema.json",
			"listen": "0.0.0.0:8080",
			"metrics_listen": "0.0.0.0:9187",
			"openapi_public": true,
			"tokens": [
				{"name": "n8n", "token": "0123456789abcdef", "scopes": ["read", "write"], "databases": ["default"], "max_response_bytes": 65536},
				{"name": "ops@example", "token_file": "/run/secrets/ops", "scopes": ["read", "write", "ddl"]}
			],
			"databases": {
				"default": {"url_file": "/run/secrets/db", "password_file": "/run/secrets/db-password", "max_conns": 20, "policy": {
					"read_only": false, "allow_ddl": true, "allowed_schemas": ["public", "sales"],
					"allow_tables": ["orders", "sales.customers"], "deny_tables": ["secrets"], "table_lists": "advisory",
					"default_limit": 100, "max_limit": 5000, "max_response_bytes": 1048576,
					"statement_timeout_ms": 10000, "lock_timeout_ms": 1000, "transaction_timeout_ms": 15000, "pool_wait_ms": 2000, "max_affected_rows": 50,
					"disabled_tools": ["execute_sql"], "mask_error_values": false, "prepared_statements": false}},
				"analytics_2": {"url": "host=db dbname=analytics", "policy": {"read_only": true}}
			},
			"sessions": {"max_sessions": 5, "max_sessions_per_principal": 2, "max_transactions": 8, "max_transactions_per_principal": 3,
				"max_sessions_per_subject": 1, "max_transactions_per_subject": 2, "ttl_seconds": 600},
			"limits": {"max_body_bytes": 2048, "rate_per_second": 0.5, "burst": 5, "max_concurrent_per_token": 4, "max_concurrent_per_subject": 2},
			"shutdown": {"drain_delay_seconds": 2.5, "grace_seconds": 0},
			"audit_log": "-",
			"log_level": "debug"
		}`, true},
		{"no databases", `{"listen":"127.0.0.1:8080"}`, false},
		{"empty databases", `{"databases":{}}`, false},
		{"bad database name", `{"databases":{"Prod-DB":{"url":"postgres://x"}}}`, false},
		{"database without url", `{"databases":{"default":{"max_conns":5}}}`, false},
		{"database with url and url_file", `{"databases":{"default":{"url":"postgres://x","url_file":"/f"}}}`, false},
		{"unknown top-level key", `{` + db + `,"port":8080}`, false},
		{"unknown database key", `{"databases":{"default":{"url":"postgres://x","dsn":"y"}}}`, false},
		{"unknown policy key", `{"databases":{"default":{"url":"postgres://x","policy":{"allow_drop":true}}}}`, false},
		{"max_conns 0", `{"databases":{"default":{"url":"postgres://x","max_conns":0}}}`, false},
		{"small response cap", `{"databases":{"default":{"url":"postgres://x","policy":{"max_response_bytes":100}}}}`, false},
		{"unknown table_lists", `{"databases":{"default":{"url":"postgres://x","policy":{"table_lists":"off"}}}}`, false},
		{"unknown disabled tool", `{"databases":{"default":{"url":"postgres://x","policy":{"disabled_tools":["drop_table"]}}}}`, false},
		{"short token", `{` + db + `,"tokens":[{"name":"a","token":"short","scopes":["read"]}]}`, false},
		{"token and token_file", `{` + db + `,"tokens":[{"name":"a","token":"0123456789abcdef","token_file":"/f","scopes":["read"]}]}`, false},
		{"token without secret", `{` + db + `,"tokens":[{"name":"a","scopes":["read"]}]}`, false},
		{"token without scopes", `{` + db + `,"tokens":[{"name":"a","token":"0123456789abcdef"}]}`, false},
		{"token empty scopes", `{` + db + `,"tokens":[{"name":"a","token":"0123456789abcdef","scopes":[]}]}`, false},
		{"token bad scope", `{` + db + `,"tokens":[{"name":"a","token":"0123456789abcdef","scopes":["admin"]}]}`, false},
		{"token without name", `{` + db + `,"tokens":[{"token":"0123456789abcdef","scopes":["read"]}]}`, false},
		{"zero rate", `{` + db + `,"limits":{"rate_per_second":0}}`, false},
		{"small body limit", `{` + db + `,"limits":{"max_body_bytes":10}}`, false},
		{"zero ttl", `{` + db + `,"sessions":{"ttl_seconds":0}}`, false},
		{"unknown sessions key", `{` + db + `,"sessions":{"max":1}}`, false},
		{"zero sessions per principal", `{` + db + `,"sessions":{"max_sessions_per_principal":0}}`, false},
		{"zero transactions", `{` + db + `,"sessions":{"max_transactions":0}}`, false},
		{"zero sessions per subject", `{` + db + `,"sessions":{"max_sessions_per_subject":0}}`, false},
		{"zero transactions per subject", `{` + db + `,"sessions":{"max_transactions_per_subject":0}}`, false},
		{"zero concurrency per subject", `{` + db + `,"limits":{"max_concurrent_per_subject":0}}`, false},
		{"transaction_timeout_ms 0", `{"databases":{"default":{"url":"postgres://x","policy":{"transaction_timeout_ms":0}}}}`, false},
		{"small token response cap", `{` + db + `,"tokens":[{"name":"a","token":"0123456789abcdef","scopes":["read"],"max_response_bytes":10}]}`, false},
		{"bad log level", `{` + db + `,"log_level":"trace"}`, false},
		{"empty audit log", `{` + db + `,"audit_log":""}`, false},
		{"negative drain delay", `{` + db + `,"shutdown":{"drain_delay_seconds":-1}}`, false},
		{"unknown shutdown key", `{` + db + `,"shutdown":{"grace":5}}`, false},
		{"empty password_file", `{"databases":{"default":{"url":"postgres://x","password_file":""}}}`, false},
		{"pool_wait_ms 0", `{"databases":{"default":{"url":"postgres://x","policy":{"pool_wait_ms":0}}}}`, false},
		{"empty metrics_listen", `{` + db + `,"metrics_listen":""}`, false},
		{"openapi_public not a boolean", `{` + db + `,"openapi_public":"yes"}`, false},
		{"approval rules", `{"databases":{"default":{"url":"postgres://x","policy":{"require_approval":[{"when":"rows_over","rows":100},{"when":"ddl"},{"when":"destructive"},{"when":"table","table":"public.orders"},{"when":"tool","tool":"delete_data"}]}}},
			"tokens":[{"name":"boss","token":"0123456789abcdef","scopes":["approve"],"require_approval":[{"when":"rows_over","rows":0}]}],"approvals":{"ttl_seconds":60,"max_pending":5}}`, true},
		{"unknown approval kind", `{"databases":{"default":{"url":"postgres://x","policy":{"require_approval":[{"when":"often"}]}}}}`, false},
		{"approval rule without when", `{"databases":{"default":{"url":"postgres://x","policy":{"require_approval":[{"rows":3}]}}}}`, false},
		{"approval rule negative rows", `{"databases":{"default":{"url":"postgres://x","policy":{"require_approval":[{"when":"rows_over","rows":-1}]}}}}`, false},
		{"approvals zero ttl", `{` + db + `,"approvals":{"ttl_seconds":0}}`, false},
		{"approvals unknown key", `{` + db + `,"approvals":{"ttl":5}}`, false},
		{"allowed origins", `{` + db + `,"mcp":{"allowed_origins":["https://app.example.com","http://localhost:3000","https://[::1]:8443/"]}}`, true},
		{"allowed origin with a path", `{` + db + `,"mcp":{"allowed_origins":["https://app.example.com/app"]}}`, false},
		{"allowed origin wildcard", `{` + db + `,"mcp":{"allowed_origins":["*"]}}`, false},
		{"allowed origin wildcard host", `{` + db + `,"mcp":{"allowed_origins":["https://*.example.com"]}}`, false},
		{"allowed origin null", `{` + db + `,"mcp":{"allowed_origins":["null"]}}`, false},
		{"allowed origin without scheme", `{` + db + `,"mcp":{"allowed_origins":["app.example.com"]}}`, false},
	})
}
