// Package apitest is the client side of the pgtools HTTP server in tests: requests with a bearer
// token whose answer is a JSON object (tool calls, /v1/tools, /openapi.json, health), raw
// JSON-RPC messages posted to /mcp as curl would send them, and go-sdk MCP sessions over
// Streamable HTTP. The tests of runner's packages and of cmd/pgtools share it, so they speak to
// the server the same way. It is for tests only.
package apitest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Request is an HTTP request to url with "Authorization: Bearer token" (no header when token is
// empty) and body (no body when empty).
func Request(method, url, token, body string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	// The method and URL come from the test itself: an error here is a typo the first run shows
	// as a nil request.
	req, _ := http.NewRequest(method, url, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// Call sends Request(method, url, token, body) with Do.
func Call(t testing.TB, method, url, token, body string) (int, map[string]any, http.Header) {
	t.Helper()
	return Do(t, Request(method, url, token, body))
}

// Do sends req and returns the status, the body decoded as a JSON object, and the headers. A
// transport error or a body that is not JSON fails the test.
func Do(t testing.TB, req *http.Request) (int, map[string]any, http.Header) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: body is not JSON: %q", req.Method, req.URL, raw)
	}
	return resp.StatusCode, out, resp.Header
}

// MCPPost sends one raw JSON-RPC message to baseURL's /mcp, as curl would, and returns the
// status, the raw body and the headers. header is name, value pairs sent too. A transport error
// fails the test.
func MCPPost(t testing.TB, baseURL, token, body string, header ...string) (int, []byte, http.Header) {
	t.Helper()
	req := Request(http.MethodPost, baseURL+"/mcp", token, body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header
}

// Bearer is an http.RoundTripper that adds "Authorization: Bearer" and its token to every
// request, as an MCP client configured with a token does.
type Bearer string

// RoundTrip sends a copy of r with the token over http.DefaultTransport.
func (b Bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// MCPTransport is the go-sdk's Streamable HTTP transport to baseURL's /mcp with token, without
// retries (a test wants the first failure, not a reconnect).
func MCPTransport(baseURL, token string) *mcp.StreamableClientTransport {
	return &mcp.StreamableClientTransport{
		Endpoint: baseURL + "/mcp", HTTPClient: &http.Client{Transport: Bearer(token)}, MaxRetries: -1,
	}
}

// ConnectMCP connects the go-sdk client to baseURL's /mcp over MCPTransport with token. The
// error is returned, not fatal, since some tests expect the connection to be refused; a session
// that connects closes when the test ends.
func ConnectMCP(t testing.TB, baseURL, token string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "pgtools-test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), MCPTransport(baseURL, token), nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// MCPToolNames lists the tools baseURL's /mcp offers token's caller, through the go-sdk client,
// in the order tools/list gives them (the SDK sorts them by name).
func MCPToolNames(t testing.TB, baseURL, token string) []string {
	t.Helper()
	cs, err := ConnectMCP(t, baseURL, token)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(res.Tools))
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names
}
