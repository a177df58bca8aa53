package wan

import (
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// maxChunk is the most the reader takes from a socket at once.
const maxChunk = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, maxChunk); return &b }}

// conn is one proxied connection: a is the accepted side, b the dialed one.
type conn struct {
	p     *Proxy
	a, b  net.Conn
	done  chan struct{} // closed on teardown
	start time.Time     // when the connection was accepted
	once  sync.Once
	wg    sync.WaitGroup // the four goroutines of the two directions
	hrs   []*hrTimer     // the writers' timers, closed on teardown to wake them
}

// stopTimers closes the writers' high-resolution timers, which wakes a
// writer asleep on one.
func (c *conn) stopTimers() {
	for _, h := range c.hrs {
		h.close()
	}
}

// abortConn closes c with an RST rather than a FIN.
func abortConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// abort tears the connection down abruptly (RST on both sides). It
// reports whether this call tore it down.
func (c *conn) abort() bool {
	did := false
	c.once.Do(func() {
		did = true
		abortConn(c.a)
		abortConn(c.b)
		close(c.done)
		c.stopTimers()
	})
	return did
}

// cut tears the connection down abruptly as a fault injected on purpose,
// counting it once.
func (c *conn) cut() {
	c.once.Do(func() {
		c.p.cuts.Add(1)
		abortConn(c.a)
		abortConn(c.b)
		close(c.done)
		c.stopTimers()
	})
}

// stallEnd returns when a per-connection stall (Config.StallAfter,
// StallFor) covering t ends, or the zero time if none does.
func (c *conn) stallEnd(t time.Time, cfg *Config) time.Time {
	if !cfg.stalls() {
		return time.Time{}
	}
	from := c.start.Add(cfg.StallAfter)
	if t.Before(from) {
		return time.Time{}
	}
	if cfg.StallFor <= 0 {
		return t.Add(time.Hour) // for ever: checked again after this
	}
	if end := from.Add(cfg.StallFor); t.Before(end) {
		return end
	}
	return time.Time{}
}

// finish closes both sides normally once both directions are done.
func (c *conn) finish() {
	c.once.Do(func() {
		c.a.Close()
		c.b.Close()
		close(c.done)
		c.stopTimers()
	})
}

// timing says how closely a chunk's release time must be kept.
type timing uint8

const (
	// exact: the chunk arrives on an idle link and its latency is what a
	// round trip measures. The writer sleeps on the high-resolution timer
	// until a small margin before the release time and spins the rest.
	exact timing = iota
	// prompt: the chunk follows another within burstGap, as in a bulk
	// transfer. The writer sleeps until the release time without spinning:
	// the wake-up is late by tens of microseconds at most, usually.
	prompt
	// paced: the release time was set by pacing behind the previous chunk
	// (it waits for the rate, not for latency). The schedule absorbs a late
	// wake-up, so the writer sleeps on an ordinary timer, whose lateness
	// releases several chunks at once.
	paced
)

// burstGap is how close behind the previous chunk a chunk must be released
// to count as part of a burst, not as the first data on an idle link.
const burstGap = time.Millisecond

// chunk is data read from one side, waiting for its release time.
type chunk struct {
	buf     *[]byte // nil for end of stream
	n       int
	release time.Time
	timing  timing
}

// dir is one direction of a connection: an emulated link from src to dst.
type dir struct {
	c        *conn
	src, dst net.Conn
	rd       reader // reads src with arrival times
	count    *atomic.Int64

	mu       sync.Mutex
	q        []chunk // FIFO from q[head]
	head     int
	held     int64         // bytes in q, including the chunk being written
	readable chan struct{} // signalled when a chunk is queued
	space    chan struct{} // signalled when held decreases

	// Reader only: the schedule.
	prevRelease time.Time
	prevLen     int

	// Writer only.
	sent      int64
	cutRandom int64 // cut after this many bytes (Config.CutRandom), if > 0
	timer     *time.Timer
	hr        *hrTimer // nil if the system has none
	batch     []chunk  // chunks written together
	iov       net.Buffers
}

