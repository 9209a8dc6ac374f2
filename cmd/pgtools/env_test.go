package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// envNames lists the environment variables pgtools reads, found in this package's source as the
// literal arguments of the injected getenv (getenv(…), f.getenv(…)) and of os.Getenv and
// os.LookupEnv, and as the env of the settings tables (setting{env: "…"}), so tests and the
// docker-compose check cannot drift from the code.
func envNames(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob("*.go")
	seen := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			if kv, ok := n.(*ast.KeyValueExpr); ok {
				if key, ok := kv.Key.(*ast.Ident); ok && key.Name == "env" {
					if lit, ok := kv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						name, _ := strconv.Unquote(lit.Value)
						seen[name] = true
					}
				}
				return true
			}
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if !readsEnv(call.Fun) {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				name, _ := strconv.Unquote(lit.Value)
				seen[name] = true
			}
			return true
		})
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) < 5 {
		t.Fatalf("found only %v; has the way pgtools reads its environment changed?", names)
	}
	return names
}

// readsEnv reports whether fun is getenv, x.getenv, os.Getenv or os.LookupEnv.
func readsEnv(fun ast.Expr) bool {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name == "getenv"
	case *ast.SelectorExpr:
		if f.Sel.Name == "getenv" {
			return true
		}
		pkg, ok := f.X.(*ast.Ident)
		return ok && pkg.Name == "os" && (f.Sel.Name == "Getenv" || f.Sel.Name == "LookupEnv")
	}
	return false
}

// envOf is a getenv over vars (nil: an empty environment), so each test gives run an
// environment of its own and runs in parallel.
func envOf(vars map[string]string) func(string) string {
	return func(key string) string { return vars[key] }
}
