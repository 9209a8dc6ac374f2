package mcpapi_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// discoverySQL is a small catalog to discover: tables in two schemas, one found by a word of
// its comment, one by a column, and a view.
const discoverySQL = `
CREATE SCHEMA sales;
CREATE TABLE sales.customers (id int PRIMARY KEY, email text);
COMMENT ON TABLE sales.customers IS 'Everyone who ever bought a kayak';
CREATE TABLE sales.kayak_orders (id int PRIMARY KEY, customer_id int REFERENCES sales.customers (id), paddle_count int);
CREATE TABLE public.audit_trail (id int PRIMARY KEY, zebra_code text);
CREATE VIEW public.recent AS SELECT id FROM public.audit_trail;
`

// TestDiscoveryOverTransports: describe_schema's search, kind, detail, limit and page_token work
// the same over HTTP and over MCP in both protocol generations: a search finds a table by a word
// of its comment, pages continue with next_page alone, and an empty search is invalid_arguments.
func TestDiscoveryOverTransports(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, discoverySQL)
	dsn := db.RoleDSN(t, "disc")
	role := db.RoleName("disc")
	db.Exec(t, `GRANT USAGE ON SCHEMA sales TO "`+role+`"; GRANT SELECT ON ALL TABLES IN SCHEMA sales TO "`+role+`"`)
	reg := toolstest.Registry(t, dsn, tools.Policy{}, 4)
	srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Log: zerolog.Nop(), Tokens: runnertest.MCPTokens()}))
	t.Cleanup(srv.Close)

	// Each transport as a function from arguments to the answer object and whether it is an error.
	type call func(t *testing.T, args string) (map[string]any, bool)
	overHTTP := func(t *testing.T, args string) (map[string]any, bool) {
		status, out, _ := apitest.Call(t, http.MethodPost, srv.URL+"/v1/tools/describe_schema", runnertest.AgentToken, args)
		return out, status != http.StatusOK
	}
	overMCP := func(v string) call {
		return func(t *testing.T, args string) (map[string]any, bool) {
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + paramsFor(v, `{"name":"describe_schema","arguments":`+args+`}`) + `}`
			status, raw := mcpPOST(t, srv.URL, runnertest.AgentToken, v, body, nil)
			var resp struct {
				Result struct {
					IsError bool `json:"isError"`
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
				} `json:"result"`
			}
			if status != http.StatusOK || json.Unmarshal(raw, &resp) != nil || len(resp.Result.Content) != 1 {
				t.Fatalf("MCP %s: %d %s", v, status, raw)
			}
			var out map[string]any
			if err := json.Unmarshal([]byte(resp.Result.Content[0].Text), &out); err != nil {
				t.Fatalf("MCP %s: %v: %s", v, err, raw)
			}
			return out, resp.Result.IsError
		}
	}
	names := func(out map[string]any) []string {
		var got []string
		for _, e := range out["data"].([]any) {
			switch v := e.(type) {
			case string:
				got = append(got, v)
			case map[string]any:
				got = append(got, v["schema"].(string)+"."+v["name"].(string))
			}
		}
		return got
	}
	for name, do := range map[string]call{"HTTP": overHTTP, "MCP 2025-11-25": overMCP("2025-11-25"), "MCP 2026-07-28": overMCP("2026-07-28")} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			out, isErr := do(t, `{"search":"kayak","detail":"summary","kind":"table"}`)
			if isErr || !slices.Equal(names(out), []string{"sales.kayak_orders", "sales.customers"}) {
				t.Fatalf("search kayak: %v", out)
			}
			out, _ = do(t, `{"search":"zebra","detail":"names"}`)
			if !slices.Equal(names(out), []string{"audit_trail"}) {
				t.Fatalf("search zebra: %v", out)
			}
			var all []string
			out, _ = do(t, `{"limit":2,"detail":"names"}`)
			for {
				all = append(all, names(out)...)
				if out["truncated"] != true {
					break
				}
				out, isErr = do(t, `{"page_token":"`+out["next_page"].(string)+`"}`)
				if isErr {
					t.Fatalf("page: %v", out)
				}
			}
			if !slices.Equal(all, []string{"audit_trail", "recent", "sales.customers", "sales.kayak_orders"}) {
				t.Fatalf("pages: %q", all)
			}
			out, _ = do(t, `{"table":"sales.customers"}`)
			if joins, _ := json.Marshal(out["data"].(map[string]any)["referencedBy"]); !strings.Contains(string(joins), "kayak_orders") {
				t.Fatalf("customers' joins: %s", joins)
			}
			out, isErr = do(t, `{"search":""}`)
			if !isErr || out["errorType"] != "invalid_arguments" {
				t.Fatalf("empty search: %v", out)
			}
		})
	}
}
