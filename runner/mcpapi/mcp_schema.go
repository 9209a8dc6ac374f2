package mcpapi

import (
	"encoding/json"
)

// mcpOutputSchema is the outputSchema of one tool on MCP: the JSON object every call of it
// answers in structuredContent, success or failure (docs/design.md §4), so a client can validate results
// before its model reads them. Fields a future version adds are allowed (additionalProperties),
// the ones a model relies on are typed, and the two shapes are told apart by "success".
//
// data depends on the tool: rows (format "objects" or "columns") or CSV text for the tools that
// return rows, the catalog for describe_schema.
func mcpOutputSchema(tool string) json.RawMessage {
	// Rows are objects or arrays (format "objects" or "columns"), or CSV text (format "csv").
	data := map[string]any{"type": []string{"array", "string"}}
	switch tool {
	case "describe_schema":
		// The tables (without table), or the table's columns, keys and indexes.
		data = map[string]any{"type": []string{"array", "object"}}
	case "pg_tx", "pg_transaction":
		data = map[string]any{}
	}
	str := map[string]any{"type": "string"}
	count := map[string]any{"type": "integer", "minimum": 0}
	s := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"success":      map[string]any{"type": "boolean"},
			"operation":    str,
			"table":        str,
			"rowCount":     count,
			"affectedRows": count,
			"data":         data,
			"truncated":    map[string]any{"type": "boolean"},
			"next_page":    str,
			"hint":         str,
			"session_id":   str,
			"results": map[string]any{"type": "array", "items": map[string]any{"type": "object",
				"properties": map[string]any{"command": str, "rowCount": count}, "required": []string{"command", "rowCount"}}},
			"error":      str,
			"errorType":  str,
			"suggestion": str,
		},
		"required": []string{"success"},
		// A failure always says what went wrong and how to fix the call; a success what it did.
		"if":   map[string]any{"properties": map[string]any{"success": map[string]any{"const": false}}},
		"then": map[string]any{"required": []string{"error", "errorType", "suggestion"}},
		"else": map[string]any{"required": []string{"operation"}},
	}
	b, err := json.Marshal(s)
	if err != nil {
		panic(err) // a literal above; cannot fail
	}
	return b
}
