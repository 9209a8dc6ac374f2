package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	// docFileName is a file a package doc names: tooltable.go, schemas/select_query.json, …
	docFileName = regexp.MustCompile(`\b[\w./-]*\w\.(go|json|md|sql|mjs|ts)\b`)
	// docToolName is a word shaped like a built-in tool's wire name.
	docToolName = regexp.MustCompile(`\b(pg_[a-z]+|[a-z]+_(query|data|sql|schema))\b`)
)

// TestPackageDocsNameWhatExists reads the package doc of every Go package in the repository and
// checks that each file it names exists (beside the package, or from the repository's root) and
// that each name shaped like a tool's is a tool of schemas/: a doc that still describes a file
// moved away or a tool renamed fails here, not in a newcomer's hands.
func TestPackageDocsNameWhatExists(t *testing.T) {
	tools := map[string]bool{}
	schemas, err := filepath.Glob(filepath.Join(repoRoot, "schemas", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range schemas {
		tools[strings.TrimSuffix(filepath.Base(s), ".json")] = true
	}
	if !tools["select_query"] || !tools["pg_tx"] {
		t.Fatalf("schemas/ lists no tools: %v", schemas)
	}
	docs := packageDocs(t)
	if len(docs) < 20 {
		t.Fatalf("found package docs in only %d directories", len(docs))
	}
	var dirs []string
	for d := range docs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		doc := docs[dir]
		for _, loc := range docFileName.FindAllStringIndex(doc, -1) {
			name := doc[loc[0]:loc[1]]
			if loc[0] > 0 && doc[loc[0]-1] == '/' {
				continue // a URL path such as /openapi.json, not a file
			}
			if !existsFrom(filepath.Join(repoRoot, dir), name) && !existsFrom(repoRoot, name) {
				t.Errorf("%s: the package doc names %s, which is neither in the package nor at that path from the repository's root", dir, name)
			}
		}
		for _, name := range docToolName.FindAllString(doc, -1) {
			if !tools[name] {
				t.Errorf("%s: the package doc names the tool %s, which schemas/ does not define", dir, name)
			}
		}
	}
}

func existsFrom(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name)))
	return err == nil
}

// packageDocs returns the package doc comment of every non-test Go package below the root, by
// directory relative to it.
func packageDocs(t *testing.T) map[string]string {
	t.Helper()
	docs := map[string]string{}
	err := filepath.WalkDir(repoRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "node_modules", "testdata", ".git", "dist", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if f.Doc != nil {
			rel, _ := filepath.Rel(repoRoot, filepath.Dir(path))
			docs[filepath.ToSlash(rel)] += f.Doc.Text()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return docs
}
