package invoke

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/approval"
)

// Caller runs one tool call, and previews one for a confirmation; *tools.Registry is the
// implementation. A wrapper may add behaviour around every call (tests inject faults this way).
type Caller interface {
	Call(ctx context.Context, p tools.Principal, tool string, rawArgs []byte) (tools.Result, tools.Outcome, *tools.Error)
	Preview(ctx context.Context, p tools.Principal, tool string, rawArgs []byte) (tools.Preview, *tools.Error)
}

var _ Caller = (*tools.Registry)(nil)

// Call is one tool call as a transport decoded it from its envelope.
type Call struct {
	// Principal is who the call runs as.
	Principal tools.Principal
	// Tool is the tool's wire name as the caller sent it.
	Tool string
	// Args is the arguments' raw JSON, passed to the Caller untouched (nil: {}).
	Args []byte
	// RequestID names the call in the log line and in an internal error; "" makes the Invoker
	// number one.
	RequestID string
	// Transport names the transport in the log line: "http", "mcp", "n8n", or "fleet" for a call
	// another replica forwarded (runner/forward).
	Transport string
	// AccessLogged says the transport's own access log line reports the call (the HTTP API's
	// does, from the Answer), so the Invoker writes no line of its own.
	AccessLogged bool
	// Refused, when set, is the transport's own refusal of the envelope (e.g. task settings it
	// cannot read): answered and logged like any failed call, without running the tool.
	Refused *tools.Error
}

// Answer is what a transport writes back into its envelope.
type Answer struct {
	// Body is the JSON text of the result, or of the error object when Err is set: byte for byte
	// the same on every transport.
	Body []byte
	// Err is the failure, nil on success.
	Err *tools.Error
	// RetryAfter is how long a rate-limited caller should wait (0 unless Err is rate_limited).
	RetryAfter time.Duration
	// Database is the database the call ran on, as the registry routed it (tools.Outcome); ""
	// when it was refused before routing.
	Database string
	// Session is the id of the session the call ran in, "" for none.
	Session string
	// Summary describes a successful result (rows, changed rows, table), for confirmations.
	Summary tools.Summary
}

// Invoker wraps every tool call of every transport the same way: the per-token limits (when it
// has a limiter), panic recovery, one log line per call and the answer's encoding. Transports
// only decode their envelope, Invoke, and write their envelope. It is safe for concurrent use.
type Invoker struct {
	caller   Caller
	lim      *Limiter // nil: no limits
	log      zerolog.Logger
	idPrefix string
	idSeq    atomic.Uint64
	tracer   trace.Tracer // nil: no spans (SetTracerProvider)
}

// NewInvoker returns an Invoker over c without limits; log receives one line per call (never
// argument values).
func NewInvoker(c Caller, log zerolog.Logger) *Invoker { return NewLimitedInvoker(c, log, nil) }

func NewLimitedInvoker(c Caller, log zerolog.Logger, lim *Limiter) *Invoker {
	return &Invoker{caller: c, lim: lim, log: log, idPrefix: newIDPrefix()}
}

// newIDPrefix is a random prefix that keeps request ids of several processes apart.
func newIDPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// nextID numbers a call that came without a request id.
func (iv *Invoker) NextID() string {
	return iv.idPrefix + "-" + strconv.FormatUint(iv.idSeq.Add(1), 36)
}

// Invoke runs c and returns its answer. It never panics: a panic anywhere in the call or its
// encoding is an internal_error whose message carries the request id, so the caller can report
// it and the operator find the log line.
func (iv *Invoker) Invoke(ctx context.Context, c Call) (ans Answer) {
	started := time.Now()
	if c.RequestID == "" {
		c.RequestID = iv.NextID()
	}
	ctx, span := iv.startSpan(ctx, c)
	if c.Refused != nil {
		ans = Answer{Err: c.Refused}
	} else if pl, wait, terr := iv.lim.Admit(c.Principal); terr != nil {
		ans = Answer{Err: terr, RetryAfter: wait}
	} else {
		ans = iv.run(ctx, c) // recovers its panics, so the slot is always given back
		iv.lim.Done(pl)
	}
	if ans.Err != nil {
		ans.Body, _ = ans.Err.MarshalJSON()
		if _, ok := tools.ErrorMetaOf(ans.Err.Type); !ok {
			// A category missing from the table is a bug: transports answer it as an
			// internal error (500, not retryable), and the operator learns of it here.
			iv.log.Error().Str("req_id", c.RequestID).Str("tool", c.Tool).Str("error_type", clip(string(ans.Err.Type))).
				Msg("error category without status or retryability; answered as an internal error")
		}
	}
	if !c.AccessLogged {
		iv.logCall(c, ans, started)
	}
	iv.endSpan(span, ans)
	return ans
}

