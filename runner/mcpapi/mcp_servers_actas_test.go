package mcpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/runnertest"
)

// TestMCPActAsSubjectsKeepTheirIdentity: over /mcp, one act-as token calls for two subjects in
// turn; every answer runs with its own subject's claims, also once both servers are kept.
func TestMCPActAsSubjectsKeepTheirIdentity(t *testing.T) {
	t.Parallel()
	f := runnertest.NewIdentityFixture(t)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_sql","arguments":{"sql":"SELECT current_setting('request.jwt.claims', true) AS c"}}}`
	for i := range 6 {
		subject := []string{"alice", "bob"}[i%2]
		status, raw, _ := apitest.MCPPost(t, f.Srv.URL, runnertest.ActAsToken, call, auth.ActAsHeader, subject)
		var resp struct {
			Result struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if status != http.StatusOK || json.Unmarshal(raw, &resp) != nil || len(resp.Result.Content) != 1 {
			t.Fatalf("call %d for %s: %d %s", i, subject, status, raw)
		}
		var answer struct {
			Data []struct {
				C string `json:"c"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(resp.Result.Content[0].Text), &answer); err != nil || len(answer.Data) != 1 {
			t.Fatalf("call %d for %s: %s", i, subject, resp.Result.Content[0].Text)
		}
		if !strings.Contains(answer.Data[0].C, `"sub": "`+subject+`"`) && !strings.Contains(answer.Data[0].C, `"sub":"`+subject+`"`) {
			t.Errorf("call %d for %s ran with claims %s", i, subject, answer.Data[0].C)
		}
	}
}
