package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"

	"github.com/pgtools/pgtools/runner/internal/httpx"
	"github.com/pgtools/pgtools/runner/version"
	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools"
)

// openapi serves an OpenAPI 3.1 document built from the same schemas the tools validate with
// (3.1 takes JSON Schema 2020-12 as is), listing the tools the caller's principal can use, like
// GET /v1/tools. It needs a token like the API (the operator's tools and the shape of each
// token's list are nobody else's business), except on a runner without tokens, where every
// caller is the local principal, and under openapi_public, where a request without a token gets
// the built-in catalog (publicCatalog), since an API client is often generated before a token is
// at hand. A bad token is refused as on the API, public or not.
func (h *handler) openapi(w http.ResponseWriter, r *http.Request) {
	if h.openapiPublic && !h.auth.Open() && r.Header.Get("Authorization") == "" {
		httpx.WriteJSON(w, http.StatusOK, openAPIDoc(h.publicCatalog(), false))
		return
	}
	h.authed(func(w http.ResponseWriter, r *http.Request, p tools.Principal) {
		httpx.WriteJSON(w, http.StatusOK, openAPIDoc(h.reg.ToolsFor(p), p.Can("approve")))
	})(w, r)
}

// publicCatalog is what openapi_public publishes without a token: the built-in tools (named by
// schemas/, so an operator's tool is never among them whatever its name) that a token with every
// scope and database could use. It depends on the configuration alone, never on a token.
func (h *handler) publicCatalog() []tools.ToolInfo {
	builtin := schemas.ToolNames()
	var out []tools.ToolInfo
	for _, t := range h.reg.ToolsFor(tools.Principal{Scopes: []string{"read", "write", "ddl"}}) {
		if slices.Contains(builtin, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// openAPIDoc is the OpenAPI document listing list, and the approvals API for an approver.
func openAPIDoc(list []tools.ToolInfo, approver bool) []byte {
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
			"truncated": map[string]any{"type": "boolean"}, "next_page": map[string]any{"type": "string"},
			"executionTime": map[string]any{"type": "string"},
			"hint":          map[string]any{"type": "string"},
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
	if approver {
		addApprovalPaths(paths, errRef)
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": "pgtools", "version": version.Version, "description": "Safe PostgreSQL tools for AI agents."},
		"paths":   paths,
		"components": map[string]any{
			"schemas":         map[string]any{"Error": errorSchema, "Result": resultSchema},
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
		"security": []any{map[string]any{"bearer": []string{}}},
	}
	out, _ := json.Marshal(doc)
	return out
}

// addApprovalPaths adds the approvals API (approvals.go) to paths.
func addApprovalPaths(paths map[string]any, errRef map[string]any) {
	answer := func(desc string) map[string]any {
		return map[string]any{"200": map[string]any{"description": desc, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}},
			"default": errRef}
	}
	id := []any{map[string]any{"name": "id", "in": "path", "required": true, "schema": map[string]any{"type": "string", "pattern": "^apr_[0-9a-f]+$"}}}
	paths["/v1/approvals"] = map[string]any{"get": map[string]any{"operationId": "list_approvals",
		"summary": "The pending approval requests this approver may decide, oldest first.", "responses": answer(`{"success": true, "approvals": [...]}`)}}
	paths["/v1/approvals/{id}"] = map[string]any{
		"get": map[string]any{"operationId": "get_approval", "summary": "One approval request.", "parameters": id,
			"responses": answer(`{"success": true, "approval": {...}}`)},
		"post": map[string]any{"operationId": "decide_approval", "summary": "Approve or deny a pending approval request.", "parameters": id,
			"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
				"type": "object", "additionalProperties": false, "required": []string{"decision"},
				"properties": map[string]any{"decision": map[string]any{"enum": []string{"approve", "deny"}}}}}}},
			"responses": answer(`{"success": true, "approval": {...}}`)},
	}
}
