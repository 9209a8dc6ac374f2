package invoke

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgtools/pgtools/runner/version"
	"github.com/pgtools/pgtools/schemas"
	"github.com/pgtools/pgtools/tools"
)

// TracerProvider is OpenTelemetry's trace.TracerProvider, named here so configuration and
// options can hold one.
type TracerProvider = trace.TracerProvider

// tracerName is the instrumentation scope of every pgtools span.
const tracerName = "github.com/pgtools/pgtools/runner"

// TracingEnabled reports whether the standard OpenTelemetry environment asks for traces: an
// OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and
// neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none turns them off. Tracing is off by
// default: nothing is exported, and no span is made.
func TracingEnabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || strings.EqualFold(getenv("OTEL_TRACES_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// NewTracerProvider returns an OpenTelemetry SDK tracer provider exporting over OTLP/HTTP in
// batches. The exporter, sampler and batch processor read the standard OTEL_* variables
// themselves (endpoint, headers, timeout, compression, OTEL_TRACES_SAMPLER, OTEL_BSP_*), and the
// resource OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; service.name defaults to "pgtools"
// and service.instance.id is the replica id. shutdown flushes the spans still buffered.
func NewTracerProvider(ctx context.Context, replicaID string) (tp trace.TracerProvider, shutdown func(context.Context) error, err error) {
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("OpenTelemetry OTLP/HTTP exporter: %w", err)
	}
	attrs := []attribute.KeyValue{semconv.ServiceName("pgtools"), semconv.ServiceVersion(version.Version)}
	if replicaID != "" {
		attrs = append(attrs, semconv.ServiceInstanceID(replicaID))
	}
	// The environment's attributes come last so OTEL_SERVICE_NAME wins over the default name.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithFromEnv())
	if err != nil {
		return nil, nil, fmt.Errorf("OpenTelemetry resource: %w", err)
	}
	p := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return p, p.Shutdown, nil
}

// withTraceContext continues a caller's trace: a W3C traceparent (and tracestate) header becomes
// the parent of the request's spans. Both the HTTP API and /mcp pass through it; a malformed
// header is ignored, as the W3C spec asks.
func WithTraceContext(r *http.Request) *http.Request {
	if r.Header.Get("Traceparent") == "" {
		return r
	}
	ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	return r.WithContext(ctx)
}

// WithTraceParent continues the trace named by a W3C traceparent (and tracestate) carried in a
// message rather than in headers, as MCP carries them in a request's _meta: the call's span
// becomes its child, and it wins over the HTTP request's header, which names the transport's
// hop rather than the caller's call. A malformed or empty traceparent leaves ctx as it is.
func WithTraceParent(ctx context.Context, traceparent, tracestate string) context.Context {
	if traceparent == "" {
		return ctx
	}
	carrier := propagation.MapCarrier{"traceparent": traceparent}
	if tracestate != "" {
		carrier["tracestate"] = tracestate
	}
	if sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier)); sc.IsValid() {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// SetTracerProvider makes iv trace every call with tp (nil: no tracing, the default): one span
// per call, named for the tool, with the tool, database, principal, transport, request id,
// errorType, rows and truncated as attributes — never argument values or SQL text. Call it
// before serving.
func (iv *Invoker) SetTracerProvider(tp trace.TracerProvider) {
	if tp == nil {
		iv.tracer = nil
		return
	}
	iv.tracer = tp.Tracer(tracerName, trace.WithInstrumentationVersion(version.Version))
}

// startSpan opens the call's span (a no-op span when tracing is off).
func (iv *Invoker) startSpan(ctx context.Context, c Call) (context.Context, trace.Span) {
	if iv.tracer == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	name := "tool_call"
	if _, ok := schemas.Tool(c.Tool); ok {
		name = "tool_call " + c.Tool // a known name only: span names must stay few
	}
	ctx, span := iv.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("pgtools.tool", clip(c.Tool)),
		attribute.String("pgtools.principal", c.Principal.Name),
		attribute.String("pgtools.transport", c.Transport),
		attribute.String("pgtools.request_id", c.RequestID)))
	// The call's phases become child spans: each wait for a pooled connection ("pool_wait") and
	// each statement with its framing ("statement": one round trip for a read).
	parent := ctx
	ctx = tools.WithPhases(ctx, func(phase string, start time.Time, d time.Duration) {
		_, child := iv.tracer.Start(parent, phase, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("db.system", "postgresql")))
		child.End(trace.WithTimestamp(start.Add(d)))
	})
	return ctx, span
}

// endSpan records how the call ended and closes its span.
func (iv *Invoker) endSpan(span trace.Span, ans Answer) {
	if iv.tracer == nil {
		return
	}
	span.SetAttributes(attribute.String("pgtools.database", ans.Database))
	if ans.Session != "" {
		span.SetAttributes(attribute.String("pgtools.session", ans.Session))
	}
	if ans.Err != nil {
		span.SetAttributes(attribute.String("pgtools.error_type", string(ans.Err.Type)))
		// The category only: a message can quote the caller's identifiers.
		span.SetStatus(codes.Error, string(ans.Err.Type))
	}
	span.End()
}

// traceResult adds a successful result's size to the call's span.
func traceResult(ctx context.Context, res tools.Result) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || res == nil {
		return
	}
	sum := res.Summary()
	if sum.Rows != nil {
		span.SetAttributes(attribute.Int("pgtools.rows", *sum.Rows))
	}
	if sum.AffectedRows != nil {
		span.SetAttributes(attribute.Int("pgtools.affected_rows", *sum.AffectedRows))
	}
	span.SetAttributes(attribute.Bool("pgtools.truncated", sum.Truncated))
}

// clip keeps a caller-chosen name short in a span attribute.
func clip(s string) string {
	if len(s) > 63 {
		return s[:63]
	}
	return s
}
