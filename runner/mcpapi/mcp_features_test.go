package mcpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// ddlToken may read, write and run DDL on the feature fixture's database.
const ddlToken = "ddl-token-0123456789abcdef01"

// mcpFeatures is a database where DDL is allowed and the runner's role owns the tables, so
// DROP and TRUNCATE reach the confirmation step: doomed (empty), big (150 rows) and the
// mcptest orders.
type mcpFeatures struct {
	db  *pgtest.DB
	reg *tools.Registry
	url string // the HTTP API with /mcp, token ddlToken
}

func newMCPFeatures(t *testing.T) *mcpFeatures {
	t.Helper()
	db := pgtest.New(t)
	dsn := db.RoleDSN(t, "mcpf")
	role := `"` + db.RoleName("mcpf") + `"`
	db.Exec(t, mcptest.Fixture)
	db.Exec(t, `CREATE TABLE doomed (id int PRIMARY KEY); ALTER TABLE doomed OWNER TO `+role+`;
		CREATE TABLE big (id int PRIMARY KEY, v text); INSERT INTO big SELECT i, 'x' FROM generate_series(1, 150) i; ALTER TABLE big OWNER TO `+role)
	reg := toolstest.Registry(t, dsn, tools.Policy{AllowDDL: true}, 4)
	srv := httptest.NewServer(httpapi.NewHandler(reg, []auth.Token{{Secret: ddlToken, Name: "ddl", Scopes: []string{"read", "write", "ddl"}}}, zerolog.Nop(), 1<<20))
	t.Cleanup(srv.Close)
	return &mcpFeatures{db: db, reg: reg, url: srv.URL}
}

// stdioLike connects the go-sdk client to an MCP server of the registry over an in-memory
// transport: one connection for the client's whole life, as on stdio.
func (f *mcpFeatures) stdioLike(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return f.stdioLikeVersion(t, opts, "")
}

// stdioLikeVersion is stdioLike with the client speaking protocol version v ("": its default).
func (f *mcpFeatures) stdioLikeVersion(t *testing.T, opts *mcp.ClientOptions, v string) *mcp.ClientSession {
	t.Helper()
	st, ct := mcp.NewInMemoryTransports()
	p := tools.Principal{Name: "stdio", Scopes: []string{"read", "write", "ddl"}}
	ss, err := mcpapi.NewMCPServerWith(f.reg, p, zerolog.Nop(), invoke.NewInvoker(f.reg, zerolog.Nop()), mcpapi.MCPOptions{}).Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pgtools-test", Version: "1"}, opts).Connect(t.Context(), ct, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// overHTTP connects the go-sdk client to /mcp with the latest protocol version.
func (f *mcpFeatures) overHTTP(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	return f.overHTTPVersion(t, opts, "")
}

// overHTTPVersion connects the go-sdk client to /mcp with protocol version v ("": the latest).
func (f *mcpFeatures) overHTTPVersion(t *testing.T, opts *mcp.ClientOptions, v string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pgtools-test", Version: "1"}, opts).Connect(t.Context(),
		apitest.MCPTransport(f.url, ddlToken), &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestMCPElicitation: a DROP without confirm_destructive and a delete over the row threshold ask
// the human (with the statement or the table and the row count); accept runs the call, decline
// answers confirmation_required and changes nothing; a client without elicitation keeps the
// refusal and the plain call. Over stdio-like and Streamable HTTP transports, with the go-sdk
// client at its default version (2026-07-28: multi-round-trip input requests) and, on stdio, at
// 2025-11-25 (elicitation/create requests on the connection): the same semantics either way.
func TestMCPElicitation(t *testing.T) {
	t.Parallel()
	for _, transport := range []string{"stdio", "stdio 2025-11-25", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			f := newMCPFeatures(t)
			connect := func(e *runnertest.Elicitor) *mcp.ClientSession {
				opts := &mcp.ClientOptions{}
				if e != nil {
					opts.ElicitationHandler = e.Handle
				}
				if transport == "http" {
					return f.overHTTP(t, opts)
				}
				_, v, _ := strings.Cut(transport, " ")
				cs := f.stdioLikeVersion(t, opts, v)
				if got := cs.InitializeResult().ProtocolVersion; v != "" && got != v {
					t.Fatalf("the client speaks %s, want %s", got, v)
				}
				return cs
			}
			exists := func(table string) bool {
				return f.db.QueryInt(t, "SELECT count(*) FROM pg_class WHERE relname = $1 AND relkind = 'r'", table) == 1
			}
			drop := map[string]any{"sql": "DROP TABLE doomed", "mode": "write", "autocommit": true}
			del := map[string]any{"table": "big", "where": "id > $1", "params": []any{0}, "autocommit": true}

			// Without elicitation: today's behaviour.
			plain := connect(nil)
			if out := runnertest.CallOut(t, plain, "execute_sql", drop); !out.IsError || out.Object["errorType"] != "confirmation_required" || !exists("doomed") {
				t.Fatalf("DROP without elicitation: %s", out.Text)
			}

			// Decline: nothing changes.
			no := &runnertest.Elicitor{Action: "decline"}
			cs := connect(no)
			out := runnertest.CallOut(t, cs, "execute_sql", drop)
			if !out.IsError || out.Object["errorType"] != "confirmation_required" || !strings.Contains(out.Object["error"].(string), "declined") || !exists("doomed") {
				t.Fatalf("declined DROP: %s", out.Text)
			}
			out = runnertest.CallOut(t, cs, "delete_data", del)
			if !out.IsError || out.Object["errorType"] != "confirmation_required" || f.db.QueryInt(t, "SELECT count(*) FROM big") != 150 {
				t.Fatalf("declined delete: %s", out.Text)
			}
			q := no.Questions()
			if len(q) != 2 || !strings.Contains(q[0], "DROP TABLE doomed") || !strings.Contains(q[1], "delete 150 rows of table big") {
				t.Fatalf("questions: %q", q)
			}

			// A small delete does not ask.
			out = runnertest.CallOut(t, cs, "delete_data", map[string]any{"table": "big", "where": "id = $1", "params": []any{150}, "autocommit": true})
			if out.IsError || out.Object["affectedRows"] != float64(1) || len(no.Questions()) != 2 {
				t.Fatalf("small delete: %s, questions %q", out.Text, no.Questions())
			}

			// Accept: the call runs.
			yes := &runnertest.Elicitor{Action: "accept"}
			cs = connect(yes)
			if out := runnertest.CallOut(t, cs, "execute_sql", drop); out.IsError || exists("doomed") {
				t.Fatalf("accepted DROP: %s", out.Text)
			}
			if out := runnertest.CallOut(t, cs, "delete_data", del); out.IsError || out.Object["affectedRows"] != float64(149) || f.db.QueryInt(t, "SELECT count(*) FROM big") != 0 {
				t.Fatalf("accepted delete: %s", out.Text)
			}
			if q := yes.Questions(); len(q) != 2 {
				t.Fatalf("accepted questions: %q", q)
			}
		})
	}
}

