package mux

import (
	"sync"
	"sync/atomic"
)

// A Budget bounds the bytes that a set of connections (a server's) hold
// together: messages received and not yet consumed, messages queued and
// not yet written, and what the server's requests hold while they work
// (see Stream.Admit and Stream.Take). Each connection is also bounded on
// its own by Config.MaxBuffer; the Budget keeps many connections together
// from exhausting a server's memory.
//
// When a receiver would exceed it, the stream concerned fails with an
// error of kind zx.ErrLimit (on a server; the client is told); a sender,
// and a request's work, wait for room. The bound is strict: Used never
// exceeds Limit.
type Budget struct {
	limit    int64
	used     atomic.Int64
	peak     atomic.Int64
	admitted atomic.Int64 // of used: what requests being served cost (Stream.Admit)

	mu      sync.Mutex
	waiters int
	wake    chan struct{} // closed when bytes are released and someone waits
}

// NewBudget returns a budget of limit bytes; limit <= 0 means no limit.
func NewBudget(limit int64) *Budget {
	return &Budget{limit: limit, wake: make(chan struct{})}
}

// Limit returns the bound, or 0 if there is none.
func (b *Budget) Limit() int64 { return max(b.limit, 0) }

// Used returns the bytes held now.
func (b *Budget) Used() int64 { return b.used.Load() }

// Peak returns the most bytes ever held at once.
func (b *Budget) Peak() int64 { return b.peak.Load() }

// TryTake takes n bytes if they fit, and reports whether it did. A server
// counts what each connection costs it this way.
func (b *Budget) TryTake(n int64) bool { return b.tryTake(n) }

// Release gives back n bytes taken with TryTake.
func (b *Budget) Release(n int64) { b.release(n) }

// tryTake takes n bytes if they fit.
func (b *Budget) tryTake(n int64) bool {
	if b == nil || n == 0 {
		return true
	}
	for {
		u := b.used.Load()
		if b.limit > 0 && u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			for {
				p := b.peak.Load()
				if u+n <= p || b.peak.CompareAndSwap(p, u+n) {
					return true
				}
			}
		}
	}
}

// tryAdmit takes n bytes for a request being served if they fit, and if
// requests together then hold at most half the limit: the other half is
// left for their data, so that requests admitted can always make
// progress.
func (b *Budget) tryAdmit(n int64) bool {
	if b == nil || n == 0 {
		return true
	}
	if b.limit > 0 && b.admitted.Add(n) > b.limit/2 {
		b.admitted.Add(-n)
		return false
	}
	if !b.tryTake(n) {
		b.admitted.Add(-n)
		return false
	}
	return true
}

// releaseAdmitted gives back n bytes taken with tryAdmit.
func (b *Budget) releaseAdmitted(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.admitted.Add(-n)
	b.release(n)
}

// release gives n bytes back.
func (b *Budget) release(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.used.Add(-n)
	b.mu.Lock()
	if b.waiters > 0 {
		close(b.wake)
		b.wake = make(chan struct{})
	}
	b.mu.Unlock()
}

// waitChan returns a channel closed at the next release; done must be
// called when the caller stops waiting.
func (b *Budget) waitChan() (<-chan struct{}, func()) {
	if b == nil {
		return nil, func() {}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiters++
	return b.wake, func() {
		b.mu.Lock()
		b.waiters--
		b.mu.Unlock()
	}
}
