// Package mux runs many streams over one connection: the transport under
// every zx request.
//
// A stream is one request: the client opens it with a request message, may
// send data after it (a put), and the server answers with a stream of
// messages (entries, data, errors, change notices) ending with one marked
// End. Any number of streams are in flight at once.
//
// # Scheduling
//
// One goroutine writes the connection. Control frames (requests, window
// updates, cancels, pings) go first; stream messages are cut into frames of
// at most proto.MaxPayload bytes and sent round-robin, one frame per stream
// with data ready, so a small reply is never queued behind a bulk transfer
// for more than one frame per active stream. The socket's unsent buffer is
// kept small (TCP_NOTSENT_LOWAT) so the kernel does not undo that order.
//
// # Flow control
//
// Each stream has a receive window, and so has the connection. A sender may
// send stream messages only while it holds credit for both; the receiver
// returns credit with window updates. Stream credit is returned as the
// application consumes messages, so a reader that stops reading stalls only
// its own stream, and the memory a stream may hold is bounded by its
// window. Connection credit is returned as frames are taken off the socket,
// so it bounds the bytes in flight on the link and never couples streams.
//
// Windows start at proto.InitialStreamWindow and proto.InitialConnWindow and
// grow automatically toward the bandwidth-delay product: when the receiver
// returns a half-window of credit less than two round trips after the
// previous update, the window was what limited the sender, so it doubles
// (up to Config.MaxStreamWindow or Config.MaxConnWindow). The round-trip
// time comes from pings, which also serve as keepalive.
//
// A receiver remembers the largest window a stream needed (the link's
// bandwidth-delay product as far as it has seen) and grants new streams
// that much credit with their request, within a per-connection allowance
// (Config.MaxPreGrant), so that a later large reply does not wait a round
// trip per doubling again.
//
// # Lifetime
//
// A stream ends when both sides have sent End, or when either cancels it.
// Frames for streams that have ended are dropped, since they may have been in
// flight when the stream ended. A connection error (a protocol violation, a
// dead peer, a closed socket) ends every stream with that error.
package mux

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/proto"
)

// Config tunes a connection. The zero value is usable: each zero field
// takes the default given beside it.
type Config struct {
	MaxStreamWindow int           // largest stream receive window (32 MiB; at most MaxBuffer/2)
	MaxConnWindow   int           // largest connection receive window (256 MiB)
	MaxStreams      int           // streams a server accepts at once (4096)
	KeepAlive       time.Duration // ping after this much silence (15s); < 0 disables
	Timeout         time.Duration // give up on a silent peer this long after a ping (20s)
	Features        []string      // features this side offers
	Compression     Compression   // zstd on DATA and DIRS frames (CompressAuto)
	Logger          *slog.Logger  // nil: discard

	// MaxBuffer bounds the bytes the connection buffers in each
	// direction (64 MiB): received messages the application has not
	// consumed, and messages queued and not yet written. A server fails a
	// stream whose data would exceed it with an error of kind
	// zx.ErrLimit; a sender waits for room.
	MaxBuffer int
	// Budget, if set, bounds the buffers of every connection sharing it
	// together (a server's memory), in the same way.
	Budget *Budget
	// StallTimeout: on a server, a stream whose reply cannot be sent for
	// this long (the client grants no credit, or buffers stay full) fails
	// with zx.ErrTimeout, releasing what the request holds (2m; < 0
	// disables). Clients never time out their own sends.
	StallTimeout time.Duration
	// WriteTimeout: a connection whose socket takes no data for this long
	// (the peer stopped reading) is closed (60s; < 0 disables).
	WriteTimeout time.Duration
	// IdleTimeout: a connection with no stream open for this long is
	// closed with a goaway of kind zx.ErrTimeout (0: never).
	IdleTimeout time.Duration
	// MaxPreGrant bounds the credit a receiver grants new streams ahead
	// of need, beyond proto.InitialStreamWindow, once it has learned the
	// link's bandwidth-delay product: all open streams together hold at
	// most this much, each at most a quarter of it (MaxBuffer/2; < 0
	// disables). See the package doc, Flow control.
	MaxPreGrant int
}

