package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// TestHTTPPlanBudget: over HTTP a statement whose plan is over the budget is refused with 422
// too_expensive and its plan, before it runs; a primary-key read passes; a token's budget and
// the X-PgTools-Max-Estimated-* headers lower the database's and never raise it; explain_query
// is served on /v1/tools/explain_query.
func TestHTTPPlanBudget(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE events (id int PRIMARY KEY, kind text, n int);
		INSERT INTO events SELECT i, 'k' || (i % 10), i FROM generate_series(1, 5000) i; ANALYZE events`)
	dsn := db.RoleDSN(t, "api")
	db.Exec(t, `GRANT UPDATE ON events TO "`+db.RoleName("api")+`"`)
	reg := toolstest.Registry(t, dsn, tools.Policy{MaxEstimatedRows: 100000}, 4)
	const tightToken = "tight-token-0123456789abcdef"
	toks := append(runnertest.Tokens(), auth.Token{Secret: tightToken, Name: "tight", Scopes: []string{"read", "write"}, MaxEstimatedRows: 10})
	srv := httptest.NewServer(httpapi.NewHandler(reg, toks, zerolog.Nop(), 4096))
	t.Cleanup(srv.Close)
	call := func(t *testing.T, tool, token, body string, headers map[string]string) (int, map[string]any) {
		t.Helper()
		req := apitest.Request(http.MethodPost, srv.URL+"/v1/tools/"+tool, token, body)
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		status, out, _ := apitest.Do(t, req)
		return status, out
	}
	const crossJoin = `{"sql":"select * from events a cross join events b"}`
	status, body := call(t, "execute_sql", runnertest.ReadToken, crossJoin, nil)
	if status != http.StatusUnprocessableEntity || body["errorType"] != "too_expensive" || body["plan"] == nil ||
		!strings.Contains(body["error"].(string), "25000000 rows, over max_estimated_rows 100000") {
		t.Fatalf("cross join: %d %v", status, body)
	}
	const byKey = `{"table":"events","where":"id = $1","params":[42]}`
	if status, body = call(t, "select_query", runnertest.ReadToken, byKey, nil); status != http.StatusOK || body["rowCount"] != float64(1) {
		t.Fatalf("primary-key read: %d %v", status, body)
	}
	const some = `{"table":"events","where":"id <= 100"}`
	if status, _ = call(t, "select_query", runnertest.ReadToken, some, nil); status != http.StatusOK {
		t.Fatalf("100 rows under the database's budget: %d", status)
	}
	if status, body = call(t, "select_query", tightToken, some, nil); status != http.StatusUnprocessableEntity {
		t.Fatalf("the token's budget of 10 rows: %d %v", status, body)
	}
	if status, body = call(t, "select_query", runnertest.ReadToken, some, map[string]string{httpapi.MaxEstimatedRowsHeader: "10"}); status != http.StatusUnprocessableEntity {
		t.Fatalf("the header's budget of 10 rows: %d %v", status, body)
	}
	if status, body = call(t, "select_query", runnertest.ReadToken, some, map[string]string{httpapi.MaxEstimatedCostHeader: "0.5"}); status != http.StatusUnprocessableEntity {
		t.Fatalf("the header's cost budget: %d %v", status, body)
	}
	if status, _ = call(t, "select_query", tightToken, some, map[string]string{httpapi.MaxEstimatedRowsHeader: "1000000"}); status != http.StatusUnprocessableEntity {
		t.Fatalf("a header raised the token's budget: %d", status)
	}
	if status, _ = call(t, "execute_sql", runnertest.ReadToken, crossJoin, map[string]string{httpapi.MaxEstimatedRowsHeader: "100000000"}); status != http.StatusUnprocessableEntity {
		t.Fatalf("a header raised the database's budget: %d", status)
	}
	before := db.QueryInt(t, "select sum(n) from events")
	if status, body = call(t, "update_data", runnertest.WriteToken, `{"table":"events","set":{"n":0},"where":"n > 0","autocommit":true,"max_affected_rows":10000}`,
		map[string]string{httpapi.MaxEstimatedRowsHeader: "1000"}); status != http.StatusUnprocessableEntity {
		t.Fatalf("an update over the header's budget: %d %v", status, body)
	}
	if after := db.QueryInt(t, "select sum(n) from events"); after != before {
		t.Fatalf("the refused update changed events: %d → %d", before, after)
	}
	for _, bad := range []struct{ header, value string }{{httpapi.MaxEstimatedCostHeader, "0"}, {httpapi.MaxEstimatedCostHeader, "cheap"},
		{httpapi.MaxEstimatedRowsHeader, "1.5"}, {httpapi.MaxEstimatedRowsHeader, "-1"}} {
		status, body = call(t, "select_query", runnertest.ReadToken, byKey, map[string]string{bad.header: bad.value})
		if status != http.StatusBadRequest || body["errorType"] != "invalid_arguments" || !strings.Contains(body["error"].(string), bad.header) {
			t.Errorf("%s: %s: %d %v", bad.header, bad.value, status, body)
		}
	}
	status, body = call(t, "explain_query", runnertest.ReadToken, `{"sql":"select * from events where kind = $1","params":["k1"]}`, nil)
	if status != http.StatusOK || body["operation"] != "explain" || body["scans"] == nil {
		t.Fatalf("explain_query: %d %v", status, body)
	}
}
