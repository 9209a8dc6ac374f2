package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// mcpVersions are the protocol versions the bench's MCP clients speak, one contender each:
// 2025-06-18 and 2025-11-25 (initialize, then calls naming the version in a header) and
// 2026-07-28, the go-sdk client's default (server/discover, then calls carrying their version,
// client info and capabilities in _meta and their method and tool in headers, SEP-2575).
var mcpVersions = []string{"2025-06-18", "2025-11-25", "2026-07-28"}

// perRequestMeta reports whether version v carries its metadata in every request.
func perRequestMeta(v string) bool { return v >= "2026-07-28" }

// mcpMeta is the _meta a 2026-07-28 request carries, as the go-sdk client (v1.8.0) writes it.
func mcpMeta(v string) string {
	return `{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"pgtools-bench","version":"1"},"io.modelcontextprotocol/protocolVersion":"` + v + `"}`
}

// mcpCallBody is a tools/call of the primary-key select_query, the same read as pkBody, as a
// client of version v writes it.
func mcpCallBody(v string, id int) []byte {
	meta := ""
	if perRequestMeta(v) {
		meta = `"_meta":` + mcpMeta(v) + `,`
	}
	return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + meta + `"name":"select_query","arguments":{"table":"customers","where":"id = $1","params":[` +
		strconv.Itoa(id) + `]}}}`)
}

// mcpPost sends one JSON-RPC message of version v to /mcp as a Streamable HTTP client does; on
// 2026-07-28 with the Mcp-Method (and for a call Mcp-Name) header.
func mcpPost(ctx context.Context, client *http.Client, url, token, v, method string, body []byte) ([]byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", v)
	if perRequestMeta(v) {
		req.Header.Set("Mcp-Method", method)
		if method == "tools/call" {
			req.Header.Set("Mcp-Name", "select_query")
		}
	}
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

// mcpCaller starts as a client of version v does, once (initialize before 2026-07-28,
// server/discover from it), and then returns a caller that sends tools/call over Streamable
// HTTP. A call that answers an error result (isError) fails the measurement.
func mcpCaller(ctx context.Context, client *http.Client, url, token, v string) (caller, error) {
	method, start := "initialize", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+v+
		`","capabilities":{},"clientInfo":{"name":"pgtools-bench","version":"1"}}}`
	want := `"protocolVersion":"` + v + `"`
	if perRequestMeta(v) {
		method, start = "server/discover", `{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{"_meta":`+mcpMeta(v)+`}}`
		want = `"` + v + `"`
	}
	b, err := mcpPost(ctx, client, url, token, v, method, []byte(start))
	if err != nil {
		return nil, fmt.Errorf("MCP %s: %w", method, err)
	}
	if !bytes.Contains(b, []byte(want)) {
		return nil, fmt.Errorf("MCP %s did not offer %s: %s", method, v, b)
	}
	return func(ctx context.Context, id int) error {
		b, err := mcpPost(ctx, client, url, token, v, "tools/call", mcpCallBody(v, id))
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

// mcpName is the contender that calls select_query through /mcp with the Go client speaking
// protocol version v.
func mcpName(v string) string { return "pgtools select_query over MCP /mcp " + v }

// mcpWrkName is the same contender loaded by wrk.
func mcpWrkName(v string) string { return mcpName(v) + ", wrk" }

// printMCPRatios prints MCP of protocol version v against the HTTP API, in the terms of issue
// 26's targets. lat holds the in-process client's figures (latency at c=1); tput those of the
// throughput run (wrk when fromWrk, where the bench process is the runner alone, so its CPU is
// the server's).
func printMCPRatios(out io.Writer, v string, c int, httpLat, mcpLat, httpTput, mcpTput figures, fromWrk bool) {
	load := "in-process Go client (its CPU counted with the runner's)"
	if fromWrk {
		load = "load from wrk"
	}
	fmt.Fprintf(out, "\nMCP /mcp, protocol %s, vs HTTP API, %s:\n", v, load)
	fmt.Fprintf(out, "  ratio throughput @c%d MCP / HTTP: %.2f  (target ≥ 0.85)\n", c, mcpTput.tput/httpTput.tput)
	fmt.Fprintf(out, "  ratio runner CPU per call MCP / HTTP: %.2f  (%.0f µs vs %.0f µs; target ≤ 1.30)\n",
		mcpTput.benchUS/httpTput.benchUS, mcpTput.benchUS, httpTput.benchUS)
	fmt.Fprintf(out, "  ratio PostgreSQL CPU per call MCP / HTTP: %.2f  (%.0f µs vs %.0f µs)\n",
		mcpTput.serverUS/httpTput.serverUS, mcpTput.serverUS, httpTput.serverUS)
	fmt.Fprintf(out, "  ratio p99 @c%d MCP / HTTP: %.2f  (%.2f ms vs %.2f ms; target ≤ 1.50)\n", c, mcpTput.p99c/httpTput.p99c, mcpTput.p99c, httpTput.p99c)
	fmt.Fprintf(out, "  ratio p50 @c1 MCP / HTTP (in-process Go client): %.2f  (%.3f ms vs %.3f ms)\n", mcpLat.p50/httpLat.p50, mcpLat.p50, httpLat.p50)
}
