package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"

	"github.com/rs/zerolog"
	"github.com/tiktoken-go/tokenizer"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/mcpapi"
	"github.com/pgtools/pgtools/tools"
)

// tokenRows is the result size the token figures are stated for (issue 16).
const tokenRows = 100

// catalogToken may use every tool, so the catalog figures count all of them (a caller is shown
// only the tools its scopes allow).
const catalogToken = "bench-catalog-token-0123456789ab"

// tokenEndpoints are the two runners the token figures compare: the default one (MCP results as
// text only, no outputSchema) and one with mcp.structured_content on.
type tokenEndpoints struct {
	client           *http.Client
	token            string
	base, structured string // base URLs
}

// serveStructured serves the HTTP API and /mcp of reg with mcp.structured_content on, on a
// loopback port, until stop is called; it returns its base URL.
func serveStructured(reg *tools.Registry, tokens []auth.Token) (base string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Tokens: tokens, Log: zerolog.Nop(),
		MCP: mcpapi.MCPOptions{StructuredContent: true}})}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// printTokens prints what a model pays, in OpenAI's o200k encoding (the tokenizer module embeds
// it): the tool catalog as MCP tools/list returns it, with and without outputSchema, and a
// 100-row select_query result in each format over HTTP and over MCP, with and without
// structuredContent. Token counts are of the compact JSON a client receives: the HTTP body, the
// tools array of tools/list, the result object of tools/call.
func printTokens(ctx context.Context, out io.Writer, e tokenEndpoints) error {
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		return err
	}
	count := func(b []byte) (int, error) {
		var c bytes.Buffer
		if err := json.Compact(&c, b); err != nil {
			return 0, err
		}
		ids, _, err := enc.Encode(c.String())
		return len(ids), err
	}
	// mcpResult sends one JSON-RPC request to a stateless /mcp and returns its result member.
	mcpResult := func(base, token, body string) (json.RawMessage, error) {
		b, err := mcpPost(ctx, e.client, base+"/mcp", token, "2025-11-25", "", []byte(body))
		if err != nil {
			return nil, err
		}
		var resp struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(b, &resp); err != nil || len(resp.Result) == 0 {
			return nil, fmt.Errorf("MCP answer without a result: %.300s", b)
		}
		return resp.Result, nil
	}

	fmt.Fprintf(out, "\n%-62s %10s %10s\n", "what a model reads (o200k: OpenAI's tokenizer)", "tokens", "bytes")
	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for _, c := range []struct{ name, base string }{
		{"catalog, all tools: MCP tools/list (default, no outputSchema)", e.base},
		{"catalog, all tools: MCP tools/list with outputSchema", e.structured},
	} {
		res, err := mcpResult(c.base, catalogToken, list)
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		var l struct {
			Tools json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(res, &l); err != nil {
			return err
		}
		var tools []json.RawMessage
		if err := json.Unmarshal(l.Tools, &tools); err != nil || len(tools) < 8 {
			return fmt.Errorf("tools/list offers %d tools, want the 8 built-in ones: %.300s", len(tools), l.Tools)
		}
		n, err := count(l.Tools)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%-62s %10d %10d\n", c.name, n, len(l.Tools))
	}

	for _, format := range []string{"objects", "columns", "csv"} {
		args := fmt.Sprintf(`{"table":"orders","order_by":"id","limit":%d,"format":%q}`, tokenRows, format)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/v1/tools/select_query", bytes.NewReader([]byte(args)))
		req.Header.Set("Authorization", "Bearer "+e.token)
		resp, err := e.client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var answer struct {
			RowCount int `json:"rowCount"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &answer) != nil || answer.RowCount != tokenRows {
			return fmt.Errorf("select_query format %s: status %d: %.300s", format, resp.StatusCode, body)
		}
		n, err := count(body)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%-62s %10d %10d\n", fmt.Sprintf("%d rows, format %s: HTTP answer", tokenRows, format), n, len(body))
		call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"select_query","arguments":` + args + `}}`
		for _, c := range []struct{ name, base string }{
			{"MCP result (default: text only)", e.base},
			{"MCP result with structuredContent", e.structured},
		} {
			res, err := mcpResult(c.base, e.token, call)
			if err != nil {
				return fmt.Errorf("tools/call format %s: %w", format, err)
			}
			n, err := count(res)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "%-62s %10d %10d\n", fmt.Sprintf("%d rows, format %s: %s", tokenRows, format, c.name), n, len(res))
		}
	}
	fmt.Fprintln(out, "(MCP text escapes the answer's quotes, so its one copy costs a little more than the HTTP body)")
	return nil
}