func newDir(c *conn, src, dst net.Conn, count *atomic.Int64) *dir {
	d := &dir{
		c:        c,
		src:      src,
		dst:      dst,
		rd:       newReader(src),
		count:    count,
		readable: make(chan struct{}, 1),
		space:    make(chan struct{}, 1),
		hr:       newHRTimer(),
	}
	if d.hr != nil {
		c.hrs = append(c.hrs, d.hr)
	}
	return d
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// schedule returns the release time of n bytes arriving now under cfg, and
// how closely it must be kept. It is computed from the schedule only, never
// from when the writer ran.
func (d *dir) schedule(now time.Time, n int, cfg *Config) (time.Time, timing) {
	rel := now.Add(cfg.RTT / 2)
	how := exact
	if !d.prevRelease.IsZero() {
		next := d.prevRelease
		if cfg.Rate > 0 {
			next = next.Add(txTime(d.prevLen, cfg.Rate))
		}
		switch {
		case next.After(rel) && cfg.Rate > 0:
			rel, how = next, paced
		case next.After(rel):
			rel, how = next, prompt
		case rel.Sub(next) < burstGap:
			how = prompt
		}
	}
	d.prevRelease, d.prevLen = rel, n
	return rel, how
}

// room waits until the queue has room for a read and returns how many bytes
// to read, or 0 if the connection is torn down.
func (d *dir) room() int {
	for {
		cfg := d.c.p.cfg.Load()
		limit, size := cfg.queueLimit(), int64(cfg.chunkSize())
		need := min(size, max(limit/2, 1))
		d.mu.Lock()
		free := limit - d.held
		d.mu.Unlock()
		if free >= need {
			return int(min(free, size))
		}
		select {
		case <-d.space:
		case <-d.c.done:
			return 0
		}
	}
}

func (d *dir) push(ch chunk) {
	d.mu.Lock()
	d.q = append(d.q, ch)
	d.held += int64(ch.n)
	d.mu.Unlock()
	signal(d.readable)
}

// shift removes and returns the chunk at the head of the queue, which must
// not be empty. d.mu is held.
func (d *dir) shift() chunk {
	ch := d.q[d.head]
	d.q[d.head] = chunk{}
	d.head++
	if d.head == len(d.q) {
		d.q, d.head = d.q[:0], 0
	} else if d.head >= 1024 && 2*d.head >= len(d.q) {
		n := copy(d.q, d.q[d.head:])
		clear(d.q[n:])
		d.q, d.head = d.q[:n], 0
	}
	return ch
}

// pop returns the next chunk, waiting for one; false if torn down.
func (d *dir) pop() (chunk, bool) {
	for {
		d.mu.Lock()
		if d.head < len(d.q) {
			ch := d.shift()
			d.mu.Unlock()
			return ch, true
		}
		d.mu.Unlock()
		select {
		case <-d.readable:
		case <-d.c.done:
			return chunk{}, false
		}
	}
}

// behind reports whether chunks are queued.
func (d *dir) behind() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.head < len(d.q)
}

// maxBatch bounds how many chunks one write takes.
const maxBatch = 32

// popDue appends to b the chunks of data at the head of the queue that are
// due by now, up to maxBatch in all.
func (d *dir) popDue(b []chunk, now time.Time) []chunk {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(b) < maxBatch && d.head < len(d.q) && d.q[d.head].buf != nil && !d.q[d.head].release.After(now) {
		b = append(b, d.shift())
	}
	return b
}

// done releases n bytes of the queue after they were written.
func (d *dir) done(n int) {
	d.mu.Lock()
	d.held -= int64(n)
	d.mu.Unlock()
	signal(d.space)
}

// read is the reader goroutine: it reads chunks from src, stamps them and
// queues them.
func (d *dir) read() {
	defer d.c.wg.Done()
	for {
		n := d.room()
		if n == 0 {
			return
		}
		buf := bufPool.Get().(*[]byte)
		k, now, err := d.rd.read((*buf)[:n])
		if k > 0 {
			rel, how := d.schedule(now, k, d.c.p.cfg.Load())
			d.push(chunk{buf: buf, n: k, release: rel, timing: how})
		} else {
			bufPool.Put(buf)
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				// The end of stream travels like data.
				rel, how := d.schedule(now, 0, d.c.p.cfg.Load())
				d.push(chunk{release: rel, timing: how})
			} else {
				d.c.abort()
			}
			return
		}
	}
}

// write is the writer goroutine: it writes each chunk to dst at its release
// time.
func (d *dir) write() {
	defer d.c.wg.Done()
	d.timer = time.NewTimer(time.Hour)
	d.timer.Stop()
	defer d.timer.Stop()
	if d.hr != nil {
		defer d.hr.close()
	}
	for {
		ch, ok := d.pop()
		if !ok {
			return
		}
		rel := ch.release
		if ch.timing == paced && d.behind() {
			// Late by up to a batch's time, so that one wake-up
			// releases a batch (see Config.paceBatch).
			rel = rel.Add(d.c.p.cfg.Load().paceBatch())
		}
		if !d.wait(rel, ch.timing) {
			return
		}
		if ch.buf == nil {
			if cw, ok := d.dst.(interface{ CloseWrite() error }); ok {
				if cw.CloseWrite() != nil {
					d.c.abort()
				}
			}
			return
		}
		lim := d.c.p.cfg.Load().CutAfter
		if d.cutRandom > 0 && (lim <= 0 || d.cutRandom < lim) {
			lim = d.cutRandom
		}
		if lim <= 0 {
			if !d.writeDue(ch) {
				return
			}
			continue
		}
		data := (*ch.buf)[:ch.n]
		cut := false
		if lim > 0 && d.sent+int64(len(data)) >= lim {
			data = data[:max(0, lim-d.sent)]
			cut = true
		}
		if len(data) > 0 {
			k, err := d.dst.Write(data)
			d.sent += int64(k)
			d.count.Add(int64(k))
			if err != nil {
				d.c.abort()
				return
			}
		}
		d.done(ch.n)
		bufPool.Put(ch.buf)
		if cut {
			d.c.cut()
			return
		}
	}
}

