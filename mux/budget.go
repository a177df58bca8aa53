package mux

import (
	"sync"
	"sync/atomic"
)

// A Budget bounds the bytes that a set of connections (a server's) hold
// together: messages received and not yet consumed, messages queued and
// not yet written, what the server's requests hold while they work (see
// Stream.Admit and Stream.Take), and what the connections themselves cost
// (TryTake). Each connection is also bounded on its own by
// Config.MaxBuffer; the Budget keeps many connections together from
// exhausting a server's memory.
//
// It is shared so that no one use starves the others:
//
//   - connections (TryTake) hold at most half of it;
//   - requests being served (Stream.Admit) at most a quarter;
//   - whatever can wait for room (replies, a request's work, and those)
//     leaves an eighth for what is received, which cannot wait;
//   - what is received may use it all.
//
// So the data of requests admitted always has at least an eighth, and
// they can always make progress. When a receiver would exceed the
// Budget, the stream concerned fails with an error of kind zx.ErrLimit
// (on a server; the client is told); the others wait for room. The bound
// is strict: Used never exceeds Limit.
type Budget struct {
	limit    int64
	used     atomic.Int64
	peak     atomic.Int64
	fixed    atomic.Int64 // of used: what connections cost (TryTake)
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

// TryTake takes n bytes for what a connection costs the server, if
// connections then hold at most half the budget, and reports whether it
// did. Release gives them back.
func (b *Budget) TryTake(n int64) bool {
	if b == nil {
		return true
	}
	return b.trySome(&b.fixed, n, 2)
}

// Release gives back n bytes taken with TryTake.
func (b *Budget) Release(n int64) {
	if b != nil {
		b.releaseSome(&b.fixed, n)
	}
}

// tryTake takes n bytes if they fit: for data received, which cannot wait.
func (b *Budget) tryTake(n int64) bool {
	if b == nil {
		return true
	}
	return b.tryTakeBelow(n, b.limit)
}

// tryWait takes n bytes if they fit and leave an eighth of the budget
// for data received: for those who can wait for room.
func (b *Budget) tryWait(n int64) bool {
	if b == nil {
		return true
	}
	return b.tryTakeBelow(n, b.limit-b.limit/8)
}

// tryAdmit takes n bytes for a request being served, if they fit and
// requests being served then hold at most a quarter of the budget.
func (b *Budget) tryAdmit(n int64) bool {
	if b == nil {
		return true
	}
	return b.trySome(&b.admitted, n, 4)
}

// releaseAdmitted gives back n bytes taken with tryAdmit.
func (b *Budget) releaseAdmitted(n int64) {
	if b != nil {
		b.releaseSome(&b.admitted, n)
	}
}

// trySome is tryWait for one use of the budget, counted in share, which
// may hold at most 1/part of the limit.
func (b *Budget) trySome(share *atomic.Int64, n, part int64) bool {
	if n == 0 {
		return true
	}
	if b.limit > 0 && share.Add(n) > b.limit/part {
		share.Add(-n)
		return false
	}
	if !b.tryWait(n) {
		share.Add(-n)
		return false
	}
	return true
}

func (b *Budget) releaseSome(share *atomic.Int64, n int64) {
	if n == 0 {
		return
	}
	share.Add(-n)
	b.release(n)
}

// tryTakeBelow takes n bytes if used stays within limit (<= 0: no limit).
func (b *Budget) tryTakeBelow(n, limit int64) bool {
	if b == nil || n == 0 {
		return true
	}
	for {
		u := b.used.Load()
		if limit > 0 && u+n > limit {
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