func (c Config) withDefaults() Config {
	if c.MaxStreamWindow <= 0 {
		c.MaxStreamWindow = 32 << 20
	}
	if c.MaxStreamWindow < proto.InitialStreamWindow {
		c.MaxStreamWindow = proto.InitialStreamWindow
	}
	if c.MaxConnWindow <= 0 {
		c.MaxConnWindow = 256 << 20
	}
	if c.MaxConnWindow < proto.InitialConnWindow {
		c.MaxConnWindow = proto.InitialConnWindow
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = 4096
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = 15 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 20 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.MaxBuffer <= 0 {
		c.MaxBuffer = 64 << 20
	}
	c.MaxBuffer = max(c.MaxBuffer, 2*proto.InitialStreamWindow)
	c.MaxStreamWindow = max(min(c.MaxStreamWindow, c.MaxBuffer/2), proto.InitialStreamWindow)
	if c.StallTimeout == 0 {
		c.StallTimeout = 2 * time.Minute
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = time.Minute
	}
	if c.MaxPreGrant == 0 {
		c.MaxPreGrant = c.MaxBuffer / 2
	}
	return c
}

// Msg is one stream message.
type Msg struct {
	Type uint8  // proto.FDir, FData, FErr, FEvent or FDirs
	Data []byte // payload, owned by the receiver
	End  bool   // the last message of the stream
}

// Stats counts a connection's traffic.
type Stats struct {
	BytesIn, BytesOut int64 // on the socket, frame headers included
	Streams           int64 // streams opened (client) or accepted (server)
	RoundTrips        int64 // see Conn.Stats
	// Bytes of DATA and DIRS that zstd kept off the wire, sent and
	// received (payload bytes before compression minus after).
	SavedOut, SavedIn int64
}

// Conn is one end of a multiplexed connection.
type Conn struct {
	cfg    Config
	nc     net.Conn
	server bool
	log    *slog.Logger
	dirsOK bool // this side offers proto.FeatureDirs: it accepts DIRS frames

	mu         sync.Mutex // guards everything below, and each Stream's send side
	streams    map[uint32]*Stream
	nextID     uint32
	ctrl       [][]byte  // encoded control frames, sent first
	ready      []*Stream // streams with frames to send, round-robin
	sendCredit int64     // connection send credit
	creditWake chan struct{}
	peerHello  *proto.Hello
	helloWait  chan struct{}
	goaway     []byte // a goaway frame, written after everything queued before it
	goawayErr  error  // the error it carries
	pings      map[uint64]chan struct{}
	pingSeq    uint64
	rtts       [8]time.Duration
	nrtt       int
	minRTT     time.Duration // least RTT measured: the link's without queues
	probeSeq   uint64        // the ping last sent to measure queues
	awaiting   int           // counted client streams that have not had a reply yet
	slots      chan struct{}
	ctrlDrain  chan struct{} // closed when the writer takes the control queue

	// Buffered bytes (Config.MaxBuffer), each direction.
	inBuf, outBuf *Budget

	recvWin      int // connection receive window
	recvConsumed int // bytes received since the last connection window update
	lastConnUpd  time.Time

	// Credit granted ahead of need. learned is the largest window a
	// stream's growth showed the link needs (a window grows only when it
	// limited the sender); pregranted is the credit beyond the initial
	// window that open streams got at their start (guarded by mu).
	learned    atomic.Int64
	pregranted int

	// Times a sender waited for stream credit: the round trips flow
	// control cost (tests count them).
	streamStalls atomic.Int64

	wake     chan struct{} // wakes the writer
	accept   chan *Stream
	done     chan struct{}
	err      error
	closeOne sync.Once
	lastRecv atomic.Int64 // unix nanoseconds
	lastBusy atomic.Int64 // unix nanoseconds: a stream opened or ended
	wg       sync.WaitGroup

	bytesIn, bytesOut, nstreams, rounds atomic.Int64

	z                         compressor
	ztries, savedOut, savedIn atomic.Int64
	encoderHeld               atomic.Bool // encoderCost is counted in the Budget (guarded by mu)
}

// Client starts the client end of a connection over nc. It sends its hello
// and returns without waiting for the server's: requests may follow at once.
func Client(nc net.Conn, cfg Config) *Conn { return newConn(nc, cfg, false) }

// Server starts the server end of a connection over nc.
func Server(nc net.Conn, cfg Config) *Conn { return newConn(nc, cfg, true) }

func newConn(nc net.Conn, cfg Config, server bool) *Conn {
	cfg = cfg.withDefaults()
	c := &Conn{
		cfg:         cfg,
		nc:          nc,
		server:      server,
		log:         cfg.Logger,
		streams:     make(map[uint32]*Stream),
		nextID:      1,
		sendCredit:  proto.InitialConnWindow,
		creditWake:  make(chan struct{}),
		helloWait:   make(chan struct{}),
		pings:       make(map[uint64]chan struct{}),
		recvWin:     proto.InitialConnWindow,
		lastConnUpd: time.Now(),
		wake:        make(chan struct{}, 1),
		accept:      make(chan *Stream, cfg.MaxStreams),
		done:        make(chan struct{}),
		ctrlDrain:   make(chan struct{}),
		inBuf:       NewBudget(int64(cfg.MaxBuffer)),
		outBuf:      NewBudget(int64(cfg.MaxBuffer)),
	}
	c.z.mode = cfg.Compression
	c.dirsOK = slices.Contains(cfg.Features, proto.FeatureDirs)
	c.lastRecv.Store(time.Now().UnixNano())
	c.busy()
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		if raw, err := tc.SyscallConn(); err == nil {
			raw.Control(func(fd uintptr) {
				unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, 256<<10)
			})
		}
	}
	h := &proto.Hello{Version: proto.Version, Features: cfg.Compression.features(cfg.Features)}
	if server {
		h.MaxStreams = uint64(cfg.MaxStreams)
	}
	c.ctrl = append(c.ctrl, proto.AppendFrame(nil, proto.Header{Type: proto.FHello}, proto.AppendHello(nil, h)))
	// An early ping gives the RTT that window growth needs, on both
	// sides: the server grows the windows of uploads.
	c.pingSeq++
	c.pings[c.pingSeq] = make(chan struct{})
	c.ctrl = append(c.ctrl, pingFrame(c.pingSeq, time.Now(), false))
	c.wg.Add(3)
	go c.readLoop()
	go c.writeLoop()
	go c.keepAlive()
	c.kick()
	return c
}

