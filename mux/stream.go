package mux

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/proto"
)

// Stream is one request and its reply. Send may be called from one
// goroutine and Recv from another at the same time.
type Stream struct {
	c  *Conn
	id uint32

	req []byte // server side: the request message

	// Receive side, guarded by rmu.
	rmu       sync.Mutex
	rq        []Msg
	rhead     int
	rbytes    int   // bytes queued in rq
	acct      int   // bytes of rq accounted to the connection's buffers
	dataIn    int64 // FData bytes received
	dirsIn    int64 // entries received: FDir messages and those in FDirs
	recvEnded bool
	rerr      error
	rwake     chan struct{} // signalled (capacity 1) on a change
	recvWin   int
	consumed  int // bytes consumed since the last window update
	lastUpd   time.Time
	gotFirst  bool

	// Send side, guarded by c.mu.
	sendCredit int64
	outq       []outFrame
	queued     bool // in c.ready
	sendEnded  bool // End queued
	endWritten bool
	peerEnded  bool // the peer will take no more
	counted    bool // counts toward Conn.awaiting until its first reply
	hasSlot    bool
	pregrant   int     // credit granted ahead of need (Conn.preGrantLocked)
	zb         backoff // compression attempts on DATA; the sending goroutine's
	zbDirs     backoff // the same, on DIRS

	// What the server's work on the request holds (work.go; c.mu).
	inbound         bool // the request carries data: its work counts as received
	admitted        int64
	heldIn, heldOut int64 // all Take and Hold counted, received and sending sides
	holding         int64 // of heldOut: reply data Hold counted, not yet queued
	released        bool

	stopCancel func() bool
	cancelOnce sync.Once
	ctx        context.Context
	cancel     context.CancelFunc
}

type outFrame struct {
	h proto.Header
	p []byte
}

func newStream(c *Conn, id uint32) *Stream {
	s := &Stream{
		c:          c,
		id:         id,
		rwake:      make(chan struct{}, 1),
		recvWin:    proto.InitialStreamWindow,
		lastUpd:    time.Now(),
		sendCredit: proto.InitialStreamWindow,
	}
	if c.server {
		s.ctx, s.cancel = context.WithCancel(context.Background())
	}
	return s
}

// ID returns the stream's number on its connection.
func (s *Stream) ID() uint32 { return s.id }

// Request returns the request message that opened the stream (server side).
func (s *Stream) Request() []byte { return s.req }

// Context is cancelled when the client cancels the stream or the connection
// ends (server side).
func (s *Stream) Context() context.Context {
	if s.ctx == nil {
		return context.Background()
	}
	return s.ctx
}

// deliver queues a received message. It runs on the read loop.
func (s *Stream) deliver(m Msg) error {
	s.rmu.Lock()
	if s.recvEnded || s.rerr != nil {
		s.rmu.Unlock()
		if s.rerr != nil {
			return nil // cancelled: drop
		}
		return zx.E(zx.ErrProtocol, "", "", "message after the end of a stream")
	}
	finalErr := m.Type == proto.FErr && m.End && !s.c.server
	if s.rbytes+len(m.Data) > s.recvWin && !finalErr {
		// (A server may end a stream with an error without credit.)
		s.rmu.Unlock()
		return zx.E(zx.ErrProtocol, "", "", "peer overran a stream's window")
	}
	if err := s.c.takeIn(len(m.Data)); err != nil {
		if s.c.server {
			s.rmu.Unlock()
			s.Fail(err)
			return nil
		}
		// A client's buffers are bounded by the windows it grants.
	} else {
		s.acct += len(m.Data)
	}
	first := !s.gotFirst
	s.gotFirst = true
	s.rq = append(s.rq, m)
	s.rbytes += len(m.Data)
	switch m.Type {
	case proto.FData:
		s.dataIn += int64(len(m.Data))
	case proto.FDir:
		s.dirsIn++
	case proto.FDirs:
		s.dirsIn += proto.DirsCount(m.Data)
	}
	if m.End {
		s.recvEnded = true
	}
	s.rmu.Unlock()
	c := s.c
	if first || m.End {
		c.mu.Lock()
		if first && s.counted {
			// Before the reader is woken: a request it opens once it has
			// the reply must not find this one still awaited (it would
			// not be counted as a round trip).
			s.counted = false
			c.awaiting--
		}
		if m.End && !c.server {
			s.peerEnded = true
			{
				// The reply is complete: whatever request data is still
				// queued is of no use to the server.
				s.dropOutLocked()
				s.endedLocked()
			}
		}
		c.mu.Unlock()
	}
	select {
	case s.rwake <- struct{}{}:
	default:
	}
	if m.End {
		c.wakeSenders()
	}
	return nil
}

