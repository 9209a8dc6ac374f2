package mcpapi

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/internal/httpx"
	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/runner/version"
	"github.com/pgtools/pgtools/tools"
)

// mcpInstructions is what an MCP client may show its model once, at initialize. The tool
// descriptions carry the details; this only names the habits that save a model round trips.
const mcpInstructions = "PostgreSQL tools. Call describe_schema to learn the tables and columns before reading or writing. " +
	"Every result is a JSON object; a failed call has isError set and carries errorType and a suggestion that says how to fix the call."

// DefaultMCPConfirmRows is MCPOptions.ConfirmRowsOver's default: an update_data, delete_data or
// operator-defined write tool call that would change more rows asks the human first, on clients
// that support elicitation.
const DefaultMCPConfirmRows = 100

// DefaultMCPProgressEvery is MCPOptions.ProgressEvery's default.
const DefaultMCPProgressEvery = time.Second

// MCPOptions configures what the MCP transports add to the tools. Zero fields take their
// defaults.
type MCPOptions struct {
	// ConfirmRowsOver is the row count above which a call a dry run can count (update_data,
	// delete_data, an operator-defined write tool; not itself a dry run) asks the human through
	// the client first, when the client declares elicitation: a dry
	// run counts the rows, the human sees the table and the count, and only an accept runs the
	// call (default DefaultMCPConfirmRows; negative: never ask). max_affected_rows still applies.
	ConfirmRowsOver int
	// ProgressEvery is how often a call that asked for progress (a progressToken) reports it,
	// starting after one interval (default DefaultMCPProgressEvery, 1 s).
	ProgressEvery time.Duration
	// StructuredContent adds each tool's outputSchema to tools/list and the result object as
	// structuredContent to every tools/call result, beside the text item (config
	// mcp.structured_content; default false). Off, a result carries its object once, as text:
	// every client shows its model the text, and clients that forward both (n8n's MCP Client
	// Tool among them) would otherwise make the model read every row twice. On, for clients that
	// validate or consume structuredContent in code; the spec asks for the text beside it.
	StructuredContent bool
	// AllowedOrigins are the browser origins (scheme://host[:port]) whose pages may call /mcp,
	// besides the host /mcp is reached at (config mcp.allowed_origins; default none). A request
	// with another Origin is answered 403, like a foreign Host; one without Origin passes.
	AllowedOrigins []string
	// StateKey keys the requestState that a client echoes with its user's answer to a question
	// (mcp_elicit.go), so that no client can make up a state for a call it was not asked about.
	// Replicas that answer each other's clients share it: the runtime derives it from the page
	// token key (StateKeyFrom). Empty (the default): a random key made when the handler or
	// server is built, valid for that handler only.
	StateKey []byte

	// SDKOnly sends every message through the go-sdk, skipping the fast path (mcp_fast.go) that
	// answers plain tools/call requests itself: for comparing the two, message by message.
	SDKOnly bool
}

func (o MCPOptions) withDefaults() MCPOptions {
	if o.ConfirmRowsOver == 0 {
		o.ConfirmRowsOver = DefaultMCPConfirmRows
	}
	if o.ProgressEvery <= 0 {
		o.ProgressEvery = DefaultMCPProgressEvery
	}
	if len(o.StateKey) == 0 {
		o.StateKey = make([]byte, 32)
		_, _ = rand.Read(o.StateKey) // crypto/rand.Read never fails (it crashes the program instead)
	}
	return o
}

// StateKeyFrom derives MCPOptions.StateKey from secret (the page token key, which replicas
// share already), so that one secret serves both without either use revealing the other.
func StateKeyFrom(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("pgtools mcp request state v2"))
	return m.Sum(nil)
}

// NewMCPServer returns an MCP server that offers every tool of reg and runs each call as p. The
// server is bound to one principal, so a caller can never borrow another's scopes or sessions:
// stdio serves one server for its one client, and /mcp keeps one server per token. The tools are
// the registry's own (name, description, raw input schema, hints, and with
// opts.StructuredContent an output schema); see mcpTool. Logs, one line per tool call without argument values, go to log. The server is safe
// for concurrent use.
func NewMCPServer(reg *tools.Registry, p tools.Principal, log zerolog.Logger, opts MCPOptions) *mcp.Server {
	return NewMCPServerWith(reg, p, log, invoke.NewInvoker(reg, log), opts)
}