func pingFrame(seq uint64, t time.Time, ack bool) []byte {
	var p [16]byte
	putUint64(p[:8], seq)
	putUint64(p[8:], uint64(t.UnixNano()))
	var fl uint8
	if ack {
		fl = proto.FlagAck
	}
	return proto.AppendFrame(nil, proto.Header{Type: proto.FPing, Flags: fl}, p[:])
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (8 * i))
	}
}

func getUint64(b []byte) uint64 {
	var v uint64
	for i := range 8 {
		v |= uint64(b[i]) << (8 * i)
	}
	return v
}

// busy notes stream activity, for IdleTimeout.
func (c *Conn) busy() { c.lastBusy.Store(time.Now().UnixNano()) }

// kick wakes the writer.
func (c *Conn) kick() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// takeIn accounts n received bytes, or returns the limit they would exceed.
func (c *Conn) takeIn(n int) error {
	if !c.inBuf.tryTake(int64(n)) {
		return zx.E(zx.ErrLimit, "", "", fmt.Sprintf("connection buffer full (%d bytes; raise the server's --max-conn-buffer)", c.cfg.MaxBuffer))
	}
	if !c.cfg.Budget.tryTake(int64(n)) {
		c.inBuf.release(int64(n))
		return zx.E(zx.ErrLimit, "", "", fmt.Sprintf("server buffers full (%d bytes for all connections; raise the server's --max-memory)", c.cfg.Budget.Limit()))
	}
	return nil
}

// takeWorkIn accounts n bytes of a request's work on data it received
// (a put's buffers), if they fit below the receive reserves.
func (c *Conn) takeWorkIn(n int) bool {
	if !c.inBuf.tryWait(int64(n)) {
		return false
	}
	if !c.cfg.Budget.tryWait(int64(n)) {
		c.inBuf.release(int64(n))
		return false
	}
	return true
}

func (c *Conn) releaseIn(n int) {
	c.inBuf.release(int64(n))
	c.cfg.Budget.release(int64(n))
}

// takeOut accounts n bytes queued to send or held for a request's
// reply, if they fit; it is for those who can wait for room.
func (c *Conn) takeOut(n int) bool {
	if !c.outBuf.tryTake(int64(n)) {
		return false
	}
	if !c.cfg.Budget.tryWait(int64(n)) {
		c.outBuf.release(int64(n))
		return false
	}
	return true
}

func (c *Conn) releaseOut(n int) {
	c.outBuf.release(int64(n))
	c.cfg.Budget.release(int64(n))
}

// Buffered returns the bytes the connection holds in buffers now: received
// and not consumed, queued and not written.
func (c *Conn) Buffered() (in, out int64) { return c.inBuf.Used(), c.outBuf.Used() }

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection ended, or nil while it is up.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection and every stream on it.
func (c *Conn) Close() error {
	c.fail(zx.E(zx.ErrIO, "", "", "connection closed"))
	c.wg.Wait()
	return nil
}

// fail ends the connection with err.
func (c *Conn) fail(err error) {
	c.closeOne.Do(func() {
		c.mu.Lock()
		c.err = err
		streams := c.streams
		c.streams = map[uint32]*Stream{}
		close(c.creditWake)
		for _, ch := range c.pings {
			close(ch)
		}
		c.pings = nil
		c.mu.Unlock()
		for _, s := range streams {
			s.abort(err)
		}
		c.mu.Lock()
		if c.encoderHeld.Load() {
			c.cfg.Budget.Release(encoderCost)
		}
		c.mu.Unlock()
		// Done only once every stream has let go of its buffers.
		close(c.done)
		c.nc.Close()
		c.log.Debug("connection closed", "remote", c.nc.RemoteAddr(), "err", err)
	})
}

