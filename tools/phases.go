package tools

import (
	"context"
	"time"
)

// PhaseFunc is told each phase of a call when it ends: "pool_wait" (waiting for a pooled
// connection) and "statement" (one statement's run, its framing round trips included), with
// when it started and how long it took. It runs on the call's goroutine and must be cheap.
type PhaseFunc func(name string, start time.Time, d time.Duration)

type phaseKey struct{}

// WithPhases returns a context whose tool calls report their phases to f: how a transport
// traces a call (runner adds them to the call's span as events).
func WithPhases(ctx context.Context, f PhaseFunc) context.Context {
	return context.WithValue(ctx, phaseKey{}, f)
}

// phase reports the phase name that began at start, if anyone listens.
func phase(ctx context.Context, name string, start time.Time) {
	if f, ok := ctx.Value(phaseKey{}).(PhaseFunc); ok {
		f(name, start, time.Since(start))
	}
}
