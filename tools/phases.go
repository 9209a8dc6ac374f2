package tools

import (
	"context"
	"time"
)

// PhaseFunc is told each phase of a call when it ends, with when it started and how long it
// took: "pool_wait" (waiting for a pooled connection, which includes opening one when the pool
// has none idle), "connect" (a pg_tx begin opening a connection of its own because no spare was
// left), "begin" (a pg_transaction's BEGIN with its identity and bounds), "statement" (one
// statement's run, its framing round trips included) and "commit" (a pg_transaction's reset and
// COMMIT, one round trip). It runs on the call's goroutine and must be cheap.
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

// phaseTook reports the phase name that began at start and took d, if anyone listens.
func phaseTook(ctx context.Context, name string, start time.Time, d time.Duration) {
	if f, ok := ctx.Value(phaseKey{}).(PhaseFunc); ok {
		f(name, start, d)
	}
}
