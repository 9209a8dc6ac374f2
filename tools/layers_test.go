package tools

import (
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestFilesAreLayered keeps tools' files in layers (tools/doc.go): no file may use, through a
// chain of others, a name of a file that uses it. Each file names what it holds, and a reader
// can take them bottom up; a cycle among files is where a concern has spread over several.
// The uses are read with go/types: functions, methods, types, variables and constants of the
// package (struct fields count where their type is declared).
func TestFilesAreLayered(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the package from source")
	}
	fset := token.NewFileSet()
	paths, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	// The source importer runs cgo for packages such as net, leaving object files in the temp
	// directory; the pure-Go variants type-check the same API.
	build.Default.CgoEnabled = false
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	pkg, err := conf.Check("github.com/pgtools/pgtools/tools", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	uses := map[string]map[string]string{} // file → file it uses → one name, for the message
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || obj.Parent() != nil && obj.Parent() != pkg.Scope() && !isMethod(obj) {
			continue
		}
		if v, ok := obj.(*types.Var); ok && v.IsField() {
			continue
		}
		from, to := fset.Position(id.Pos()).Filename, fset.Position(obj.Pos()).Filename
		if from == to || to == "" {
			continue
		}
		if uses[from] == nil {
			uses[from] = map[string]string{}
		}
		uses[from][to] = obj.Name()
	}
	// A file in a cycle reaches itself: report each such pair of neighbours once.
	reach := func(from string) map[string]bool {
		seen := map[string]bool{}
		stack := []string{from}
		for len(stack) > 0 {
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for to := range uses[f] {
				if !seen[to] {
					seen[to] = true
					stack = append(stack, to)
				}
			}
		}
		return seen
	}
	var cycles []string
	for from, tos := range uses {
		for to, name := range tos {
			if reach(to)[from] {
				cycles = append(cycles, from+" uses "+name+" of "+to+", which reaches back to it")
			}
		}
	}
	sort.Strings(cycles)
	for _, c := range cycles {
		t.Error(c)
	}
}

func isMethod(obj types.Object) bool {
	f, ok := obj.(*types.Func)
	return ok && f.Type().(*types.Signature).Recv() != nil
}