// Goaway tells the peer this side is closing, with err as the reason, and
// closes the connection once the frame is written (or after a second).
func (c *Conn) Goaway(err error) {
	c.mu.Lock()
	if c.err == nil && c.goaway == nil {
		c.goaway = proto.AppendFrame(nil, proto.Header{Type: proto.FGoaway}, proto.AppendError(nil, err))
		c.goawayErr = err
	}
	c.mu.Unlock()
	c.kick()
	select {
	case <-c.done:
	case <-time.After(time.Second):
		c.fail(err)
	}
}

// PeerHello waits for the peer's hello.
func (c *Conn) PeerHello(ctx context.Context) (*proto.Hello, error) {
	select {
	case <-c.helloWait:
		return c.peerHello, nil
	case <-c.done:
		return nil, c.err
	case <-ctx.Done():
		return nil, zx.Errorf("hello", "", ctx.Err())
	}
}

// RTT returns the round-trip time measured by pings: the least of the last
// few, which is the link's and not its queues'. It is 0 before the first.
func (c *Conn) RTT() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rttLocked()
}

func (c *Conn) rttLocked() time.Duration {
	n := min(c.nrtt, len(c.rtts))
	var m time.Duration
	for i := range n {
		if m == 0 || c.rtts[i] < m {
			m = c.rtts[i]
		}
	}
	return m
}

// Ping measures one round trip.
func (c *Conn) Ping(ctx context.Context) (time.Duration, error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return 0, c.err
	}
	c.pingSeq++
	seq := c.pingSeq
	ch := make(chan struct{})
	c.pings[seq] = ch
	t0 := time.Now()
	c.ctrl = append(c.ctrl, pingFrame(seq, t0, false))
	c.mu.Unlock()
	c.kick()
	select {
	case <-ch:
		if err := c.Err(); err != nil {
			return 0, err
		}
		return time.Since(t0), nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pings, seq)
		c.mu.Unlock()
		return 0, zx.Errorf("ping", "", ctx.Err())
	}
}

// Stats returns the connection's counters. RoundTrips, on a client, counts
// the requests opened while no other counted request was waiting for its
// first reply: the round trips a program had to wait for, one per set of
// overlapping requests. It is deterministic for a given program and
// independent of bandwidth.
func (c *Conn) Stats() Stats {
	return Stats{
		BytesIn:    c.bytesIn.Load(),
		BytesOut:   c.bytesOut.Load(),
		Streams:    c.nstreams.Load(),
		RoundTrips: c.rounds.Load(),
		SavedOut:   c.savedOut.Load(),
		SavedIn:    c.savedIn.Load(),
	}
}

// LocalAddr and RemoteAddr return the socket's addresses.
func (c *Conn) LocalAddr() net.Addr  { return c.nc.LocalAddr() }
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// queuedCost is what a request waiting for the server to take it costs
// beside its message: its Stream (measured: about 300 bytes with its
// context and channel) and its place in the maps and queues.
const queuedCost = 512

// Accept returns the next request stream, in the order the client opened
// them. It fails when the connection ends.
func (c *Conn) Accept() (*Stream, error) {
	select {
	case s := <-c.accept:
		c.releaseIn(len(s.req) + queuedCost)
		return s, nil
	case <-c.done:
		// Streams queued before the end are still handed out, so that
		// their requests are answered with the connection's error.
		select {
		case s := <-c.accept:
			c.releaseIn(len(s.req) + queuedCost)
			return s, nil
		default:
		}
		return nil, c.err
	}
}

// OpenFlags modify Open.
type OpenFlags int

const (
	// WithData says request data follows; the stream stays open for Send
	// until Send with end.
	WithData OpenFlags = 1 << iota
	// Uncounted keeps a request out of the round-trip count: long-lived
	// requests such as watches.
	Uncounted
)

// Open opens a stream with the request message req. It returns once the
// request is queued. Cancelling ctx cancels the stream.
func (c *Conn) Open(ctx context.Context, req []byte, flags OpenFlags) (*Stream, error) {
	if len(req) > proto.MaxPayload {
		return nil, zx.E(zx.ErrTooBig, "", "", "request message too long")
	}
	if err := c.takeSlot(ctx); err != nil {
		return nil, err
	}
	s := newStream(c, 0)
	s.hasSlot = true
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		c.releaseSlot()
		return nil, c.err
	}
	if c.goaway != nil {
		c.mu.Unlock()
		c.releaseSlot()
		return nil, zx.E(zx.ErrIO, "", "", "connection is closing")
	}
	s.id = c.nextID
	c.nextID++
	c.streams[s.id] = s
	h := proto.Header{Type: proto.FReq, Stream: s.id}
	if flags&WithData == 0 {
		h.Flags = proto.FlagEnd
		s.sendEnded = true
	}
	if flags&Uncounted == 0 {
		s.counted = true
		if c.awaiting == 0 {
			c.rounds.Add(1)
		}
		c.awaiting++
	}
	c.ctrl = append(c.ctrl, proto.AppendFrame(nil, h, req))
	if flags&(WithData|Uncounted) != 0 {
		// A put's reply is small, a watch's long-lived: neither should
		// hold the allowance.
	} else if inc := c.preGrantLocked(s); inc > 0 {
		// Right behind the request: the server may send the whole
		// window of the reply in its first round trip.
		c.ctrl = append(c.ctrl, proto.AppendFrame(nil, proto.Header{Type: proto.FWindow, Stream: s.id}, proto.AppendWindow(nil, uint32(inc))))
	}
	if ctx.Done() != nil {
		// The function runs in its own goroutine, so setting it up under
		// c.mu cannot deadlock; stopCancel is read under c.mu.
		s.stopCancel = context.AfterFunc(ctx, func() { s.Cancel(zx.Errorf("", "", ctx.Err())) })
	}
	c.mu.Unlock()
	c.busy()
	c.nstreams.Add(1)
	c.kick()
	return s, nil
}

