package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pgtools/pgtools/runner"
	"github.com/pgtools/pgtools/runner/apitest"
	"github.com/pgtools/pgtools/runner/httpapi"
	"github.com/pgtools/pgtools/runner/runnertest"
	"github.com/pgtools/pgtools/tools"
	"github.com/pgtools/pgtools/tools/pgtest"
	"github.com/pgtools/pgtools/tools/toolstest"
)

// serveWithBodyWait runs the HTTP API with the given body read deadline on a loopback listener
// through Serve, the http.Server pgtools serve runs, and returns its address.
func serveWithBodyWait(t *testing.T, dsn string, wait time.Duration) string {
	t.Helper()
	reg := toolstest.Registry(t, dsn, tools.Policy{}, 4)
	h := httpapi.NewHandlerWith(reg, httpapi.HandlerOptions{Tokens: runnertest.MCPTokens(), Log: zerolog.New(&pgtest.SyncBuffer{}), MaxBodyBytes: 4096, BodyReadTimeout: wait})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runner.Serve(ctx, ln, h, zerolog.Nop(), time.Second) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return ln.Addr().String()
}

// slowClient sends a request's headers, then its body one byte every 50 ms, on a raw
// connection, until the server answers or closes. It returns the connection and a stop function.
func slowClient(t *testing.T, addr, method, path string, header http.Header, bodyLen int) (net.Conn, func()) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", method, path, addr, bodyLen)
	for k, vs := range header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n{")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		for i := 1; i < bodyLen; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	var once bool
	stopFn := func() {
		if !once {
			once = true
			close(stop)
			<-trickled
		}
	}
	t.Cleanup(func() {
		stopFn()
		conn.Close()
	})
	return conn, stopFn
}

// TestSlowBodyIsTimedOut: a body sent a byte at a time used to hold its connection for as long
// as the client liked (only headers had a deadline). With a 300 ms body deadline every endpoint
// answers within a second: the tool API and /mcp with the pgtools error object and 408, an
// unauthenticated or unknown request at once, and the server then closes the connection instead
// of reading the trickle.
func TestSlowBodyIsTimedOut(t *testing.T) {
	t.Parallel()
	_, dsn := runnertest.SetupDB(t)
	addr := serveWithBodyWait(t, dsn, 300*time.Millisecond)
	auth := http.Header{"Authorization": {"Bearer " + runnertest.AgentToken}}
	mcpHeader := http.Header{"Authorization": {"Bearer " + runnertest.AgentToken}, "Content-Type": {"application/json"},
		"Accept": {"application/json, text/event-stream"}}
	cases := []struct {
		name, method, path string
		header             http.Header
		status             int
		errorType          string // "" when the answer is not a pgtools error object
	}{
		{"tool call", "POST", "/v1/tools/select_query", auth, http.StatusRequestTimeout, "timeout"},
		{"mcp", "POST", "/mcp", mcpHeader, http.StatusRequestTimeout, "timeout"},
		{"no token", "POST", "/v1/tools/select_query", nil, http.StatusUnauthorized, "authentication_error"},
		{"unknown path", "POST", "/v2/anything", auth, http.StatusNotFound, "unknown_tool"},
		{"get with a body", "GET", "/v1/tools", auth, http.StatusOK, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			conn, stop := slowClient(t, addr, c.method, c.path, c.header, 1000) // 50 s at this pace
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer after %s: %v", time.Since(start).Round(time.Millisecond), err)
			}
			raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, raw)
			}
			if c.errorType != "" {
				var body map[string]any
				if err := json.Unmarshal(raw, &body); err != nil || body["success"] != false || body["errorType"] != c.errorType || body["suggestion"] == "" {
					t.Fatalf("not the pgtools error object with %s: %s", c.errorType, raw)
				}
			}
			if c.status == http.StatusRequestTimeout && !strings.Contains(string(raw), "did not arrive within 300ms") {
				t.Fatalf("the 408 does not name the deadline: %s", raw)
			}
			// The server must not keep reading the trickle to reuse the connection: it closes it
			// once the deadline has passed.
			_, err = br.ReadByte()
			stop()
			if err == nil {
				t.Fatal("the server sent more after its answer")
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the connection was still open %s after the request started", time.Since(start).Round(time.Millisecond))
			}
		})
	}
}

// TestBodyDeadlineSparesLongCalls: the deadline covers the body, not the call. A call that runs
// well past it after a prompt body still succeeds, on the tool API and on /mcp; a deadline left
// on the connection would cancel it when the server's watch for a closed connection timed out.
func TestBodyDeadlineSparesLongCalls(t *testing.T) {
	t.Parallel()
	_, dsn := runnertest.SetupDB(t)
	addr := serveWithBodyWait(t, dsn, 200*time.Millisecond)
	base := "http://" + addr
	status, body, _ := apitest.Call(t, http.MethodPost, base+"/v1/tools/execute_sql", runnertest.AgentToken, `{"sql":"select pg_sleep(0.8) is null as slept"}`)
	if status != http.StatusOK || body["success"] != true {
		t.Fatalf("tool call: %d %v", status, body)
	}
	mstatus, raw, _ := apitest.MCPPost(t, base, runnertest.AgentToken, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"execute_sql","arguments":{"sql":"select pg_sleep(0.8) is null as slept"}}}`)
	if mstatus != http.StatusOK || !strings.Contains(string(raw), `slept`) || strings.Contains(string(raw), `"isError":true`) {
		t.Fatalf("mcp call: %d %s", mstatus, raw)
	}
}
