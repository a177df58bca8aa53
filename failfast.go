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

type backgroundKey struct{}

// WithBackground returns a context whose requests nobody waits for as
// they are made (write-back records, sent after close returned): a
// client does not count them as round trips a program waited for.
func WithBackground(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// Background reports whether ctx's requests are made in the background
// (WithBackground).
func Background(ctx context.Context) bool {
	bg, _ := ctx.Value(backgroundKey{}).(bool)
	return bg
}
