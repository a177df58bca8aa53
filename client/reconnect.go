package client

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/proto"
)

// Reconnection (Options.Reconnect).
//
// The connection keeps every request in flight as a pending, in issue
// order. When the connection is lost, the first request that notices
// dials again (with backoff, for at most Options.ReconnectWait), waits for
// the server's hello and one ping, and then, holding c.mu so that no new
// request can slip in between, replays the requests that were in flight,
// in the order they were issued:
//
//   - a request that had not been sent is sent now;
//   - one whose reply had ended is left alone: its goroutine reads the end;
//   - an idempotent one is sent again, resuming where it was: stat, attach,
//     wstat, statfs, a put without data; a get from the offset it had
//     reached (after a stat pipelined before it, checked against one taken
//     with the first attempt, so that a file changed in between is reported,
//     not spliced); find and findget from the start, their goroutines
//     skipping what was already delivered; a watch, whose watcher gets an
//     Overflow notice once the new watch is in place;
//   - a put is sent again from the start of its data when the data can be
//     read again (the reader is an io.Seeker) and writing it twice is
//     harmless (it replaces the file, or writes in place at an offset, and
//     is not exclusive);
//   - any other request (move, remove, removeall, link, an exclusive or
//     appending put, a put whose data is gone) fails with an error saying
//     that whether it took effect is unknown.
//
// Each request's goroutine, when its stream fails because the connection
// did, waits for the replay's answer (resume) and carries on with the new
// stream. Lock order: Conn.mu, then pending.mu.

// maxTries bounds how many times one request is carried over a lost
// connection: a request that kills the server every time is not retried
// for ever.
const maxTries = 16

// pending is a request in flight on a reconnecting connection.
type pending struct {
	seq    uint64
	op     uint8
	path   string
	opened chan struct{} // closed when the first Open has returned

	// open sends the request as it was issued; retry, if set, sends it
	// again after a loss (with p.mu held), resuming where it was. A
	// request without retry is sent again only if it had not been sent.
	open  func(*mux.Conn) (*mux.Stream, error)
	retry func(*mux.Conn, *pending) (*mux.Stream, error)

	next  chan reopened // the replay's answer, one per loss
	tries int           // used by the request's goroutine only

	mu      sync.Mutex
	mc      *mux.Conn   // the connection st is on
	st      *mux.Stream // nil until sent
	sender  chan struct{}
	gotData int64       // data bytes and entries received on earlier streams
	gotDirs int64       // (gets)
	orig    *mux.Stream // a stat sent before the first get, to check a resumed one
	origDir zx.Dir      // its reply, once read
	verify  *mux.Stream // a stat sent before the resumed get
}

type reopened struct {
	st  *mux.Stream
	err error
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// currentLocked returns the connection to use, re-establishing it first if
// it was lost and reconnection is on. c.mu is held; it is released while
// waiting. With zx.FailFast(ctx) it does not wait: it starts the redial
// and fails with ErrIO.
func (c *Conn) currentLocked(ctx context.Context) (*mux.Conn, error) {
	for {
		if c.closed {
			return nil, zx.E(zx.ErrIO, "", "", "connection closed")
		}
		mc := c.mc
		if mc.Err() == nil || !c.reconnects() {
			return mc, nil
		}
		ch := c.redialLocked(mc)
		if zx.FailFast(ctx) {
			// The redial goes on; the caller keeps its request
			// (zx.WithFailFast) and sends it again later.
			return nil, zx.E(zx.ErrIO, "", "", fmt.Sprintf("connection to %s lost (%v); being re-established", c.addr, mc.Err()))
		}
		c.waits++
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			c.mu.Lock()
			return nil, zx.Errorf("", "", ctx.Err())
		}
		c.mu.Lock()
		if c.mc == mc {
			return nil, c.redialErr
		}
	}
}

// current is currentLocked without the lock held.
func (c *Conn) current(ctx context.Context) (*mux.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.currentLocked(ctx)
}

func (c *Conn) reconnects() bool { return c.opts.Reconnect && c.opts.Redial != nil }

