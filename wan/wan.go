package wan

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes the emulated link. The zero Config forwards without delay
// or rate limit.
type Config struct {
	RTT  time.Duration // added round-trip time: half is added in each direction
	Rate int64         // bytes per second in each direction; 0 = unlimited

	// Queue bounds the bytes held per direction (in flight + waiting), as a
	// router's buffer does. 0 means a default: with Rate,
	// RTT/2*Rate + max(256KiB, RTT/2*Rate/2), that is one bandwidth-delay
	// product plus slack; without Rate, 64 MiB.
	Queue int64

	// CutAfter, if positive, cuts each connection once that many bytes have
	// been forwarded in either direction (counted per direction): exactly
	// CutAfter bytes are delivered in that direction, then both sides are
	// closed abruptly with an RST (SO_LINGER 0), as when a link dies.
	CutAfter int64

	// CutRandom, if positive, cuts each connection after a random number
	// of bytes in [1, CutRandom], drawn per connection (and per direction)
	// from Seed, as CutAfter does with a fixed number. With both set, the
	// smaller limit wins.
	CutRandom int64

	// CutWithin, if positive, cuts each connection abruptly (RST) at a
	// random time in [0, CutWithin) after it was accepted, drawn per
	// connection from Seed, whatever it is doing.
	CutWithin time.Duration

	// Seed seeds the random draws of CutRandom and CutWithin: a proxy with
	// the same Seed cuts its n-th connection at the same point.
	Seed uint64

	// StallAfter and StallFor stall each connection, both directions,
	// once it has been open for StallAfter: nothing is forwarded for
	// StallFor, or for ever if StallFor is 0 (a half-open link: both ends
	// keep their sockets, nothing arrives). Data is queued as with
	// Proxy.Stall. StallAfter 0 with StallFor 0 means no stall.
	StallAfter time.Duration
	StallFor   time.Duration
}

// stalls reports whether c asks for a per-connection stall.
func (c *Config) stalls() bool { return c.StallAfter > 0 || c.StallFor > 0 }

// queueLimit returns the effective queue bound of c.
func (c *Config) queueLimit() int64 {
	if c.Queue > 0 {
		return c.Queue
	}
	if c.Rate <= 0 {
		return 64 << 20
	}
	bdp := int64(float64(c.Rate) * (c.RTT / 2).Seconds())
	return bdp + max(256<<10, bdp/2)
}

// chunkSize returns the largest chunk the reader takes at once: 64 KiB, or
// about a millisecond of traffic when pacing (but at least one MTU-sized
// packet), so that pacing is smooth rather than bursty.
func (c *Config) chunkSize() int {
	if c.Rate <= 0 {
		return maxChunk
	}
	return int(min(max(c.Rate/1000, 1500), maxChunk))
}

// maxPaceBatch bounds Config.paceBatch.
const maxPaceBatch = 4 * time.Millisecond

// paceBatch returns how late the writer may release a paced chunk that has
// more queued behind it, so that a wake-up releases a batch of chunks in
// one write rather than one chunk every millisecond: 4 ms (a wake-up
// costs about as much as the write, and this more than halves the CPU of
// a paced transfer), or less where that much traffic would take more than
// an eighth of the queue, which must also absorb late wake-ups. Only the
// schedule sets the rate, so a batch late by this much does not lower it;
// the last chunk of a burst, with nothing queued behind it, is not held
// (though it may go out with its predecessor, up to a batch late).
func (c *Config) paceBatch() time.Duration {
	if c.Rate <= 0 {
		return 0
	}
	return min(maxPaceBatch, txTime(int(c.queueLimit()/8), c.Rate))
}

// txTime returns the time n bytes take at rate bytes per second.
func txTime(n int, rate int64) time.Duration {
	return time.Duration(int64(n) * int64(time.Second) / rate)
}

