package runner_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/auth/authtest"
	"github.com/pgtools/pgtools/runner/runnertest"
)

func rowsOf(t *testing.T, body map[string]any) []map[string]any {
	t.Helper()
	data, ok := body["data"].([]any)
	if !ok {
		t.Fatalf("no rows in %v", body)
	}
	out := make([]map[string]any, len(data))
	for i, r := range data {
		out[i], _ = r.(map[string]any)
	}
	return out
}

// TestTwoTenantsSeeAndChangeOnlyTheirRows: two JWTs naming two tenants read, update and delete
// only their rows through select_query, execute_sql and a session; a write violating the
// policy's WITH CHECK is refused and nothing lands.
func TestTwoTenantsSeeAndChangeOnlyTheirRows(t *testing.T) {
	t.Parallel()
	f := runnertest.NewIdentityFixture(t)
	a, b := f.TenantToken(t, "alice", "a"), f.TenantToken(t, "bob", "b")
	for _, c := range []struct {
		token string
		want  int
	}{{a, 2}, {b, 1}} {
		status, body, _ := f.Post(t, "/v1/tools/select_query", c.token, `{"table": "docs"}`)
		if status != http.StatusOK || len(rowsOf(t, body)) != c.want {
			t.Fatalf("select_query: %d %v, want %d rows", status, body, c.want)
		}
		for _, r := range rowsOf(t, body) {
			if (c.token == a) != (r["tenant"] == "a") {
				t.Errorf("a tenant read another's row: %v", r)
			}
		}
	}
	// b updates everything it can: only its row changes.
	status, body, _ := f.Post(t, "/v1/tools/execute_sql", b, `{"sql": "UPDATE docs SET body = 'changed'", "mode": "write", "autocommit": true}`)
	if status != http.StatusOK {
		t.Fatalf("update: %d %v", status, body)
	}
	if n := f.DB.QueryInt(t, `SELECT count(*) FROM docs WHERE body = 'changed'`); n != 1 {
		t.Errorf("tenant b changed %d rows, want its 1", n)
	}
	// a deletes inside a session: only its rows go.
	status, body, _ = f.Post(t, "/v1/tools/pg_tx", a, `{"action": "begin"}`)
	if status != http.StatusOK {
		t.Fatalf("begin: %d %v", status, body)
	}
	sid, _ := body["session_id"].(string)
	status, body, _ = f.Post(t, "/v1/tools/execute_sql", a, `{"sql": "DELETE FROM docs", "mode": "write", "confirm_destructive": true, "session_id": "`+sid+`"}`)
	if status != http.StatusOK {
		t.Fatalf("delete in session: %d %v", status, body)
	}
	if status, body, _ = f.Post(t, "/v1/tools/pg_tx", a, `{"action": "commit", "session_id": "`+sid+`"}`); status != http.StatusOK {
		t.Fatalf("commit: %d %v", status, body)
	}
	if n := f.DB.QueryInt(t, `SELECT count(*) FROM docs`); n != 1 {
		t.Errorf("%d rows left, want tenant b's 1", n)
	}
	// a inserts a row of tenant b: WITH CHECK refuses it, nothing lands.
	status, body, _ = f.Post(t, "/v1/tools/execute_sql", a, `{"sql": "INSERT INTO docs VALUES (9, 'b', 'forged')", "mode": "write", "autocommit": true}`)
	if status == http.StatusOK || body["errorType"] != "permission_denied" {
		t.Errorf("a write violating WITH CHECK: %d %v, want permission_denied", status, body)
	}
	if n := f.DB.QueryInt(t, `SELECT count(*) FROM docs WHERE id = 9`); n != 0 {
		t.Error("the forged row landed")
	}
	if strings.Contains(f.Log.String(), authtest.TenantSecret) {
		t.Errorf("a claim value reached the log:\n%s", f.Log.String())
	}
}

// TestActAs: a token with act_as acts for the subject of X-PgTools-Act-As (role and claims
// {"sub", "via"} plus the fixed ones); its sessions belong to the subject; a token without
// act_as sending the header is refused with not_allowed and nothing runs.
func TestActAs(t *testing.T) {
	t.Parallel()
	f := runnertest.NewIdentityFixture(t)
	status, body, _ := f.Post(t, "/v1/tools/execute_sql", runnertest.ActAsToken,
		`{"sql": "SELECT current_user AS u, current_setting('request.jwt.claims', true) AS c"}`, auth.ActAsHeader, "user-42")
	if status != http.StatusOK {
		t.Fatalf("act as: %d %v", status, body)
	}
	row := rowsOf(t, body)[0]
	var claims map[string]any
	_ = json.Unmarshal([]byte(row["c"].(string)), &claims)
	if row["u"] != f.Role || claims["sub"] != "user-42" || claims["via"] != "hub" || claims["app"] != "crm" {
		t.Errorf("acting for user-42 ran as %v with claims %v", row["u"], claims)
	}
	if !strings.Contains(f.Log.String(), `"principal":"hub:user-42"`) {
		t.Errorf("the access log does not name the subject's principal:\n%s", f.Log.String())
	}

	// Sessions are the subject's: another subject of the same token cannot use one.
	status, body, _ = f.Post(t, "/v1/tools/pg_tx", runnertest.ActAsToken, `{"action": "begin"}`, auth.ActAsHeader, "alice")
	if status != http.StatusOK {
		t.Fatalf("begin: %d %v", status, body)
	}
	sid, _ := body["session_id"].(string)
	for _, other := range []string{"bob", ""} {
		h := []string{auth.ActAsHeader, other}
		if other == "" {
			h = nil // the token itself, acting for nobody
		}
		status, body, _ = f.Post(t, "/v1/tools/select_query", runnertest.ActAsToken, `{"table": "probe", "session_id": "`+sid+`"}`, h...)
		if status != http.StatusNotFound || body["errorType"] != "session_not_found" {
			t.Errorf("subject %q used alice's session: %d %v, want session_not_found", other, status, body)
		}
	}
	if status, body, _ = f.Post(t, "/v1/tools/select_query", runnertest.ActAsToken, `{"table": "probe", "session_id": "`+sid+`"}`, auth.ActAsHeader, "alice"); status != http.StatusOK {
		t.Errorf("alice cannot use her session: %d %v", status, body)
	}

	// A token without act_as: not_allowed, nothing run.
	status, body, _ = f.Post(t, "/v1/tools/execute_sql", runnertest.PlainToken, runnertest.InsertProbe, auth.ActAsHeader, "user-42")
	if status != http.StatusForbidden || body["errorType"] != "not_allowed" {
		t.Errorf("act-as without act_as: %d %v, want 403 not_allowed", status, body)
	}
	// A JWT principal may not act for others either.
	status, body, _ = f.Post(t, "/v1/tools/execute_sql", f.TenantToken(t, "alice", "a"), runnertest.InsertProbe, auth.ActAsHeader, "user-42")
	if status != http.StatusForbidden || body["errorType"] != "not_allowed" {
		t.Errorf("act-as with a JWT: %d %v, want 403 not_allowed", status, body)
	}
	if n := f.DB.QueryInt(t, `SELECT count(*) FROM probe`); n != 0 {
		t.Errorf("%d rows landed through refused act-as calls", n)
	}
	// A subject with control characters is refused without being echoed.
	status, body, _ = f.Post(t, "/v1/tools/select_query", runnertest.ActAsToken, `{"table": "probe"}`, auth.ActAsHeader, "a\tb")
	if status != http.StatusBadRequest || body["errorType"] != "invalid_arguments" {
		t.Errorf("bad subject: %d %v", status, body)
	}
}