// run calls the tool and encodes the result, turning a panic into an internal_error.
func (iv *Invoker) run(ctx context.Context, c Call) (ans Answer) {
	defer func() {
		if r := recover(); r != nil {
			iv.logPanic(c, r)
			ans = Answer{Err: &tools.Error{Type: tools.ErrInternal,
				Message:    "Internal error while running the tool (request id " + c.RequestID + ")",
				Suggestion: "Retry the call; if it fails again, report request id " + c.RequestID + " to the operator."}}
		}
	}()
	res, out, terr := iv.caller.Call(ctx, c.Principal, c.Tool, c.Args)
	ans.Database, ans.Session = out.Database, out.Session
	if terr != nil {
		ans.Err = terr
		return ans
	}
	ans.Summary = res.Summary()
	traceResult(ctx, res)
	addRoutingHint(res)
	body, err := res.MarshalJSON()
	if err != nil {
		ans.Err = &tools.Error{Type: tools.ErrInternal, Message: "Could not encode the result",
			Suggestion: "Retry; report it if it persists."}
		return ans
	}
	ans.Body = body
	return ans
}

// logPanic logs where a call panicked. A runtime error names the fault, never a value; anything
// else is logged by type only, since a panic value may hold arguments.
func (iv *Invoker) logPanic(c Call, r any) {
	what := fmt.Sprintf("%T", r)
	if re, ok := r.(runtime.Error); ok {
		what = re.Error()
	}
	ev := iv.log.Error().Str("req_id", c.RequestID).Str("tool", c.Tool).Str("principal", c.Principal.Name).Str("panic", what)
	if at := panicSite(); at != "" {
		ev = ev.Str("at", at)
	}
	ev.Msg("tool call panicked")
}

// panicSite is the file and line of the innermost frame outside the runtime, seen from a
// deferred recover: where the panic started.
func panicSite() string {
	pcs := make([]uintptr, 32)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if f.Function != "" && !isRuntimeFrame(f.Function) {
			return f.File + ":" + strconv.Itoa(f.Line)
		}
		if !more {
			return ""
		}
	}
}

func isRuntimeFrame(fn string) bool {
	return len(fn) >= 8 && fn[:8] == "runtime."
}

// logCall writes the call's one log line: transport, request id, tool, principal, database,
// error type and duration; never argument values. The database is where the call was routed.
func (iv *Invoker) logCall(c Call, ans Answer, started time.Time) {
	terr := ans.Err
	ev := iv.log.Info()
	if terr != nil && terr.Type == tools.ErrInternal {
		ev = iv.log.Warn()
	}
	if terr != nil {
		ev = ev.Str("error_type", string(terr.Type))
	}
	if c.Transport != "" {
		ev = ev.Str("transport", c.Transport)
	}
	if ans.Session != "" {
		ev = ev.Str("session", ans.Session)
	}
	ev.Str("req_id", c.RequestID).Str("principal", c.Principal.Name).Str("tool", c.Tool).
		Str("database", ans.Database).Dur("duration", time.Since(started)).Msg("tool call")
}

// Preview previews c without running it (Caller.Preview): what a confirmation shows a human.
func (iv *Invoker) Preview(ctx context.Context, c Call) (tools.Preview, *tools.Error) {
	return iv.caller.Preview(ctx, c.Principal, c.Tool, c.Args)
}

// clientApprover is a Caller whose approval requests a caller's MCP client may decide itself
// (tools.Registry).
type clientApprover interface {
	ClientMayApprove(p tools.Principal, id string) bool
	DecideByClient(p tools.Principal, id string, approve bool) (approval.Request, *tools.Error)
}

// ClientMayApprove reports whether the user of p's client may decide p's approval request id
// (policy.approval_by_client); false for a Caller without approvals.
func (iv *Invoker) ClientMayApprove(p tools.Principal, id string) bool {
	ca, ok := iv.caller.(clientApprover)
	return ok && ca.ClientMayApprove(p, id)
}

// DecideByClient records the decision of the user of p's client on p's approval request id.
func (iv *Invoker) DecideByClient(p tools.Principal, id string, approve bool) (approval.Request, *tools.Error) {
	ca, ok := iv.caller.(clientApprover)
	if !ok {
		return approval.Request{}, &tools.Error{Type: tools.ErrNotAllowed, Message: "This runner keeps no approval requests",
			Suggestion: "Call again without approval_id."}
	}
	return ca.DecideByClient(p, id, approve)
}
