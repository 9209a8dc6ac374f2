package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot is the repository's root as seen from this package's tests.
const repoRoot = "../.."

// docFiles returns README.md and every page under docs/, the documentation a user reads.
func docFiles(t testing.TB) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 10 {
		t.Fatalf("found only %d pages under docs/", len(pages))
	}
	return append([]string{filepath.Join(repoRoot, "README.md")}, pages...)
}

// readDoc returns the text of a documentation file, path relative to the repository's root.
func readDoc(t testing.TB, path string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`^#{1,6} (.+)$`)
	mdFence   = regexp.MustCompile("^\\s*```")
)

// anchors returns the anchors GitHub gives the headings of a Markdown text; fenced blocks are
// skipped, since a shell comment there is no heading.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if mdFence.MatchString(line) {
			fenced = !fenced
			continue
		}
		if m := mdHeading.FindStringSubmatch(line); m != nil && !fenced {
			out[anchorOf(m[1])] = true
		}
	}
	return out
}

// anchorOf is GitHub's anchor for a heading: lower case, punctuation dropped except - and _,
// spaces as dashes.
func anchorOf(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127 && r != '§' && r != '—' && r != '–':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsLinksResolve: every relative link in README.md and docs/*.md names a file that exists
// and, with a #fragment into a Markdown file, a heading of that file; pages moved out of the
// README must not leave links behind that point nowhere.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	links := 0
	for _, file := range docFiles(t) {
		rel, _ := filepath.Rel(repoRoot, file)
		text := readDoc(t, rel)
		fenced := false
		for n, line := range strings.Split(text, "\n") {
			if mdFence.MatchString(line) {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, frag, _ := strings.Cut(target, "#")
				dest := rel
				if path != "" {
					dest = filepath.Join(filepath.Dir(rel), path)
				}
				if _, err := os.Stat(filepath.Join(repoRoot, dest)); err != nil {
					t.Errorf("%s:%d: link %s: no file %s", rel, n+1, target, dest)
					continue
				}
				if frag != "" && strings.HasSuffix(dest, ".md") && !anchors(readDoc(t, dest))[frag] {
					t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", rel, n+1, target, dest, frag)
				}
			}
		}
	}
	if links < 50 {
		t.Fatalf("checked only %d relative links", links)
	}
}

// TestDocsIndexListsEveryPage: README.md and docs/README.md link to every page under docs/.
func TestDocsIndexListsEveryPage(t *testing.T) {
	t.Parallel()
	readme, index := readDoc(t, "README.md"), readDoc(t, "docs/README.md")
	for _, file := range docFiles(t)[1:] {
		name := filepath.Base(file)
		if name == "README.md" {
			continue
		}
		if !strings.Contains(readme, "](docs/"+name+")") {
			t.Errorf("README.md does not link to docs/%s", name)
		}
		if !strings.Contains(index, "]("+name+")") {
			t.Errorf("docs/README.md does not link to %s", name)
		}
	}
	if n := strings.Count(readme, "\n"); n > 300 {
		t.Errorf("README.md has %d lines; keep it under 300 and move the rest to a docs/ page", n)
	}
}

// TestDesignSectionsCited: every "docs/design.md §N" a comment cites is a section of
// docs/design.md, so a reader following a citation finds it.
func TestDesignSectionsCited(t *testing.T) {
	t.Parallel()
	have := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\d+)\. `).FindAllStringSubmatch(readDoc(t, "docs/design.md"), -1) {
		have[m[1]] = true
	}
	cite := regexp.MustCompile(`docs/design\.md §(\d+)`)
	cited := 0
	for _, dir := range []string{"cmd", "runner", "tools", "schemas", "n8n-nodes"} {
		filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() && d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			if ext := filepath.Ext(path); d.IsDir() || ext != ".go" && ext != ".ts" && ext != ".mjs" {
				return nil
			}
			raw, _ := os.ReadFile(path)
			if strings.Contains(string(raw), "DESIGN "+"§") {
				t.Errorf("%s cites the DESIGN document, which is not in the repository; cite docs/design.md and the section", path)
			}
			for _, m := range cite.FindAllStringSubmatch(string(raw), -1) {
				cited++
				if !have[m[1]] {
					t.Errorf("%s cites docs/design.md §%s, which docs/design.md has no section for", path, m[1])
				}
			}
			return nil
		})
	}
	if cited < 20 {
		t.Fatalf("found only %d citations of docs/design.md", cited)
	}
}