// writeDue writes ch and the chunks queued behind it that are due by now
// in one system call: after a late wake-up, a batch of chunks goes out at
// the cost of one. False if the connection was torn down.
func (d *dir) writeDue(ch chunk) bool {
	b := d.popDue(append(d.batch[:0], ch), time.Now())
	iov, n := d.iov[:0], 0
	for _, c := range b {
		iov = append(iov, (*c.buf)[:c.n])
		n += c.n
	}
	d.iov = iov
	k, err := iov.WriteTo(d.dst) // consumes iov, not d.iov
	d.sent += k
	d.count.Add(k)
	for i := range b {
		bufPool.Put(b[i].buf)
		b[i] = chunk{}
	}
	d.batch = b[:0]
	if err != nil {
		d.c.abort()
		return false
	}
	d.done(n)
	return true
}

// wait waits until release (or the end of a stall, if later); false if the
// connection was torn down. See the package comment and the timing
// constants for how.
func (d *dir) wait(release time.Time, how timing) bool {
	p := d.c.p
	for {
		// The channel of the next Resume is taken before the stall is
		// read: a Resume between the two would otherwise leave this
		// waiting for the one after it, with the stall over.
		resumed := p.resumed()
		t, how := release, how
		if s := p.stallEnd(); s.After(t) {
			t, how = s, paced
		}
		now := time.Now()
		if s := d.c.stallEnd(maxTime(now, t), p.cfg.Load()); s.After(t) {
			t, how = s, paced
		}
		left := t.Sub(now)
		if left <= 0 {
			return true
		}
		if how == paced || d.hr == nil && how == prompt {
			if !d.sleep(left, resumed) {
				return false
			}
			continue
		}
		var margin time.Duration
		if how == exact {
			margin = p.clock.margin()
		}
		sleep := left - margin
		if sleep < minSleep || d.hr == nil && sleep < time.Millisecond {
			// Spin: the release is within the margin, or too close for
			// a sleep to be worth its wake-up (with only time.Timer,
			// which rounds sub-millisecond sleeps up to a millisecond,
			// anything under a millisecond is).
			for time.Now().Before(t) {
				runtime.Gosched()
			}
			continue // the stall may have moved
		}
		if d.hr == nil {
			if !d.sleep(sleep, resumed) {
				return false
			}
		} else if err := d.hr.sleep(sleep); err != nil {
			select {
			case <-d.c.done:
				return false
			default:
				// Not closed by teardown: do without it.
				d.hr.close()
				d.hr = nil
				continue
			}
		}
		if how == exact {
			p.clock.observe(time.Since(now) - sleep)
		}
	}
}

// sleep sleeps on the ordinary timer for d, or until resumed is closed;
// false if the connection was torn down.
func (d *dir) sleep(dt time.Duration, resumed <-chan struct{}) bool {
	d.timer.Reset(dt)
	select {
	case <-d.timer.C:
		return true
	case <-resumed:
		d.timer.Stop()
		return true
	case <-d.c.done:
		return false
	}
}

// clock estimates how late the high-resolution timer wakes the writers, to
// choose the spin margin of exact releases: about the 75th percentile of
// recent lateness, tracked multiplicatively (up by an eighth on a wake-up
// later than the estimate, down by 4% otherwise, which balances at about 1
// in 4 later), within [minMargin, maxMargin]. A percentile, not the worst
// case: a burst of load that makes a few wake-ups late by milliseconds must
// not make every later release spin for milliseconds, which only takes CPU
// from the processes the link serves (the old estimate jumped to the worst
// case and decayed slowly, and burned up to a core under load). A release
// later than the margin is late by tens of microseconds, usually.
type clock struct {
	est atomic.Int64 // nanoseconds
}

const (
	// minSleep is the shortest sleep on the high-resolution timer: a
	// wake-up costs about as much CPU, and comes about as late.
	minSleep = 20 * time.Microsecond

	minMargin = 10 * time.Microsecond
	maxMargin = 500 * time.Microsecond
)

func (c *clock) init() { c.est.Store(int64(100 * time.Microsecond)) }

// observe records how late one timer woke.
func (c *clock) observe(late time.Duration) {
	for {
		old := c.est.Load()
		nw := old - old/25
		if int64(late) > old {
			nw = old + old/8
		}
		nw = min(max(nw, int64(minMargin)), int64(maxMargin))
		if c.est.CompareAndSwap(old, nw) {
			return
		}
	}
}

// margin returns how long before an exact release time to stop sleeping
// and spin.
func (c *clock) margin() time.Duration { return time.Duration(c.est.Load()) }

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
