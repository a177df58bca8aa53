package zx

import "context"

// Memory accounts the memory a request's work holds, and paces that work
// by its reader. A server puts one in each request's context, so that
// what a tree reads ahead or buffers for a request counts against the
// server's limits, and a client that stops reading its reply stops the
// work done for it.
//
// A tree calls Take before it allocates a buffer for a request (data it
// will read from a file and send, entries it reads ahead, a put's data on
// its way to the disk) and Give when it no longer holds it. Data sent in
// an Item is given back once it is sent: the receiver accounts for it.
type Memory interface {
	// Take waits until the request may hold n more bytes, and counts
	// them. For a request whose reply carries data it first waits until
	// the reader has room for more of it. It fails when ctx is done or
	// the request cannot have the memory (kind ErrLimit, ErrTimeout).
	Take(ctx context.Context, n int) error
	// TryTake is Take without waiting, for work that may be left
	// undone (reading ahead): it counts n bytes and reports true if the
	// request may hold them now and its reply is not stalled.
	TryTake(n int) bool
	// Give returns n bytes taken.
	Give(n int)
}

type memoryKey struct{}

// WithMemory returns a context whose requests account their memory in m.
func WithMemory(ctx context.Context, m Memory) context.Context {
	return context.WithValue(ctx, memoryKey{}, m)
}

// TakeMemory calls Take on the Memory of ctx; without one it returns nil
// at once.
func TakeMemory(ctx context.Context, n int) error {
	if m, ok := ctx.Value(memoryKey{}).(Memory); ok {
		return m.Take(ctx, n)
	}
	return nil
}

// TryTakeMemory calls TryTake on the Memory of ctx; without one it
// reports true.
func TryTakeMemory(ctx context.Context, n int) bool {
	if m, ok := ctx.Value(memoryKey{}).(Memory); ok {
		return m.TryTake(n)
	}
	return true
}

// GiveMemory calls Give on the Memory of ctx, if it has one.
func GiveMemory(ctx context.Context, n int) {
	if m, ok := ctx.Value(memoryKey{}).(Memory); ok {
		m.Give(n)
	}
}
