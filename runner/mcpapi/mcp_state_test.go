package mcpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/mcpapi"
)

// TestMCPConfirmStateIsKeyed: the requestState a 2026-07-28 client echoes with the human's
// answer is keyed by the runner, so nobody can compute it. An accept that carries a state the
// client made up (the plain hash of the tool and its arguments, as the state once was) or one
// the server issued with one character changed is no answer: the call asks again and deletes
// nothing. The state the server issued, echoed as it was, runs the call.
func TestMCPConfirmStateIsKeyed(t *testing.T) {
	t.Parallel()
	f := newMCPFeatures(t)
	srv := httptest.NewServer(httpapi.NewHandlerWith(f.reg, httpapi.HandlerOptions{Log: zerolog.Nop(),
		Tokens: []auth.Token{{Secret: ddlToken, Name: "ddl", Scopes: []string{"read", "write", "ddl"}}},
		MCP:    mcpapi.MCPOptions{ConfirmRowsOver: 10}}))
	t.Cleanup(srv.Close)
	const v = "2026-07-28"
	args := `{"table":"big","where":"id > $1","params":[130],"autocommit":true}`
	call := func(extra string) (resultType, state string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` +
			withMeta(v, `{"name":"delete_data","arguments":`+args+extra+`}`, `{"elicitation":{"form":{}}}`, "") + `}`
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ddlToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", v)
		setMethodHeaders(req, body)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out struct {
			Result struct {
				ResultType   string `json:"resultType"`
				RequestState string `json:"requestState"`
			} `json:"result"`
		}
		if err := json.Unmarshal(b, &out); err != nil || out.Result.ResultType == "" {
			t.Fatalf("answer %d %s", resp.StatusCode, b)
		}
		return out.Result.ResultType, out.Result.RequestState
	}
	answer := func(state string) string {
		return `,"inputResponses":{"pgtools_confirm":{"action":"accept"}},"requestState":"` + state + `"`
	}
	kind, issued := call("")
	if kind != "input_required" || issued == "" {
		t.Fatalf("the 20-row delete did not ask: %s %q", kind, issued)
	}
	h := sha256.Sum256([]byte("delete_data\x00" + args))
	unkeyed := "pgtools-confirm-v1:" + hex.EncodeToString(h[:])
	tampered := issued[:len(issued)-1] + map[bool]string{true: "0", false: "1"}[!strings.HasSuffix(issued, "0")]
	for name, forged := range map[string]string{"computed by the client": unkeyed, "tampered": tampered} {
		if kind, _ := call(answer(forged)); kind != "input_required" {
			t.Errorf("accept with a state %s: %s, want the question again", name, kind)
		}
		if n := f.db.QueryInt(t, `SELECT count(*) FROM big`); n != 150 {
			t.Fatalf("accept with a state %s deleted rows: %d left", name, n)
		}
	}
	if kind, _ := call(answer(issued)); kind != "complete" {
		t.Fatalf("accept with the issued state: %s, want complete", kind)
	}
	if n := f.db.QueryInt(t, `SELECT count(*) FROM big`); n != 130 {
		t.Errorf("after the accepted delete %d rows left, want 130", n)
	}
}

// TestMCPDuplicateKeysRefused: a message naming a key twice in one object, in its envelope,
// its _meta or the tool's arguments, is refused before the go-sdk or the fast path reads it,
// on every protocol version, with invalid_arguments naming the key; nothing runs.
func TestMCPDuplicateKeysRefused(t *testing.T) {
	t.Parallel()
	f := newMCPFeatures(t)
	srv := httptest.NewServer(httpapi.NewHandlerWith(f.reg, httpapi.HandlerOptions{Log: zerolog.Nop(),
		Tokens: []auth.Token{{Secret: ddlToken, Name: "ddl", Scopes: []string{"read", "write", "ddl"}}}}))
	t.Cleanup(srv.Close)
	del := `{"table":"big","where":"id > 100","autocommit":true}`
	for _, v := range mcpVersions() {
		for name, c := range map[string]struct{ body, key string }{
			"arguments": {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(v, `{"name":"delete_data","arguments":{"table":"big","where":"id > 149","where":"true","autocommit":true}}`, `{}`, "") + `}`, "where"},
			"method":    {`{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":` + withMeta(v, `{"name":"delete_data","arguments":`+del+`}`, `{}`, "") + `}`, "method"},
			"name":      {`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + withMeta(v, `{"name":"select_query","name":"delete_data","arguments":`+del+`}`, `{}`, "") + `}`, "name"},
			"batch":     {`[{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":` + withMeta(v, `{"name":"delete_data","arguments":`+del+`}`, `{}`, "") + `}]`, "id"},
		} {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer "+ddlToken)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if v != "" {
				req.Header.Set("Mcp-Protocol-Version", v)
				req.Header.Set("Mcp-Method", "tools/call")
				req.Header.Set("Mcp-Name", "delete_data")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var out struct {
				Error struct {
					Data struct {
						ErrorType string `json:"errorType"`
						Error     string `json:"error"`
					} `json:"data"`
				} `json:"error"`
			}
			_ = json.Unmarshal(b, &out)
			if resp.StatusCode != http.StatusBadRequest || out.Error.Data.ErrorType != "invalid_arguments" || !strings.Contains(out.Error.Data.Error, `"`+c.key+`" appears more than once`) {
				t.Errorf("version %q, duplicate %s: %d %s", v, name, resp.StatusCode, b)
			}
		}
	}
	if n := f.db.QueryInt(t, `SELECT count(*) FROM big`); n != 150 {
		t.Errorf("big has %d rows, want 150: a refused message ran", n)
	}
}
