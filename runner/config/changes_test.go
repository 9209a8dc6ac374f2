package config

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pgtools/pgtools/runner/apitest"
)

// TestChangesComparesEverySetting: Changes finds a changed value at its schema key and path,
// sees a rotated secret behind an unchanged *_file key, and finds nothing between two loads of
// the same configuration, or between a default left out and written out.
func TestChangesComparesEverySetting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	password := apitest.WriteFile(t, dir, "password", "first-password")
	doc := func(extra string) string {
		return `{"databases": {"main": {"url": "postgres://u@127.0.0.1/d", "password_file": "` + password + `"` + extra + `}},
		  "tokens": [{"name": "a", "token": "token-a-0123456789abcdef", "scopes": ["read"]}]}`
	}
	load := func(text string) *Config {
		t.Helper()
		cfg, err := Load(apitest.WriteFile(t, dir, "pgtools.json", text), nil)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	changes := func(was, now *Config) string {
		t.Helper()
		cs, err := Changes(was, now)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range cs {
			out = append(out, c.Key+"@"+c.Path)
		}
		return strings.Join(out, " ")
	}
	base := load(doc(""))
	if got := changes(base, load(doc(`, "max_conns": 10, "policy": {"max_affected_rows": 1000}`))); got != "" {
		t.Errorf("defaults written out: %s", got)
	}
	if got := changes(base, load(doc(`, "policy": {"read_only": true, "disabled_tools": ["pg_tx"]}`))); got !=
		"databases.*.policy.disabled_tools@databases.main.policy.disabled_tools databases.*.policy.read_only@databases.main.policy.read_only" {
		t.Errorf("policy changes: %s", got)
	}
	if err := os.WriteFile(password, []byte("second-password"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := changes(base, load(doc(""))); got != "databases.*.password_file@databases.main.password_file" {
		t.Errorf("a rotated password file: %s", got)
	}
	more := load(strings.Replace(doc(""), `"scopes": ["read"]}]`, `"scopes": ["read"]}, {"name": "b", "token": "token-b-0123456789abcdef", "scopes": ["read"]}]`, 1))
	if got := changes(base, more); !strings.Contains(got, "tokens.*.name@tokens[1].name") || strings.Contains(got, "tokens[0]") {
		t.Errorf("a token added: %s", got)
	}
	if got := changes(base, base); got != "" {
		t.Errorf("a config against itself: %s", got)
	}
}

// TestChangesSeesEveryKeyOfTheExamples: every value the example config files give is found by
// Changes at its path (the Go field's json tag is the schema's key), so no setting they use can
// change unseen by a reload. Values of keys whose Go field reads them into another shape
// (items of a custom tool's parameter) are found under the same key.
func TestChangesSeesEveryKeyOfTheExamples(t *testing.T) {
	t.Parallel()
	root, err := schemaDoc()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob("../../examples/config/*.json")
	if len(files) < 3 {
		t.Fatalf("found %d example configs", len(files))
	}
	all := 0
	defer func() {
		if all < 50 {
			t.Errorf("the examples give only %d values", all)
		}
	}()
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		// The files a config names may not exist here: read the document as written, then
		// decode it as Load does, without reading secrets.
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		written := flattenDoc(root, doc)
		all += len(written)
		cfg := &Config{}
		if err := json.Unmarshal(raw, cfg); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		seen, err := settingsOf(root, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for path := range written {
			if s, ok := seen[path]; !ok || s.value == nil {
				t.Errorf("%s: %s is in the file, but Changes does not see it", filepath.Base(file), path)
			}
		}
	}
}

// flattenDoc lists the paths of the values a config document gives, as settingsOf does.
func flattenDoc(root map[string]any, doc any) map[string]bool {
	out := map[string]bool{}
	var walk func(node map[string]any, v any, path string)
	walk = func(node map[string]any, v any, path string) {
		if v == nil {
			return
		}
		node = resolveRef(root, node)
		if props, ok := node["properties"].(map[string]any); ok {
			obj, _ := v.(map[string]any)
			for k, sub := range props {
				if _, given := obj[k]; given && k != "$schema" {
					walk(sub.(map[string]any), obj[k], joinPath(path, k))
				}
			}
			return
		}
		if sub := entrySchema(root, node); sub != nil {
			switch v := v.(type) {
			case map[string]any:
				for k, item := range v {
					walk(sub, item, joinPath(path, k))
				}
				return
			case []any:
				for i, item := range v {
					walk(sub, item, fmt.Sprintf("%s[%d]", path, i))
				}
				return
			}
		}
		if l, ok := v.([]any); ok && len(l) == 0 {
			return
		}
		out[path] = true
	}
	walk(root, doc, "")
	return out
}
