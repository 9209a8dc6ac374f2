package mcpapi

import (
	"bytes"
	"encoding/json"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/pgtools/pgtools/runner/invoke"
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

// isID reports whether v (valid JSON) is a request id, a number or a string. The fast path
// echoes it as sent, as the SDK path does (mcp_ids.go); null and other values go to the SDK.
func isID(v []byte) bool {
	return len(v) > 0 && (v[0] == '"' || v[0] == '-' || v[0] >= '0' && v[0] <= '9')
}

// fastCall is a tools/call message as the fast path accepts it.
type fastCall struct {
	id   []byte
	tool string
	args []byte // the arguments' JSON, nil when absent
}

// parseFastCall returns body as a plain tools/call, or false when it is anything more or other:
// a batch, a notification, another method, an unknown or repeated member, _meta (progress
// tokens, 2026-07-28 metadata), input responses, a name or key spelled with escapes. It reads
// the canonical form only, so whatever it accepts the SDK reads the same way; everything else is
// left to the SDK. A call's body is small and the SDK-free path is the point, so this is one pass
// over the bytes after json.Valid rather than decoding into maps.
func parseFastCall(body []byte) (fastCall, bool) {
	if !json.Valid(body) {
		return fastCall{}, false
	}
	var c fastCall
	var seen [4]bool // jsonrpc, id, method, params
	sc := fastScanner{b: body}
	ok := sc.object(func(key string) bool {
		switch key {
		case "jsonrpc":
			return once(&seen[0]) && sc.literal(`"2.0"`)
		case "method":
			return once(&seen[2]) && sc.literal(`"tools/call"`)
		case "id":
			c.id = sc.value()
			return once(&seen[1]) && isID(c.id)
		case "params":
			var name, args bool
			return once(&seen[3]) && sc.object(func(key string) bool {
				switch key {
				case "name":
					n := sc.value()
					c.tool = plainString(n)
					return once(&name) && c.tool != ""
				case "arguments":
					c.args = sc.value()
					return once(&args) && (c.args[0] == '{' || string(c.args) == "null")
				}
				return false
			}) && name
		}
		return false
	})
	return c, ok && sc.end() && seen == [4]bool{true, true, true, true}
}

// once marks a member seen and reports whether it was new.
func once(seen *bool) bool {
	if *seen {
		return false
	}
	*seen = true
	return true
}

// plainString is the text of a JSON string without escapes, or "" for anything else.
func plainString(v []byte) string {
	if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v[1:len(v)-1], '\\') >= 0 || bytes.IndexByte(v[1:len(v)-1], '"') >= 0 {
		return ""
	}
	return string(v[1 : len(v)-1])
}

// fastScanner walks JSON that json.Valid has accepted.
type fastScanner struct {
	b []byte
	i int
}

func (s *fastScanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// end reports whether only white space is left.
func (s *fastScanner) end() bool {
	s.space()
	return s.i == len(s.b)
}

// object reads an object, calling member for each key with the scanner at its value; member
// reads the value and reports whether to go on. Keys with escapes stop it.
func (s *fastScanner) object(member func(key string) bool) bool {
	s.space()
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		return false
	}
	s.i++
	s.space()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return true
	}
	for {
		s.space()
		key := plainString(s.value())
		s.space()
		if key == "" || s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		s.space()
		if !member(key) {
			return false
		}
		s.space()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			return true
		default:
			return false
		}
	}
}

// literal reads a value that must be exactly want.
func (s *fastScanner) literal(want string) bool {
	return string(s.value()) == want
}

// value reads one value and returns its bytes.
func (s *fastScanner) value() []byte {
	start := s.i
	depth := 0
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			for s.i < len(s.b) && s.b[s.i] != '"' {
				if s.b[s.i] == '\\' {
					s.i++
				}
				s.i++
			}
			s.i++
		case c == '{' || c == '[':
			depth++
			s.i++
		case c == '}' || c == ']':
			if depth == 0 {
				return s.b[start:s.i]
			}
			depth--
			s.i++
		case depth == 0 && (c == ',' || c == ':' || c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return s.b[start:s.i]
		default:
			s.i++
		}
		if depth == 0 && s.i > start && (s.b[start] == '"' || s.b[start] == '{' || s.b[start] == '[') {
			return s.b[start:s.i]
		}
	}
	return s.b[start:s.i]
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
func (m *HTTP) serveFast(w http.ResponseWriter, r *http.Request, p tools.Principal, body []byte) bool {
	if m.opts.SDKOnly || int64(len(body)) > m.maxBody || !fastHeadersOK(r) {
		return false
	}
	c, ok := parseFastCall(body)
	if !ok || !m.registered[c.tool] {
		return false // an unknown tool is the SDK's protocol error
	}
	args := c.args
	if string(args) == "null" {
		args = nil // "arguments" is optional in MCP; some clients spell its absence as null
	}
	ans := m.inv.Invoke(r.Context(), invoke.Call{Principal: p, Tool: c.tool, Args: args, RequestID: httpRequestID(r.Context()), Transport: "mcp"})
	// The envelope as the SDK writes it; the result is compact and escaped already, so it is
	// copied. The call has run: whatever happens now is answered here, never by running it again
	// through the SDK.
	resp := append([]byte(`{"jsonrpc":"2.0","id":`), c.id...)
	if res, err := json.Marshal(toolResult(ans, m.opts)); err == nil {
		resp = append(append(resp, `,"result":`...), res...)
	} else { // unreachable for a result of text, kept so a failure is an answer
		resp = append(resp, `,"error":{"code":-32603,"message":"the tool ran, but its result could not be encoded"}`...)
	}
	resp = append(resp, '}')
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(resp)
	return true
}

// TakesFastPath reports whether a POST of body with r's headers is one the fast path answers
// itself (when its tool is served), and names that tool; every other message goes to the go-sdk.
// For the differential tests that hold the two paths to the same answers.
func TakesFastPath(r *http.Request, body []byte) (tool string, ok bool) {
	c, parsed := parseFastCall(body)
	return c.tool, parsed && fastHeadersOK(r)
}
