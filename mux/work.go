package mux

import (
	"context"
	"fmt"
	"time"

	"github.com/zxfs/zx"
)

// What a server's work on a request holds is counted against the
// connection's buffers (Config.MaxBuffer, each way) and the server's
// Budget, as the messages it buffers are, from before it is allocated
// until it is freed or written:
//
//   - Admit counts what serving the request costs whatever its data (its
//     goroutines and their stacks, what the tree keeps for it), before
//     the server starts on it. Requests admitted hold at most half of
//     each bound, so that those admitted can always get memory for
//     their data.
//   - Take counts a buffer the request's work allocates: data a tree
//     reads to send, entries read ahead, a put's data on its way to the
//     disk (the stream implements zx.Memory). For a stream whose reply
//     may carry data it first waits until the client has granted credit
//     beyond what the stream holds: a client that stops reading stops
//     the work done for it.
//   - Hold counts data the server has in hand for the reply, and SendHeld
//     sends it without counting it again; it is released as its frames
//     are written.
//
// Release, when the work is over, gives back whatever is left.
// A put's work counts against the receiving side, every other request's
// against the sending side. Waiting for memory ends with an error of kind
// zx.ErrLimit after Config.StallTimeout.

// Admit waits until n more bytes fit in what the connection's and the
// server's requests may hold, and counts them until Release.
func (s *Stream) Admit(ctx context.Context, n int) error {
	c := s.c
	return s.waitMem(ctx, n, false, true, func() bool {
		if !c.outBuf.tryAdmit(int64(n)) {
			return false
		}
		if !c.cfg.Budget.tryAdmit(int64(n)) {
			c.outBuf.releaseAdmitted(int64(n))
			return false
		}
		s.admitted += int64(n)
		return true
	})
}

// Take implements zx.Memory: it waits until the stream may hold n more
// bytes and counts them. On a stream whose request carries no data, it
// first waits until the client has granted credit beyond the reply data
// the server holds (Hold); with none for Config.StallTimeout the stream
// fails with zx.ErrTimeout, as Send does. A get thus reads a chunk of a
// file only while the client has room for more, and holds at most one
// it cannot send yet.
func (s *Stream) Take(ctx context.Context, n int) error {
	if !s.c.server || n <= 0 {
		return nil
	}
	if !s.inbound {
		if err := s.waitCredit(ctx); err != nil {
			return err
		}
	}
	return s.take(ctx, n, s.inbound, false)
}

// TryTake implements zx.Memory: it counts n bytes if they fit now and,
// on a stream whose request carries no data, the client has granted
// credit beyond the reply data the server holds.
func (s *Stream) TryTake(n int) bool {
	c := s.c
	if !c.server || n <= 0 {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case s.released || c.err != nil:
		return false
	case s.inbound:
		if !c.takeWorkIn(n) {
			return false
		}
		s.heldIn += int64(n)
	default:
		if s.sendCredit <= s.holding || s.sendEnded || s.peerEnded || !c.takeOut(n) {
			return false
		}
		s.heldOut += int64(n)
	}
	return true
}

// Give implements zx.Memory: it returns n bytes taken.
func (s *Stream) Give(n int) {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.released || n <= 0 {
		return
	}
	if s.inbound {
		m := min(int64(n), s.heldIn)
		s.heldIn -= m
		c.releaseIn(int(m))
		return
	}
	m := min(int64(n), s.heldOut-s.holding)
	s.heldOut -= m
	c.releaseOut(int(m))
}

// Hold counts n bytes of reply data the server has in hand, without
// waiting for credit: SendHeld sends them.
func (s *Stream) Hold(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	return s.take(ctx, n, false, true)
}

// SendHeld is Send for data counted with Hold: its frames take no more
// room in the buffers, and give back what Hold counted as they are
// written.
func (s *Stream) SendHeld(ctx context.Context, typ uint8, p []byte, end bool) error {
	return s.send(ctx, typ, p, end, true)
}

// Release gives back everything the request's work holds: what Admit,
// Take and Hold counted and was not given back or sent, and the data it
// received and did not consume. The server calls it when the work is
// over; Give does nothing after it, and Take, Hold and Admit fail.
func (s *Stream) Release() {
	s.dropReceived(errReleased)
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	c.outBuf.releaseAdmitted(s.admitted)
	c.cfg.Budget.releaseAdmitted(s.admitted)
	c.releaseIn(int(s.heldIn))
	c.releaseOut(int(s.heldOut))
	s.admitted, s.heldIn, s.heldOut, s.holding = 0, 0, 0, 0
}

