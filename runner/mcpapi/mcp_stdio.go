package mcpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/pgtools/pgtools/tools"
)

// stdioPending sits between "pgtools mcp"'s stdin/stdout and the SDK's transport, counting the
// requests read and the responses written, so that the end of stdin reaches the SDK only once
// every request read has been answered. The SDK ends the connection at the end of its input and
// cancels the calls still running; a client that pipes its requests from a file (or closes its
// side right after the last one) would otherwise get an answer to initialize alone, and the
// cancelled calls would be logged as timeouts.
//
// It also keeps request ids exact (mcp_ids.go): a request line whose id the SDK would not echo
// byte for byte reaches the SDK with a stand-in id (and a notifications/cancelled naming it,
// with the stand-in too), and the answer goes out with the original id.
type stdioPending struct {
	ctx context.Context
	in  io.ReadCloser
	out io.Writer

	wmu sync.Mutex // one line at a time on out: the SDK's answers and admit's refusals

	mu      sync.Mutex
	changed chan struct{}       // closed and replaced whenever open shrinks
	open    map[string]struct{} // ids of the requests read and not yet answered or cancelled
	inLine  []byte              // a request line not yet complete
	outLine []byte              // a response line not yet complete
	ready   []byte              // complete request lines, ids swapped, not yet read by the SDK
	inErr   error               // how stdin ended, once ready is drained
	swaps   map[string]*idSwap  // by stand-in id: requests whose answers need their id back
	byOrig  map[string][]byte   // original id → stand-in, for notifications/cancelled
}

func newStdioPending(ctx context.Context, in io.ReadCloser, out io.Writer) *stdioPending {
	return &stdioPending{ctx: ctx, in: in, out: out, changed: make(chan struct{}), open: map[string]struct{}{},
		swaps: map[string]*idSwap{}, byOrig: map[string][]byte{}}
}

func (s *stdioPending) reader() io.ReadCloser  { return stdioReader{s} }
func (s *stdioPending) writer() io.WriteCloser { return stdioWriter{s} }

type stdioReader struct{ s *stdioPending }

// Read reads from stdin, a line at a time, with ids swapped; at its end it waits until every
// request read has been answered (or ctx ends) before it reports the end.
func (r stdioReader) Read(p []byte) (int, error) {
	s := r.s
	for {
		s.mu.Lock()
		if len(s.ready) > 0 {
			n := copy(p, s.ready)
			s.ready = s.ready[n:]
			s.mu.Unlock()
			return n, nil
		}
		inErr := s.inErr
		s.mu.Unlock()
		if inErr != nil {
			if errors.Is(inErr, io.EOF) {
				s.waitAnswered()
			}
			return 0, inErr
		}
		buf := make([]byte, max(len(p), 4096))
		n, err := s.in.Read(buf)
		s.mu.Lock()
		s.inLine = append(s.inLine, buf[:n]...)
		for {
			i := bytes.IndexByte(s.inLine, '\n')
			if i < 0 {
				break
			}
			s.admit(s.inLine[:i+1])
			s.inLine = s.inLine[i+1:]
		}
		if err != nil {
			if len(s.inLine) > 0 { // a last line without its newline
				s.admit(s.inLine)
				s.inLine = nil
			}
			s.inErr = err
		}
		s.mu.Unlock()
	}
}

// admit swaps the ids of one input line, queues it for the SDK and notes the requests it opens
// and the ones it cancels. s.mu is held.
func (s *stdioPending) admit(line []byte) {
	msg := bytes.TrimSpace(line)
	if dup := tools.CheckDuplicateKeys(msg); dup != nil {
		// Answered here, never handed to the SDK, whose parser would pick one of the two
		// values (refuseDuplicateKey says why and how); written under wmu, between the SDK's
		// own lines.
		s.wmu.Lock()
		_, _ = s.out.Write(append(duplicateKeyAnswer(dup), '\n'))
		s.wmu.Unlock()
		return
	}
	if swapped, swap := swapIDs(msg); swap != nil {
		msg = swapped
		for i, standIn := range swap.standIn {
			s.swaps[string(standIn)] = swap
			s.byOrig[string(swap.original[i])] = standIn
		}
	} else if m, ok := cancelledID(msg); ok {
		if standIn := s.byOrig[string(m)]; standIn != nil {
			msg = swapCancelled(msg, standIn)
		}
	}
	eachMessage(append(append([]byte(nil), msg...), '\n'), func(m jsonrpcEnvelope) {
		switch {
		case isRequest(m):
			s.open[string(m.ID)] = struct{}{}
		case m.Method == "notifications/cancelled":
			// A cancelled request gets no answer (MCP): stop waiting for it.
			s.settle(m.Params.RequestID)
		}
	})
	s.ready = append(append(s.ready, msg...), '\n')
}

// cancelledID is the requestId of a notifications/cancelled message.
func cancelledID(msg []byte) (json.RawMessage, bool) {
	var m jsonrpcEnvelope
	if json.Unmarshal(msg, &m) != nil || m.Method != "notifications/cancelled" || len(m.Params.RequestID) == 0 {
		return nil, false
	}
	return bytes.TrimSpace(m.Params.RequestID), true
}

// swapCancelled is a notifications/cancelled message naming standIn instead of its requestId.
func swapCancelled(msg, standIn []byte) []byte {
	out, ok := rewriteMembers(msg, func(key string, val []byte) []byte {
		if key != "params" {
			return val
		}
		params, ok := rewriteMembers(val, func(key string, val []byte) []byte {
			if key == "requestId" {
				return standIn
			}
			return val
		})
		if !ok {
			return val
		}
		return params
	})
	if !ok {
		return msg
	}
	return out
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

// Write writes the SDK's output with the original ids of swapped requests back in place. The
// SDK writes each message in one Write, so a stand-in is never split.
func (w stdioWriter) Write(p []byte) (int, error) {
	s := w.s
	s.mu.Lock()
	out := p
	if len(s.swaps) > 0 {
		for _, swap := range s.swaps {
			out = swap.restore(out)
		}
	}
	s.mu.Unlock()
	s.wmu.Lock()
	_, err := s.out.Write(out)
	s.wmu.Unlock()
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.outLine = eachMessage(append(s.outLine, p...), func(m jsonrpcEnvelope) {
		if isResponse(m) {
			s.settle(m.ID)
			if swap := s.swaps[string(m.ID)]; swap != nil {
				for i, standIn := range swap.standIn {
					if string(standIn) == string(m.ID) {
						delete(s.swaps, string(standIn))
						delete(s.byOrig, string(swap.original[i]))
					}
				}
			}
		}
	})
	s.mu.Unlock()
	return len(p), nil
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
