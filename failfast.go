package zx

import "context"

type failFastKey struct{}

// WithFailFast returns a context whose requests do not wait for a lost
// connection to be re-established (a reconnecting client): they fail at
// once with an ErrIO error, which says the server was not reached, while
// the connection is down. Callers that keep their work elsewhere while
// the link is down (the write-back journal) use it so that they never
// block on the network; other requests wait, bounded by their context.
func WithFailFast(ctx context.Context) context.Context {
	return context.WithValue(ctx, failFastKey{}, true)
}

// FailFast reports whether ctx asks requests not to wait for a lost
// connection (WithFailFast).
func FailFast(ctx context.Context) bool {
	ff, _ := ctx.Value(failFastKey{}).(bool)
	return ff
}
