package invoke_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/session"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// routedFixture is a registry over two databases, "default" (empty) and "reports" (table big,
// 150 rows, owned by the runner's role, DDL allowed), with sessions, an audit log and the
// operator-defined write tool purge_big bound to reports.
type routedFixture struct {
	reports *pgtest.DB
	reg     *tools.Registry
	audit   *pgtest.SyncBuffer
}

func newRoutedFixture(t *testing.T) *routedFixture {
	t.Helper()
	main, reports := pgtest.New(t), pgtest.New(t)
	dsn := reports.RoleDSN(t, "routed")
	reports.Exec(t, `CREATE TABLE big (id int PRIMARY KEY); INSERT INTO big SELECT generate_series(1, 150);
		ALTER TABLE big OWNER TO "`+reports.RoleName("routed")+`"`)
	policy := tools.Policy{AllowDDL: true}
	cfg, err := tools.PoolConfig(dsn, policy, 4)
	if err != nil {
		t.Fatal(err)
	}
	mgr := session.New(session.Config{})
	t.Cleanup(func() { mgr.Close(context.Background()) })
	audit := &pgtest.SyncBuffer{}
	reg, err := tools.NewRegistry(t.Context(), tools.Options{Databases: []*tools.Database{
		toolstest.Database(t, main.RoleDSN(t, "routed"), tools.Policy{}, 2),
		tools.NewDatabase("reports", pgtest.OpenPool(t, cfg), policy)},
		Sessions: mgr, Auditor: invoke.NewAuditLog(audit),
		CustomTools: []tools.CustomTool{{Name: "purge_big", Description: "Delete the rows of big above min.",
			Database: "reports", Mode: "write", SQL: "DELETE FROM big WHERE id > $1", Parameters: []tools.CustomParam{{Name: "min", Type: "integer"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return &routedFixture{reports: reports, reg: reg, audit: audit}
}

// TestCallsNameTheRoutedDatabase: a call in a session begun on a second database and a call of
// an operator-defined tool bound to it are logged, audited and traced on that database, not on
// "default" (which their arguments imply when read alone), over the HTTP API.
func TestCallsNameTheRoutedDatabase(t *testing.T) {
	t.Parallel()
	f := newRoutedFixture(t)
	logs := &pgtest.SyncBuffer{}
	recv := runnertest.NewOTLPReceiver(t)
	exp, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(recv.Srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	srv := httptest.NewServer(httpapi.NewHandlerWith(f.reg, httpapi.HandlerOptions{Log: zerolog.New(logs), Tracer: tp}))
	t.Cleanup(srv.Close)
	post := func(tool, body string) map[string]any {
		t.Helper()
		status, out, _ := apitest.Call(t, http.MethodPost, srv.URL+"/v1/tools/"+tool, "", body)
		if status != http.StatusOK {
			t.Fatalf("%s %s: %d %v", tool, body, status, out)
		}
		return out
	}

	id := post("pg_tx", `{"action":"begin","database":"reports"}`)["session_id"].(string)
	post("delete_data", `{"table":"big","where":"id > $1","params":[149],"session_id":"`+id+`"}`)
	post("pg_tx", `{"action":"rollback","session_id":"`+id+`"}`)
	post("purge_big", `{"min":149,"dry_run":true}`)

	for _, tool := range []string{"delete_data", "purge_big"} {
		lines := runnertest.JSONLines(t, logs, "tool", tool)
		if len(lines) != 1 || lines[0]["database"] != "reports" {
			t.Errorf("log line of %s: %v, want database reports", tool, lines)
		}
		audits := runnertest.JSONLines(t, f.audit, "tool", tool)
		if len(audits) != 1 || audits[0]["database"] != "reports" {
			t.Errorf("audit of %s: %v, want database reports", tool, audits)
		}
	}
	if l := runnertest.JSONLines(t, logs, "tool", "delete_data"); len(l) == 1 && l[0]["session"] != id {
		t.Errorf("log line of the session call: %v, want session %s", l[0], id)
	}
	spans := 0
	for _, s := range recv.Received() {
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[kv.Key] = kv.Value.GetStringValue()
		}
		if tool := attrs["pgtools.tool"]; tool == "delete_data" || tool == "purge_big" {
			spans++
			if attrs["pgtools.database"] != "reports" {
				t.Errorf("span of %s: pgtools.database %q, want reports", tool, attrs["pgtools.database"])
			}
		}
	}
	if spans != 2 {
		t.Errorf("%d spans of the two calls, want 2", spans)
	}
}

// TestMCPConfirmationNamesTheRoutedDatabase: the human asked to confirm a delete in a session on
// a second database, a DROP in that session and an operator-defined write tool bound to that
// database is told that database; the MCP call log names it too. Declined, nothing changes.
func TestMCPConfirmationNamesTheRoutedDatabase(t *testing.T) {
	t.Parallel()
	f := newRoutedFixture(t)
	logs := &pgtest.SyncBuffer{}
	log := zerolog.New(logs)
	st, ct := mcp.NewInMemoryTransports()
	p := tools.Principal{Name: "stdio", Scopes: []string{"read", "write", "ddl"}}
	ss, err := mcpapi.NewMCPServerWith(f.reg, p, log, invoke.NewInvoker(f.reg, log), mcpapi.MCPOptions{ConfirmRowsOver: 100}).Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	no := &runnertest.Elicitor{Action: "decline"}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "pgtools-test", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: no.Handle}).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	begin := runnertest.CallOut(t, cs, "pg_tx", map[string]any{"action": "begin", "database": "reports"})
	id, _ := begin.Object["session_id"].(string)
	if begin.IsError || id == "" {
		t.Fatalf("begin: %s", begin.Text)
	}
	calls := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"delete_data", map[string]any{"table": "big", "where": "id > $1", "params": []any{0}, "session_id": id}, "delete 150 rows of table big in database reports"},
		{"execute_sql", map[string]any{"sql": "DROP TABLE big", "mode": "write", "session_id": id}, "cannot be undone, on database reports"},
		{"purge_big", map[string]any{"min": 0, "autocommit": true}, "in database reports"},
	}
	for i, c := range calls {
		out := runnertest.CallOut(t, cs, c.tool, c.args)
		if !out.IsError || out.Object["errorType"] != "confirmation_required" {
			t.Errorf("%s declined: %s", c.tool, out.Text)
		}
		if q := no.Questions(); len(q) != i+1 || !strings.Contains(q[i], c.want) {
			t.Errorf("%s: questions %q, want the last to say %q", c.tool, q, c.want)
		}
	}
	if n := f.reports.QueryInt(t, "SELECT count(*) FROM big"); n != 150 {
		t.Errorf("big has %d rows after declined calls, want 150", n)
	}
	for _, tool := range []string{"delete_data", "purge_big"} {
		for _, l := range runnertest.JSONLines(t, logs, "tool", tool) {
			if l["database"] != "reports" {
				t.Errorf("MCP log line of %s: %v, want database reports", tool, l)
			}
		}
	}
}

// TestSessionHeaderMustMatchSessionID: a call whose X-PgTools-Session header names another
// session than its session_id is refused before it runs (the proxy routed by the header, so the
// call may be on a replica that lacks its session), also when the session is not on this
// replica; the same id in both, or a header on a call without a session, runs.
func TestSessionHeaderMustMatchSessionID(t *testing.T) {
	t.Parallel()
	f := newRoutedFixture(t)
	srv := httptest.NewServer(httpapi.NewHandlerWith(f.reg, httpapi.HandlerOptions{Log: zerolog.Nop()}))
	t.Cleanup(srv.Close)
	post := func(tool, header, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/tools/"+tool, strings.NewReader(body))
		if header != "" {
			req.Header.Set(invoke.SessionHeader, header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, out
	}
	status, out := post("pg_tx", "", `{"action":"begin","database":"reports"}`)
	id, _ := out["session_id"].(string)
	if status != http.StatusOK || id == "" {
		t.Fatalf("begin: %d %v", status, out)
	}
	for _, sid := range []string{id, "0000aaaa-1111-2222-3333-444455556666"} {
		status, out = post("select_query", "ffffffff-1111-2222-3333-444455556666", `{"table":"big","limit":1,"session_id":"`+sid+`"}`)
		if status != http.StatusBadRequest || out["errorType"] != "invalid_arguments" || !strings.Contains(out["error"].(string), "name different sessions") {
			t.Errorf("session_id %s under another header: %d %v", sid, status, out)
		}
	}
	if status, out = post("select_query", strings.ToUpper(id), `{"table":"big","limit":1,"session_id":"`+id+`"}`); status != http.StatusOK {
		t.Errorf("same session in header and session_id: %d %v", status, out)
	}
	if status, out = post("describe_schema", id, `{}`); status != http.StatusOK {
		t.Errorf("header on a call without session_id: %d %v", status, out)
	}
	if status, out = post("pg_tx", id, `{"action":"rollback","session_id":"`+id+`"}`); status != http.StatusOK {
		t.Errorf("rollback: %d %v", status, out)
	}
}