// NewMCPServerWith serves every tool of reg for calls, but tools/list shows only the ones p can
// use (Registry.ToolsFor, docs/design.md §12): a hidden tool called anyway still answers with the
// registry's not_allowed result and its suggestion, as on the HTTP API, rather than the SDK's
// bare "unknown tool" protocol error.
//
// tools/list lists the tools in name order (the SDK keeps them sorted) with cache hints:
// cacheScope "private", since the list depends on the caller's token, and ttlMs ToolsListTTL.
// Its _meta names the caller's catalog (CatalogMetaKey): a digest of the tools as listed, which
// changes exactly when what this caller sees changes.
func NewMCPServerWith(reg *tools.Registry, p tools.Principal, log zerolog.Logger, inv *invoke.Invoker, opts MCPOptions) *mcp.Server {
	s := mcp.NewServer(serverImpl(), &mcp.ServerOptions{Instructions: mcpInstructions, Logger: slogFor(log),
		SetCacheable: func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
			if _, ok := req.(*mcp.ListToolsRequest); ok {
				c.TTLMs, c.CacheScope = int(ToolsListTTL/time.Millisecond), "private"
			}
		}})
	opts = opts.withDefaults()
	shown := map[string]bool{}
	listed := map[string]tools.ToolInfo{} // as p sees them (approval_id only where approval rules apply)
	for _, info := range reg.ToolsFor(p) {
		shown[info.Name], listed[info.Name] = true, info
	}
	digest := sha256.New()
	for _, info := range reg.Tools() {
		if l, ok := listed[info.Name]; ok {
			info = l
		}
		t, h := mcpTool(info, p, inv, opts)
		s.AddTool(t, h)
		if shown[info.Name] {
			b, _ := json.Marshal(t) // plain data: cannot fail
			digest.Write(b)
		}
	}
	catalog := hex.EncodeToString(digest.Sum(nil)[:12])
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if list, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				// The SDK builds a new slice for every answer, so it is filtered in place.
				list.Tools = slices.DeleteFunc(list.Tools, func(t *mcp.Tool) bool { return !shown[t.Name] })
				if list.Meta == nil {
					list.Meta = mcp.Meta{}
				}
				list.Meta[CatalogMetaKey] = catalog
			}
			return res, err
		}
	})
	return s
}

// ToolsListTTL is the ttlMs of tools/list results: how long a client may keep the list. The
// catalog changes only when the configuration is reloaded (SIGHUP), so a minute bounds how long
// a client keeps a list from before a reload; a tool called after it was withdrawn answers
// not_allowed with a suggestion, as on the HTTP API.
const ToolsListTTL = time.Minute

// CatalogMetaKey names, in a tools/list result's _meta, the digest of the caller's catalog
// (hex): equal digests, equal lists.
const CatalogMetaKey = "pgtools.dev/catalog"

// serverImpl is how pgtools names itself to MCP clients.
func serverImpl() *mcp.Implementation {
	return &mcp.Implementation{Name: "pgtools", Title: "pgtools: PostgreSQL tools", Version: version.Version}
}

