package localpg

import (
	"bytes"
	"sync"
)

// tailSize is how much of the server log is kept for error messages.
const tailSize = 8 << 10

// tailBuffer keeps the last tailSize bytes written to it. It is safe for
// concurrent use: the server's stderr is copied in by an os/exec goroutine
// while Start reads it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - tailSize; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

// Reset forgets everything written so far.
func (b *tailBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = b.buf[:0]
}

// Lines returns at most the last n complete lines, trimmed.
func (b *tailBuffer) Lines(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := bytes.Split(bytes.TrimSpace(b.buf), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Contains reports whether the kept log contains s.
func (b *tailBuffer) Contains(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Contains(b.buf, []byte(s))
}
