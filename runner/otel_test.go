package runner

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// TestTraceOfToolCall: through the real HTTP wiring, a pg_transaction call with a W3C
// traceparent is one span, child of the caller's trace, with the tool, database, principal,
// rows and errorType — and no argument value or SQL text.
func TestTraceOfToolCall(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	db.Exec(t, `CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL)`)
	dsn := db.RoleDSN(t, "otel")
	db.Exec(t, `GRANT INSERT, UPDATE, DELETE ON notes TO "`+db.RoleName("otel")+`"`)
	reg := toolstest.Registry(t, dsn, tools.Policy{}, 2)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	srv := httptest.NewServer(NewHandlerWith(reg, HandlerOptions{Log: zerolog.Nop(), Tracer: tp}))
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
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("want 2 spans, got %d", len(spans))
	}
	// The call's phases are events of its span: each of pg_transaction's two statements; the
	// refused select_query waited for a connection to read the catalog, and ran no statement.
	phases := func(s sdktrace.ReadOnlySpan) string {
		var names []string
		for _, ev := range s.Events() {
			names = append(names, ev.Name)
		}
		return strings.Join(names, ",")
	}
	if got := phases(spans[0].Snapshot()); got != "statement,statement" {
		t.Errorf("pg_transaction's phases: %s", got)
	}
	if got := phases(spans[1].Snapshot()); got == "" || strings.Contains(got, "statement") {
		t.Errorf("refused select_query's phases: %q", got)
	}
	for i, want := range []struct{ name, errType string }{{"tool_call pg_transaction", ""}, {"tool_call select_query", "invalid_table"}} {
		s := spans[i]
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		t.Logf("span %s trace=%s parent=%s attrs=%v", s.Name, s.SpanContext.TraceID(), s.Parent.SpanID(), attrs)
		if s.Name != want.name || s.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || s.Parent.SpanID().String() != "00f067aa0ba902b7" {
			t.Errorf("span %d: %s in trace %s under %s", i, s.Name, s.SpanContext.TraceID(), s.Parent.SpanID())
		}
		if attrs["pgtools.database"] != "default" || attrs["pgtools.principal"] != "local" || attrs["pgtools.error_type"] != want.errType {
			t.Errorf("span %d attributes: %v", i, attrs)
		}
		for k, v := range attrs {
			if strings.Contains(v, "secret-value") || strings.Contains(v, "INSERT") {
				t.Errorf("span attribute %s carries a value or SQL: %q", k, v)
			}
		}
	}
}