// preHelloStreams is how many streams a client may open before it knows
// the server's limit: every server accepts at least that many.
const preHelloStreams = 64

// takeSlot waits until the server accepts one more stream.
func (c *Conn) takeSlot(ctx context.Context) error {
	for {
		c.mu.Lock()
		slots := c.slots
		hello := c.peerHello != nil
		if !hello && len(c.streams) < preHelloStreams {
			c.mu.Unlock()
			return nil
		}
		c.mu.Unlock()
		if hello && slots == nil {
			return nil // the server states no limit
		}
		if slots == nil {
			select {
			case <-c.helloWait:
				continue
			case <-ctx.Done():
				return zx.Errorf("", "", ctx.Err())
			case <-c.done:
				return c.err
			}
		}
		select {
		case slots <- struct{}{}:
			return nil
		case <-ctx.Done():
			return zx.Errorf("", "", ctx.Err())
		case <-c.done:
			return c.err
		}
	}
}

func (c *Conn) releaseSlot() {
	c.mu.Lock()
	slots := c.slots
	c.mu.Unlock()
	if slots != nil {
		select {
		case <-slots:
		default:
		}
	}
}

var errPeerEnded = errors.New("peer ended the stream")

// ErrPeerEnded is returned by Send when the peer has ended the stream (a
// server that answered a put before taking all its data).
var ErrPeerEnded = errPeerEnded

func (c *Conn) protocolError(err error) {
	c.log.Warn("protocol error", "remote", c.nc.RemoteAddr(), "err", err)
	c.mu.Lock()
	if c.err == nil && c.goaway == nil {
		c.goaway = proto.AppendFrame(nil, proto.Header{Type: proto.FGoaway}, proto.AppendError(nil, err))
	}
	c.mu.Unlock()
	c.kick()
	// Give the writer a moment to tell the peer why.
	go func() {
		select {
		case <-c.done:
		case <-time.After(500 * time.Millisecond):
		}
		c.fail(err)
	}()
}

func (c *Conn) readLoop() {
	defer c.wg.Done()
	defer c.z.codec.Close()
	br := bufio.NewReaderSize(c.nc, 256<<10)
	var hdr [proto.HeaderSize]byte
	first := true
	for {
		h, p, err := proto.ReadFrame(br, hdr[:])
		if err != nil {
			if zx.KindOf(err) == zx.ErrProtocol || zx.KindOf(err) == zx.ErrTooBig {
				c.protocolError(err)
				// Keep the socket open for the goaway, but stop reading.
				<-c.done
				return
			}
			if errors.Is(err, io.EOF) {
				err = zx.E(zx.ErrIO, "", "", "connection closed by peer")
			} else if errors.Is(err, io.ErrUnexpectedEOF) {
				err = zx.E(zx.ErrIO, "", "", "connection closed by peer in the middle of a frame")
			} else if c.Err() == nil {
				err = zx.E(zx.ErrIO, "", "", err.Error())
			}
			c.fail(err)
			return
		}
		c.bytesIn.Add(int64(proto.HeaderSize + len(p)))
		c.lastRecv.Store(time.Now().UnixNano())
		if first {
			if h.Type != proto.FHello {
				c.protocolError(zx.E(zx.ErrProtocol, "", "", "first frame is not a hello"))
				<-c.done
				return
			}
			first = false
		}
		if err := c.handle(h, p); err != nil {
			c.protocolError(err)
			<-c.done
			return
		}
		c.waitCtrl()
	}
}

// maxCtrl is how many control frames may wait for the writer before the
// reader stops reading: a peer that floods pings or requests while not
// reading its replies meets TCP backpressure, not unbounded queues.
const maxCtrl = 4096

