package server

import (
	"context"
	"fmt"
	"maps"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/proto"
)

// Callback breaks, as in AFS: a change made through one connection is
// not answered until every other connection's acknowledged watch that
// covers it has applied a notice of it (dropped its cached copies, and its
// kernel's), or a bound has passed. So "another client sees the data once
// our close() returned" holds for every client that acknowledges in time.
//
// The server sends those notices itself (numbered, proto.Event.Seq), from
// the outcome of the request it applied, besides the tree's own notices
// (which also report changes made on the disk); duplicates only drop
// again. The wait is per reply, on the reply's goroutine: the connection's
// later requests are taken and applied meanwhile, in order.
//
// A watch that misses its bound is lagging: later changes do not wait for
// it until it has acknowledged every notice it was sent (it did get them:
// it applies them late, and an Overflow would only make it drop all it
// caches). A watch that does not read at all, so that its queue fills, is
// sent an Overflow in place of the queued notices.

// maxQueued bounds the server's notices queued for one watch that its
// client does not read: beyond it they are replaced by one Overflow.
const maxQueued = 4096

// minCallbackWait is the least a writer waits for a watch's
// acknowledgement before counting it as lagging.
const minCallbackWait = 250 * time.Millisecond

// ackWatch is an acknowledged watch: a watch whose client acknowledges
// the notices the server numbers.
type ackWatch struct {
	c    *conn
	st   *mux.Stream
	tree string // the tree's name, resolved
	path string // the watched path

	kick chan struct{} // capacity 1: notices queued

	mu       sync.Mutex
	seq      uint64        // the last number given
	acked    uint64        // all numbers up to this one are acknowledged
	ackc     chan struct{} // closed and replaced when acked, lagging or closed change
	queue    []proto.Event // numbered notices to send, in order
	overflow bool          // an Overflow is to be sent instead of the queue
	lagging  bool          // missed a bound: nobody waits for it
	lagSeq   uint64        // lagging ends once this is acknowledged (0: the Overflow to come)
	closed   bool
}

// callbacks is the server's registry of acknowledged watches.
type callbacks struct {
	mu      sync.Mutex
	watches map[string]map[*ackWatch]struct{} // by tree name

	breaks atomic.Int64 // numbered notices queued
	waits  atomic.Int64 // replies that waited for an acknowledgement
	lagged atomic.Int64 // bounds missed
}

func (cb *callbacks) add(w *ackWatch) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if cb.watches == nil {
		cb.watches = make(map[string]map[*ackWatch]struct{})
	}
	if cb.watches[w.tree] == nil {
		cb.watches[w.tree] = make(map[*ackWatch]struct{})
	}
	cb.watches[w.tree][w] = struct{}{}
}

func (cb *callbacks) remove(w *ackWatch) {
	cb.mu.Lock()
	delete(cb.watches[w.tree], w)
	cb.mu.Unlock()
	w.mu.Lock()
	w.closed = true
	w.wakeLocked()
	w.mu.Unlock()
}

// counts returns how many acknowledged watches there are, and how many of
// them lag.
func (cb *callbacks) counts() (n, lagging int) {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	for _, ws := range cb.watches {
		for w := range ws {
			n++
			w.mu.Lock()
			if w.lagging {
				lagging++
			}
			w.mu.Unlock()
		}
	}
	return n, lagging
}

func (w *ackWatch) wakeLocked() {
	close(w.ackc)
	w.ackc = make(chan struct{})
}

