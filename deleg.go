package zx

import "context"

// Delegator is implemented by trees that can delegate paths to their
// user (the client, with a server that grants delegations): a promise
// that nobody else looks at a path without first recalling it, so that
// the user may keep its changes there for a while before sending them
// (docs/design.md, "Delegations").
type Delegator interface {
	// Recalls starts taking delegations for owner, an id that stays the
	// same across connections (and, for a reclaim after a crash, across
	// runs): the first Recall is Ready; then each asks for the
	// delegation of Path back. The user sends what it has pending under
	// Path, then calls Return. The stream ends (after an Err) when ctx
	// is done or the tree can no longer delegate.
	Recalls(ctx context.Context, owner string) <-chan Recall

	// Delegate asks for the delegation of path. The Grant's Err is nil
	// if granted; ErrBusy: refused (another user holds it or used it
	// lately); ErrNotSupp: the tree cannot delegate. A Grant also says
	// whether the owner held it already, or held it until it was
	// revoked and what others changed under it since (a reclaim after a
	// crash: see Grant).
	Delegate(ctx context.Context, path string) <-chan Grant

	// Return gives the delegation of path back, once the requests
	// issued before it are applied.
	Return(ctx context.Context, path string) <-chan error
}

// Grant is the answer to Delegate.
type Grant struct {
	Err  error
	Held bool // the owner held it already (Err is nil)
	// Revoked: the owner held it until it was revoked (its holder did
	// not answer within the lease); Touched are the paths others
	// changed under it since, or All if they cannot be told (too many,
	// or the server forgot). Err may be set too (not granted again).
	Revoked bool
	All     bool
	Touched []string
}

// Recall is one value of a Recalls stream.
type Recall struct {
	Ready bool   // the stream is in place (again, after a lost connection)
	Path  string // the path to give back
	Err   error  // set on the last value when the stream fails
}
