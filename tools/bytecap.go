package tools

import "context"

type maxBytesKey struct{}

// WithMaxResponseBytes returns a context whose tool calls cut their rows at n bytes of JSON when
// that is below the database's and the principal's caps. Transports set it from what the caller's
// host asks for (the n8n nodes' response size limit): it can only lower a cap, never raise one.
// n <= 0 leaves ctx as it is.
func WithMaxResponseBytes(ctx context.Context, n int) context.Context {
	if n <= 0 {
		return ctx
	}
	return context.WithValue(ctx, maxBytesKey{}, n)
}

// responseCap is the byte cap of one call: the smallest of the database policy's
// max_response_bytes, the principal's and the call's own (WithMaxResponseBytes).
func responseCap(ctx context.Context, p Principal, db *Database) int {
	n := db.Policy.MaxResponseBytes
	if p.MaxResponseBytes > 0 && p.MaxResponseBytes < n {
		n = p.MaxResponseBytes
	}
	if c, ok := ctx.Value(maxBytesKey{}).(int); ok && c < n {
		n = c
	}
	return n
}