// mcpTool maps one registry tool to its MCP form and a handler that runs it through inv.
//
// The low-level Server.AddTool is used on purpose: unlike the generic mcp.AddTool it neither
// validates nor unmarshals the arguments, so they reach Registry.Call as the raw JSON the client
// sent, and our schema validation answers a malformed call with our invalid_arguments error
// object. Results, failures included (isError set), carry the JSON object the HTTP API sends as
// their one text item, which every client shows its model; with opts.StructuredContent also as
// structuredContent, described by the tool's outputSchema (the spec makes the outputSchema a
// promise of structuredContent, so the two go together). Only the SDK's own failures (an unknown
// tool name, a malformed JSON-RPC request) are protocol errors.
func mcpTool(info tools.ToolInfo, p tools.Principal, inv *invoke.Invoker, opts MCPOptions) (*mcp.Tool, mcp.ToolHandler) {
	destructive, openWorld := info.Destructive, false
	t := &mcp.Tool{
		Name:        info.Name,
		Description: info.Description,
		InputSchema: info.InputSchema,
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:    info.ReadOnly,
			DestructiveHint: &destructive,
			IdempotentHint:  info.Idempotent,
			// The tools reach one configured database, not the open world.
			OpenWorldHint: &openWorld,
		},
	}
	if opts.StructuredContent {
		t.OutputSchema = mcpOutputSchema(info.Name)
	}
	h := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := []byte(req.Params.Arguments)
		if string(args) == "null" {
			// "arguments" is optional in MCP; some clients spell its absence as null.
			args = nil
		}
		reqID := httpRequestID(ctx)
		// A caller's trace context rides in _meta (as on the fast path), which names the
		// caller's call rather than the HTTP hop.
		tp, _ := req.Params.GetMeta()["traceparent"].(string)
		ts, _ := req.Params.GetMeta()["tracestate"].(string)
		ctx = invoke.WithTraceParent(ctx, tp, ts)
		ctx, stop := withHTTPCancel(ctx)
		defer stop()
		if token := req.Params.GetProgressToken(); token != nil {
			defer reportProgress(ctx, req.Session, token, info.Name, opts.ProgressEvery)()
		}
		call := invoke.Call{Principal: p, Tool: info.Name, Args: args, RequestID: reqID, Transport: "mcp"}
		// A rate-limited call is a tool result like any refused call; MCP has no Retry-After, so the
		// wait is in the suggestion.
		ans, ask := confirmed(ctx, req, inv, call, opts)
		if ask != nil {
			return ask, nil
		}
		return toolResult(ans, opts), nil
	}
	return t, h
}

// toolResult is the MCP result of a call's answer: its JSON object as the one text item, also as
// structuredContent when opts.StructuredContent, and isError for a failed call.
func toolResult(ans invoke.Answer, opts MCPOptions) *mcp.CallToolResult {
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(ans.Body)}}}
	if opts.StructuredContent {
		out.StructuredContent = json.RawMessage(ans.Body)
	}
	if ans.Err != nil {
		out.SetError(ans.Err) // keeps our content; records the error for SDK middleware
	}
	return out
}

// httpRequestID is the id of the HTTP request ctx serves (on /mcp a call takes it), or "" (on
// stdio the invoker numbers the call).
func httpRequestID(ctx context.Context) string {
	if info := httpx.RequestLogOf(ctx); info != nil {
		return info.ReqID
	}
	return ""
}

// reportProgress sends notifications/progress for the call every interval until the returned
// function is called: the elapsed seconds as progress, with no total (a statement's length is
// not known in advance). A call shorter than one interval sends none.
func reportProgress(ctx context.Context, ss *mcp.ServerSession, token any, tool string, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		started := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				secs := time.Since(started).Seconds()
				// A failed notification (the client went away) changes nothing for the call.
				_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(int(secs)),
					Message: fmt.Sprintf("%s still running after %.0f s", tool, secs)})
			}
		}
	}()
	return func() { cancel(); <-done }
}

// ServeMCPStdio serves the tools of reg over MCP on in and out (newline-delimited JSON-RPC, as
// "pgtools mcp" does on stdin and stdout) until the client closes in or ctx ends. Every call
// runs as p. Nothing but protocol messages is ever written to out; logs go to log.
//
// At the end of in, every request already read is answered before it returns: a client (or a
// file of requests piped in) may close its side right after its last request.
func ServeMCPStdio(ctx context.Context, reg *tools.Registry, p tools.Principal, in io.ReadCloser, out io.Writer, log zerolog.Logger, opts MCPOptions) error {
	pending := newStdioPending(ctx, in, out)
	// Not Server.Run: it logs a normal stop (a signal) as an error.
	ss, err := NewMCPServer(reg, p, log, opts).Connect(ctx, &mcp.IOTransport{Reader: pending.reader(), Writer: pending.writer()}, nil)
	if err != nil {
		return fmt.Errorf("starting MCP on stdio: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case <-ctx.Done():
		_ = ss.Close()
		<-done
		return nil
	case err := <-done:
		return err
	}
}

// slogFor feeds the SDK's slog logging into our zerolog logger, at warn and above: its info
// lines are per-connection chatter.
func slogFor(log zerolog.Logger) *slog.Logger {
	l := log.With().Str("component", "mcp").Logger()
	if l.GetLevel() < zerolog.WarnLevel {
		l = l.Level(zerolog.WarnLevel)
	}
	return slog.New(zerolog.NewSlogHandler(l))
}
