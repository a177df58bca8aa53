package zx

import "context"

// Caller is who a request is made for: the ids of a user. On a client it
// says which local user a request comes from (a shared mount serves
// several); on a server it says which user the request acts as, so that a
// tree can give what it creates to that user. An id of -1 is not given.
type Caller struct {
	Uid, Gid int
}

type callerKey struct{}

// WithCaller returns a context whose requests are made for c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller that ctx carries, if any.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}