// ParseRate parses a rate such as "100mbit", "10Mbit", "1gbit", "500kbit",
// "12MB" or "1.5GiB" into bytes per second. Units are case-insensitive and
// follow tc(8): a "bit" suffix ("kbit", "mbit", "gbit", "tbit", optionally
// followed by "/s") means bits per second; "b", "kb", "mb", "gb", "tb" (and
// "kbps" and so on, as in tc) mean bytes per second; "kib", "mib", "gib" are
// binary byte multiples. Decimal prefixes are powers of 1000. "0" and "" mean
// unlimited and return 0. A bare non-zero number is rejected as ambiguous.
func ParseRate(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" || t == "0" {
		return 0, nil
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("wan: bad rate %q", s)
	}
	if unit == "" {
		if v == 0 {
			return 0, nil
		}
		return 0, fmt.Errorf("wan: rate %q needs a unit (e.g. mbit, MB)", s)
	}
	unit = strings.TrimSuffix(unit, "/s")
	bits := false
	switch {
	case strings.HasSuffix(unit, "bit"):
		bits, unit = true, strings.TrimSuffix(unit, "bit")
	case strings.HasSuffix(unit, "bps"):
		unit = strings.TrimSuffix(unit, "bps")
	case strings.HasSuffix(unit, "b"):
		unit = strings.TrimSuffix(unit, "b")
	default:
		return 0, fmt.Errorf("wan: bad rate unit in %q", s)
	}
	mult := 1.0
	switch unit {
	case "":
	case "k":
		mult = 1e3
	case "m":
		mult = 1e6
	case "g":
		mult = 1e9
	case "t":
		mult = 1e12
	case "ki":
		mult = 1 << 10
	case "mi":
		mult = 1 << 20
	case "gi":
		mult = 1 << 30
	case "ti":
		mult = 1 << 40
	default:
		return 0, fmt.Errorf("wan: bad rate unit in %q", s)
	}
	v *= mult
	if bits {
		v /= 8
	}
	if v >= math.MaxInt64/2 {
		return 0, fmt.Errorf("wan: rate %q too large", s)
	}
	r := int64(math.Round(v))
	if r == 0 && v > 0 {
		r = 1
	}
	return r, nil
}

// Stats counts the traffic through a Proxy.
type Stats struct {
	Up     int64 // bytes delivered from clients to the target
	Down   int64 // bytes delivered from the target to clients
	Conns  int64 // connections accepted
	Active int64 // connections open now
	Cuts   int64 // connections cut by Config.CutAfter, CutRandom or CutWithin
}

// Proxy is a TCP proxy that emulates a WAN link. Create it with Listen or
// Serve.
type Proxy struct {
	ln     net.Listener
	target string
	cfg    atomic.Pointer[Config]
	epoch  time.Time    // origin of stall; has a monotonic reading
	stall  atomic.Int64 // forwarding stalled until epoch+stall
	clock  clock
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	rng    *rand.Rand    // draws cut points; guarded by mu
	resume chan struct{} // closed by Resume; guarded by mu
	wg     sync.WaitGroup

	up, down, accepted, active, cuts atomic.Int64
}

// Listen starts a proxy listening on listen (e.g. "127.0.0.1:0") forwarding
// each accepted connection to target.
func Listen(listen, target string, cfg Config) (*Proxy, error) {
	return ListenContext(context.Background(), listen, target, cfg)
}

// ListenContext is like Listen; ctx bounds the listen call only.
func ListenContext(ctx context.Context, listen, target string, cfg Config) (*Proxy, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", listen)
	if err != nil {
		return nil, err
	}
	return Serve(ln, target, cfg), nil
}

// Serve starts a proxy accepting connections on ln and forwarding each to
// target. The proxy owns ln: Close closes it.
func Serve(ln net.Listener, target string, cfg Config) *Proxy {
	p := &Proxy{
		ln:     ln,
		target: target,
		epoch:  time.Now(),
		conns:  make(map[*conn]struct{}),
		resume: make(chan struct{}),
	}
	p.clock.init()
	p.rng = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.SetConfig(cfg)
	p.wg.Add(1)
	go p.accept()
	return p
}

// Addr returns the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Config returns the current configuration.
func (p *Proxy) Config() Config { return *p.cfg.Load() }