// redialLocked starts re-establishing the connection lost in mc, unless
// that is under way, and returns a channel closed when it is over.
func (c *Conn) redialLocked(mc *mux.Conn) chan struct{} {
	if c.redialing == nil {
		c.redialing = make(chan struct{})
		if c.downSince.IsZero() {
			c.downSince = time.Now()
		}
		go c.reconnect(mc, c.redialing)
	}
	return c.redialing
}

// reconnect dials again until it succeeds or Options.ReconnectWait has
// passed, and replays the requests that were in flight on old.
func (c *Conn) reconnect(old *mux.Conn, done chan struct{}) {
	wait := c.opts.ReconnectWait
	if wait <= 0 {
		wait = 30 * time.Second
	}
	deadline := time.Now().Add(wait)
	backoff := 20 * time.Millisecond
	var err error
	for {
		var mc *mux.Conn
		if mc, err = c.redialOnce(deadline); err == nil {
			c.mu.Lock()
			if c.closed {
				c.mu.Unlock()
				mc.Close()
				err = zx.E(zx.ErrIO, "", "", "connection closed")
				break
			}
			c.base = addStats(c.base, old.Stats())
			c.mc = mc
			c.redials++
			c.downSince = time.Time{}
			c.replayLocked(old, mc)
			c.redialing = nil
			c.mu.Unlock()
			close(done)
			return
		}
		if time.Now().Add(backoff).After(deadline) {
			break
		}
		select {
		case <-time.After(backoff):
		case <-c.gone:
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	kind := zx.KindOf(err)
	if kind == zx.ErrOther || kind == 0 {
		kind = zx.ErrIO
	}
	rerr := &zx.Error{Kind: kind, Msg: fmt.Sprintf("connection to %s lost (%v), and not re-established within %v: %v", c.addr, old.Err(), wait, err), Err: err}
	c.mu.Lock()
	c.redialErr = rerr
	for p := range c.inflight {
		p.mu.Lock()
		lost := p.mc == old
		p.mu.Unlock()
		if lost {
			delete(c.inflight, p)
			p.next <- reopened{err: rerr}
		}
	}
	c.redialing = nil
	c.mu.Unlock()
	close(done)
}

// redialOnce makes one new connection and checks that the server takes it
// (a server with too many connections says hello, then goaway).
func (c *Conn) redialOnce(deadline time.Time) (*mux.Conn, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	go func() {
		select {
		case <-c.gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	nc, err := c.opts.Redial(ctx)
	if err != nil {
		return nil, err
	}
	mc := mux.Client(nc, c.opts.Mux)
	if _, err := mc.PeerHello(ctx); err != nil {
		mc.Close()
		return nil, err
	}
	if _, err := mc.Ping(ctx); err != nil {
		mc.Close()
		return nil, err
	}
	return mc, nil
}

// replayLocked carries the requests in flight on old over to mc, in issue
// order. c.mu is held, so requests issued meanwhile wait and come after.
func (c *Conn) replayLocked(old, mc *mux.Conn) {
	var ps []*pending
	for p := range c.inflight {
		p.mu.Lock()
		if p.mc == old {
			ps = append(ps, p)
		}
		p.mu.Unlock()
	}
	slices.SortFunc(ps, func(a, b *pending) int { return int(a.seq - b.seq) })
	for _, p := range ps {
		<-p.opened // prompt: Open on a dead connection fails at once
		p.mu.Lock()
		sent := p.st != nil
		if sent && p.st.GotEnd() {
			p.mu.Unlock()
			continue // its reply is complete
		}
		var r reopened
		switch {
		case !sent:
			r.st, r.err = p.open(mc)
		case p.retry != nil:
			r.st, r.err = p.retry(mc, p)
		default:
			r.err = unknownOutcome(p)
			delete(c.inflight, p)
		}
		if r.st != nil {
			p.mc, p.st = mc, r.st
		} else if r.err != nil {
			delete(c.inflight, p)
		}
		p.mu.Unlock()
		p.next <- r
	}
}

// unknownOutcome is the error of a request that was sent, could not be
// sent again safely, and whose reply the lost connection took with it.
func unknownOutcome(p *pending) error {
	op := proto.OpName(p.op)
	msg := "connection lost before the reply: whether the " + op + " took effect is unknown; the connection is back: check, then retry"
	if p.op == proto.OpPut {
		msg = "connection lost during the put, and its data cannot be sent again (the reader cannot seek back, or the put appends or is exclusive): " +
			"the file may be unchanged, replaced, or (a write in place) partly written; the connection is back: check, then put again"
	}
	return zx.E(zx.ErrIO, op, p.path, msg)
}

// resume is called by a request's goroutine when its stream failed with
// err. If the connection was lost and comes back, it returns the stream
// the request goes on with; otherwise an error, err itself if the failure
// was not a lost connection.
func (c *Conn) resume(ctx context.Context, p *pending, err error) (*mux.Stream, error) {
	if p == nil || !c.reconnects() || ctx.Err() != nil {
		return nil, err
	}
	select {
	case r := <-p.next:
		// The connection was re-established and the request sent again
		// (by another request's redial) before its own stream reported
		// the loss: p.mc is already the new connection.
		return r.st, r.err
	default:
	}
	p.mu.Lock()
	mc := p.mc
	p.mu.Unlock()
	if mc.Err() == nil {
		return nil, err
	}
	if p.tries >= maxTries {
		return nil, zx.E(zx.ErrIO, proto.OpName(p.op), p.path, fmt.Sprintf("connection lost %d times during the request; giving up (last: %v)", p.tries+1, err))
	}
	p.tries++
	c.mu.Lock()
	if c.mc == mc && len(p.next) == 0 {
		c.redialLocked(mc)
	}
	c.mu.Unlock()
	select {
	case r := <-p.next:
		return r.st, r.err
	case <-ctx.Done():
		return nil, zx.Errorf("", "", ctx.Err())
	case <-c.gone:
		return nil, zx.E(zx.ErrIO, "", "", "connection closed")
	}
}

// finish forgets a request that is over, cancelling a stream the replay
// may have opened for it meanwhile.
func (c *Conn) finish(p *pending) {
	if p == nil {
		return
	}
	c.mu.Lock()
	delete(c.inflight, p)
	c.mu.Unlock()
	select {
	case r := <-p.next:
		if r.st != nil {
			r.st.Cancel(nil)
		}
	default:
	}
	p.mu.Lock()
	for _, st := range []*mux.Stream{p.orig, p.verify} {
		if st != nil {
			st.Cancel(nil)
		}
	}
	p.mu.Unlock()
}

func addStats(a, b mux.Stats) mux.Stats {
	return mux.Stats{
		BytesIn:    a.BytesIn + b.BytesIn,
		BytesOut:   a.BytesOut + b.BytesOut,
		Streams:    a.Streams + b.Streams,
		RoundTrips: a.RoundTrips + b.RoundTrips,
		SavedIn:    a.SavedIn + b.SavedIn,
		SavedOut:   a.SavedOut + b.SavedOut,
	}
}

// idempotent reports whether req may be sent twice with the effect of
// once: reads, and writes that set rather than change.
func idempotent(req *proto.Request) bool {
	switch req.Op {
	case proto.OpAttach, proto.OpStat, proto.OpWstat, proto.OpStatFS, proto.OpSync, proto.OpAllocate, proto.OpGet, proto.OpFind, proto.OpFindGet, proto.OpWatch,
		proto.OpDelegate, proto.OpReturn, proto.OpRecalls:
		return true
	case proto.OpPut:
		return req.Dir["Excl"] == ""
	}
	return false
}

// getRetry returns the retry function of a get: it asks for what is left,
// after a stat to check that the file is the one the first attempt read.
func (t *Tree) getRetry(ctx context.Context, req *proto.Request) func(*mux.Conn, *pending) (*mux.Stream, error) {
	return func(mc *mux.Conn, p *pending) (*mux.Stream, error) {
		d, n := p.st.Received()
		p.gotData += d
		p.gotDirs += n
		r := *req
		got := p.gotData + p.gotDirs // a get streams data or entries, not both
		if got > 0 {
			r.Off = req.Off + got
			if req.Count >= 0 {
				r.Count = max(req.Count-got, 0)
			}
		}
		if p.gotData > 0 {
			vst, err := mc.Open(ctx, t.encode(ctx, &proto.Request{Op: proto.OpStat, Tree: req.Tree, Path: req.Path}), 0)
			if err != nil {
				return nil, err
			}
			if p.verify != nil {
				p.verify.Cancel(nil)
			}
			p.verify = vst
		}
		return mc.Open(ctx, t.encode(ctx, &r), 0)
	}
}

// checkResumed checks, before a get goes on with data from a new stream,
// that the file is the one it was reading.
func (t *Tree) checkResumed(ctx context.Context, p *pending) error {
	p.mu.Lock()
	orig, verify := p.orig, p.verify
	p.verify = nil
	p.mu.Unlock()
	if verify == nil {
		return nil
	}
	defer verify.Cancel(nil)
	bad := func(why string) error {
		return zx.E(zx.ErrIO, "get", p.path, "connection lost in the middle, and the transfer cannot resume safely: "+why+"; read it again")
	}
	if orig == nil {
		return bad("no stat of the first attempt")
	}
	a := zx.Reply{Dir: p.origDir}
	if a.Dir == nil {
		a = t.one(ctx, nil, orig, proto.OpStat, p.path)
		p.origDir = a.Dir // used by this goroutine only
	}
	b := t.one(ctx, nil, verify, proto.OpStat, p.path)
	if a.Err != nil || b.Err != nil {
		return bad(fmt.Sprintf("the file could not be checked (%v, %v)", a.Err, b.Err))
	}
	for _, k := range []string{zx.ASize, zx.AMtime, "ino"} {
		if a.Dir[k] != b.Dir[k] {
			return bad("the file changed meanwhile")
		}
	}
	return nil
}

// skipper drops, from a find or findget replayed from the start, what its
// first attempts already delivered: entries up to the last one delivered
// (in walk order), and that one's data already delivered.
type skipper struct {
	last     string // path of the last entry delivered; "" before any
	lastData int64  // data bytes delivered after it
	skipping bool
	skipData int64 // data still to drop after reaching last
}

// delivered records an item given to the caller.
func (s *skipper) delivered(it zx.Item) {
	switch {
	case it.Dir != nil:
		s.last, s.lastData = it.Dir.Path(), 0
	default:
		s.lastData += int64(len(it.Data))
	}
}

// restart begins skipping on a new stream.
func (s *skipper) restart() {
	s.skipping = s.last != ""
	s.skipData = -1
}

// skip reports whether it is to be dropped, trimming it if it is the
// partly delivered data of the last entry.
func (s *skipper) skip(it *zx.Item) bool {
	if !s.skipping {
		return false
	}
	if it.Dir != nil {
		switch c := walkCmp(it.Dir.Path(), s.last); {
		case c < 0:
			return true
		case c == 0:
			s.skipData = s.lastData
			if s.skipData == 0 {
				s.skipping = false
			}
			return true
		}
		s.skipping = false
		return false
	}
	if it.Err != nil {
		return false
	}
	if s.skipData < 0 {
		return true // data of an entry before last
	}
	if int64(len(it.Data)) <= s.skipData {
		s.skipData -= int64(len(it.Data))
		if s.skipData == 0 {
			s.skipping = false
		}
		return true
	}
	it.Data = it.Data[s.skipData:]
	s.skipping = false
	return false
}

// walkCmp compares two paths in the order of a find's walk: depth first,
// names sorted, a directory before what it holds.
func walkCmp(a, b string) int {
	ae, be := strings.Split(strings.Trim(a, "/"), "/"), strings.Split(strings.Trim(b, "/"), "/")
	for i := range min(len(ae), len(be)) {
		if c := strings.Compare(ae[i], be[i]); c != 0 {
			return c
		}
	}
	return len(ae) - len(be)
}

// putRetry returns the retry function of a put whose data can be read
// again: it waits for the sender of the lost attempt to stop, and rewinds.
func putRetry(data io.Seeker, start int64) func(*mux.Conn, *pending) (*mux.Stream, error) {
	return func(mc *mux.Conn, p *pending) (*mux.Stream, error) {
		<-p.sender
		if _, err := data.Seek(start, io.SeekStart); err != nil {
			return nil, zx.E(zx.ErrIO, "put", p.path, "connection lost during the put, and its data cannot be read again: "+err.Error())
		}
		return p.open(mc)
	}
}
