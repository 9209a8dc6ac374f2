package mcpapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner/auth"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/mcptest"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// BenchmarkToolCall compares the runner's own cost of one primary-key select_query on the HTTP
// API and as an MCP tools/call on /mcp, in process (no network), so -cpuprofile and -benchmem
// show what MCP adds. cmd/pgtools-bench measures the same over loopback under load.
func BenchmarkToolCall(b *testing.B) {
	db := pgtest.New(b)
	db.Exec(b, mcptest.Fixture)
	reg := toolstest.Registry(b, db.RoleDSN(b, "bench"), tools.Policy{}, 8)
	// The act-as token's calls run for a subject named per request: a per-user principal, with
	// claims, as JWT callers are too.
	tokens := append(runnertest.MCPTokens(), auth.Token{Secret: runnertest.ActAsToken, Name: "hub", Scopes: []string{"read"}, ActAs: true})
	h := httpapi.NewHandler(reg, tokens, zerolog.New(io.Discard), 1<<20)
	args := func(id int64) string {
		return `{"table":"orders","where":"id = $1","params":[` + strconv.FormatInt(id%5+1, 10) + `]}`
	}
	run := func(b *testing.B, newReq func(id int64) *http.Request) {
		var n atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, newReq(n.Add(1)))
				// An MCP result carries the answer as escaped text.
				if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, `"success":true`) && !strings.Contains(body, `\"success\":true`) {
					b.Errorf("status %d: %.300s", w.Code, w.Body.String())
					return
				}
			}
		})
	}
	b.Run("http", func(b *testing.B) {
		run(b, func(id int64) *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/v1/tools/select_query", strings.NewReader(args(id)))
			r.Header.Set("Authorization", "Bearer "+runnertest.AgentToken)
			return r
		})
	})
	mcpCall := func(token string, header ...string) func(id int64) *http.Request {
		return func(id int64) *http.Request {
			body := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"method":"tools/call","params":{"name":"select_query","arguments":` + args(id) + `}}`
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+token)
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Accept", "application/json, text/event-stream")
			r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			for i := 0; i+1 < len(header); i += 2 {
				r.Header.Set(header[i], header[i+1])
			}
			return r
		}
	}
	b.Run("mcp", func(b *testing.B) { run(b, mcpCall(runnertest.AgentToken)) })
	// As the go-sdk client sends a call at its default protocol version: no session, its
	// version, identity and capabilities in _meta, the method and tool in headers.
	b.Run("mcp-2026-07-28", func(b *testing.B) {
		call := mcpCall(runnertest.AgentToken, "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "select_query")
		run(b, func(id int64) *http.Request {
			body := `{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"method":"tools/call","params":{"_meta":` + mcp20260728Meta +
				`,"name":"select_query","arguments":` + args(id) + `}}`
			r := call(id)
			r.Body = io.NopCloser(strings.NewReader(body))
			r.ContentLength = int64(len(body))
			return r
		})
	})
	// Four subjects in turn, as a few users of one agent would call.
	b.Run("mcp-act-as", func(b *testing.B) {
		subject := mcpCall(runnertest.ActAsToken, auth.ActAsHeader, "")
		run(b, func(id int64) *http.Request {
			r := subject(id)
			r.Header.Set(auth.ActAsHeader, "user-"+strconv.FormatInt(id%4, 10))
			return r
		})
	})
}

// mcp20260728Meta is the _meta the go-sdk client (v1.8.0, at its default protocol version)
// puts in every request.
const mcp20260728Meta = `{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true}},` +
	`"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