// wakeSenders wakes every goroutine waiting for credit.
func (c *Conn) wakeSenders() {
	c.mu.Lock()
	if c.err == nil {
		close(c.creditWake)
		c.creditWake = make(chan struct{})
	}
	c.mu.Unlock()
}

// Recv returns the next message. After the message marked End it returns
// io.EOF; if the stream was cancelled or the connection failed, that error.
func (s *Stream) Recv(ctx context.Context) (Msg, error) {
	for {
		s.rmu.Lock()
		if s.rhead < len(s.rq) {
			m := s.rq[s.rhead]
			s.rq[s.rhead] = Msg{}
			s.rhead++
			if s.rhead == len(s.rq) {
				s.rq = s.rq[:0]
				s.rhead = 0
			}
			s.rbytes -= len(m.Data)
			s.consumed += len(m.Data)
			rel := min(len(m.Data), s.acct)
			s.acct -= rel
			var inc int
			if !s.recvEnded && s.consumed >= s.recvWin/2 {
				inc = s.consumed
				now := time.Now()
				if rtt := s.c.RTT(); rtt > 0 && now.Sub(s.lastUpd) < 2*rtt && s.recvWin < s.c.cfg.MaxStreamWindow {
					grow := min(s.recvWin, s.c.cfg.MaxStreamWindow-s.recvWin)
					s.recvWin += grow
					inc += grow
					s.c.learn(s.recvWin)
				}
				s.lastUpd = now
				s.consumed = 0
			}
			s.rmu.Unlock()
			s.c.releaseIn(rel)
			if m.End {
				s.c.mu.Lock()
				s.releasePreGrantLocked()
				s.c.mu.Unlock()
			}
			if inc > 0 {
				s.c.control(proto.AppendFrame(nil, proto.Header{Type: proto.FWindow, Stream: s.id}, proto.AppendWindow(nil, uint32(inc))))
			}
			return m, nil
		}
		if s.rerr != nil {
			err := s.rerr
			s.rmu.Unlock()
			return Msg{}, err
		}
		if s.recvEnded {
			s.rmu.Unlock()
			return Msg{}, io.EOF
		}
		s.rmu.Unlock()
		select {
		case <-s.rwake:
		case <-ctx.Done():
			return Msg{}, zx.Errorf("", "", ctx.Err())
		}
	}
}

func (c *Conn) control(frame []byte) {
	c.mu.Lock()
	if c.err == nil {
		c.ctrl = append(c.ctrl, frame)
	}
	c.mu.Unlock()
	c.kick()
}

// Send sends one message of type typ (proto.FDir, FData, FErr, FEvent,
// FDirs: only to a peer that offered proto.FeatureDirs),
// marked End if end is set. Messages longer than a frame are cut into
// frames; only FData may be. Send blocks while the peer gives no credit,
// until ctx is done. It takes ownership of p. It fails with ErrPeerEnded
// once the peer has ended the stream, and with the connection's error once
// the connection has failed.
func (s *Stream) Send(ctx context.Context, typ uint8, p []byte, end bool) error {
	return s.send(ctx, typ, p, end, false)
}