var errReleased = zx.E(zx.ErrCanceled, "", "", "request is over")

func (s *Stream) take(ctx context.Context, n int, in, hold bool) error {
	c := s.c
	return s.waitMem(ctx, n, in, false, func() bool {
		if in {
			if !c.takeWorkIn(n) {
				return false
			}
			s.heldIn += int64(n)
			return true
		}
		if !c.takeOut(n) {
			return false
		}
		s.heldOut += int64(n)
		if hold {
			s.holding += int64(n)
		}
		return true
	})
}

// waitMem calls try with c.mu held until it succeeds, waiting in between
// for buffers to be released, until ctx is done or Config.StallTimeout
// passes; the error then says which bound was short.
func (s *Stream) waitMem(ctx context.Context, n int, in, admit bool, try func() bool) error {
	c := s.c
	attempt := func() (bool, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if s.released {
			return false, errReleased
		}
		return try(), nil
	}
	var stalled <-chan time.Time
	for {
		if ok, err := attempt(); ok || err != nil {
			return err
		}
		buf := c.outBuf
		if in {
			buf = c.inBuf
		}
		w1, d1 := buf.waitChan()
		w2, d2 := c.cfg.Budget.waitChan()
		// Once more: a release between the attempt and waitChan woke no one.
		ok, err := attempt()
		if ok || err != nil {
			d1()
			d2()
			return err
		}
		if stalled == nil && c.cfg.StallTimeout > 0 {
			t := time.NewTimer(c.cfg.StallTimeout)
			defer t.Stop()
			stalled = t.C
		}
		select {
		case <-w1:
		case <-w2:
		case <-ctx.Done():
			d1()
			d2()
			return zx.Errorf("", "", ctx.Err())
		case <-stalled:
			d1()
			d2()
			return s.memErr(buf, n, admit)
		}
		d1()
		d2()
	}
}

// memErr says which bound kept n bytes from s for StallTimeout.
func (s *Stream) memErr(buf *Budget, n int, admit bool) error {
	c := s.c
	what := "buffers"
	if admit {
		what = "requests being served"
	}
	if b := c.cfg.Budget; b != nil && b.Limit() > 0 && (b.Used()+int64(n) > b.Limit() || admit && b.admitted.Load()+int64(n) > b.Limit()/2) {
		return zx.E(zx.ErrLimit, "", "", fmt.Sprintf("server's %s full for %v (%d bytes for all connections; raise the server's --max-memory)", what, c.cfg.StallTimeout, b.Limit()))
	}
	return zx.E(zx.ErrLimit, "", "", fmt.Sprintf("connection's %s full for %v (%d bytes each way; raise the server's --max-conn-buffer)", what, c.cfg.StallTimeout, buf.Limit()))
}

// waitCredit waits until the client has granted the stream credit beyond
// the reply data the server holds for it: the reply is not stalled.
func (s *Stream) waitCredit(ctx context.Context) error {
	c := s.c
	var stall *time.Timer
	defer func() {
		if stall != nil {
			stall.Stop()
		}
	}()
	counted := false
	c.mu.Lock()
	for {
		switch {
		case c.err != nil:
			err := c.err
			c.mu.Unlock()
			return err
		case s.released:
			c.mu.Unlock()
			return errReleased
		case s.sendEnded || s.peerEnded:
			c.mu.Unlock()
			return ErrPeerEnded
		case s.sendCredit > s.holding:
			c.mu.Unlock()
			return nil
		}
		if !counted {
			counted = true
			c.streamStalls.Add(1)
		}
		wake := c.creditWake
		c.mu.Unlock()
		var stalled <-chan time.Time
		if c.cfg.StallTimeout > 0 {
			if stall == nil {
				stall = time.NewTimer(c.cfg.StallTimeout)
			}
			stalled = stall.C
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return zx.Errorf("", "", ctx.Err())
		case <-stalled:
			err := zx.E(zx.ErrTimeout, "", "", fmt.Sprintf("the client took no reply data for %v; request abandoned", c.cfg.StallTimeout))
			s.Fail(err)
			return err
		}
		c.mu.Lock()
	}
}
