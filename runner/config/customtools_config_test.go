package config

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/apitest"
)

// customConfig is a config document with one read-only and one writable database and the given
// custom_tools array.
func customConfig(list string) string {
	return `{"databases": {"default": {"url": "postgres://u@127.0.0.1/db"},
	  "archive": {"url": "postgres://u@127.0.0.1/archive", "policy": {"read_only": true}}},
	  "custom_tools": ` + list + `}`
}

// configProblems loads doc as serve does (LoadConfigFile, then Validate) and returns the problem
// lines, or nil when it is valid.
func configProblems(t *testing.T, doc string) []string {
	t.Helper()
	cfg, err := LoadConfigFile(apitest.WriteFile(t, t.TempDir(), "pgtools.json", doc))
	if err == nil {
		err = cfg.Validate()
	}
	if err == nil {
		return nil
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("not a *ConfigError: %v", err)
	}
	return ce.Problems
}

// TestCustomToolsConfigErrors: every structural mistake in custom_tools is reported on a line
// that starts with its JSON path and says what to write instead.
func TestCustomToolsConfigErrors(t *testing.T) {
	t.Parallel()
	const ok = `{"name": "t0", "description": "d", "sql": "SELECT 1"}`
	cases := []struct {
		name, tools string
		want        []string // each must appear in one problem line
	}{
		{"parameter type", `[` + ok + `, {"name": "t1", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "n", "type": "int"}]}]`,
			[]string{`custom_tools[1].parameters[0].type: "int" is not allowed; value must be one of 'string', 'integer'`}},
		{"missing sql", `[{"name": "t", "description": "d"}]`,
			[]string{`custom_tools[0]: missing "sql". sql: One statement with $1`}},
		{"bad name", `[{"name": "Orders-Of", "description": "d", "sql": "SELECT 1"}]`,
			[]string{`custom_tools[0].name: "Orders-Of" is not valid: The tool's wire name: lowercase letters`}},
		{"unknown key", `[{"name": "t", "description": "d", "sql": "SELECT 1", "statement": "x"}]`,
			[]string{`custom_tools[0].statement: unknown key`}},
		{"mode", `[{"name": "t", "description": "d", "sql": "SELECT 1", "mode": "readwrite"}]`,
			[]string{`custom_tools[0].mode: "readwrite" is not allowed`}},
		{"built-in name", `[{"name": "select_query", "description": "d", "sql": "SELECT 1"}]`,
			[]string{`custom_tools[0].name: "select_query" is a built-in tool; choose another name`}},
		{"duplicate name", `[` + ok + `, ` + ok + `]`,
			[]string{`custom_tools[1].name: "t0" is also the name of custom_tools[0]`}},
		{"unknown database", `[{"name": "t", "description": "d", "sql": "SELECT 1", "database": "sales"}]`,
			[]string{`custom_tools[0].database: "sales" is not configured (configured: archive, default)`}},
		{"write on a read-only database", `[{"name": "t", "description": "d", "sql": "DELETE FROM x", "database": "archive", "mode": "write"}]`,
			[]string{`custom_tools[0].mode: a write tool on database "archive", whose policy is read_only`}},
		{"order_by on a write tool", `[{"name": "t", "description": "d", "sql": "DELETE FROM x", "mode": "write", "order_by": "id"}]`,
			[]string{`custom_tools[0].order_by: pages the rows of a read tool`}},
		{"page_token parameter", `[{"name": "t", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "page_token", "type": "string"}]}]`,
			[]string{`custom_tools[0].parameters[0].name: "page_token" is an argument pgtools adds`}},
		{"reserved parameter", `[{"name": "t", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "autocommit", "type": "boolean"}]}]`,
			[]string{`custom_tools[0].parameters[0].name: "autocommit" is an argument pgtools adds`}},
		{"duplicate parameter", `[{"name": "t", "description": "d", "sql": "SELECT $1, $2", "parameters": [{"name": "a", "type": "string"}, {"name": "a", "type": "string"}]}]`,
			[]string{`custom_tools[0].parameters[1].name: "a" is also parameters[0]`}},
		{"items on a string", `[{"name": "t", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "a", "type": "string", "items": {"type": "string"}}]}]`,
			[]string{`custom_tools[0].parameters[0].items: only an array parameter has items`}},
		{"bounds on a string", `[{"name": "t", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "a", "type": "string", "minimum": 1}]}]`,
			[]string{`custom_tools[0].parameters[0]: minimum and maximum bound an integer or number parameter, not a string`}},
		{"maxLength on an integer", `[{"name": "t", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "a", "type": "integer", "maxLength": 3}]}]`,
			[]string{`custom_tools[0].parameters[0].maxLength: bounds a string parameter, not an integer`}},
		{"minimum above maximum", `[{"name": "t", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "a", "type": "integer", "minimum": 10, "maximum": 1}]}]`,
			[]string{`custom_tools[0].parameters[0]: minimum 10 is above maximum 1; swap them`}},
		{"default of the wrong type", `[{"name": "t", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "a", "type": "integer", "default": "ten"}]}]`,
			[]string{`custom_tools[0].parameters[0].default: "ten" does not fit the parameter`}},
		{"default past the maximum", `[{"name": "t", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "a", "type": "integer", "maximum": 100, "default": 500}]}]`,
			[]string{`custom_tools[0].parameters[0].default: 500 does not fit the parameter`}},
		{"default outside the enum", `[{"name": "t", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "a", "type": "string", "enum": ["paid"], "default": "lost"}]}]`,
			[]string{`custom_tools[0].parameters[0].default: "lost" does not fit the parameter`}},
		{"array default with a wrong element", `[{"name": "t", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "a", "type": "array", "items": {"type": "integer"}, "default": [1, "x"]}]}]`,
			[]string{`custom_tools[0].parameters[0].default: [1,"x"] does not fit the parameter: [1]:`}},
		{"enum value of the wrong type", `[{"name": "t", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "a", "type": "integer", "enum": [1, 2.5]}]}]`,
			[]string{`custom_tools[0].parameters[0].enum[1]: 2.5 does not fit the parameter`}},
		{"required with a default", `[{"name": "t", "description": "d", "sql": "SELECT $1", "parameters": [{"name": "a", "type": "string", "required": true, "default": "x"}]}]`,
			[]string{`custom_tools[0].parameters[0].default: a required parameter never uses its default`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			problems := configProblems(t, customConfig(c.tools))
			all := strings.Join(problems, "\n")
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("no problem line contains %q:\n%s", w, all)
				}
			}
		})
	}
}