func (s *Stream) send(ctx context.Context, typ uint8, p []byte, end, held bool) error {
	if typ != proto.FData && len(p) > proto.MaxPayload {
		return zx.E(zx.ErrTooBig, "", "", "message longer than a frame")
	}
	c := s.c
	if !c.server && ctx.Err() != nil {
		// A request cancelled sends nothing more: in particular not the
		// end of a put's data, which would complete what was cancelled.
		return zx.Errorf("", "", ctx.Err())
	}
	var stall *time.Timer
	defer func() {
		if stall != nil {
			stall.Stop()
		}
	}()
	for {
		n := min(len(p), proto.MaxPayload)
		last := n == len(p)
		// Stream credit counts the message's bytes (what the receiver
		// holds); connection credit the bytes on the wire.
		payload, zstd := p[:n:n], false
		if proto.Compressible(typ) && n > 0 {
			payload, zstd = s.compress(typ, payload)
		}
		wire := len(payload)
		var stalled <-chan time.Time
		creditWait := false
		c.mu.Lock()
		for {
			if c.err != nil {
				c.mu.Unlock()
				return c.err
			}
			if s.sendEnded {
				c.mu.Unlock()
				return zx.E(zx.ErrProtocol, "", "", "send after the end of a stream")
			}
			if s.peerEnded {
				c.mu.Unlock()
				return ErrPeerEnded
			}
			var bufWake, budWake <-chan struct{}
			unwait := func() {}
			if n == 0 {
				break
			}
			if s.sendCredit >= int64(n) && c.sendCredit >= int64(wire) {
				if s.account(n, wire, held) {
					break
				}
				// Buffers full: wait for the writer (or others) to
				// release some.
				var d1, d2 func()
				bufWake, d1 = c.outBuf.waitChan()
				budWake, d2 = c.cfg.Budget.waitChan()
				unwait = func() { d1(); d2() }
				if s.account(n, wire, held) {
					unwait()
					break
				}
			}
			if s.sendCredit < int64(n) && !creditWait {
				// Once per frame: a wake-up by other credit is not
				// another round trip.
				creditWait = true
				c.streamStalls.Add(1)
			}
			wake := c.creditWake
			c.mu.Unlock()
			if stalled == nil && c.server && c.cfg.StallTimeout > 0 {
				if stall == nil {
					stall = time.NewTimer(c.cfg.StallTimeout)
				} else {
					stall.Reset(c.cfg.StallTimeout)
				}
				stalled = stall.C
			}
			t0 := time.Now()
			select {
			case <-wake:
			case <-bufWake:
			case <-budWake:
			case <-ctx.Done():
				unwait()
				return zx.Errorf("", "", ctx.Err())
			case <-stalled:
				unwait()
				err := zx.E(zx.ErrTimeout, "", "", fmt.Sprintf("the client took no reply data for %v; request abandoned", c.cfg.StallTimeout))
				s.Fail(err)
				return err
			}
			unwait()
			if typ == proto.FData {
				c.z.waited(time.Since(t0))
			}
			c.mu.Lock()
		}
		if stalled != nil {
			stall.Stop()
		}
		s.sendCredit -= int64(n)
		c.sendCredit -= int64(wire)
		h := proto.Header{Type: typ, Stream: s.id, Len: uint32(wire)}
		if zstd {
			h.Flags |= proto.FlagZstd
		}
		if last && end {
			h.Flags |= proto.FlagEnd
			s.sendEnded = true
		}
		s.outq = append(s.outq, outFrame{h: h, p: payload})
		if !s.queued {
			s.queued = true
			c.ready = append(c.ready, s)
		}
		c.mu.Unlock()
		c.kick()
		if typ == proto.FData && n > 0 {
			if c.z.account(n, time.Now()) {
				c.probe()
			}
		}
		if zstd {
			c.savedOut.Add(int64(n - wire))
		}
		p = p[n:]
		if last {
			return nil
		}
	}
}

// account counts a frame of n bytes, wire on the wire, in the
// connection's buffers, if it fits. With held, the bytes Hold counted
// cover it as far as they go. c.mu is held.
func (s *Stream) account(n, wire int, held bool) bool {
	c := s.c
	var cover int64
	if held && !s.released {
		cover = min(int64(n), s.holding)
	}
	need := int64(wire) - cover
	if need > 0 && !c.takeOut(int(need)) {
		return false
	}
	s.holding -= cover
	s.heldOut -= cover
	if need < 0 {
		c.releaseOut(int(-need))
	}
	return true
}

// CloseSend ends the sending side: it sends an empty FData marked End.
func (s *Stream) CloseSend(ctx context.Context) error {
	return s.Send(ctx, proto.FData, nil, true)
}

// sentEnd runs on the write loop once the End frame is written.
func (s *Stream) sentEnd() {
	c := s.c
	c.mu.Lock()
	s.endWritten = true
	if c.server {
		// The reply is complete: the stream is over.
		s.releasePreGrantLocked()
		s.endedLocked()
	}
	c.mu.Unlock()
	if c.server {
		// (A server may answer a put before it took all its data.)
		s.dropReceived(errReleased)
	}
}

// endedLocked removes a finished stream. c.mu is held.
func (s *Stream) endedLocked() {
	c := s.c
	if c.streams[s.id] == s {
		if c.server || s.sendEnded || s.peerEnded {
			delete(c.streams, s.id)
			c.busy()
			if s.hasSlot {
				s.hasSlot = false
				if c.slots != nil {
					select {
					case <-c.slots:
					default:
					}
				}
			}
			if s.stopCancel != nil {
				s.stopCancel()
			}
			if s.cancel != nil {
				s.cancel()
			}
		}
	}
}

// dropOutLocked discards frames not yet written. c.mu is held. Their
// connection credit comes back: the peer never receives those bytes, so
// it never returns credit for them, and a connection whose cancelled
// streams had frames queued would otherwise lose credit until no data
// frame fits (a get then hangs with both ends idle).
func (s *Stream) dropOutLocked() {
	c := s.c
	var back int64
	for _, f := range s.outq {
		c.releaseOut(len(f.p))
		back += int64(len(f.p))
	}
	s.outq = nil
	if back > 0 {
		c.sendCredit += back
		if c.err == nil { // fail closed it for good
			close(c.creditWake)
			c.creditWake = make(chan struct{})
		}
	}
	if s.queued {
		for i, r := range s.c.ready {
			if r == s {
				s.c.ready = append(s.c.ready[:i], s.c.ready[i+1:]...)
				break
			}
		}
		s.queued = false
	}
}

