package schemas

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDocsListEveryTool: the pages that list the built-in tools list exactly the tools of the
// files here, so a tool is not added (or removed) without its documentation: the README's
// opening paragraph names each, docs/tools.md has a row per tool in its table of tools, and the
// package README (n8n-nodes/README.md) a row per tool node, under the node's displayName.
func TestDocsListEveryTool(t *testing.T) {
	t.Parallel()
	names := ToolNames()

	readme := readDoc(t, "../README.md")
	intro, _, _ := strings.Cut(readme, "\n## ")
	for _, name := range names {
		if !strings.Contains(intro, "`"+name+"`") {
			t.Errorf("README.md: the opening paragraph does not name `%s`", name)
		}
	}

	rows := tableRows(t, readDoc(t, "../docs/tools.md"), "| tool | arguments | does |")
	var listed []string
	for _, cells := range rows {
		listed = append(listed, strings.Trim(cells[0], "`"))
	}
	if got, want := slices.Sorted(slices.Values(listed)), slices.Sorted(slices.Values(names)); !slices.Equal(got, want) {
		t.Errorf("docs/tools.md: the table of tools lists %v, want every tool once: %v", got, want)
	}

	nodes := map[string]string{}
	for _, cells := range tableRows(t, readDoc(t, "../n8n-nodes/README.md"), "| node | tool | what the agent can do |") {
		// Rows whose tool is not a wire name are the nodes that are not built from schemas/.
		if tool := cells[1]; strings.HasPrefix(tool, "`") {
			nodes[strings.Trim(tool, "`")] = cells[0]
		}
	}
	want := map[string]string{}
	for _, name := range names {
		meta, _ := Meta(name)
		want[name] = meta.DisplayName
	}
	if !maps.Equal(nodes, want) {
		t.Errorf("n8n-nodes/README.md: the table of nodes has (tool → node) %v, want %v", nodes, want)
	}
}

func readDoc(tb testing.TB, path string) string {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return string(raw)
}

// tableRows returns the trimmed cells of each row of the Markdown table whose header line is
// header, without the header and the delimiter row. Escaped pipes (\|) stay inside their cell.
func tableRows(tb testing.TB, doc, header string) [][]string {
	tb.Helper()
	_, after, ok := strings.Cut(doc, "\n"+header+"\n")
	if !ok {
		tb.Fatalf("no table with the header %q", header)
	}
	var rows [][]string
	for i, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		if i == 0 {
			continue // |---|---|
		}
		line = strings.ReplaceAll(strings.Trim(line, "|"), `\|`, "\x00")
		var cells []string
		for _, c := range strings.Split(line, "|") {
			cells = append(cells, strings.TrimSpace(strings.ReplaceAll(c, "\x00", `\|`)))
		}
		rows = append(rows, cells)
	}
	return rows
}
