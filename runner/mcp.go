package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/tools"
)

// mcpInstructions is what an MCP client may show its model once, at initialize. The tool
// descriptions carry the details; this only names the habits that save a model round trips.
const mcpInstructions = "PostgreSQL tools. Call describe_schema to learn the tables and columns before reading or writing. " +
	"Every result is a JSON object; a failed call has isError set and carries errorType and a suggestion that says how to fix the call."

// NewMCPServer returns an MCP server that offers every tool of reg and runs each call as p. The
// server is bound to one principal, so a caller can never borrow another's scopes or sessions:
// stdio serves one server for its one client, and /mcp keeps one server per token. The tools are
// the registry's own (name, description, raw input schema, hints); see mcpTool. Logs, one line
// per tool call without argument values, go to log. The server is safe for concurrent use.
func NewMCPServer(reg *tools.Registry, p tools.Principal, log zerolog.Logger) *mcp.Server {
	return newMCPServer(reg.Tools(), p, log, NewInvoker(reg, log))
}

// newMCPServer is NewMCPServer offering list and running the calls through inv (which applies
// the per-token limits of the HTTP API on /mcp).
func newMCPServer(list []tools.ToolInfo, p tools.Principal, log zerolog.Logger, inv *Invoker) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "pgtools", Title: "pgtools: PostgreSQL tools", Version: Version},
		&mcp.ServerOptions{Instructions: mcpInstructions, Logger: slogFor(log)})
	for _, info := range list {
		s.AddTool(mcpTool(info, p, inv))
	}
	return s
}

// mcpTool maps one registry tool to its MCP form and a handler that runs it through inv.
//
// The low-level Server.AddTool is used on purpose: unlike the generic mcp.AddTool it neither
// validates nor unmarshals the arguments, so they reach Registry.Call as the raw JSON the client
// sent, and our schema validation answers a malformed call with our invalid_arguments error
// object. Tool failures are results with isError set, carrying the same JSON object the HTTP API
// sends, as structured content and as text (for clients that only show text). Only the SDK's own
// failures (an unknown tool name, a malformed JSON-RPC request) are protocol errors.
func mcpTool(info tools.ToolInfo, p tools.Principal, inv *Invoker) (*mcp.Tool, mcp.ToolHandler) {
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
	h := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args := req.Params.Arguments
		if string(args) == "null" {
			// "arguments" is optional in MCP; some clients spell its absence as null.
			args = nil
		}
		// On /mcp the call takes the HTTP request's id; on stdio the invoker numbers it.
		var reqID string
		if info, _ := ctx.Value(logInfoKey).(*logInfo); info != nil {
			reqID = info.reqID
		}
		// A rate-limited call is a tool result like any refused call; MCP has no Retry-After, so the
		// wait is in the suggestion.
		ans := inv.Invoke(ctx, Call{Principal: p, Tool: info.Name, Args: args, RequestID: reqID, Transport: "mcp"})
		out := &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(ans.Body)}},
			StructuredContent: json.RawMessage(ans.Body),
		}
		if ans.Err != nil {
			out.SetError(ans.Err) // keeps our content; records the error for SDK middleware
		}
		return out, nil
	}
	return t, h
}

// ServeMCPStdio serves the tools of reg over MCP on in and out (newline-delimited JSON-RPC, as
// "pgtools mcp" does on stdin and stdout) until the client closes in or ctx ends. Every call
// runs as p. Nothing but protocol messages is ever written to out; logs go to log.
func ServeMCPStdio(ctx context.Context, reg *tools.Registry, p tools.Principal, in io.ReadCloser, out io.Writer, log zerolog.Logger) error {
	// Not Server.Run: it logs a normal stop (a signal) as an error.
	ss, err := NewMCPServer(reg, p, log).Connect(ctx, &mcp.IOTransport{Reader: in, Writer: nopWriteCloser{out}}, nil)
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

// nopWriteCloser lets the transport "close" stdout without closing the process's stdout.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// slogFor feeds the SDK's slog logging into our zerolog logger, at warn and above: its info
// lines are per-connection chatter.
func slogFor(log zerolog.Logger) *slog.Logger {
	l := log.With().Str("component", "mcp").Logger()
	if l.GetLevel() < zerolog.WarnLevel {
		l = l.Level(zerolog.WarnLevel)
	}
	return slog.New(zerolog.NewSlogHandler(l))
}