// abort ends the stream locally with err: queued frames are dropped and
// Recv returns err once the messages already received are read. It does
// not tell the peer.
func (s *Stream) abort(err error) {
	if s.c.server {
		s.dropReceived(err)
	} else {
		s.rmu.Lock()
		if s.rerr == nil && !s.recvEnded {
			s.rerr = err
		}
		rel := s.acct
		s.acct = 0
		s.rmu.Unlock()
		s.c.releaseIn(rel)
	}
	select {
	case s.rwake <- struct{}{}:
	default:
	}
	c := s.c
	c.mu.Lock()
	s.dropOutLocked()
	s.releasePreGrantLocked()
	s.peerEnded = true
	if s.counted {
		s.counted = false
		c.awaiting--
	}
	if c.streams[s.id] == s {
		delete(c.streams, s.id)
		c.busy()
	}
	if s.hasSlot {
		s.hasSlot = false
		if c.slots != nil {
			select {
			case <-c.slots:
			default:
			}
		}
	}
	if c.err == nil {
		close(c.creditWake)
		c.creditWake = make(chan struct{})
	}
	stop := s.stopCancel
	c.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	if stop != nil {
		stop()
	}
}

// dropReceived ends the receiving side of a server's stream with err:
// the request is over, and what it received and did not consume is of no
// more use. It is dropped and no longer counted (it would be held as long
// as the stream is referenced, by the queue of requests not yet served),
// and so is what arrives later.
func (s *Stream) dropReceived(err error) {
	s.rmu.Lock()
	if s.rerr == nil {
		s.rerr = err
	}
	clear(s.rq)
	s.rq, s.rhead, s.rbytes = nil, 0, 0
	rel := s.acct
	s.acct = 0
	s.rmu.Unlock()
	s.c.releaseIn(rel)
}

// Cancel abandons the stream and tells the peer to stop working on it.
// Recv returns err (kind ErrCanceled) unless the reply had already ended.
func (s *Stream) Cancel(err error) {
	s.cancelOnce.Do(func() {
		c := s.c
		c.mu.Lock()
		_, live := c.streams[s.id]
		ended := s.peerEnded && (s.sendEnded || c.server)
		c.mu.Unlock()
		if live && !ended {
			c.control(proto.AppendFrame(nil, proto.Header{Type: proto.FCancel, Stream: s.id}, nil))
		}
		if err == nil || zx.KindOf(err) != zx.ErrCanceled {
			err = zx.E(zx.ErrCanceled, "", "", "request cancelled")
		}
		s.abort(err)
	})
}

// Fail ends the stream with err as its last message, which needs no
// credit, so that a server can always tell the client why it gave up on a
// request (a limit, a stall); frames not yet written are dropped, and the
// stream is over on this side (Recv returns err, the context is done).
func (s *Stream) Fail(err error) {
	c := s.c
	c.mu.Lock()
	_, live := c.streams[s.id]
	ended := s.sendEnded
	if live && !ended {
		s.dropOutLocked()
		s.sendEnded = true
		c.ctrl = append(c.ctrl, proto.AppendFrame(nil, proto.Header{Type: proto.FErr, Flags: proto.FlagEnd, Stream: s.id}, proto.AppendError(nil, err)))
	}
	c.mu.Unlock()
	c.kick()
	s.abort(err)
}

// Received returns what the stream has received so far: the bytes of its
// data messages and the number of its entries (DIR messages, and the
// entries DIRS messages say they hold).
func (s *Stream) Received() (data, dirs int64) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return s.dataIn, s.dirsIn
}

// GotEnd reports whether the peer's last message (marked End) has arrived,
// whether or not it has been read.
func (s *Stream) GotEnd() bool {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return s.recvEnded
}

// Drain discards what is left of the reply, returning the first error
// message received, if any.
func (s *Stream) Drain(ctx context.Context) error {
	for {
		m, err := s.Recv(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if m.Type == proto.FErr {
			e, perr := proto.ParseError(m.Data)
			if perr != nil {
				return perr
			}
			s.Cancel(nil)
			return e
		}
	}
}

// RecvEnded reports whether the peer has ended its side and every message
// has been read.
func (s *Stream) RecvEnded() bool {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return s.recvEnded && s.rhead == len(s.rq)
}

// Conn returns the connection the stream is on.
func (s *Stream) Conn() *Conn { return s.c }