// TestCustomToolsConfigLoads: a valid custom_tools array becomes tools.CustomTool values with
// their defaults, integer defaults as integers (they are bound as given), and check-config's
// effective config shows each with the JSON Schema clients get.
func TestCustomToolsConfigLoads(t *testing.T) {
	t.Parallel()
	cfg := loadConfig(t, customConfig(`[
	  {"name": "recent", "description": "Recent rows.", "sql": "SELECT $1::int, $2::text[]",
	   "parameters": [{"name": "n", "type": "integer", "default": 20, "minimum": 1, "maximum": 100},
	                  {"name": "tags", "type": "array", "items": {"type": "string"}, "enum": [["a"], ["b"]]}]},
	  {"name": "purge", "description": "Purge.", "sql": "DELETE FROM t WHERE id = $1", "mode": "write",
	   "parameters": [{"name": "id", "type": "integer", "required": true}]}]`))
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	got := cfg.CustomTools
	if len(got) != 2 || got[0].Database != "default" || got[0].Mode != "read" || got[1].Mode != "write" {
		t.Fatalf("defaults: %+v", got)
	}
	if d, ok := got[0].Parameters[0].Default.(json.Number); !ok || d != "20" {
		t.Fatalf("integer default decoded as %T %v, want json.Number 20", got[0].Parameters[0].Default, got[0].Parameters[0].Default)
	}
	if got[0].Parameters[1].Items != "string" || len(got[0].Parameters[1].Enum) != 2 {
		t.Fatalf("array parameter: %+v", got[0].Parameters[1])
	}
	raw, err := cfg.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	var eff struct {
		CustomTools []struct {
			Name, Database, Mode, SQL string
			InputSchema               map[string]any `json:"input_schema"`
		} `json:"custom_tools"`
	}
	if err := json.Unmarshal(raw, &eff); err != nil {
		t.Fatal(err)
	}
	if len(eff.CustomTools) != 2 {
		t.Fatalf("effective custom_tools: %s", raw)
	}
	for i, e := range eff.CustomTools {
		var want map[string]any
		if err := json.Unmarshal(got[i].Schema(), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(e.InputSchema, want) || e.Database != "default" {
			t.Errorf("%s: input_schema %v, want %v", e.Name, e.InputSchema, want)
		}
	}
	props := eff.CustomTools[1].InputSchema["properties"].(map[string]any)
	if props["autocommit"] == nil || eff.CustomTools[1].InputSchema["additionalProperties"] != false {
		t.Fatalf("write tool's schema lacks autocommit or allows extra keys: %v", eff.CustomTools[1].InputSchema)
	}
	if note := cfg.CustomToolsNote(); !strings.Contains(note, "recent (read), purge (write)") || !strings.Contains(note, "when pgtools serve or pgtools mcp starts") {
		t.Fatalf("note: %q", note)
	}
	var none Config
	if none.CustomToolsNote() != "" || len(effectiveCustomTools(nil)) != 0 {
		t.Fatal("no custom tools must print nothing")
	}
}
