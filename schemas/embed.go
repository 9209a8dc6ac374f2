// Package schemas holds the JSON Schemas (draft 2020-12) of the arguments of
// every pgtools tool and of the runner's configuration file, embedded in the
// binary.
//
// The schema files are the single source of the words a model reads: their
// descriptions are served over MCP, HTTP (GET /v1/tools) and the n8n nodes,
// which import the same files at build time. The "x-pgtools" object of a
// tool schema names the tool, its place in the list and its class (scope,
// read-only, destructive) for the runner and the n8n build alike; it is read
// with Meta and never served. The files are the list of tools: ToolNames is
// read from them. Every function returns a fresh copy of the bytes, so callers may
// keep or modify the result; all functions are safe for concurrent use.
package schemas

import (
	"cmp"
	"embed"
	"encoding/json"
	"io/fs"
	"slices"
	"strings"
	"sync"
)

//go:embed *.json
var files embed.FS

// configFile is the name of the configuration schema inside files.
const configFile = "config.schema.json"

// ToolNames returns the wire names of the built-in tools in their canonical order, the order
// of /v1/tools, MCP tools/list and the n8n package: every embedded schema file but the config
// schema is a tool named by its file, placed by the "order" of its "x-pgtools" metadata
// (select_query, insert_data, update_data, delete_data, execute_sql, describe_schema,
// explain_query, pg_tx, pg_transaction). Adding a tool's file adds the tool; no list is kept
// here. Each call returns a new slice.
func ToolNames() []string {
	return slices.Clone(toolNames())
}

// toolNames reads the names and order of the tools from the embedded files once. The files are
// compiled in and checked by the tests (TestToolNames: distinct orders), so a file without
// valid metadata is a build defect and panics.
var toolNames = sync.OnceValue(func() []string {
	paths, err := fs.Glob(files, "*.json")
	if err != nil {
		panic("schemas: " + err.Error())
	}
	type tool struct {
		name  string
		order int
	}
	var all []tool
	for _, p := range paths {
		if p == configFile {
			continue
		}
		name := strings.TrimSuffix(p, ".json")
		all = append(all, tool{name, readMeta(name).Order})
	}
	// Ties (which the tests refuse) fall back to the name, so the order never depends on the
	// file system's.
	slices.SortFunc(all, func(a, b tool) int { return cmp.Or(cmp.Compare(a.order, b.order), strings.Compare(a.name, b.name)) })
	names := make([]string, len(all))
	for i, t := range all {
		names[i] = t.name
	}
	return names
})

// Tool returns the JSON Schema of the arguments of the tool with the given
// wire name (for example "select_query") as clients are shown it: the file
// without its "x-pgtools" metadata (see Meta), its "$schema", "$id" and
// "title", and its description, which is served once, as the tool's
// (Description). It returns false if no tool has that name.
//
// What validates a call is Validation, which keeps the keywords a model does not need to read:
// "pattern" (regular expressions; the answer to a mismatch says in words what to send),
// "minLength", "maxLength", and the size bounds of arrays and objects ("minItems", "maxItems",
// "minProperties"; descriptions say what matters of them). Tool serves the schema without them,
// as every token of it is paid on every turn.
func Tool(name string) ([]byte, bool) {
	raw, ok := Validation(name)
	if !ok {
		return nil, false
	}
	served, err := withoutKeywords(raw, "pattern", "minLength", "maxLength", "minItems", "maxItems", "minProperties")
	if err != nil {
		panic("schemas: " + name + ".json: " + err.Error())
	}
	return served, true
}

// Validation returns the schema that validates the arguments of the tool with the given wire
// name: Tool's document with every keyword. It returns false if no tool has that name.
func Validation(name string) ([]byte, bool) {
	if !slices.Contains(ToolNames(), name) {
		return nil, false
	}
	raw, err := withoutMeta(mustRead(name + ".json"))
	if err != nil {
		panic("schemas: " + name + ".json: " + err.Error())
	}
	return raw, true
}

// Description returns the description of the tool with the given wire name:
// the "description" of its schema file, what a model reads about the tool.
// It returns "" if no tool has that name.
func Description(name string) string {
	if !slices.Contains(ToolNames(), name) {
		return ""
	}
	var doc struct {
		Description string `json:"description"`
	}
	if err := json.Unmarshal(mustRead(name+".json"), &doc); err != nil {
		panic("schemas: " + name + ".json: " + err.Error())
	}
	return doc.Description
}

// Config returns the raw JSON Schema of the configuration file read by
// pgtools serve --config.
func Config() []byte {
	return mustRead(configFile)
}

// mustRead returns a copy of an embedded file. The files are compiled into
// the binary and their presence is checked by the tests, so a failure is a
// build defect, not a runtime condition.
func mustRead(name string) []byte {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("schemas: embedded file missing: " + name)
	}
	return b
}
