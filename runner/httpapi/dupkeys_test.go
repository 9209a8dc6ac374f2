package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/apitest"
)

// TestDuplicateKeysRefused: a JSON body that names a key twice in one object is refused as
// invalid_arguments naming the key, whichever value would win: the approvals API's
// {"decision":"deny","decision":"approve"} (in either order, with an escaped spelling, or with
// the key's case changed) leaves the request pending, and a tool call's arguments with a
// duplicate at any depth run nothing.
func TestDuplicateKeysRefused(t *testing.T) {
	t.Parallel()
	f := newApprovalRunner(t)
	f.seed(t, 120)
	id := f.request(t)
	for _, body := range []string{`{"decision":"deny","decision":"approve"}`, `{"decision":"approve","decision":"deny"}`,
		`{"decision":"deny","d\u0065cision":"approve"}`} {
		status, out := f.api(t, http.MethodPost, "/"+id, aprApproverToken, body)
		if status != http.StatusBadRequest || out["errorType"] != "invalid_arguments" || !strings.Contains(out["error"].(string), `"decision" appears more than once`) {
			t.Errorf("decision %s: %d %v", body, status, out)
		}
	}
	// encoding/json matches struct fields without case: "Decision" must not be read as a decision.
	if status, out := f.api(t, http.MethodPost, "/"+id, aprApproverToken, `{"decision":"deny","Decision":"approve"}`); status != http.StatusBadRequest || out["errorType"] != "invalid_arguments" {
		t.Errorf("a second spelling of decision: %d %v", status, out)
	}
	if status, out := f.api(t, http.MethodGet, "/"+id, aprApproverToken, ""); status != http.StatusOK || out["approval"].(map[string]any)["status"] != "pending" {
		t.Fatalf("after the refused decisions: %d %v, want pending", status, out)
	}
	for _, args := range []string{
		`{"table":"orders","where":"id = 1","where":"true","autocommit":true}`,
		`{"table":"orders","where":"note = $1","params":["x"],"autocommit":true,"autocommit":false}`,
	} {
		status, out, _ := apitest.Call(t, http.MethodPost, f.url+"/v1/tools/delete_data", aprCallerToken, args)
		if status != http.StatusBadRequest || out["errorType"] != "invalid_arguments" || !strings.Contains(out["error"].(string), "appears more than once") {
			t.Errorf("arguments %s: %d %v", args, status, out)
		}
	}
	status, out, _ := apitest.Call(t, http.MethodPost, f.url+"/v1/tools/select_query", aprCallerToken, `{"table":"orders","where":{"a":1,"a":2}}`)
	if status != http.StatusBadRequest || out["errorType"] != "invalid_arguments" || !strings.Contains(out["error"].(string), `"a" appears more than once in "where"`) {
		t.Errorf("a nested duplicate: %d %v", status, out)
	}
	if n := f.orders(t); n != 170 {
		t.Errorf("orders: %d, want 170 (nothing deleted)", n)
	}
}