// waitCtrl waits while the control queue is too long.
func (c *Conn) waitCtrl() {
	for {
		c.mu.Lock()
		n, drained := len(c.ctrl), c.ctrlDrain
		c.mu.Unlock()
		if n < maxCtrl {
			return
		}
		select {
		case <-drained:
		case <-c.done:
			return
		}
	}
}

func (c *Conn) handle(h proto.Header, p []byte) error {
	switch h.Type {
	case proto.FHello:
		return c.handleHello(p)
	case proto.FReq:
		if !c.server {
			return zx.E(zx.ErrProtocol, "", "", "request sent to a client")
		}
		c.handleReq(h, p)
	case proto.FDir, proto.FData, proto.FErr, proto.FEvent:
		return c.handleMsg(h, p)
	case proto.FDirs:
		if !c.dirsOK {
			return zx.E(zx.ErrProtocol, "", "", "DIRS frame, but this side did not offer the dirs feature")
		}
		return c.handleMsg(h, p)
	case proto.FWindow:
		inc, err := proto.ParseWindow(p)
		if err != nil {
			return err
		}
		c.handleWindow(h.Stream, int64(inc))
	case proto.FCancel:
		c.mu.Lock()
		s := c.streams[h.Stream]
		c.mu.Unlock()
		if s != nil {
			s.abort(zx.E(zx.ErrCanceled, "", "", "cancelled by peer"))
		}
	case proto.FPing:
		if len(p) != 16 {
			return zx.E(zx.ErrProtocol, "", "", "bad ping")
		}
		c.handlePing(h, p)
	case proto.FGoaway:
		e, err := proto.ParseError(p)
		if err != nil {
			return err
		}
		c.fail(e)
	}
	return nil
}

func (c *Conn) handleHello(p []byte) error {
	h, err := proto.ParseHello(p)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.peerHello != nil {
		return zx.E(zx.ErrProtocol, "", "", "second hello")
	}
	if h.Version < 1 {
		return zx.E(zx.ErrProtocol, "", "", fmt.Sprintf("peer speaks protocol version %d, this side %d", h.Version, proto.Version))
	}
	c.peerHello = h
	c.z.peerHello(h)
	if !c.server && h.MaxStreams > 0 {
		c.slots = make(chan struct{}, h.MaxStreams)
		// Streams opened before the hello take their slots now.
		for _, s := range c.streams {
			if s.hasSlot {
				select {
				case c.slots <- struct{}{}:
				default:
				}
			}
		}
	}
	close(c.helloWait)
	return nil
}

func (c *Conn) handleReq(h proto.Header, p []byte) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	if h.Stream == 0 {
		c.mu.Unlock()
		c.protocolError(zx.E(zx.ErrProtocol, "", "", "request on stream 0, which is the connection's: requests use streams 1 and up"))
		return
	}
	if _, dup := c.streams[h.Stream]; dup {
		c.mu.Unlock()
		c.protocolError(zx.E(zx.ErrProtocol, "", "", fmt.Sprintf("stream %d opened twice", h.Stream)))
		return
	}
	var refuse error
	switch {
	case c.goaway != nil && zx.KindOf(c.goawayErr) == zx.ErrLimit:
		refuse = c.goawayErr
	case c.goaway != nil:
		refuse = zx.E(zx.ErrLimit, "", "", "server is shutting down")
	case len(c.streams) >= c.cfg.MaxStreams || len(c.accept) == cap(c.accept):
		// (Streams that ended while they waited for the server to
		// take them are still queued: the queue has a bound too.)
		refuse = zx.E(zx.ErrLimit, "", "", fmt.Sprintf("too many streams at once (limit %d)", c.cfg.MaxStreams))
	default:
		// The request message is held until the server takes it.
		refuse = c.takeIn(len(p) + queuedCost)
	}
	if refuse != nil {
		// Refuse the stream right away; the client never sees it open.
		e := refuse
		c.ctrl = append(c.ctrl, proto.AppendFrame(nil, proto.Header{Type: proto.FErr, Flags: proto.FlagEnd, Stream: h.Stream}, proto.AppendError(nil, e)))
		c.mu.Unlock()
		c.kick()
		return
	}
	s := newStream(c, h.Stream)
	s.req = p
	if h.Flags&proto.FlagEnd != 0 {
		s.recvEnded = true
	} else {
		s.inbound = true
		if inc := c.preGrantLocked(s); inc > 0 {
			// A put: its data may come at the link's rate at once.
			c.ctrl = append(c.ctrl, proto.AppendFrame(nil, proto.Header{Type: proto.FWindow, Stream: s.id}, proto.AppendWindow(nil, uint32(inc))))
			c.kick()
		}
	}
	c.streams[h.Stream] = s
	c.mu.Unlock()
	c.busy()
	c.nstreams.Add(1)
	c.accept <- s // never blocks: this loop is its only sender, and there is room
}

