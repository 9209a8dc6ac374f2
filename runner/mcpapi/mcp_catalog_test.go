package mcpapi_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/tiktoken-go/tokenizer"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/runnertest"
)

// catalogTokenBudget is docs/design.md §12's budget for the whole catalog of the built-in tools as an MCP
// client receives it from tools/list, in OpenAI's o200k encoding: 5,322 tokens at first; 4,487
// once the served schemas lost their header and second description; 2,390 with the descriptions
// rewritten and the validation-only keywords (pattern, minLength) no longer served; 2,440 with
// explain_query as a ninth tool, array and object size bounds no longer served and the shared
// database and params descriptions shortened; 2,479 with describe_schema's search, kind, detail,
// limit and page_token, maxLength not served, and defaults that said nothing (false, or what the
// description states) left out.
const catalogTokenBudget = 2500

// mcpCatalog returns the compact JSON of the tools array a client with token receives from
// tools/list on /mcp, and the same with each tool's outputSchema removed.
func mcpCatalog(t *testing.T, api *runnertest.APIFixture, token string) (whole, withoutOutput []byte) {
	t.Helper()
	status, body, _ := apitest.MCPPost(t, api.Srv.URL, token, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var resp struct {
		Result struct {
			Tools []map[string]json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &resp) != nil || len(resp.Result.Tools) == 0 {
		t.Fatalf("tools/list: %d %s", status, body)
	}
	compact := func(v any) []byte {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := json.Compact(&b, raw); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	whole = compact(resp.Result.Tools)
	for _, tool := range resp.Result.Tools {
		delete(tool, "outputSchema")
	}
	return whole, compact(resp.Result.Tools)
}

// o200k counts tokens of OpenAI's o200k encoding (the tokenizer module embeds it: no download).
func o200k(t testing.TB, b []byte) int {
	t.Helper()
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	ids, _, err := enc.Encode(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

// TestMCPCatalogTokens counts what the whole catalog of the built-in tools costs a model
// (docs/design.md §12), printing the figure, and fails above the ceiling. The outputSchema is counted
// apart: it is for the client to validate structuredContent with, and clients hand their model
// the name, description and input schema (the function-calling form has no output schema).
func TestMCPCatalogTokens(t *testing.T) {
	t.Parallel()
	api := runnertest.NewMCPAPI(t)
	whole, without := mcpCatalog(t, api, runnertest.AgentToken)
	n, nw := o200k(t, whole), o200k(t, without)
	t.Logf("tools/list, built-in tools: %d o200k tokens without outputSchema (budget %d); %d tokens (%d bytes) with it",
		nw, catalogTokenBudget, n, len(whole))
	if nw > catalogTokenBudget {
		t.Errorf("the catalog costs %d o200k tokens, over the %d budget: shorten descriptions in schemas/ or what schemas.Tool serves",
			nw, catalogTokenBudget)
	}
}
