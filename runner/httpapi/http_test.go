package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/runnertest"
)

func TestHTTPAuthAndStatus(t *testing.T) {
	t.Parallel()
	_, dsn := runnertest.SetupDB(t)
	api := runnertest.NewAPI(t, dsn, runnertest.Tokens())

	cases := []struct {
		name, path, token, body string
		status                  int
		errorType               string
	}{
		{"no token", "/v1/tools/select_query", "", `{"table":"orders"}`, 401, "authentication_error"},
		{"wrong token", "/v1/tools/select_query", "wrong-token-0123456789abcdef", `{"table":"orders"}`, 401, "authentication_error"},
		{"token without read scope", "/v1/tools/select_query", runnertest.WriteToken, `{"table":"orders"}`, 403, "not_allowed"},
		{"unknown tool", "/v1/tools/drop_everything", runnertest.ReadToken, `{}`, 404, "unknown_tool"},
		{"invalid arguments", "/v1/tools/select_query", runnertest.ReadToken, `{"tabel":"orders"}`, 400, "invalid_arguments"},
		{"body not JSON", "/v1/tools/select_query", runnertest.ReadToken, `{"table":`, 400, "invalid_arguments"},
		{"unknown table", "/v1/tools/select_query", runnertest.ReadToken, `{"table":"ordrs"}`, 400, "invalid_table"},
		{"unknown column", "/v1/tools/select_query", runnertest.ReadToken, `{"table":"orders","columns":"idd"}`, 400, "invalid_column"},
		{"read only violation", "/v1/tools/execute_sql", runnertest.ReadToken, `{"sql":"delete from orders"}`, 403, "read_only_violation"},
		{"write with a read-only token", "/v1/tools/insert_data", runnertest.ReadToken, `{"table":"orders","row":{"id":9}}`, 403, "not_allowed"},
		{"body over the limit", "/v1/tools/select_query", runnertest.ReadToken, `{"table":"orders","where":"` + strings.Repeat("x", 5000) + `"}`, 400, "invalid_arguments"},
		{"ok", "/v1/tools/select_query", runnertest.ReadToken, `{"table":"orders","limit":2}`, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := api.Post(t, c.path, c.token, c.body)
			if status != c.status {
				t.Fatalf("status %d, want %d: %v", status, c.status, body)
			}
			if c.errorType == "" {
				if body["success"] != true || body["rowCount"].(float64) != 2 || body["truncated"] != true {
					t.Fatalf("unexpected success body: %v", body)
				}
				return
			}
			if body["success"] != false || body["errorType"] != c.errorType || body["suggestion"] == "" || body["error"] == "" {
				t.Fatalf("unexpected error body: %v", body)
			}
		})
	}
}

func TestHTTPAccessLogHasNoSecrets(t *testing.T) {
	t.Parallel()
	_, dsn := runnertest.SetupDB(t)
	api := runnertest.NewAPI(t, dsn, runnertest.Tokens())
	status, _, hdr := api.Post(t, "/v1/tools/select_query?token=query-string-secret", runnertest.ReadToken,
		`{"table":"orders","where":"status = $1","params":["PARAM-SECRET-VALUE"]}`)
	if status != 200 {
		t.Fatalf("status %d", status)
	}
	logs := api.Log.String()
	for _, secret := range []string{runnertest.ReadToken, "PARAM-SECRET-VALUE", "query-string-secret", dsn} {
		if strings.Contains(logs, secret) {
			t.Fatalf("access log contains a secret %q:\n%s", secret, logs)
		}
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(logs)), &line); err != nil {
		t.Fatalf("access log line is not one JSON object: %q", logs)
	}
	if line["req_id"] != hdr.Get("X-Request-Id") || line["principal"] != "reader" || line["tool"] != "select_query" || line["status"].(float64) != 200 {
		t.Fatalf("access log line lacks fields: %v", line)
	}
}

func TestHTTPCatalogEndpoints(t *testing.T) {
	t.Parallel()
	_, dsn := runnertest.SetupDB(t)
	api := runnertest.NewAPI(t, dsn, runnertest.Tokens())

	status, body, _ := apitest.Call(t, http.MethodGet, api.Srv.URL+"/v1/tools", runnertest.ReadToken, "")
	list, _ := body["tools"].([]any)
	if status != 200 || len(list) != 5 { // a read token is shown the read tools only (toollist_test.go)
		t.Fatalf("/v1/tools: %d %v", status, body)
	}
	names := map[string]bool{}
	for _, item := range list {
		m := item.(map[string]any)
		names[m["name"].(string)] = true
		if m["description"] == "" || m["inputSchema"] == nil {
			t.Fatalf("tool without description or schema: %v", m)
		}
		if m["name"] == "select_query" && m["readOnlyHint"] != true {
			t.Fatalf("select_query should be read-only: %v", m)
		}
	}
	for _, n := range []string{"select_query", "execute_sql", "describe_schema", "pg_tx"} {
		if !names[n] {
			t.Fatalf("/v1/tools lacks %s", n)
		}
	}

	status, body, _ = apitest.Call(t, http.MethodGet, api.Srv.URL+"/openapi.json", runnertest.ReadToken, "")
	paths, _ := body["paths"].(map[string]any)
	if status != 200 || body["openapi"] != "3.1.0" || paths["/v1/tools/select_query"] == nil {
		t.Fatalf("/openapi.json: %d %v", status, body)
	}

	for _, p := range []string{"/healthz", "/readyz"} {
		if status, body, _ = apitest.Call(t, http.MethodGet, api.Srv.URL+p, "", ""); status != 200 {
			t.Fatalf("%s: %d %v", p, status, body)
		}
	}
}

func TestHTTPReadyzWhenDatabaseIsDown(t *testing.T) {
	t.Parallel()
	// A port nobody listens on: the runner starts, is alive, and reports not ready.
	api := runnertest.NewAPI(t, "postgres://nobody:hunter2-password@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", runnertest.Tokens())
	if status, _, _ := apitest.Call(t, http.MethodGet, api.Srv.URL+"/healthz", "", ""); status != 200 {
		t.Fatalf("/healthz: %d", status)
	}
	status, body, _ := apitest.Call(t, http.MethodGet, api.Srv.URL+"/readyz", "", "")
	if status != 503 || strings.Contains(body["reason"].(string), "hunter2") {
		t.Fatalf("/readyz: %d %v", status, body)
	}
	status, body, _ = api.Post(t, "/v1/tools/select_query", runnertest.ReadToken, `{"table":"orders"}`)
	raw, _ := json.Marshal(body)
	if status != 503 || body["errorType"] != "connection_error" || strings.Contains(string(raw), "hunter2") || strings.Contains(string(raw), "nobody") {
		t.Fatalf("call with database down: %d %s", status, raw)
	}
}