// enqueueLocked numbers ev and queues it to be sent; w.mu is held.
func (w *ackWatch) enqueueLocked(ev proto.Event) uint64 {
	w.seq++
	ev.Seq = w.seq
	if w.overflow {
		return w.seq // the Overflow to come covers it
	}
	if len(w.queue) >= maxQueued {
		w.lagLocked(true)
	} else {
		w.queue = append(w.queue, ev)
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return w.seq
}

// lagLocked marks w as lagging: writers stop waiting for it until it has
// acknowledged every notice numbered so far. With drop (its queue is full:
// it does not read), its queued notices are dropped and it is sent an
// Overflow in their place, which it must acknowledge instead. w.mu is
// held.
func (w *ackWatch) lagLocked(drop bool) {
	if !w.lagging {
		w.lagging = true
		w.c.srv.cb.lagged.Add(1)
		msg := "watch did not acknowledge a change in time: writers do not wait for it until it has caught up"
		if drop {
			msg = "watch does not read its notices: they are replaced by an overflow, and writers do not wait for it until it acknowledges that"
		}
		w.c.srv.log.Info(msg, "remote", w.c.remote, "tree", w.tree, "path", w.path)
	}
	w.lagSeq = w.seq
	if drop {
		w.overflow = true
		w.queue = nil
		w.lagSeq = 0 // set when the Overflow is numbered
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	w.wakeLocked()
}

// next takes what is to be sent next: the queued notices, or an
// Overflow (numbered) in their place.
func (w *ackWatch) next() []proto.Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.overflow {
		w.overflow = false
		w.seq++
		w.lagSeq = w.seq
		return []proto.Event{{Kind: uint8(zx.Overflow), Seq: w.seq, Dir: zx.Dir{zx.APath: w.path, zx.AName: path.Base(w.path)}}}
	}
	q := w.queue
	w.queue = nil
	return q
}

// ack records an acknowledgement from the client.
func (w *ackWatch) ack(seq uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if seq > w.seq {
		return zx.E(zx.ErrProtocol, "watch", w.path, fmt.Sprintf("acknowledgement of notice %d, which was not sent (last %d)", seq, w.seq))
	}
	if seq <= w.acked {
		return nil
	}
	w.acked = seq
	if w.lagging && w.lagSeq != 0 && seq >= w.lagSeq {
		w.lagging = false
		w.lagSeq = 0
	}
	w.wakeLocked()
	return nil
}

// bound is how long a writer waits for w: a few of its round trips,
// within [minCallbackWait, Config.CallbackWait].
func (w *ackWatch) bound() time.Duration {
	least := minCallbackWait
	if d := w.c.srv.cfg.minCallbackWait; d > 0 {
		least = d
	}
	return min(max(4*w.c.mc.RTT(), least), w.c.srv.cfg.CallbackWait)
}

// wait waits until w acknowledged seq, lags, ends, or deadline passes
// (then it lags), or ctx ends.
func (w *ackWatch) wait(ctx context.Context, seq uint64, deadline time.Time) {
	var t *time.Timer
	for {
		w.mu.Lock()
		if w.acked >= seq || w.lagging || w.closed {
			w.mu.Unlock()
			break
		}
		ch := w.ackc
		w.mu.Unlock()
		if t == nil {
			t = time.NewTimer(time.Until(deadline))
			defer t.Stop()
		}
		select {
		case <-ch:
		case <-t.C:
			w.mu.Lock()
			if w.acked < seq && !w.closed && !w.lagging {
				w.lagLocked(false)
			}
			w.mu.Unlock()
			return
		case <-ctx.Done():
			return
		}
	}
}

// readAcks takes the client's acknowledgements off the watch's stream
// until it ends.
func (w *ackWatch) readAcks() {
	ctx := w.st.Context()
	for {
		m, err := w.st.Recv(ctx)
		if err != nil {
			// The client ended its side (it acknowledges no more) or
			// the watch is over.
			w.c.srv.cb.remove(w)
			return
		}
		if m.Type != proto.FData {
			w.st.Fail(zx.E(zx.ErrProtocol, "watch", w.path, "acknowledged watch stream holds a non-data message"))
			continue
		}
		if len(m.Data) == 0 && m.End {
			continue
		}
		seq, err := proto.ParseAck(m.Data)
		if err == nil {
			err = w.ack(seq)
		}
		if err != nil {
			w.st.Fail(zx.Errorf("watch", w.path, err))
		}
	}
}

// ackedEvents serves an acknowledged watch: the tree's notices as they
// come, and the server's numbered ones. It runs as conn.events does, and
// registers the watch once its Ready is sent.
func (c *conn) ackedEvents(w *ackWatch, ec <-chan zx.Event) {
	defer c.done(w.st)
	defer func() {
		c.mu.Lock()
		delete(c.watches, w.st)
		c.mu.Unlock()
		c.srv.cb.remove(w)
	}()
	ctx := w.st.Context()
	failed, registered := false, false
	send := func(typ uint8, b []byte) {
		if failed {
			return
		}
		if err := w.st.Send(ctx, typ, b, false); err != nil {
			failed = true
			w.st.Cancel(err)
		}
	}
	for ec != nil {
		select {
		case ev, ok := <-ec:
			if !ok {
				ec = nil
				break
			}
			if ev.Err != nil {
				send(proto.FErr, proto.AppendError(nil, ev.Err))
				continue
			}
			send(proto.FEvent, appendEvent(&proto.Event{Kind: uint8(ev.Kind), From: ev.From, Dir: ev.Dir}))
			if ev.Kind == zx.Ready && !registered && !failed {
				registered = true
				c.srv.cb.add(w)
				go w.readAcks()
			}
		case <-w.kick:
			for _, ev := range w.next() {
				send(proto.FEvent, appendEvent(&ev))
			}
		}
	}
	if !failed {
		w.st.Send(ctx, proto.FData, nil, true)
	}
}

// appendEvent encodes a notice; one whose entry does not fit in a frame
// (attributes set on the tree directly) carries only the entry's path and
// name, which is all a watcher needs to drop it, rather than failing the
// watch.
func appendEvent(ev *proto.Event) []byte {
	b := proto.AppendEvent(nil, ev)
	if len(b) > proto.MaxPayload {
		p := ev.Dir.Path()
		small := *ev
		small.Dir = zx.Dir{zx.APath: p, zx.AName: path.Base(p)}
		b = proto.AppendEvent(nil, &small)
	}
	return b
}

// wantsAcks reports whether a watch request asks for acknowledged
// notices: the client offered the feature and left the stream open.
func (c *conn) wantsAcks(st *mux.Stream) bool {
	if c.srv.cfg.NoWatchAck || st.RecvEnded() {
		return false
	}
	h, err := c.mc.PeerHello(context.Background())
	if err != nil {
		return false
	}
	for _, f := range h.Features {
		if f == proto.FeatureWatchAck {
			return true
		}
	}
	return false
}

// notices returns the notices that report the outcome of a write
// request, for other connections' watches: what the tree would report,
// from what the request did. d is the reply's entry (put, wstat, link).
func (c *conn) notices(req *proto.Request, d zx.Dir) []proto.Event {
	if d != nil && c.grant != nil {
		// The reply's ids are those of the writer's side: leave them
		// out (a notice only ever drops).
		d = maps.Clone(d)
		delete(d, zx.AUid)
		delete(d, zx.AGid)
	}
	named := func(p string) zx.Dir { return zx.Dir{zx.APath: p, zx.AName: path.Base(p)} }
	switch req.Op {
	case proto.OpPut:
		kind := zx.Changed
		if req.Dir[zx.AType] != "" {
			kind = zx.Created // a create, or a replacement
		}
		if d == nil {
			d = named(req.Path)
		}
		return []proto.Event{{Kind: uint8(kind), Dir: d}}
	case proto.OpWstat, proto.OpAllocate:
		if d == nil {
			d = named(req.Path)
		}
		return []proto.Event{{Kind: uint8(zx.Changed), Dir: d}}
	case proto.OpRemove, proto.OpRemoveAll:
		return []proto.Event{{Kind: uint8(zx.Removed), Dir: named(req.Path)}}
	case proto.OpMove:
		return []proto.Event{{Kind: uint8(zx.Moved), From: req.Path, Dir: named(req.To)}}
	case proto.OpLink:
		old := named(req.Path)
		if d == nil {
			d = named(req.To)
		} else {
			old = maps.Clone(d)
			old[zx.APath], old[zx.AName] = req.Path, path.Base(req.Path)
		}
		return []proto.Event{{Kind: uint8(zx.Created), Dir: d}, {Kind: uint8(zx.Changed), Dir: old}}
	}
	return nil
}

// forWatch returns the notice a watch of wp gets for ev, in terms of paths
// at or below wp (a watcher of a subtree knows no others), and whether it
// gets one: a move across wp's boundary is a create or a remove; the
// remove or move of a directory above wp removes wp; other changes outside
// wp concern it not.
func forWatch(ev proto.Event, wp string) (proto.Event, bool) {
	in := func(p string) bool { return p != "" && zx.HasPrefix(p, wp) }
	above := func(p string) bool { return p != "" && p != wp && zx.HasPrefix(wp, p) }
	named := func(p string) zx.Dir { return zx.Dir{zx.APath: p, zx.AName: path.Base(p)} }
	p := ev.Dir.Path()
	switch {
	case ev.Kind == uint8(zx.Moved) && in(ev.From) && in(p):
		return ev, true
	case ev.Kind == uint8(zx.Moved) && in(ev.From):
		return proto.Event{Kind: uint8(zx.Removed), Dir: named(ev.From)}, true
	case ev.Kind == uint8(zx.Moved) && in(p):
		return proto.Event{Kind: uint8(zx.Created), Dir: named(p)}, true
	case in(p):
		return ev, true
	case (ev.Kind == uint8(zx.Removed) || ev.Kind == uint8(zx.Moved)) && (above(p) || above(ev.From)):
		return proto.Event{Kind: uint8(zx.Removed), Dir: named(wp)}, true
	}
	return ev, false
}

// breakCallbacks sends the notices of a write request that c applied to
// every other connection's acknowledged watch on the tree that covers
// them, and waits until they acknowledged, lag, or ctx ends. With no such
// watch it returns at once: a lone client pays nothing.
func (c *conn) breakCallbacks(ctx context.Context, tree string, req *proto.Request, d zx.Dir) {
	cb := &c.srv.cb
	if c.srv.cfg.CallbackWait < 0 {
		return
	}
	cb.mu.Lock()
	if len(cb.watches[tree]) == 0 {
		cb.mu.Unlock()
		return
	}
	type target struct {
		w   *ackWatch
		seq uint64
	}
	var targets []target
	evs := c.notices(req, d)
	for w := range cb.watches[tree] {
		if w.c == c {
			continue // the writer's own: its replies tell it
		}
		var seq uint64
		w.mu.Lock()
		for _, ev := range evs {
			if ev, ok := forWatch(ev, w.path); ok {
				seq = w.enqueueLocked(ev)
				cb.breaks.Add(1)
			}
		}
		lagging := w.lagging
		w.mu.Unlock()
		if seq != 0 && !lagging {
			targets = append(targets, target{w, seq})
		}
	}
	cb.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	cb.waits.Add(1)
	start := time.Now()
	for _, t := range targets {
		t.w.wait(ctx, t.seq, start.Add(t.w.bound()))
	}
}
