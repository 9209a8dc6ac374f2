package pgerr

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// declaredErrorTypes parses this package's source and returns the value of every constant
// declared with type ErrorType, so a category added without an entry in the table fails.
func declaredErrorTypes(t *testing.T) []ErrorType {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var out []ErrorType
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "ErrorType" {
					continue
				}
				for _, v := range vs.Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok {
						t.Fatalf("%s: an ErrorType constant that is not a string literal", name)
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, ErrorType(s))
				}
			}
		}
	}
	return out
}

// TestEveryCategoryHasMetadata walks every ErrorType constant declared in the package: each is
// in AllErrorTypes and in the table, with a 4xx or 5xx status, and nothing else is.
func TestEveryCategoryHasMetadata(t *testing.T) {
	declared := declaredErrorTypes(t)
	if len(declared) < 20 {
		t.Fatalf("found only %d ErrorType constants: %v", len(declared), declared)
	}
	all := AllErrorTypes()
	if !slices.Equal(declared, all) {
		t.Fatalf("AllErrorTypes %v, declared constants %v", all, declared)
	}
	if len(categories) != len(declared) {
		t.Fatalf("the table has %d entries for %d categories", len(categories), len(declared))
	}
	for _, et := range declared {
		m, ok := MetaOf(et)
		if !ok {
			t.Errorf("%s: no entry in the table", et)
		}
		if m.Status < 400 || m.Status > 599 {
			t.Errorf("%s: status %d", et, m.Status)
		}
		if m.Retryable && m.Status < 429 {
			t.Errorf("%s: retryable, but its status %d says the call must change", et, m.Status)
		}
	}
}

// TestUnknownCategoryFailsClosed: a category without an entry maps to 500, not retryable, and
// says so.
func TestUnknownCategoryFailsClosed(t *testing.T) {
	m, ok := MetaOf("made_up_category")
	if ok || m.Status != http.StatusInternalServerError || m.Retryable {
		t.Fatalf("unknown category: %+v, %v", m, ok)
	}
}
