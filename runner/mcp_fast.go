package runner

import (
	"bytes"
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/tools"
)

// The fast path: /mcp answers the commonest message itself, a plain tools/call (one JSON-RPC
// request, no progress token, no _meta, a protocol version before 2026-07-28), and leaves every
// other message to the SDK.
//
// Such a call needs nothing of an MCP session: on a stateless POST of these protocol versions a
// client declares no capabilities, so the SDK's path runs it exactly as the HTTP API would (no
// elicitation, no progress) and wraps the answer in a CallToolResult. The SDK's path builds a
// session, a JSON-RPC connection and a goroutine per POST and parses the message twice; that was
// three quarters of an MCP call's cost. This path answers with the same bytes (a differential
// test, TestMCPFastPathAnswersAsTheSDK, sends each message both ways and compares them), so a
// client cannot tell which path answered.

// fastProtocolVersions are the protocol versions whose stateless tools/call the fast path
// answers: "" (no header: the SDK assumes 2025-03-26) and the versions before 2026-07-28, where a
// request carries no per-request client capabilities.
var fastProtocolVersions = map[string]bool{"": true, "2025-11-25": true, "2025-06-18": true, "2025-03-26": true, "2024-11-05": true}

// fastID matches the request ids the fast path echoes: integers and plain strings, which the
// SDK writes back as they were sent. Any other id goes to the SDK.
var fastID = regexp.MustCompile(`^(-?[1-9][0-9]{0,14}|0|"[A-Za-z0-9_.:-]{1,64}")$`)

// fastCall is a tools/call message as the fast path accepts it.
type fastCall struct {
	id   json.RawMessage
	tool string
	args json.RawMessage
}

// parseFastCall returns body as a plain tools/call, or false when anything in it is more than
// that: a batch, a notification, another method, an unknown member, _meta (progress tokens,
// 2026-07-28 metadata), input responses.
func parseFastCall(body []byte) (fastCall, bool) {
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil || len(msg) != 4 || string(msg["jsonrpc"]) != `"2.0"` || string(msg["method"]) != `"tools/call"` {
		return fastCall{}, false
	}
	id, ok := msg["id"]
	if !ok || !fastID.Match(id) {
		return fastCall{}, false
	}
	var params map[string]json.RawMessage
	if json.Unmarshal(msg["params"], &params) != nil {
		return fastCall{}, false
	}
	var name string
	if json.Unmarshal(params["name"], &name) != nil || name == "" {
		return fastCall{}, false
	}
	args, hasArgs := params["arguments"]
	if len(params) != 1+btoi(hasArgs) {
		return fastCall{}, false
	}
	if hasArgs {
		if t := bytes.TrimSpace(args); len(t) == 0 || t[0] != '{' && string(t) != "null" {
			return fastCall{}, false // not an object: the SDK's own invalid-params error
		}
	}
	return fastCall{id: id, tool: name, args: args}, true
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// fastHeadersOK reports whether r is a POST the SDK would serve rather than refuse: JSON content,
// an Accept that allows JSON and event streams, a protocol version of fastProtocolVersions, and a
// Host that passes the SDK's DNS-rebinding check. Anything else goes to the SDK, which answers it.
func fastHeadersOK(r *http.Request) bool {
	if r.Method != http.MethodPost || !fastProtocolVersions[r.Header.Get("Mcp-Protocol-Version")] {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	jsonOK, streamOK := false, false
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(part, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	if !jsonOK || !streamOK {
		return false
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil && loopbackHost(local.String()) && !loopbackHost(r.Host) {
		return false
	}
	return true
}

// loopbackHost reports whether addr (host:port or a host) names the loopback interface, as the
// SDK's DNS-rebinding check judges it: where this says yes, the SDK says yes too, so the fast
// path never serves a request the SDK would refuse.
func loopbackHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// serveFast answers body itself when it is a plain tools/call of a registered tool, and reports
// whether it did.
func (m *mcpHTTP) serveFast(w http.ResponseWriter, r *http.Request, p tools.Principal, body []byte) bool {
	if m.opts.noFastPath || int64(len(body)) > m.maxBody || !fastHeadersOK(r) {
		return false
	}
	c, ok := parseFastCall(body)
	if !ok || !m.registered[c.tool] {
		return false // an unknown tool is the SDK's protocol error
	}
	args := []byte(c.args)
	if string(bytes.TrimSpace(args)) == "null" {
		args = nil // "arguments" is optional in MCP; some clients spell its absence as null
	}
	var reqID string
	if info, _ := r.Context().Value(logInfoKey).(*logInfo); info != nil {
		reqID = info.reqID
	}
	ans := m.inv.Invoke(r.Context(), Call{Principal: p, Tool: c.tool, Args: args, RequestID: reqID, Transport: "mcp"})
	out := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(ans.Body)}}}
	if m.opts.StructuredContent {
		out.StructuredContent = json.RawMessage(ans.Body)
	}
	if ans.Err != nil {
		out.SetError(ans.Err)
	}
	res, err := json.Marshal(out)
	if err != nil {
		return false // unreachable for a result of text; the SDK would answer its own error
	}
	resp, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", c.id, res})
	if err != nil {
		return false
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(resp)
	return true
}