func (c *Conn) handleMsg(h proto.Header, p []byte) error {
	n := len(p)
	c.mu.Lock()
	s := c.streams[h.Stream]
	// Connection credit returns as frames come off the socket.
	c.recvConsumed += n
	if c.recvConsumed >= c.recvWin/2 {
		inc := c.recvConsumed
		now := time.Now()
		if rtt := c.rttLocked(); rtt > 0 && now.Sub(c.lastConnUpd) < 2*rtt && c.recvWin < c.cfg.MaxConnWindow {
			grow := min(c.recvWin, c.cfg.MaxConnWindow-c.recvWin)
			c.recvWin += grow
			inc += grow
		}
		c.lastConnUpd = now
		c.recvConsumed = 0
		c.ctrl = append(c.ctrl, proto.AppendFrame(nil, proto.Header{Type: proto.FWindow}, proto.AppendWindow(nil, uint32(inc))))
		c.kick()
	}
	c.mu.Unlock()
	if s == nil {
		return nil // a stream that has ended: the frame was in flight
	}
	if h.Flags&proto.FlagZstd != 0 {
		if c.cfg.Compression == CompressOff {
			return zx.E(zx.ErrProtocol, "", "", "compressed frame, but this side did not offer zstd")
		}
		d, err := c.z.codec.Decompress(p)
		if err != nil {
			return err
		}
		c.savedIn.Add(int64(len(d) - len(p)))
		p = d
	}
	return s.deliver(Msg{Type: h.Type, Data: p, End: h.Flags&proto.FlagEnd != 0})
}

// minPreGrant is the least credit worth granting ahead of need.
const minPreGrant = 64 << 10

// preGrantLocked gives a new stream s, before anyone else sees it, the
// credit the link has shown it needs, beyond the initial window, and
// returns that increment (0: none), which the caller sends in a window
// update right after the request. Without it a stream that brings more
// than the initial window waits a round trip per doubling of its window,
// every time.
//
// The grant is the window the link's streams needed (learned), bounded
// by the largest stream window, a quarter of Config.MaxPreGrant, the
// connection window, and what is left of MaxPreGrant for all open
// streams together: many small requests at once do not each get a large
// window, and the memory pre-grants let the peer fill is bounded. A
// server grants nothing while its shared Budget is over half full, not
// counting what the connections themselves cost. c.mu is held.
func (c *Conn) preGrantLocked(s *Stream) int {
	if c.cfg.MaxPreGrant <= 0 {
		return 0
	}
	win := min(int(c.learned.Load()), c.cfg.MaxStreamWindow, c.cfg.MaxPreGrant/4, c.recvWin)
	extra := min(win-proto.InitialStreamWindow, c.cfg.MaxPreGrant-c.pregranted)
	if extra < minPreGrant {
		return 0
	}
	if b := c.cfg.Budget; b != nil && b.Limit() > 0 && b.Used()-b.fixed.Load()+int64(extra) > (b.Limit()-b.fixed.Load())/2 {
		return 0
	}
	c.pregranted += extra
	s.pregrant = extra
	s.recvWin += extra
	return extra
}

// learn notes that a stream's window had to grow to win.
func (c *Conn) learn(win int) {
	for {
		l := c.learned.Load()
		if int64(win) <= l || c.learned.CompareAndSwap(l, int64(win)) {
			return
		}
	}
}

// releasePreGrantLocked returns s's pre-granted credit to the
// connection's allowance: s will receive no more. c.mu is held.
func (s *Stream) releasePreGrantLocked() {
	s.c.pregranted -= s.pregrant
	s.pregrant = 0
}

func (c *Conn) handleWindow(id uint32, inc int64) {
	c.mu.Lock()
	if id == 0 {
		c.sendCredit += inc
	} else if s := c.streams[id]; s != nil {
		s.sendCredit += inc
	}
	if c.err == nil { // fail closed it for good
		close(c.creditWake)
		c.creditWake = make(chan struct{})
	}
	c.mu.Unlock()
}

func (c *Conn) handlePing(h proto.Header, p []byte) {
	if h.Flags&proto.FlagAck == 0 {
		c.mu.Lock()
		c.ctrl = append(c.ctrl, proto.AppendFrame(nil, proto.Header{Type: proto.FPing, Flags: proto.FlagAck}, p))
		c.mu.Unlock()
		c.kick()
		return
	}
	seq := getUint64(p[:8])
	sent := time.Unix(0, int64(getUint64(p[8:])))
	c.mu.Lock()
	if ch, ok := c.pings[seq]; ok {
		rtt := time.Since(sent)
		if rtt > 0 {
			c.rtts[c.nrtt%len(c.rtts)] = rtt
			c.nrtt++
			if c.minRTT == 0 || rtt < c.minRTT {
				c.minRTT = rtt
			}
		}
		delete(c.pings, seq)
		close(ch)
	}
	c.mu.Unlock()
}

