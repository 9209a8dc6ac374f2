package invoke_test

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// TestTraceOfToolCall: through the real HTTP wiring and the official OTLP/HTTP exporter into an
// in-process receiver, a pg_transaction call with a W3C traceparent is one span, child of the
// caller's trace, with the tool, database, principal, rows and errorType — and no argument value
// or SQL text — and a child span per statement; a broker task's traceparent is continued too.
func TestTraceOfToolCall(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL)`)
	dsn := db.RoleDSN(t, "otel")
	db.Exec(t, `GRANT INSERT, UPDATE, DELETE ON notes TO "`+db.RoleName("otel")+`"`)
	reg := toolstest.Registry(t, dsn, tools.Policy{}, 2)
	recv := runnertest.NewOTLPReceiver(t)
	exp, err := otlptracehttp.New(t.Context(), otlptracehttp.WithEndpointURL(recv.Srv.URL+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	srv := httptest.NewServer(httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Log: zerolog.Nop(), Tracer: tp}))
	t.Cleanup(srv.Close)

	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	post := func(tool, body string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/tools/"+tool, strings.NewReader(body))
		req.Header.Set("Traceparent", parent)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("pg_transaction", `{"operations":[{"sql":"INSERT INTO notes VALUES (1, 'secret-value')"},{"sql":"SELECT body FROM notes"}]}`); code != 200 {
		t.Fatalf("pg_transaction: %d", code)
	}
	if code := post("select_query", `{"table":"nope"}`); code != 400 {
		t.Fatalf("select_query on a missing table: %d", code)
	}
	spans := recv.Received()
	byID := map[string]*tracepb.Span{}
	var calls []*tracepb.Span
	for _, s := range spans {
		byID[hex.EncodeToString(s.SpanId)] = s
		if strings.HasPrefix(s.Name, "tool_call") {
			calls = append(calls, s)
		}
	}
	if len(calls) != 2 {
		t.Fatalf("want 2 tool_call spans, got %d of %d spans", len(calls), len(spans))
	}
	children := func(call *tracepb.Span) string {
		var names []string
		for _, s := range spans {
			if string(s.ParentSpanId) == string(call.SpanId) {
				names = append(names, s.Name)
			}
		}
		return strings.Join(names, ",")
	}
	for i, want := range []struct{ name, errType, children string }{
		{"tool_call pg_transaction", "", "pool_wait,begin,statement,statement,commit"},
		{"tool_call select_query", "invalid_table", "pool_wait"}} {
		s := calls[i]
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[kv.Key] = strings.Trim(kv.Value.String(), " ")
		}
		t.Logf("span %s trace=%x parent=%x children=[%s] attrs=%v", s.Name, s.TraceId, s.ParentSpanId, children(s), attrs)
		if s.Name != want.name || hex.EncodeToString(s.TraceId) != "4bf92f3577b34da6a3ce929d0e0e4736" || hex.EncodeToString(s.ParentSpanId) != "00f067aa0ba902b7" {
			t.Errorf("span %d: %s in trace %x under %x", i, s.Name, s.TraceId, s.ParentSpanId)
		}
		got := children(s)
		if want.children == "pool_wait" && (got == "" || strings.Contains(got, "statement")) || want.children != "pool_wait" && got != want.children {
			t.Errorf("span %d children: %q, want %s", i, got, want.children)
		}
		for _, k := range []string{"pgtools.database", "pgtools.principal", "pgtools.error_type"} {
			v := attrs[k]
			if k == "pgtools.error_type" && want.errType == "" {
				if v != "" {
					t.Errorf("span %d: error type %s", i, v)
				}
				continue
			}
			if !strings.Contains(v, map[string]string{"pgtools.database": "default", "pgtools.principal": "local", "pgtools.error_type": want.errType}[k]) {
				t.Errorf("span %d attribute %s: %q", i, k, v)
			}
		}
		for k, v := range attrs {
			if strings.Contains(v, "secret-value") || strings.Contains(v, "INSERT") {
				t.Errorf("span attribute %s carries a value or SQL: %q", k, v)
			}
		}
	}
}