// TestMCPOutputSchema validates real results of every tool, successes and failures, against
// the outputSchema tools/list gives when structured content is on (HandlerOptions.MCP), and
// checks that each result carries its object as structuredContent too.
func TestMCPOutputSchema(t *testing.T) {
	t.Parallel()
	f := newMCPFeatures(t)
	srv := httptest.NewServer(httpapi.NewHandlerWith(f.reg, httpapi.HandlerOptions{Log: zerolog.Nop(), MCP: mcpapi.MCPOptions{StructuredContent: true},
		Tokens: []auth.Token{{Secret: ddlToken, Name: "ddl", Scopes: []string{"read", "write", "ddl"}}}}))
	t.Cleanup(srv.Close)
	f.url = srv.URL
	cs := f.overHTTP(t, nil)
	list, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	schemas := map[string]*jsonschema.Schema{}
	for _, tool := range list.Tools {
		raw, err := json.Marshal(tool.OutputSchema)
		if err != nil || tool.OutputSchema == nil {
			t.Fatalf("%s: outputSchema %v", tool.Name, tool.OutputSchema)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource(tool.Name+".json", doc); err != nil {
			t.Fatal(err)
		}
		if schemas[tool.Name], err = c.Compile(tool.Name + ".json"); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
	}
	calls := []struct {
		tool string
		args map[string]any
		fail bool
	}{
		{"select_query", map[string]any{"table": "orders"}, false},
		{"select_query", map[string]any{"table": "nope"}, true},
		{"describe_schema", map[string]any{}, false},
		{"describe_schema", map[string]any{"table": "orders"}, false},
		{"insert_data", map[string]any{"table": "big", "row": map[string]any{"id": 1000, "v": "new"}, "autocommit": true}, false},
		{"insert_data", map[string]any{"table": "big", "row": map[string]any{"id": 1001, "v": "new"}}, true},
		{"update_data", map[string]any{"table": "big", "set": map[string]any{"v": "y"}, "where": "id = 1000", "dry_run": true}, false},
		{"delete_data", map[string]any{"table": "big", "where": "id = 1000", "autocommit": true}, false},
		{"execute_sql", map[string]any{"sql": "select 1 as one"}, false},
		{"execute_sql", map[string]any{"sql": "selec 1"}, true},
		{"explain_query", map[string]any{"sql": "update big set v = 'x' where id = $1", "params": []any{1}}, false},
		{"explain_query", map[string]any{"sql": "explain analyze select 1"}, true},
		{"pg_tx", map[string]any{"action": "list"}, true}, // sessions are not enabled on this registry
		{"pg_tx", map[string]any{"action": "commit", "session_id": "00000000-0000-4000-8000-000000000000"}, true},
		{"pg_transaction", map[string]any{"operations": []any{map[string]any{"sql": "select 1"}, map[string]any{"sql": "update big set v = v where id = 1"}}}, false},
	}
	seen := map[string]bool{}
	for _, c := range calls {
		out := runnertest.CallOut(t, cs, c.tool, c.args)
		if out.IsError != c.fail || !out.Structured {
			t.Errorf("%s %v: isError %v, structuredContent %v: %s", c.tool, c.args, out.IsError, out.Structured, out.Text)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out.Text))
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas[c.tool].Validate(inst); err != nil {
			t.Errorf("%s result %s does not validate against its outputSchema: %v", c.tool, out.Text, err)
		}
		seen[c.tool] = true
	}
	if len(seen) != len(schemas) {
		t.Errorf("validated %d tools of %d", len(seen), len(schemas))
	}
	// The schema is not vacuous: a failure without its suggestion does not validate.
	bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"success":false,"error":"x","errorType":"timeout"}`))
	if schemas["select_query"].Validate(bad) == nil {
		t.Error("a failure without suggestion validates")
	}
}

// TestMCPProgress: a call longer than a second that names a progress token gets progress
// notifications, over Streamable HTTP (an SSE answer) and stdio-like transports.
func TestMCPProgress(t *testing.T) {
	t.Parallel()
	f := newMCPFeatures(t)
	for _, transport := range []string{"stdio", "http", "http-2025-11-25"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []*mcp.ProgressNotificationParams
			opts := &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				defer mu.Unlock()
				got = append(got, req.Params)
			}}
			var cs *mcp.ClientSession
			switch transport {
			case "stdio":
				cs = f.stdioLike(t, opts)
			case "http":
				cs = f.overHTTP(t, opts)
			default:
				cs = f.overHTTPVersion(t, opts, strings.TrimPrefix(transport, "http-"))
			}
			params := &mcp.CallToolParams{Name: "execute_sql", Arguments: map[string]any{"sql": "select pg_sleep(2.3) is null as slept"}}
			params.SetProgressToken("p-1")
			res, err := cs.CallTool(t.Context(), params)
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
			// The client handles notifications apart from results: give the last one a moment.
			runnertest.WaitFor(t, time.Second, "two progress notifications", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) >= 2 })
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 2 || got[0].ProgressToken != "p-1" || got[0].Progress != 1 || got[1].Progress != 2 || !strings.Contains(got[1].Message, "execute_sql") {
				t.Fatalf("progress notifications: %d %+v", len(got), got)
			}
		})
	}
}

// TestMCPCancel: cancelling a call (the go-sdk client sends notifications/cancelled and, on
// HTTP, abandons the POST) stops the statement on the server: it leaves pg_stat_activity.
func TestMCPCancel(t *testing.T) {
	t.Parallel()
	f := newMCPFeatures(t)
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			cs := f.stdioLike(t, nil)
			if transport == "http" {
				cs = f.overHTTP(t, nil)
			}
			f.assertCancelStops(t, "cancel_me_"+transport, func(ctx context.Context, sql string) {
				_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_sql", Arguments: map[string]any{"sql": sql}})
			})
		})
	}
}

// assertCancelStops runs call with a 30 s pg_sleep statement named by marker, cancels its context
// once the statement runs, and requires the statement to leave pg_stat_activity.
func (f *mcpFeatures) assertCancelStops(t *testing.T, marker string, call func(ctx context.Context, sql string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		call(ctx, "select pg_sleep(30) as "+marker)
	}()
	running := func() int64 {
		return f.db.QueryInt(t, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()", marker)
	}
	runnertest.WaitFor(t, 10*time.Second, "the statement to start", func() bool { return running() == 1 })
	cancel()
	<-done
	runnertest.WaitFor(t, 5*time.Second, "the statement to leave pg_stat_activity", func() bool { return running() == 0 })
}

// TestMCPProtocolVersions: the server offers the SDK's latest protocol version and answers an
// older client's initialize with the client's version; an unknown one gets the latest version
// a client can initialize with. The go-sdk client negotiates the SDK's latest (2026-07-28,
// without initialize).
func TestMCPProtocolVersions(t *testing.T) {
	t.Parallel()
	f := newMCPFeatures(t)
	for _, c := range []struct{ sent, want string }{
		{"2024-11-05", "2024-11-05"}, {"2025-03-26", "2025-03-26"}, {"2025-06-18", "2025-06-18"},
		{"2025-11-25", "2025-11-25"}, {"2099-01-01", "2025-11-25"},
	} {
		status, body, _ := apitest.MCPPost(t, f.url, ddlToken, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+c.sent+
			`","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`)
		if status != http.StatusOK || !strings.Contains(string(body), `"protocolVersion":"`+c.want+`"`) {
			t.Errorf("initialize with %s: %d %s, want %s", c.sent, status, body, c.want)
		}
	}
	cs := f.overHTTP(t, nil)
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Errorf("go-sdk client negotiated %q", v)
	}
	if out := runnertest.CallOut(t, cs, "select_query", map[string]any{"table": "orders"}); out.IsError {
		t.Errorf("select_query: %s", out.Text)
	}
}
