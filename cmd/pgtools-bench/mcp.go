package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// mcpProtocolVersion is what the bench's MCP client negotiates, as a current client (the
// TypeScript SDK, Claude Desktop) does: the latest version before the SDK's draft one.
const mcpProtocolVersion = "2025-11-25"

// mcpCallBody is a tools/call of the primary-key select_query, the same read as pkBody.
func mcpCallBody(id int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"select_query","arguments":{"table":"customers","where":"id = $1","params":[` +
		strconv.Itoa(id) + `]}}}`)
}

// mcpPost sends one JSON-RPC message to /mcp as a Streamable HTTP client does.
func mcpPost(ctx context.Context, client *http.Client, url, token string, body []byte) ([]byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", mcpProtocolVersion)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return b, nil
}

// mcpCaller initializes once, like the load generator of issue 17 and like every MCP client, and
// then returns a caller that sends tools/call over Streamable HTTP. A call that answers an error
// result (isError) fails the measurement.
func mcpCaller(ctx context.Context, client *http.Client, url, token string) (caller, error) {
	init := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + mcpProtocolVersion +
		`","capabilities":{},"clientInfo":{"name":"pgtools-bench","version":"1"}}}`
	b, err := mcpPost(ctx, client, url, token, []byte(init))
	if err != nil {
		return nil, fmt.Errorf("MCP initialize: %w", err)
	}
	if !bytes.Contains(b, []byte(`"protocolVersion":"`+mcpProtocolVersion+`"`)) {
		return nil, fmt.Errorf("MCP initialize did not negotiate %s: %s", mcpProtocolVersion, b)
	}
	return func(ctx context.Context, id int) error {
		b, err := mcpPost(ctx, client, url, token, mcpCallBody(id))
		if err != nil {
			return err
		}
		// The answer is the HTTP API's JSON inside a text item (escaped), or also as
		// structuredContent when that is switched on.
		ok := bytes.Contains(b, []byte(`\"success\":true`)) || bytes.Contains(b, []byte(`"success":true`))
		if !ok || bytes.Contains(b, []byte(`"isError":true`)) {
			return fmt.Errorf("tools/call failed: %.300s", b)
		}
		return nil
	}, nil
}

// mcpName is the contender that calls select_query through /mcp with the Go client.
const mcpName = "pgtools select_query over MCP /mcp"

// printMCPRatios prints MCP against the HTTP API, in the terms of issue 17's targets. lat holds
// the in-process client's figures (latency at c=1); tput those of the throughput run (wrk when
// fromWrk, where the bench process is the runner alone, so its CPU is the server's).
func printMCPRatios(out io.Writer, c int, httpLat, mcpLat, httpTput, mcpTput figures, fromWrk bool) {
	load := "in-process Go client (its CPU counted with the runner's)"
	if fromWrk {
		load = "load from wrk"
	}
	fmt.Fprintf(out, "\nMCP /mcp vs HTTP API, %s:\n", load)
	fmt.Fprintf(out, "  ratio throughput @c%d MCP / HTTP: %.2f  (target ≥ 0.85)\n", c, mcpTput.tput/httpTput.tput)
	fmt.Fprintf(out, "  ratio runner CPU per call MCP / HTTP: %.2f  (%.0f µs vs %.0f µs; target ≤ 1.30)\n",
		mcpTput.benchUS/httpTput.benchUS, mcpTput.benchUS, httpTput.benchUS)
	fmt.Fprintf(out, "  ratio PostgreSQL CPU per call MCP / HTTP: %.2f  (%.0f µs vs %.0f µs)\n",
		mcpTput.serverUS/httpTput.serverUS, mcpTput.serverUS, httpTput.serverUS)
	fmt.Fprintf(out, "  ratio p99 @c%d MCP / HTTP: %.2f  (%.2f ms vs %.2f ms; target ≤ 1.50)\n", c, mcpTput.p99c/httpTput.p99c, mcpTput.p99c, httpTput.p99c)
	fmt.Fprintf(out, "  ratio p50 @c1 MCP / HTTP (in-process Go client): %.2f  (%.3f ms vs %.3f ms)\n", mcpLat.p50/httpLat.p50, mcpLat.p50, httpLat.p50)
}
