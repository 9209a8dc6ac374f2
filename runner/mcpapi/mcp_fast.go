package mcpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pgtools/pgtools/runner/invoke"
	"github.com/pgtools/pgtools/tools"
)

// The fast path: /mcp answers the commonest message itself, a plain tools/call (one JSON-RPC
// request, no progress token, no answer to a question), on every protocol version the SDK
// offers, and leaves every other message to the SDK.
//
// Such a call needs nothing of an MCP session. Before 2026-07-28 a stateless POST carries no
// client capabilities, so the SDK's path runs it exactly as the HTTP API would and wraps the
// answer in a CallToolResult. On 2026-07-28 there is no session at all: the request carries its
// version, client info and capabilities in params._meta, the method and tool in headers, and the
// result gains resultType and the server's info in _meta. Either way the SDK's path builds a
// session, a JSON-RPC connection and a goroutine per POST and decodes the message about eight
// times (on 2026-07-28, each decode with a fresh 64 KiB buffer: half a megabyte per call); that
// was most of an MCP call's cost. This path reads the message once and answers with the same
// bytes: TestMCPFastPathAnswersAsTheSDKOnEveryVersion sends each message both ways, on every
// version, and compares them, so a client cannot tell which path answered.

// fastProtocolVersions are the protocol versions whose tools/call the fast path answers, each
// with whether its requests carry their metadata in _meta (2026-07-28, SEP-2575): "" (no header:
// the SDK assumes 2025-03-26) and every version the SDK offers. A version missing here goes to
// the SDK; TestMCPFastPathVersions checks that every version the SDK offers is listed.
var fastProtocolVersions = map[string]bool{"": false, "2024-11-05": false, "2025-03-26": false, "2025-06-18": false,
	"2025-11-25": false, "2026-07-28": true}

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
	meta fastMeta
}

// fastMeta is the _meta of a call: the members the fast path knows, each as sent.
type fastMeta struct {
	version                 string // io.modelcontextprotocol/protocolVersion
	clientInfo, caps        []byte // io.modelcontextprotocol/clientInfo and clientCapabilities, objects
	traceparent, tracestate string // W3C trace context
}

// parseFastCall returns body as a plain tools/call, or false when it is anything more or other:
// a batch, a notification, another method, an unknown or repeated member, a _meta member other
// than the 2026-07-28 metadata and the W3C trace context (a progress token, a log level), input
// responses, a name or key spelled with escapes. It reads the canonical form only, so whatever it
// accepts the SDK reads the same way; everything else is left to the SDK. A call's body is small
// and the SDK-free path is the point, so this is one pass over the bytes after json.Valid rather
// than decoding into maps.
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
			var name, args, meta bool
			return once(&seen[3]) && sc.object(func(key string) bool {
				switch key {
				case "name":
					n := sc.value()
					c.tool = plainString(n)
					return once(&name) && c.tool != ""
				case "arguments":
					c.args = sc.value()
					return once(&args) && (c.args[0] == '{' || string(c.args) == "null")
				case "_meta":
					return once(&meta) && c.meta.parse(&sc)
				}
				return false
			}) && name
		}
		return false
	})
	return c, ok && sc.end() && seen == [4]bool{true, true, true, true}
}

