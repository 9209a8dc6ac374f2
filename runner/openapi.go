package runner

import (
	"encoding/json"
	"net/http"

	"github.com/pgtools/pgtools/tools"
)

// openapi serves an OpenAPI 3.1 document built from the same schemas the tools validate with
// (3.1 takes JSON Schema 2020-12 as is). A request with a token (or any request on a runner
// without tokens) gets the paths of the tools its principal can use, like GET /v1/tools; a
// request without one gets every tool, since the schemas are no secret and an API client is
// often generated before a token is at hand. A bad token is refused as on the API.
func (h *handler) openapi(w http.ResponseWriter, r *http.Request) {
	list := h.reg.Tools()
	if h.auth.open || r.Header.Get("Authorization") != "" {
		p, terr := h.auth.authenticate(r)
		if terr != nil {
			if terr.Type == tools.ErrAuthentication {
				w.Header().Set("WWW-Authenticate", h.auth.challenge(r))
				writeErrorStatus(w, http.StatusUnauthorized, terr)
				return
			}
			writeError(w, terr)
			return
		}
		list = h.reg.ToolsFor(p)
	}
	errorSchema := map[string]any{"type": "object", "required": []string{"success", "error", "errorType", "suggestion"},
		"properties": map[string]any{
			"success": map[string]any{"const": false}, "operation": map[string]any{"type": "string"},
			"table": map[string]any{"type": "string"}, "error": map[string]any{"type": "string"},
			"errorType": map[string]any{"type": "string"}, "suggestion": map[string]any{"type": "string"},
			"sqlState": map[string]any{"type": "string"},
		}}
	resultSchema := map[string]any{"type": "object", "required": []string{"success", "operation"},
		"properties": map[string]any{
			"success": map[string]any{"const": true}, "operation": map[string]any{"type": "string"},
			"table": map[string]any{"type": "string"}, "rowCount": map[string]any{"type": "integer"},
			"affectedRows": map[string]any{"type": "integer"}, "data": map[string]any{},
			"truncated": map[string]any{"type": "boolean"}, "executionTime": map[string]any{"type": "string"},
			"hint": map[string]any{"type": "string"},
		}}
	paths := map[string]any{}
	errRef := map[string]any{"description": "Error object", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
	for _, t := range list {
		paths["/v1/tools/"+t.Name] = map[string]any{"post": map[string]any{
			"operationId": t.Name, "summary": t.Description,
			"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": t.InputSchema}}},
			"responses": map[string]any{
				"200":     map[string]any{"description": "Success", "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Result"}}}},
				"default": errRef,
			},
		}}
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "pgtools", "version": Version, "description": "Safe PostgreSQL tools for AI agents."},
		"paths":   paths,
		"components": map[string]any{
			"schemas":         map[string]any{"Error": errorSchema, "Result": resultSchema},
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
		"security": []any{map[string]any{"bearer": []string{}}},
	}
	out, _ := json.Marshal(doc)
	writeJSON(w, http.StatusOK, out)
}