// keepAlive pings a silent peer and ends the connection when it stays
// silent.
func (c *Conn) keepAlive() {
	defer c.wg.Done()
	pings := c.cfg.KeepAlive > 0
	if !pings && c.cfg.IdleTimeout <= 0 {
		<-c.done
		return
	}
	every := c.cfg.IdleTimeout
	if pings {
		every = min(c.cfg.KeepAlive, c.cfg.Timeout)
		if c.cfg.IdleTimeout > 0 {
			every = min(every, c.cfg.IdleTimeout)
		}
	}
	tick := time.NewTicker(every / 2)
	defer tick.Stop()
	var pinged time.Time
	for {
		select {
		case <-c.done:
			return
		case now := <-tick.C:
			if c.cfg.IdleTimeout > 0 {
				c.mu.Lock()
				open := len(c.streams) > 0 || len(c.accept) > 0
				c.mu.Unlock()
				if open {
					c.busy()
				} else if idle := now.Sub(time.Unix(0, c.lastBusy.Load())); idle >= c.cfg.IdleTimeout {
					c.log.Info("closing idle connection", "remote", c.nc.RemoteAddr(), "idle", idle)
					go c.Goaway(zx.E(zx.ErrTimeout, "", "", fmt.Sprintf("connection idle for %v; closed by the server", c.cfg.IdleTimeout)))
					<-c.done
					return
				}
			}
			if !pings {
				continue
			}
			silent := now.Sub(time.Unix(0, c.lastRecv.Load()))
			if silent < c.cfg.KeepAlive {
				pinged = time.Time{}
				continue
			}
			if pinged.IsZero() {
				pinged = now
				c.mu.Lock()
				c.pingSeq++
				c.pings[c.pingSeq] = make(chan struct{})
				c.ctrl = append(c.ctrl, pingFrame(c.pingSeq, now, false))
				c.mu.Unlock()
				c.kick()
				continue
			}
			if now.Sub(pinged) > c.cfg.Timeout {
				c.fail(zx.E(zx.ErrTimeout, "", "", fmt.Sprintf("peer silent for %v", silent.Round(time.Second))))
				return
			}
		}
	}
}

func (c *Conn) writeLoop() {
	defer c.wg.Done()
	bw := bufio.NewWriterSize(c.nc, 256<<10)
	var hb [proto.HeaderSize]byte
	for {
		c.mu.Lock()
		ctrl := c.ctrl
		c.ctrl = nil
		if len(ctrl) >= maxCtrl {
			close(c.ctrlDrain)
			c.ctrlDrain = make(chan struct{})
		}
		var f outFrame
		var fs *Stream
		if len(ctrl) == 0 && len(c.ready) > 0 {
			fs = c.ready[0]
			f = fs.outq[0]
			fs.outq[0] = outFrame{}
			fs.outq = fs.outq[1:]
			c.ready = c.ready[1:]
			if len(fs.outq) > 0 {
				c.ready = append(c.ready, fs)
			} else {
				fs.queued = false
			}
		}
		var goaway []byte
		if len(ctrl) == 0 && fs == nil {
			goaway = c.goaway
		}
		c.mu.Unlock()

		if c.cfg.WriteTimeout > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(c.cfg.WriteTimeout))
		}
		var err error
		for _, b := range ctrl {
			_, err = bw.Write(b)
			c.bytesOut.Add(int64(len(b)))
		}
		if fs != nil && err == nil {
			proto.PutHeader(hb[:], f.h)
			_, err = bw.Write(hb[:])
			if err == nil {
				_, err = bw.Write(f.p)
			}
			c.bytesOut.Add(int64(proto.HeaderSize + len(f.p)))
			c.releaseOut(len(f.p))
			if f.h.Flags&proto.FlagEnd != 0 {
				fs.sentEnd()
			}
		}
		if err != nil {
			c.fail(c.writeErr(err))
			return
		}
		if len(ctrl) > 0 || fs != nil {
			continue
		}
		if err := bw.Flush(); err != nil {
			c.fail(c.writeErr(err))
			return
		}
		if goaway != nil {
			// Everything queued before the goaway is written: now it.
			_, err := c.nc.Write(goaway)
			c.bytesOut.Add(int64(len(goaway)))
			if err != nil {
				c.fail(zx.E(zx.ErrIO, "", "", err.Error()))
				return
			}
			if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
				tc.CloseWrite()
			}
			select {
			case <-c.done:
			case <-time.After(time.Second):
			}
			c.fail(zx.E(zx.ErrIO, "", "", "connection closed"))
			return
		}
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
	}
}

// writeErr describes a failed write.
func (c *Conn) writeErr(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return zx.E(zx.ErrTimeout, "", "", fmt.Sprintf("peer took no data for %v", c.cfg.WriteTimeout))
	}
	return zx.E(zx.ErrIO, "", "", err.Error())
}