// parse reads a _meta object of known members, each once.
func (m *fastMeta) parse(sc *fastScanner) bool {
	var seen [5]bool
	return sc.object(func(key string) bool {
		v := sc.value()
		switch key {
		case mcp.MetaKeyProtocolVersion:
			m.version = plainString(v)
			return once(&seen[0]) && m.version != ""
		case mcp.MetaKeyClientInfo:
			m.clientInfo = v
			return once(&seen[1]) && v[0] == '{'
		case mcp.MetaKeyClientCapabilities:
			m.caps = v
			return once(&seen[2]) && v[0] == '{'
		case "traceparent":
			m.traceparent = plainString(v)
			return once(&seen[3]) && m.traceparent != ""
		case "tracestate":
			m.tracestate = plainString(v)
			return once(&seen[4]) && (m.tracestate != "" || string(v) == `""`)
		}
		return false
	})
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
	if _, ok := fastProtocolVersions[r.Header.Get("Mcp-Protocol-Version")]; r.Method != http.MethodPost || !ok {
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

// fastMetaOK reports whether c's metadata is what its protocol version asks for, as the SDK
// checks it, and returns the client's capabilities (nil before 2026-07-28). Before 2026-07-28 a
// call carries none of the 2026-07-28 members (the SDK would read them); on 2026-07-28 it
// carries its version (the header's), its capabilities, optionally its client info, and the
// Mcp-Method and Mcp-Name headers name the body's method and tool. Anything the SDK would refuse
// or read further is left to it.
func fastMetaOK(r *http.Request, c fastCall, seen *metaCache) (*mcp.ClientCapabilities, bool) {
	v := r.Header.Get("Mcp-Protocol-Version")
	if !fastProtocolVersions[v] {
		return nil, c.meta.version == "" && c.meta.caps == nil && c.meta.clientInfo == nil
	}
	if c.meta.version != v || c.meta.caps == nil || r.Header.Get("Mcp-Method") != "tools/call" || r.Header.Get("Mcp-Name") != c.tool {
		return nil, false
	}
	if c.meta.clientInfo != nil {
		if _, ok := seen.decode(c.meta.clientInfo, func(b []byte) (any, error) {
			var info mcp.Implementation
			return nil, json.Unmarshal(b, &info)
		}); !ok {
			return nil, false
		}
	}
	caps, ok := seen.decode(c.meta.caps, func(b []byte) (any, error) {
		var caps mcp.ClientCapabilities
		err := json.Unmarshal(b, &caps)
		return &caps, err
	})
	if !ok {
		return nil, false
	}
	return caps.(*mcp.ClientCapabilities), true
}

// metaCacheSize bounds the _meta members metaCache keeps, and metaCacheMaxLen the length of
// one (a client's description is a few hundred bytes): a client sends the same client info and
// capabilities with every request, and a server has few kinds of clients. At most 256 KiB.
const (
	metaCacheSize   = 256
	metaCacheMaxLen = 1024
)

// metaCache keeps the decoding of _meta members already seen, by their bytes, so that a
// 2026-07-28 call does not pay for decoding its client's description again (reflection-based
// decoding was a third of what the fast path added). Values are read-only once kept. A nil
// cache decodes every time.
type metaCache struct {
	mu   sync.Mutex
	byID map[string]metaDecoded
}

type metaDecoded struct {
	v  any
	ok bool
}

// decode returns what dec makes of b, and whether it succeeded, from the cache when b was seen.
func (c *metaCache) decode(b []byte, dec func([]byte) (any, error)) (any, bool) {
	if len(b) > metaCacheMaxLen {
		c = nil
	}
	if c != nil {
		c.mu.Lock()
		d, hit := c.byID[string(b)]
		c.mu.Unlock()
		if hit {
			return d.v, d.ok
		}
	}
	v, err := dec(b)
	if c != nil {
		c.mu.Lock()
		if c.byID == nil {
			c.byID = map[string]metaDecoded{}
		}
		if len(c.byID) < metaCacheSize {
			c.byID[string(b)] = metaDecoded{v, err == nil}
		}
		c.mu.Unlock()
	}
	return v, err == nil
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
	caps, ok := fastMetaOK(r, c, &m.metaSeen)
	if !ok {
		return false
	}
	args := c.args
	if string(args) == "null" {
		args = nil // "arguments" is optional in MCP; some clients spell its absence as null
	}
	ctx := invoke.WithTraceParent(r.Context(), c.meta.traceparent, c.meta.tracestate)
	call := invoke.Call{Principal: p, Tool: c.tool, Args: args, RequestID: httpRequestID(ctx), Transport: "mcp"}
	ans, ask := askOrRun(ctx, canElicit(caps), m.inv, call, m.opts)
	if ask == nil {
		ask = toolResult(ans, m.opts)
	}
	// The envelope as the SDK writes it; the result is compact and escaped already, so it is
	// copied. The call has run: whatever happens now is answered here, never by running it again
	// through the SDK.
	resp := append([]byte(`{"jsonrpc":"2.0","id":`), c.id...)
	if res, err := m.encodeResult(ask, fastProtocolVersions[r.Header.Get("Mcp-Protocol-Version")]); err == nil {
		resp = append(append(resp, `,"result":`...), res...)
	} else { // unreachable for a result of text, kept so a failure is an answer
		resp = append(resp, `,"error":{"code":-32603,"message":"the tool ran, but its result could not be encoded"}`...)
	}
	resp = append(resp, '}')
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(resp)
	return true
}

// encodeResult is res as the SDK encodes it. On 2026-07-28 (perRequestMeta) the SDK names the
// server in the result's _meta and adds resultType, after every other member, followed by the
// questions of an input-required result (CallToolResult.MarshalJSON).
func (m *HTTP) encodeResult(res *mcp.CallToolResult, perRequestMeta bool) ([]byte, error) {
	if !perRequestMeta {
		return json.Marshal(res)
	}
	// _meta comes first and its one member is always the same: m.metaHead. The members after
	// it never include _meta (res has none), and "content" is always written (not omitempty).
	out := *res
	out.InputRequests = nil
	body, err := json.Marshal(&out)
	if err != nil || len(body) < 2 || res.Meta != nil {
		return nil, fmt.Errorf("a result of %d bytes with _meta %v: %w", len(body), res.Meta != nil, err)
	}
	b := append(append(append(make([]byte, 0, len(m.metaHead)+len(body)+64), m.metaHead...), ','), body[1:len(body)-1]...)
	if res.InputRequests == nil {
		return append(b, `,"resultType":"complete"}`...), nil
	}
	q, err := json.Marshal(res.InputRequests)
	if err != nil {
		return nil, err
	}
	b = append(b, `,"resultType":"input_required","inputRequests":`...)
	return append(append(b, q...), '}'), nil
}

// TakesFastPath reports whether a POST of body with r's headers is one the fast path answers
// itself (when its tool is served), and names that tool; every other message goes to the go-sdk.
// For the differential tests that hold the two paths to the same answers.
func TakesFastPath(r *http.Request, body []byte) (tool string, ok bool) {
	c, parsed := parseFastCall(body)
	if !parsed || !fastHeadersOK(r) {
		return c.tool, false
	}
	_, ok = fastMetaOK(r, c, nil)
	return c.tool, ok
}
