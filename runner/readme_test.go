package runner

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/schemas"
)

// docsSection returns the text of the docs/ page from heading to the next heading of the same
// level; heading "" returns the page's text before its first "## " heading.
func docsSection(t *testing.T, page, heading string) string {
	t.Helper()
	raw, err := os.ReadFile("../docs/" + page)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	level := "## "
	if heading != "" {
		i := strings.Index(s, "\n"+heading+"\n")
		if i < 0 {
			t.Fatalf("docs/%s has no %q section", page, heading)
		}
		s = s[i+len(heading)+2:]
		level = heading[:strings.IndexByte(heading, ' ')+1]
	}
	if j := strings.Index(s, "\n"+level); j >= 0 {
		s = s[:j]
	}
	return s
}

// TestDocsDocumentEveryConfigKey keeps the configuration table of docs/configuration.md in step
// with schemas/config.schema.json: every key, at every level, has a row, and every key a row
// names is in the schema.
func TestDocsDocumentEveryConfigKey(t *testing.T) {
	t.Parallel()
	section := docsSection(t, "configuration.md", "")
	var schema map[string]any
	if err := json.Unmarshal(schemas.Config(), &schema); err != nil {
		t.Fatal(err)
	}
	defs, _ := schema["$defs"].(map[string]any)
	seen := map[string]bool{}
	var walk func(node map[string]any)
	walk = func(node map[string]any) {
		if ref, ok := node["$ref"].(string); ok {
			walk(defs[strings.TrimPrefix(ref, "#/$defs/")].(map[string]any))
		}
		for _, key := range []string{"items", "additionalProperties"} {
			if sub, ok := node[key].(map[string]any); ok {
				walk(sub)
			}
		}
		props, _ := node["properties"].(map[string]any)
		for name, sub := range props {
			if name != "$schema" && !seen[name] {
				seen[name] = true
				if !documented(section, name) {
					t.Errorf("docs/configuration.md's table lacks the key %q", name)
				}
			}
			walk(sub.(map[string]any))
		}
	}
	walk(schema)
	if len(seen) < 30 {
		t.Fatalf("walked only %d keys", len(seen))
	}
	// The other way round: a row naming a key the schema does not have documents a setting that
	// pgtools would refuse as an unknown key.
	rows := 0
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		rows++
		cell := strings.SplitN(line, "|", 3)[1]
		for i, part := range strings.Split(cell, "`") {
			if i%2 == 0 {
				continue
			}
			for _, name := range strings.Split(part, ".") {
				name = strings.TrimSuffix(name, "[]")
				if name != "<name>" && !seen[name] {
					t.Errorf("docs/configuration.md's table names %q (in %s), which schemas/config.schema.json does not have", name, part)
				}
			}
		}
	}
	if rows < 30 {
		t.Fatalf("read only %d rows of docs/configuration.md's table", rows)
	}
}

// documented reports whether a key appears in a table cell as a key path: `name`, `a.name`,
// `name.b`, `name[]` or `a / name`.
func documented(section, name string) bool {
	for _, before := range []string{"`", "."} {
		for _, after := range []string{"`", ".", "["} {
			if strings.Contains(section, before+name+after) {
				return true
			}
		}
	}
	return strings.Contains(section, "/ `"+name+"`")
}

// TestDocsTroubleshootEveryErrorType keeps the table of docs/troubleshooting.md in step with the
// error types of package tools.
func TestDocsTroubleshootEveryErrorType(t *testing.T) {
	t.Parallel()
	section := docsSection(t, "troubleshooting.md", "")
	file, err := parser.ParseFile(token.NewFileSet(), "../tools/internal/pgerr/pgerr.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	ast.Inspect(file, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || vs.Type == nil {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "ErrorType" {
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok {
					s, _ := strconv.Unquote(lit.Value)
					types = append(types, s)
				}
			}
		}
		return true
	})
	sort.Strings(types)
	if len(types) < 20 {
		t.Fatalf("found only %v in tools/internal/pgerr/pgerr.go", types)
	}
	for _, et := range types {
		if !strings.Contains(section, "| `"+et+"` |") {
			t.Errorf("docs/troubleshooting.md's table has no row for %s", et)
		}
	}
}
