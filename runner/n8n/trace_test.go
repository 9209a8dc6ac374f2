package n8n_test

import (
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pgtools/pgtools/runner/n8n"
)

// TestTaskContinuesCallersTrace: a task's traceparent setting makes its call's span a child of
// the caller's trace, as the HTTP API's traceparent header does.
func TestTaskContinuesCallersTrace(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	f := newFixture(t, func(o *n8n.Options) { o.Tracer = tp })
	rn := f.broker.NextRunner(t, 5*time.Second)
	taskID := rn.StartTask(t, map[string]any{"tool": "describe_schema", "args": map[string]any{},
		"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	if ans := rn.Answer(t, taskID, 5*time.Second); ans.Type != "runner:taskdone" {
		t.Fatalf("task answered %s", ans.Raw)
	}
	var call sdktrace.ReadOnlySpan
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() == "tool_call describe_schema" {
			call = s
		}
	}
	if call == nil || call.SpanContext().TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || call.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Fatalf("the task's span does not continue the caller's trace: %+v", call)
	}
}
