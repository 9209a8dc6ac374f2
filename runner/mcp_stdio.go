package runner

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

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced whenever answered grows
	read     int           // requests (with an id) read from in
	answered int           // responses (with an id) written to out
	inLine   []byte        // a request line not yet complete
	outLine  []byte        // a response line not yet complete
}

func newStdioPending(ctx context.Context, in io.ReadCloser, out io.Writer) *stdioPending {
	return &stdioPending{ctx: ctx, in: in, out: out, changed: make(chan struct{})}
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
	s.inLine = countLines(append(s.inLine, p[:n]...), &s.read, isRequest)
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
		done, changed := s.answered >= s.read, s.changed
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
	before := s.answered
	s.outLine = countLines(append(s.outLine, p[:n]...), &s.answered, isResponse)
	if s.answered != before {
		close(s.changed)
		s.changed = make(chan struct{})
	}
	s.mu.Unlock()
	return n, err
}

// Close leaves the process's stdout open: the transport "closes" it when the session ends.
func (stdioWriter) Close() error { return nil }

// countLines adds to *n the JSON-RPC messages in buf's complete lines that match, and returns
// the incomplete rest. A line may hold one message or a batch (an array).
func countLines(buf []byte, n *int, match func(jsonrpcEnvelope) bool) []byte {
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
			if match(m) {
				*n++
			}
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
}

func hasID(m jsonrpcEnvelope) bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// isRequest: a message that expects an answer (a notification has no id).
func isRequest(m jsonrpcEnvelope) bool { return m.Method != "" && hasID(m) }

// isResponse: an answer to a request (a server-to-client request, e.g. elicitation, has a method).
func isResponse(m jsonrpcEnvelope) bool { return m.Method == "" && hasID(m) }
