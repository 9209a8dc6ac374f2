package schemas

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
)

// configDocPage is the page whose generated section lists every key of config.schema.json.
const configDocPage = "../docs/configuration.md"

// The generated section sits between these markers; what lies outside them is hand-written.
const (
	configDocBegin = "<!-- generated from schemas/config.schema.json: go test ./schemas -run TestConfigDocMatchesSchema -update; do not edit by hand -->"
	configDocEnd   = "<!-- end of generated section -->"
)

// configDocTable renders every key of the config schema, depth first with keys sorted, as a
// Markdown table of key path, JSON type and the schema's own description.
func configDocTable(t testing.TB) string {
	t.Helper()
	var schema map[string]any
	if err := json.Unmarshal(Config(), &schema); err != nil {
		t.Fatal(err)
	}
	defs, _ := schema["$defs"].(map[string]any)
	resolve := func(node map[string]any) map[string]any {
		if ref, ok := node["$ref"].(string); ok {
			def, ok := defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any)
			if !ok {
				t.Fatalf("config schema: %s resolves to nothing", ref)
			}
			return def
		}
		return node
	}
	var b strings.Builder
	b.WriteString("| key | type | description |\n|---|---|---|\n")
	var walk func(prefix string, node map[string]any)
	walk = func(prefix string, node map[string]any) {
		node = resolve(node)
		props, _ := node["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			if k != "$schema" {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			sub := props[k].(map[string]any)
			desc, _ := sub["description"].(string)
			if desc == "" {
				t.Errorf("config schema: %s%s has no description", prefix, k)
			}
			target := resolve(sub)
			fmt.Fprintf(&b, "| `%s%s` | %s | %s |\n", prefix, k, typeOf(target, resolve), strings.ReplaceAll(desc, "|", `\|`))
			walk(prefix+k+".", target)
			if items, ok := target["items"].(map[string]any); ok {
				walk(prefix+k+"[].", items)
			}
			if values, ok := target["additionalProperties"].(map[string]any); ok {
				walk(prefix+k+".<name>.", values)
			}
		}
	}
	walk("", schema)
	return b.String()
}

// typeOf names a schema node's JSON type as the table shows it: "array of object", "string".
func typeOf(node map[string]any, resolve func(map[string]any) map[string]any) string {
	var types []string
	switch v := node["type"].(type) {
	case string:
		types = []string{v}
	case []any:
		for _, x := range v {
			types = append(types, fmt.Sprint(x))
		}
	}
	if len(types) == 0 {
		if _, ok := node["properties"]; ok {
			types = []string{"object"}
		}
	}
	if enum, ok := node["enum"].([]any); ok && len(types) == 0 {
		var names []string
		for _, v := range enum {
			names = append(names, fmt.Sprint(v))
		}
		types = []string{"one of " + strings.Join(names, ", ")}
	}
	s := strings.Join(types, " or ")
	if s == "" {
		s = "any"
	}
	if items, ok := node["items"].(map[string]any); ok && s == "array" {
		if of := typeOf(resolve(items), resolve); of != "" {
			s += " of " + of
		}
	}
	return s
}

// TestConfigDocMatchesSchema keeps the generated key table of docs/configuration.md equal to
// what config.schema.json says, so the page and the schema cannot disagree; -update rewrites
// the section between its markers.
func TestConfigDocMatchesSchema(t *testing.T) {
	raw, err := os.ReadFile(configDocPage)
	if err != nil {
		t.Fatal(err)
	}
	page := string(raw)
	i, j := strings.Index(page, configDocBegin), strings.Index(page, configDocEnd)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers of its generated section:\n%s\n%s", configDocPage, configDocBegin, configDocEnd)
	}
	want := configDocTable(t)
	got := page[i+len(configDocBegin) : j]
	if strings.TrimSpace(got) == strings.TrimSpace(want) {
		return
	}
	if *updateGolden {
		page = page[:i+len(configDocBegin)] + "\n" + want + page[j:]
		if err := os.WriteFile(configDocPage, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gotLines, wantLines := strings.Split(strings.TrimSpace(got), "\n"), strings.Split(strings.TrimSpace(want), "\n")
	for k := 0; k < len(gotLines) || k < len(wantLines); k++ {
		var g, w string
		if k < len(gotLines) {
			g = gotLines[k]
		}
		if k < len(wantLines) {
			w = wantLines[k]
		}
		if g != w {
			t.Fatalf("%s differs from config.schema.json at row %d:\npage:   %s\nschema: %s\n(go test ./schemas -run TestConfigDocMatchesSchema -update rewrites it)", configDocPage, k+1, g, w)
		}
	}
}
