package schemas

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/descriptions/*.golden from the schemas")

// TestDescriptionsGolden pins what a model reads about every tool — its description and each
// argument's, as served — in testdata/descriptions, so a change of wording is seen in review
// (go test ./schemas -run Golden -update rewrites the files).
func TestDescriptionsGolden(t *testing.T) {
	t.Parallel()
	for _, name := range ToolNames() {
		raw, _ := Tool(name)
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		b.WriteString(name + ": " + Description(name) + "\n")
		var walk func(prefix string, props map[string]any)
		walk = func(prefix string, props map[string]any) {
			keys := make([]string, 0, len(props))
			for k := range props {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				p, _ := props[k].(map[string]any)
				d, _ := p["description"].(string)
				b.WriteString("  " + prefix + k + ": " + d + "\n")
				if sub, ok := p["properties"].(map[string]any); ok {
					walk(prefix+k+".", sub)
				}
				if items, ok := p["items"].(map[string]any); ok {
					if sub, ok := items["properties"].(map[string]any); ok {
						walk(prefix+k+"[].", sub)
					}
				}
			}
		}
		props, _ := doc["properties"].(map[string]any)
		walk("", props)
		path := filepath.Join("testdata", "descriptions", name+".golden")
		if *updateGolden {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./schemas -run Golden -update)", err)
		}
		if string(want) != b.String() {
			t.Errorf("%s differs from the schema's descriptions (run with -update and review the diff):\n%s", path, b.String())
		}
	}
}
