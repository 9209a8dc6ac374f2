package runner_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// jsonDecodersNotOfCallers are the functions of runner/ and tools/ that call encoding/json's
// decoders directly, each with why what it reads is not a caller's JSON, or was checked for
// duplicate keys already. Every JSON a caller sends goes through wire.Unmarshal (tools.DecodeJSON)
// or tools.CheckDuplicateKeys, which refuse a key named twice in one object.
var jsonDecodersNotOfCallers = map[string]string{
	"runner/config/load.go:load":                   "the operator's config file",
	"runner/config/schemakeys.go:schemaDoc":        "pgtools' own embedded schema",
	"runner/config/configcheck.go:configSchema":    "pgtools' own embedded schema",
	"runner/config/customtools.go:valueProblem":    "a schema pgtools generated",
	"runner/runnertest/runnertest.go:JSONLines":    "a test helper reading logs",
	"runner/mcpapi/mcp_fast.go:fastMetaOK":         "members of a body Serve checked for duplicates",
	"runner/mcpapi/mcp_ids.go:swapIDs":             "a body Serve (or stdio) checked",
	"runner/mcpapi/mcp_ids.go:rewriteMembers":      "a body Serve (or stdio) checked; rewrites ids only",
	"runner/mcpapi/mcp_stdio.go:cancelledID":       "stdio bookkeeping of ids, after admit checked the line",
	"runner/mcpapi/mcp_stdio.go:eachMessage":       "stdio bookkeeping of ids, after admit checked the line",
	"runner/mcptest/mcptest.go:":                   "a test client reading the server's answers",
	"runner/fleetstate.go:Get":                     "a sign-in record pgtools stored in its state database",
	"runner/forward/forward.go:Forward":            "the owner replica's signed answer",
	"runner/forward/forward.go:ServeHTTP":          "a call another replica signed; the registry checks its arguments again",
	"runner/forward/locator.go:Identify":           "a peer replica's signed answer naming its tag",
	"tools/approval/backend.go:DecodeEffect":       "an effect pgtools measured and stored",
	"tools/forwardcall.go:forward":                 "the owner replica's answer",
	"runner/n8n/brokertest/brokertest.go:":         "a test broker",
	"runner/n8n/broker.go:grantToken":              "the n8n broker's answer, not a caller's",
	"runner/n8n/conn.go:readLoop":                  "the broker's message envelope; task settings are checked in parseSettings",
	"runner/n8n/task.go:parseSettings":             "after tools.CheckDuplicateKeys on the settings and args",
	"runner/n8n/task.go:withDatabase":              "args parseSettings checked",
	"runner/apitest/apitest.go:":                   "a test client",
	"runner/httpapi/approvals_page.go:requestView": "arguments pgtools stored after checking them",
	"runner/httpapi/approvals_page.go:jwtExpiry":   "a JWT the auth layer verified",
	"tools/args.go:decode":                         "inside wire.Unmarshal's decode of the call, which checked the bytes",
	"tools/plan/plan.go:Parse":                     "PostgreSQL's EXPLAIN output",
	"tools/database.go:UnmarshalJSON":              "a policy of the operator's config file",
	"tools/tooltable.go:checkSchemaAgrees":         "pgtools' own embedded schemas",
	"tools/registry.go:schemaProperties":           "pgtools' own schemas",
	"tools/budgetgate.go:planRead":                 "PostgreSQL's answer",
	"tools/visible.go:withoutApprovalID":           "pgtools' own schemas",
	"tools/errors.go:maskPlan":                     "PostgreSQL's EXPLAIN output",
	"tools/customtool.go:":                         "operator-defined tools from the config",
	"tools/preview.go:withArg":                     "arguments the registry decoded and checked",
	"tools/internal/wire/encode.go:Unmarshal":      "the one decoder itself",
	"tools/internal/wire/dupkeys.go:object":        "unescapes one key of the bytes being checked",
	"tools/internal/wire/object.go:":               "row text PostgreSQL produced",
	"tools/approval/store.go:":                     "the approval store's own records",
}

// TestCallerJSONIsReadByWire fails when a new direct json.Unmarshal or json.NewDecoder appears
// in runner/ or tools/ outside the functions listed in jsonDecodersNotOfCallers: a decoder of
// a caller's JSON must refuse duplicate keys, which only wire does.
func TestCallerJSONIsReadByWire(t *testing.T) {
	t.Parallel()
	root := ".."
	var found []string
	for _, dir := range []string{"runner", "tools"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				ast.Inspect(fn.Body, func(n ast.Node) bool {
					sel, ok := n.(*ast.SelectorExpr)
					if !ok {
						return true
					}
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "json" && (sel.Sel.Name == "Unmarshal" || sel.Sel.Name == "NewDecoder") {
						key := filepath.ToSlash(rel) + ":" + fn.Name.Name
						if _, ok := jsonDecodersNotOfCallers[key]; !ok {
							if _, ok := jsonDecodersNotOfCallers[filepath.ToSlash(rel)+":"]; !ok {
								found = append(found, key+" ("+fset.Position(sel.Pos()).String()+")")
							}
						}
					}
					return true
				})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(found)
	for _, f := range slices.Compact(found) {
		t.Errorf("json decoding outside wire: %s; read a caller's JSON with tools.DecodeJSON, or list the function with why it is not a caller's", f)
	}
}