// SetConfig changes the link for new and existing connections. It takes
// effect for data arriving after the call; data already in flight keeps the
// release time it was given, and data never overtakes earlier data.
func (p *Proxy) SetConfig(cfg Config) {
	if cfg.RTT < 0 {
		cfg.RTT = 0
	}
	if cfg.Rate < 0 {
		cfg.Rate = 0
	}
	p.cfg.Store(&cfg)
}

// Stall stops forwarding data on all connections, existing and new, for d
// from now; d < 0 stalls until Resume. Data keeps arriving and is queued (up to the queue bound, then
// senders see backpressure); nothing is lost. When the stall ends, data whose
// release time has passed is delivered at once. Calls do not add up: the
// stall ends at the latest end asked for.
func (p *Proxy) Stall(d time.Duration) {
	if d < 0 {
		d = 1 << 62
	}
	end := int64(time.Since(p.epoch) + d)
	for {
		old := p.stall.Load()
		if old >= end || p.stall.CompareAndSwap(old, end) {
			return
		}
	}
}

// Cut cuts every connection open now abruptly (an RST to both ends), as
// when a link dies; the proxy goes on accepting new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.cut()
	}
}

// Resume ends a stall at once.
func (p *Proxy) Resume() {
	p.stall.Store(int64(time.Since(p.epoch)))
	p.mu.Lock()
	close(p.resume)
	p.resume = make(chan struct{})
	p.mu.Unlock()
}

// resumed returns a channel closed at the next Resume.
func (p *Proxy) resumed() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resume
}

// stallEnd returns when the current stall ends (a past time if none).
func (p *Proxy) stallEnd() time.Time { return p.epoch.Add(time.Duration(p.stall.Load())) }

// Stats returns the traffic counters.
func (p *Proxy) Stats() Stats {
	return Stats{
		Up:     p.up.Load(),
		Down:   p.down.Load(),
		Conns:  p.accepted.Load(),
		Active: p.active.Load(),
		Cuts:   p.cuts.Load(),
	}
}

// Close stops listening, tears down all proxied connections abruptly and
// waits for all goroutines of the proxy to exit.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.cancel()
	for _, c := range conns {
		c.abort()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	var delay time.Duration
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			// Probably out of file descriptors: back off as net/http does.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(delay):
			case <-p.ctx.Done():
				return
			}
			continue
		}
		delay = 0
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.handle(c)
	}
}

// Socket buffer sizes of the proxy's sockets. The receive buffer is small:
// data waiting in it is data queued at the bottleneck that Config.Queue does
// not count, and latency is emulated in the proxy's queue, not on the
// loopback path, so a small TCP window costs no throughput. The send buffer
// holds data already released, which is past the emulated link.
const (
	readBuf  = 128 << 10
	writeBuf = 4 << 20
)

func tune(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetReadBuffer(readBuf)
		tc.SetWriteBuffer(writeBuf)
	}
}

func (p *Proxy) handle(a net.Conn) {
	defer p.wg.Done()
	var d net.Dialer
	b, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		abortConn(a)
		return
	}
	tune(a)
	tune(b)
	c := &conn{p: p, a: a, b: b, done: make(chan struct{}), start: time.Now()}
	// The directions exist before c is registered: teardown (by Close,
	// from another goroutine) closes their timers.
	up := newDir(c, a, b, &p.up)
	down := newDir(c, b, a, &p.down)
	cfg := p.cfg.Load()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.abort()
		return
	}
	p.conns[c] = struct{}{}
	var cutUp, cutDown int64
	var cutAt time.Duration
	if cfg.CutRandom > 0 {
		cutUp, cutDown = 1+p.rng.Int64N(cfg.CutRandom), 1+p.rng.Int64N(cfg.CutRandom)
	}
	if cfg.CutWithin > 0 {
		cutAt = time.Duration(p.rng.Int64N(int64(cfg.CutWithin)))
	}
	p.mu.Unlock()
	p.active.Add(1)

	if cfg.CutWithin > 0 {
		tm := time.AfterFunc(cutAt, c.cut)
		defer tm.Stop()
	}
	up.cutRandom, down.cutRandom = cutUp, cutDown
	c.wg.Add(4)
	go up.read()
	go up.write()
	go down.read()
	go down.write()
	c.wg.Wait()
	c.finish()

	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	p.active.Add(-1)
}
