package config

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/schemas"
)

// schemaDefaults walks a JSON Schema and returns every "default" by the path of its key in a
// config document: "." between keys, "*" for any key of a map (additionalProperties) or any
// element of a list (items). $refs into $defs are followed.
func schemaDefaults(t *testing.T, root map[string]any) map[string]any {
	t.Helper()
	defs, _ := root["$defs"].(map[string]any)
	out := map[string]any{}
	var walk func(node map[string]any, path string, depth int)
	walk = func(node map[string]any, path string, depth int) {
		if depth > 10 {
			t.Fatalf("schema nests too deep at %s", path)
		}
		if ref, ok := node["$ref"].(string); ok {
			target, ok := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
			if !ok {
				t.Fatalf("%s: $ref %s does not resolve", path, ref)
			}
			walk(target, path, depth+1)
		}
		if d, ok := node["default"]; ok && path != "" {
			out[path] = d
		}
		join := func(k string) string {
			if path == "" {
				return k
			}
			return path + "." + k
		}
		if props, ok := node["properties"].(map[string]any); ok {
			for k, v := range props {
				walk(v.(map[string]any), join(k), depth+1)
			}
		}
		for _, key := range []string{"additionalProperties", "items"} {
			if sub, ok := node[key].(map[string]any); ok {
				walk(sub, join("*"), depth+1)
			}
		}
	}
	walk(root, "", 0)
	return out
}

// lookup finds path in the effective config, "*" taking the one key or element there is.
func lookup(doc any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		switch v := doc.(type) {
		case map[string]any:
			if k == "*" {
				if len(v) != 1 {
					return nil, false
				}
				for _, only := range v {
					doc = only
				}
				continue
			}
			var ok bool
			if doc, ok = v[k]; !ok {
				return nil, false
			}
		case []any:
			if k != "*" || len(v) != 1 {
				return nil, false
			}
			doc = v[0]
		default:
			return nil, false
		}
	}
	return doc, true
}

// TestSchemaDefaultsMatchGo compares every default schemas/config.schema.json states with what
// Validate fills in (withDefaults and tools.Policy.WithDefaults), as check-config prints it.
func TestSchemaDefaultsMatchGo(t *testing.T) {
	t.Parallel()
	var schema map[string]any
	if err := json.Unmarshal(schemas.Config(), &schema); err != nil {
		t.Fatal(err)
	}
	want := schemaDefaults(t, schema)
	if len(want) < 15 {
		t.Fatalf("found only %d defaults in the schema: %v", len(want), want)
	}
	cfg := &Config{Databases: map[string]DatabaseConfig{"default": {URL: "postgres://pgtools@127.0.0.1:5432/app"}},
		Tokens: []auth.Token{{Secret: "token-0123456789abcdef", Name: "agent", Scopes: []string{"read"}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	raw, err := cfg.EffectiveJSON()
	if err != nil {
		t.Fatal(err)
	}
	var got any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	paths := make([]string, 0, len(want))
	for p := range want {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		g, ok := lookup(got, p)
		if !ok {
			t.Errorf("%s: the schema has a default (%v) but the effective config has no such key", p, want[p])
			continue
		}
		if !reflect.DeepEqual(g, want[p]) {
			t.Errorf("%s: the schema's default is %v, Go's is %v", p, want[p], g)
		}
	}
}
