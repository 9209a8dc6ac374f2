package mcpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// stdioPending sits between "pgtools mcp"'s stdin/stdout and the SDK's transport, counting the
// requests read and the responses written, so that the end of stdin reaches the SDK only once
// every request read has been answered. The SDK ends the connection at the end of its input and
// cancels the calls still running; a client that pipes its requests from a file (or closes its
// side right after the last one) would otherwise get an answer to initialize alone, and the
// cancelled calls would be logged as timeouts.
type stdioPending struct {
	ctx context.Context
	in  io.ReadCloser
	out io.Writer

	mu      sync.Mutex
	changed chan struct{}       // closed and replaced whenever open shrinks
	open    map[string]struct{} // ids of the requests read and not yet answered or cancelled
	inLine  []byte              // a request line not yet complete
	outLine []byte              // a response line not yet complete
}

func newStdioPending(ctx context.Context, in io.ReadCloser, out io.Writer) *stdioPending {
	return &stdioPending{ctx: ctx, in: in, out: out, changed: make(chan struct{}), open: map[string]struct{}{}}
}

func (s *stdioPending) reader() io.ReadCloser  { return stdioReader{s} }
func (s *stdioPending) writer() io.WriteCloser { return stdioWriter{s} }

type stdioReader struct{ s *stdioPending }

// Read reads from stdin; at its end it waits until every request read has been answered (or
// ctx ends) before it reports the end.
func (r stdioReader) Read(p []byte) (int, error) {
	s := r.s
	n, err := s.in.Read(p)
	s.mu.Lock()
	s.inLine = eachMessage(append(s.inLine, p[:n]...), func(m jsonrpcEnvelope) {
		switch {
		case isRequest(m):
			s.open[string(m.ID)] = struct{}{}
		case m.Method == "notifications/cancelled":
			// A cancelled request gets no answer (MCP): stop waiting for it.
			s.settle(m.Params.RequestID)
		}
	})
	s.mu.Unlock()
	if errors.Is(err, io.EOF) {
		if n > 0 {
			return n, nil // the SDK reads the last bytes first; the next Read reports the end
		}
		s.waitAnswered()
	}
	return n, err
}

func (r stdioReader) Close() error { return r.s.in.Close() }

// waitAnswered returns once every request read has been answered, or ctx ends.
func (s *stdioPending) waitAnswered() {
	for {
		s.mu.Lock()
		done, changed := len(s.open) == 0, s.changed
		s.mu.Unlock()
		if done {
			return
		}
		select {
		case <-changed:
		case <-s.ctx.Done():
			return
		}
	}
}

type stdioWriter struct{ s *stdioPending }

func (w stdioWriter) Write(p []byte) (int, error) {
	s := w.s
	n, err := s.out.Write(p)
	s.mu.Lock()
	s.outLine = eachMessage(append(s.outLine, p[:n]...), func(m jsonrpcEnvelope) {
		if isResponse(m) {
			s.settle(m.ID)
		}
	})
	s.mu.Unlock()
	return n, err
}

// Close leaves the process's stdout open: the transport "closes" it when the session ends.
func (stdioWriter) Close() error { return nil }

// settle forgets the request id (answered or cancelled) and wakes waitAnswered. s.mu is held.
func (s *stdioPending) settle(id json.RawMessage) {
	if _, ok := s.open[string(id)]; ok {
		delete(s.open, string(id))
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// eachMessage calls fn with the JSON-RPC messages in buf's complete lines and returns the
// incomplete rest. A line may hold one message or a batch (an array).
func eachMessage(buf []byte, fn func(jsonrpcEnvelope)) []byte {
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return buf
		}
		line := bytes.TrimSpace(buf[:i])
		buf = buf[i+1:]
		var msgs []jsonrpcEnvelope
		if len(line) > 0 && line[0] == '[' {
			_ = json.Unmarshal(line, &msgs)
		} else {
			var m jsonrpcEnvelope
			if json.Unmarshal(line, &m) == nil {
				msgs = append(msgs, m)
			}
		}
		for _, m := range msgs {
			fn(m)
		}
		if len(buf) == 0 {
			return buf[:0]
		}
	}
}

// jsonrpcEnvelope is what countLines reads of a message.
type jsonrpcEnvelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"` // of notifications/cancelled
	} `json:"params"`
}

func hasID(m jsonrpcEnvelope) bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// isRequest: a message that expects an answer (a notification has no id).
func isRequest(m jsonrpcEnvelope) bool { return m.Method != "" && hasID(m) }

// isResponse: an answer to a request (a server-to-client request, e.g. elicitation, has a method).
func isResponse(m jsonrpcEnvelope) bool { return m.Method == "" && hasID(m) }
