// Package order applies requests that touch the same paths in the order they
// were issued, while letting unrelated requests run at once.
//
// A tree registers each request with Enter synchronously, in the order the
// caller issued it, before it returns the request's channel; the work itself
// runs later, in its own goroutine, after Wait. Two requests conflict when one
// of them writes and their paths overlap (one is the other or lies below it):
// the later one waits for the earlier one to be Done. Reads never wait for
// reads.
package order

import (
	"context"
	"sync"

	"github.com/zxfs/zx"
)

// Queue orders requests. The zero value is ready to use.
type Queue struct {
	mu     sync.Mutex
	active map[*Op]struct{} // requests entered and not yet done
}

// Op is one registered request.
type Op struct {
	q     *Queue
	write bool
	paths []string
	deps  []*Op
	done  chan struct{}
}

// Enter registers a request on the given clean paths. It never blocks.
func (q *Queue) Enter(write bool, paths ...string) *Op {
	o := &Op{q: q, write: write, paths: paths, done: make(chan struct{})}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.active == nil {
		q.active = make(map[*Op]struct{})
	}
	for a := range q.active {
		if (write || a.write) && overlap(paths, a.paths) {
			o.deps = append(o.deps, a)
		}
	}
	q.active[o] = struct{}{}
	return o
}

func overlap(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if zx.Overlaps(x, y) {
				return true
			}
		}
	}
	return false
}

// Wait blocks until every earlier conflicting request is done, or ctx is
// cancelled. The caller must call Done in either case.
func (o *Op) Wait(ctx context.Context) error {
	for _, d := range o.deps {
		select {
		case <-d.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	o.deps = nil
	return nil
}

// Done marks the request finished, releasing those that wait for it. It may
// be called more than once.
func (o *Op) Done() {
	o.q.mu.Lock()
	defer o.q.mu.Unlock()
	if _, ok := o.q.active[o]; ok {
		delete(o.q.active, o)
		close(o.done)
	}
}

// Pending returns the number of requests entered and not yet done.
func (q *Queue) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.active)
}
