// Package client is the zx client: a zx.Tree (and Finder, Watcher,
// AckWatcher, Linker, StatFSer, Syncer and Allocator) that speaks to a
// server over one multiplexed connection.
//
// Every call encodes its request and queues it on the connection in call
// order, then returns; a goroutine per request turns the reply stream into
// the call's channel. Requests therefore reach the server in the order they
// were issued, and the server applies those on the same paths in that
// order: a caller may pipeline any sequence of calls without waiting.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/auth"
	"github.com/zxfs/zx/ctl"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/proto"
)

// DefaultPort is the port of a zx:// address that gives none.
const DefaultPort = "5640"

// Options configure a connection.
type Options struct {
	Mux         mux.Config
	DialTimeout time.Duration // default 15s; bounds the TLS handshake too
	// TLS, if set, makes Dial speak TLS 1.3 over the TCP connection, and
	// check the server as this configuration says (see auth.ClientConfig,
	// which pins server keys and presents the client's key).
	TLS *tls.Config
	// Caller, if set, is sent with every request whose context carries
	// no zx.Caller: the user a request is made for. Servers honour it
	// only on connections whose key may speak for several users.
	Caller *zx.Caller

	// Reconnect makes the connection survive its loss (a dropped link, a
	// server restart): the next request, or a request in flight, dials
	// again with backoff and re-authenticates; requests in flight are
	// carried over where that is safe and fail with an error saying their
	// outcome is unknown where it is not (see reconnect.go). Done and Err
	// then concern Close only.
	Reconnect bool
	// ReconnectWait bounds how long a request waits for the connection to
	// come back before failing (30s).
	ReconnectWait time.Duration
	// Redial makes a new connection to the same server. Dial and DialSSH
	// set it; callers of NewConn who want Reconnect must.
	Redial func(ctx context.Context) (net.Conn, error)
}

// Conn is a connection to a zx server.
type Conn struct {
	opts Options
	addr string

	mu        sync.Mutex // guards what follows; before pending.mu
	mc        *mux.Conn  // replaced when re-established (Options.Reconnect)
	seq       uint64
	inflight  map[*pending]struct{}
	redialing chan struct{} // closed when the redial under way is over
	redialErr error         // why the last redial failed
	redials   int64
	downSince time.Time // when the connection was lost, zero while it is up
	waits     int64     // calls that waited for a lost connection (ReconnectWaits)
	closed    bool
	gone      chan struct{} // closed by Close
	base      mux.Stats     // counters of the connections before mc

	// For the control file (see ctl.go).
	since  time.Time
	reqs   ctl.Counts
	flags  *ctl.Flags
	caller *zx.Caller
}

// Dial connects to a server at addr (host:port).
func Dial(ctx context.Context, addr string, opts Options) (*Conn, error) {
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 15 * time.Second
	}
	nc, err := dialNet(ctx, addr, opts)
	if err != nil {
		return nil, err
	}
	if opts.Reconnect && opts.Redial == nil {
		o := opts
		opts.Redial = func(ctx context.Context) (net.Conn, error) { return dialNet(ctx, addr, o) }
	}
	c := NewConn(nc, opts)
	c.addr = addr
	return c, nil
}

// dialNet makes the transport connection: TCP, and TLS if asked.
func dialNet(ctx context.Context, addr string, opts Options) (net.Conn, error) {
	d := net.Dialer{Timeout: opts.DialTimeout, KeepAlive: -1}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, zx.Errorf("dial", addr, err)
	}
	if opts.TLS != nil {
		tuneTCP(nc)
		tc := tls.Client(nc, opts.TLS)
		hctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			return nil, handshakeError(addr, err)
		}
		nc = tc
	}
	return nc, nil
}

// handshakeError explains a failed TLS handshake.
func handshakeError(addr string, err error) error {
	msg := "TLS: " + err.Error()
	var rhe tls.RecordHeaderError
	if errors.As(err, &rhe) {
		msg = "the server does not speak TLS (a zx serve on loopback without --tls?): connect without --tls"
	}
	var hke *auth.HostKeyError
	if errors.As(err, &hke) {
		msg = err.Error()
	}
	return &zx.Error{Kind: zx.ErrAuth, Op: "dial", Path: addr, Msg: msg, Err: err}
}

// tuneTCP sets what mux sets on TCP connections it is given directly, which
// it cannot do through TLS.
func tuneTCP(nc net.Conn) {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return
	}
	tc.SetNoDelay(true)
	if raw, err := tc.SyscallConn(); err == nil {
		raw.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, 256<<10)
		})
	}
}

// NewConn runs the client protocol over an established connection.
func NewConn(nc net.Conn, opts Options) *Conn {
	// The client takes acknowledged watches, and entries in batches
	// (DIRS frames) from servers that send them.
	for _, f := range []string{proto.FeatureWatchAck, proto.FeatureDirs} {
		if !slices.Contains(opts.Mux.Features, f) {
			opts.Mux.Features = append(slices.Clip(opts.Mux.Features), f)
		}
	}
	return &Conn{
		opts:     opts,
		mc:       mux.Client(nc, opts.Mux),
		inflight: make(map[*pending]struct{}),
		gone:     make(chan struct{}),
		addr:     nc.RemoteAddr().String(),
		caller:   opts.Caller,
		since:    time.Now(),
		flags:    ctl.NewFlags("debug"),
	}
}

// cur returns the current connection.
func (c *Conn) cur() *mux.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mc
}

// Close closes the connection; requests in flight fail.
func (c *Conn) Close() error {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.gone)
	}
	mc := c.mc
	c.mu.Unlock()
	return mc.Close()
}

// Done is closed when the connection ends; Err then says why. With
// Options.Reconnect, a lost connection does not end it: only Close does.
func (c *Conn) Done() <-chan struct{} {
	if c.reconnects() {
		return c.gone
	}
	return c.cur().Done()
}

// Err returns why the connection ended, or nil.
func (c *Conn) Err() error {
	if c.reconnects() {
		select {
		case <-c.gone:
			return zx.E(zx.ErrIO, "", "", "connection closed")
		default:
			return nil
		}
	}
	return c.cur().Err()
}

// Reconnects returns how many times the connection was re-established.
func (c *Conn) Reconnects() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.redials
}

// ReconnectWaits returns how many calls waited for a lost connection to
// be re-established (each wait bounded by its context and by
// Options.ReconnectWait). A call that fails fast (zx.WithFailFast) does
// not wait and is not counted.
func (c *Conn) ReconnectWaits() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waits
}

// Ping measures one round trip to the server.
func (c *Conn) Ping(ctx context.Context) (time.Duration, error) {
	for try := 0; ; try++ {
		mc, err := c.current(ctx)
		if err != nil {
			return 0, zx.Errorf("ping", "", err)
		}
		d, err := mc.Ping(ctx)
		if err != nil && c.reconnects() && mc.Err() != nil && ctx.Err() == nil && try < maxTries {
			continue // lost on the way: ping again on a new connection
		}
		return d, err
	}
}

// RTT returns the round-trip time measured so far.
func (c *Conn) RTT() time.Duration { return c.cur().RTT() }

// Stats returns the connection's counters, including the round trips
// callers waited for (see mux.Conn.Stats); with Options.Reconnect, summed
// over the connections it has made.
func (c *Conn) Stats() mux.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return addStats(c.base, c.mc.Stats())
}

// Addr returns the server's address.
func (c *Conn) Addr() string { return c.addr }

// Tree returns the named tree of the server ("" for its default tree). It
// does not talk to the server: use Attach to check that the tree exists.
func (c *Conn) Tree(name string) *Tree { return &Tree{c: c, name: name} }

// Attach returns the named tree after checking with the server that it
// exists and may be used.
func (c *Conn) Attach(ctx context.Context, name string) (*Tree, error) {
	t := c.Tree(name)
	r := <-t.call(ctx, &proto.Request{Op: proto.OpAttach, Tree: name, Path: "/"})
	if r.Err != nil {
		return nil, r.Err
	}
	return t, nil
}

// Tree is a tree on a server.
type Tree struct {
	c    *Conn
	name string
	raw  bool // /Ctl is the server's: the client's own control file is above
}

var (
	_ zx.Tree     = (*Tree)(nil)
	_ zx.Finder   = (*Tree)(nil)
	_ zx.Watcher  = (*Tree)(nil)
	_ zx.Linker   = (*Tree)(nil)
	_ zx.StatFSer = (*Tree)(nil)
)

// Conn returns the tree's connection.
func (t *Tree) Conn() *Conn { return t.c }

// RTT returns the connection's estimate of the round-trip time (0 before
// it has one), for layers above that weigh waiting against asking.
func (t *Tree) RTT() time.Duration { return t.c.RTT() }

// encode encodes req, with the caller it is made for.
func (t *Tree) encode(ctx context.Context, req *proto.Request) []byte {
	c, ok := zx.CallerFrom(ctx)
	if !ok && t.c.caller != nil {
		c, ok = *t.c.caller, true
	}
	if ok && c.Uid >= 0 && c.Gid >= 0 {
		req.HasCaller, req.Uid, req.Gid = true, uint32(c.Uid), uint32(c.Gid)
	}
	return proto.AppendRequest(nil, req)
}

// begin sends a request, after the requests issued before it, and returns
// it as a pending request (for reconnection) with its stream. retry, if
// set, sends it again after the connection was lost (see reconnect.go).
func (t *Tree) begin(ctx context.Context, req *proto.Request, flags mux.OpenFlags, retry func(*mux.Conn, *pending) (*mux.Stream, error)) (*pending, *mux.Stream, error) {
	op := proto.OpName(req.Op)
	if err := ctx.Err(); err != nil {
		// Not sent at all, so certainly not applied. (A request cancelled
		// once sent may or may not have taken effect.)
		return nil, nil, zx.Errorf(op, req.Path, err)
	}
	t.c.reqs.Add(op)
	if t.c.flags.On("debug") {
		log.Printf("zx client: %s %s %s", t.c.addr, op, req.Path)
	}
	b := t.encode(ctx, req)
	if zx.Background(ctx) {
		flags |= mux.Uncounted // nobody waits for it
	}
	c := t.c
	p := &pending{op: req.Op, path: req.Path, opened: make(chan struct{}), next: make(chan reopened, 1), sender: closedChan()}
	p.open = func(mc *mux.Conn) (*mux.Stream, error) { return mc.Open(ctx, b, flags) }
	p.retry = retry
	c.mu.Lock()
	mc, err := c.currentLocked(ctx)
	if err != nil {
		c.mu.Unlock()
		return nil, nil, zx.Errorf(op, req.Path, err)
	}
	c.seq++
	p.seq, p.mc = c.seq, mc
	if c.reconnects() {
		c.inflight[p] = struct{}{}
	}
	c.mu.Unlock()
	if req.Op == proto.OpGet && c.reconnects() {
		// A stat of what the get reads, to check a resumed get against.
		if o, err := mc.Open(ctx, t.encode(ctx, &proto.Request{Op: proto.OpStat, Tree: req.Tree, Path: req.Path}), 0); err == nil {
			p.orig = o
		}
	}
	st, err := mc.Open(ctx, b, flags)
	p.mu.Lock()
	if err == nil {
		p.st = st
	}
	p.mu.Unlock()
	close(p.opened)
	if err != nil {
		if st, err = c.resume(ctx, p, err); err != nil {
			c.finish(p)
			return nil, nil, zx.Errorf(op, req.Path, err)
		}
	}
	return p, st, nil
}

// plainRetry sends a request again as it was.
func plainRetry(mc *mux.Conn, p *pending) (*mux.Stream, error) { return p.open(mc) }

// retryFor returns how req is sent again after a loss: nil if it may not.
func retryFor(req *proto.Request) func(*mux.Conn, *pending) (*mux.Stream, error) {
	if idempotent(req) {
		return plainRetry
	}
	return nil
}

// replyErr decodes an FErr message, adding the op and path when the server
// gave none.
func replyErr(op, path string, m mux.Msg) error {
	e, err := proto.ParseError(m.Data)
	if err != nil {
		return zx.Errorf(op, path, err)
	}
	return zx.Errorf(op, path, e)
}

// call issues a request whose reply is one entry.
func (t *Tree) call(ctx context.Context, req *proto.Request) <-chan zx.Reply {
	rc := make(chan zx.Reply, 1)
	p, st, err := t.begin(ctx, req, 0, retryFor(req))
	if err != nil {
		rc <- zx.Reply{Err: err}
		return rc
	}
	go func() {
		defer t.c.finish(p)
		rc <- t.one(ctx, p, st, req.Op, req.Path)
	}()
	return rc
}

// one reads a one-entry reply, going on over a reconnection if p allows.
func (t *Tree) one(ctx context.Context, p *pending, st *mux.Stream, opn uint8, path string) zx.Reply {
	op := proto.OpName(opn)
	var r zx.Reply
	for {
		m, err := st.Recv(ctx)
		if err == io.EOF {
			if r.Dir == nil && r.Err == nil {
				r.Err = zx.E(zx.ErrProtocol, op, path, "empty reply")
			}
			return r
		}
		if err != nil {
			if st2, rerr := t.c.resume(ctx, p, err); rerr == nil {
				st, r = st2, zx.Reply{}
				continue
			} else {
				err = rerr
			}
			return zx.Reply{Err: zx.Errorf(op, path, err)}
		}
		switch m.Type {
		case proto.FErr:
			if r.Err == nil {
				r.Err = replyErr(op, path, m)
			}
		case proto.FDir:
			d, err := proto.ParseDir(m.Data)
			if err != nil {
				r.Err = zx.Errorf(op, path, err)
			} else if r.Dir == nil {
				r.Dir = d
			}
		}
	}
}

func (t *Tree) status(ctx context.Context, req *proto.Request) <-chan error {
	ec := make(chan error, 1)
	p, st, err := t.begin(ctx, req, 0, retryFor(req))
	if err != nil {
		ec <- err
		return ec
	}
	go func() {
		defer t.c.finish(p)
		op := proto.OpName(req.Op)
		var rerr error
		for {
			m, err := st.Recv(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				if st2, err2 := t.c.resume(ctx, p, err); err2 == nil {
					st, rerr = st2, nil
					continue
				} else {
					err = err2
				}
				rerr = zx.Errorf(op, req.Path, err)
				break
			}
			if m.Type == proto.FErr && rerr == nil {
				rerr = replyErr(op, req.Path, m)
			}
		}
		ec <- rerr
	}()
	return ec
}

// stream issues a request whose reply is a stream of items.
func (t *Tree) stream(ctx context.Context, req *proto.Request, flags mux.OpenFlags) <-chan zx.Item {
	// A little buffering lets the decoder run ahead of the consumer
	// instead of handing over each entry of a long find.
	ic := make(chan zx.Item, 64)
	retry := retryFor(req)
	if req.Op == proto.OpGet {
		retry = t.getRetry(ctx, req)
	}
	p, st, err := t.begin(ctx, req, flags, retry)
	if err != nil {
		go func() {
			defer close(ic)
			select {
			case ic <- zx.Item{Err: err}:
			case <-ctx.Done():
			}
		}()
		return ic
	}
	go func() {
		defer close(ic)
		defer t.c.finish(p)
		// A stream left before its end (an error delivered, a resumed
		// get that cannot go on safely) is cancelled: the server would
		// otherwise go on with it until out of credit, holding what it
		// reads (lfs orders a put of a file after a get of it).
		defer func() { st.Cancel(nil) }()
		op := proto.OpName(req.Op)
		var skip skipper
		// deliver hands it to the caller, unless a resumed stream
		// already delivered it; false if the caller went away.
		deliver := func(it zx.Item) bool {
			if skip.skip(&it) {
				return true
			}
			if p != nil && req.Op != proto.OpGet {
				skip.delivered(it)
			}
			select {
			case ic <- it: // most often there is room: no need to watch ctx
				return true
			default:
			}
			select {
			case ic <- it:
				return true
			case <-ctx.Done():
				st.Cancel(ctx.Err())
				return false
			}
		}
		for {
			m, err := st.Recv(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				if st2, err2 := t.c.resume(ctx, p, err); err2 == nil {
					st = st2
					if req.Op == proto.OpGet {
						err = t.checkResumed(ctx, p)
					} else {
						skip.restart()
						continue
					}
					if err == nil {
						continue
					}
				} else {
					err = err2
				}
			}
			var it zx.Item
			if err != nil {
				it.Err = zx.Errorf(op, req.Path, err)
			} else {
				switch m.Type {
				case proto.FData:
					if len(m.Data) == 0 {
						continue
					}
					it.Data = m.Data
				case proto.FDir:
					if cap(m.Data) <= 2*len(m.Data) {
						// m.Data is ours and used for nothing else.
						it.Dir, it.Err = proto.ParseDirOwned(m.Data)
					} else {
						// Sharing would keep its spare room alive
						// (a decompressed frame has 64 KiB).
						it.Dir, it.Err = proto.ParseDir(m.Data)
					}
				case proto.FDirs:
					var ds []zx.Dir
					var perr error
					if cap(m.Data) <= 2*len(m.Data) {
						ds, perr = proto.ParseDirsOwned(m.Data)
					} else {
						ds, perr = proto.ParseDirs(m.Data)
					}
					if perr != nil {
						// Entries were lost, and what a resumed stream
						// would skip is unknown: the request fails.
						st.Cancel(perr)
						deliver(zx.Item{Err: zx.Errorf(op, req.Path, perr)})
						return
					}
					for _, d := range ds {
						if !deliver(zx.Item{Dir: d}) {
							return
						}
					}
					continue
				case proto.FErr:
					e, perr := proto.ParseError(m.Data)
					if perr != nil {
						it.Err = perr
					} else {
						it.Err = e
						if e.Op == "" {
							e.Op = op
						}
						if !m.End && e.Path != "" {
							// An error about one entry; the stream goes on.
							it.Dir = zx.Dir{zx.APath: e.Path, zx.AName: zx.Base(e.Path)}
						} else if e.Path == "" {
							e.Path = req.Path
						}
					}
				default:
					it.Err = zx.E(zx.ErrProtocol, op, req.Path, fmt.Sprintf("unexpected message type %d", m.Type))
				}
			}
			if !deliver(it) || err != nil {
				return
			}
		}
	}()
	return ic
}

// Stat implements zx.Tree.
func (t *Tree) Stat(ctx context.Context, path string) <-chan zx.Reply {
	if t.local(path) {
		return t.ctlFile().Stat(ctx)
	}
	return t.call(ctx, &proto.Request{Op: proto.OpStat, Tree: t.name, Path: path})
}

// Get implements zx.Tree.
func (t *Tree) Get(ctx context.Context, path string, off, count int64) <-chan zx.Item {
	if t.local(path) {
		return t.ctlFile().Get(ctx, off, count)
	}
	return t.stream(ctx, &proto.Request{Op: proto.OpGet, Tree: t.name, Path: path, Off: off, Count: count}, 0)
}

// Put implements zx.Tree. Data is read and sent in the background while
// the server writes it.
func (t *Tree) Put(ctx context.Context, path string, d zx.Dir, off int64, data io.Reader) <-chan zx.Reply {
	if t.local(path) {
		return t.ctlFile().Put(ctx, d, off, data)
	}
	req := &proto.Request{Op: proto.OpPut, Tree: t.name, Path: path, Dir: d, Off: off}
	if data == nil {
		return t.call(ctx, req)
	}
	rc := make(chan zx.Reply, 1)
	// A put is sent again after a lost connection only if its data can be
	// read again and writing it twice does no harm: it replaces the file
	// (size 0) or writes at an offset, and is not exclusive.
	var retry func(*mux.Conn, *pending) (*mux.Stream, error)
	if sk, ok := data.(io.Seeker); ok && idempotent(req) && (d[zx.ASize] == "0" || off >= 0) {
		if start, err := sk.Seek(0, io.SeekCurrent); err == nil {
			retry = putRetry(sk, start)
		}
	}
	p, st, err := t.begin(ctx, req, mux.WithData, retry)
	if err != nil {
		rc <- zx.Reply{Err: err}
		return rc
	}
	go func() {
		defer t.c.finish(p)
		for {
			// The sender starts only on the stream the request is on:
			// a replay may have replaced it already (and rewound data).
			sent := make(chan error, 1)
			p.mu.Lock()
			if p.st == st {
				stopped := make(chan struct{})
				p.sender = stopped
				go func() {
					defer close(stopped)
					sent <- sendData(ctx, st, data)
				}()
			} else {
				sent <- nil
			}
			p.mu.Unlock()
			// The data reader may block: the reply must not wait for it
			// when the request fails or is cancelled.
			replied := make(chan zx.Reply, 1)
			go func() { replied <- t.one(ctx, nil, st, proto.OpPut, path) }()
			var r zx.Reply
			select {
			case serr := <-sent:
				if serr != nil && st.Conn().Err() == nil {
					// The server must not keep a half-written file:
					// cancel the request, which aborts the put.
					st.Cancel(serr)
					rc <- zx.Reply{Err: zx.Errorf("put", path, serr)}
					return
				}
				r = <-replied
			case r = <-replied:
			}
			if r.Err != nil && st.Conn().Err() != nil {
				st2, err := t.c.resume(ctx, p, r.Err)
				if err == nil {
					st = st2
					continue
				}
				r.Err = zx.Errorf("put", path, err)
			}
			rc <- r
			return
		}
	}()
	return rc
}

// sendData streams data on st and ends it. A server that ended the stream
// early (an error) is not an error here: its reply says why.
func sendData(ctx context.Context, st *mux.Stream, data io.Reader) error {
	const chunk = 256 << 10
	// Buffers sized to what is left when the reader tells: most files
	// are small, and a 256 KiB buffer per Put showed in the profile of
	// tar -x (allocation and the garbage collector). One byte more than
	// what is left, so that the last read sees the end.
	left := int64(-1)
	switch r := data.(type) {
	case interface{ Len() int }:
		left = int64(r.Len())
	case *io.SectionReader:
		if off, err := r.Seek(0, io.SeekCurrent); err == nil {
			left = r.Size() - off
		}
	}
	for {
		size := int64(chunk)
		if left >= 0 && left < chunk {
			size = left + 1
		}
		buf := make([]byte, size)
		n, rerr := io.ReadFull(data, buf)
		switch {
		case left >= 0 && int64(n) == size && size <= left:
			left -= size
		case left >= 0 && int64(n) == size:
			left = -1 // more than the reader said: read on by chunks
		}
		if n > 0 {
			if err := st.Send(ctx, proto.FData, buf[:n], false); err != nil {
				if err == mux.ErrPeerEnded {
					return nil
				}
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("reading data: %w", rerr)
		}
	}
	if err := st.CloseSend(ctx); err != nil && err != mux.ErrPeerEnded {
		return err
	}
	return nil
}

// Move implements zx.Tree.
func (t *Tree) Move(ctx context.Context, from, to string) <-chan error {
	return t.status(ctx, &proto.Request{Op: proto.OpMove, Tree: t.name, Path: from, To: to})
}

// Link implements zx.Linker.
func (t *Tree) Link(ctx context.Context, oldpath, newpath string) <-chan zx.Reply {
	return t.call(ctx, &proto.Request{Op: proto.OpLink, Tree: t.name, Path: oldpath, To: newpath})
}

// StatFS implements zx.StatFSer.
func (t *Tree) StatFS(ctx context.Context, path string) <-chan zx.Reply {
	return t.call(ctx, &proto.Request{Op: proto.OpStatFS, Tree: t.name, Path: path})
}

// Remove implements zx.Tree.
func (t *Tree) Remove(ctx context.Context, path string) <-chan error {
	return t.status(ctx, &proto.Request{Op: proto.OpRemove, Tree: t.name, Path: path})
}

// RemoveAll implements zx.Tree.
func (t *Tree) RemoveAll(ctx context.Context, path string) <-chan error {
	return t.status(ctx, &proto.Request{Op: proto.OpRemoveAll, Tree: t.name, Path: path})
}

// Wstat implements zx.Tree.
func (t *Tree) Wstat(ctx context.Context, path string, d zx.Dir) <-chan zx.Reply {
	return t.call(ctx, &proto.Request{Op: proto.OpWstat, Tree: t.name, Path: path, Dir: d})
}

// Find implements zx.Finder: one request, however large the tree.
func (t *Tree) Find(ctx context.Context, path string, o zx.FindOpts) <-chan zx.Item {
	if t.local(path) {
		return t.ctlFile().Find(ctx, o)
	}
	return t.stream(ctx, &proto.Request{Op: proto.OpFind, Tree: t.name, Path: path, Pred: o.Pred, Spref: o.Spref, Dpref: o.Dpref, Depth: int64(o.Depth0)}, 0)
}

// FindGet implements zx.Finder.
func (t *Tree) FindGet(ctx context.Context, path string, o zx.FindOpts) <-chan zx.Item {
	if t.local(path) {
		return t.ctlFile().Find(ctx, o)
	}
	return t.stream(ctx, &proto.Request{Op: proto.OpFindGet, Tree: t.name, Path: path, Pred: o.Pred, Spref: o.Spref, Dpref: o.Dpref, Depth: int64(o.Depth0)}, 0)
}

// Watch implements zx.Watcher. The watch is not counted as a round trip.
func (t *Tree) Watch(ctx context.Context, path string) <-chan zx.Event {
	return t.watch(ctx, path, false)
}

// WatchAcked implements zx.AckWatcher: notices of changes made through
// other connections carry Ack, and the server holds the writer's reply
// until Ack is called (or a bound passes: then the watch is sent an
// Overflow). A server that cannot hold replies sends no Ack (the watch is
// then Watch). Acknowledgements cost no round trip: they ride on the
// watch's stream.
func (t *Tree) WatchAcked(ctx context.Context, path string) <-chan zx.Event {
	return t.watch(ctx, path, true)
}

var _ zx.AckWatcher = (*Tree)(nil)

func (t *Tree) watch(ctx context.Context, path string, acked bool) <-chan zx.Event {
	ec := make(chan zx.Event)
	flags := mux.Uncounted
	if acked {
		// The stream stays open for the acknowledgements; its End asks
		// for none.
		flags |= mux.WithData
	}
	p, st, err := t.begin(ctx, &proto.Request{Op: proto.OpWatch, Tree: t.name, Path: path}, flags, plainRetry)
	go func() {
		defer close(ec)
		defer t.c.finish(p)
		var ack *acker
		defer func() {
			if ack != nil {
				ack.stop()
			}
		}()
		newAcker := func() {
			if ack != nil {
				ack.stop() // a new stream numbers afresh
			}
			if acked {
				ack = newAcker(st)
			}
		}
		resumed := false
		send := func(ev zx.Event) bool {
			select {
			case ec <- ev:
				return true
			case <-ctx.Done():
				if st != nil {
					st.Cancel(ctx.Err())
				}
				return false
			}
		}
		if err != nil {
			send(zx.Event{Err: err})
			return
		}
		newAcker()
		for {
			m, err := st.Recv(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				if st2, err2 := t.c.resume(ctx, p, err); err2 == nil {
					st, resumed = st2, true
					newAcker()
					continue
				} else {
					err = err2
				}
				send(zx.Event{Err: zx.Errorf("watch", path, err)})
				return
			}
			var ev zx.Event
			switch m.Type {
			case proto.FEvent:
				pe, perr := proto.ParseEvent(m.Data)
				if perr != nil {
					ev.Err = perr
				} else {
					ev = zx.Event{Kind: zx.EventKind(pe.Kind), Dir: pe.Dir, From: pe.From}
					if pe.Seq != 0 && ack != nil {
						ev.Ack = ack.received(pe.Seq, ev.Kind == zx.Overflow)
					}
				}
				if resumed && ev.Kind == zx.Ready {
					// The watch is back in place after a lost
					// connection: what happened meanwhile is unknown.
					resumed = false
					ev = zx.Event{Kind: zx.Overflow, Dir: zx.Dir{zx.APath: path, zx.AName: zx.Base(path)}}
				}
			case proto.FErr:
				ev.Err = replyErr("watch", path, m)
			default:
				continue
			}
			if !send(ev) {
				return
			}
		}
	}()
	return ec
}

// acker acknowledges the numbered notices of one watch stream: it sends
// the largest number up to which every notice received was acknowledged
// (the server takes acknowledgements as cumulative), from its own
// goroutine, so that Ack never blocks.
type acker struct {
	st   *mux.Stream
	kick chan struct{}
	done chan struct{}

	mu   sync.Mutex
	open []uint64 // received and not acknowledged, ascending
	last uint64   // the largest number received
}

func newAcker(st *mux.Stream) *acker {
	a := &acker{st: st, kick: make(chan struct{}, 1), done: make(chan struct{})}
	go a.loop()
	return a
}

// received notes notice seq and returns its Ack. Applying an Overflow
// (all) applies every notice before it.
func (a *acker) received(seq uint64, all bool) func() {
	a.mu.Lock()
	if seq > a.last {
		a.last = seq
		a.open = append(a.open, seq)
	}
	a.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			for i, s := range a.open {
				if all && s <= seq {
					a.open[i] = 0
				} else if s == seq {
					a.open = append(a.open[:i], a.open[i+1:]...)
					break
				}
			}
			a.open = slices.DeleteFunc(a.open, func(s uint64) bool { return s == 0 })
			a.mu.Unlock()
			select {
			case a.kick <- struct{}{}:
			default:
			}
		})
	}
}

func (a *acker) stop() { close(a.done) }

func (a *acker) loop() {
	var sent uint64
	for {
		select {
		case <-a.kick:
		case <-a.done:
			return
		}
		a.mu.Lock()
		upTo := a.last
		if len(a.open) > 0 {
			upTo = a.open[0] - 1
		}
		a.mu.Unlock()
		if upTo > sent {
			if err := a.st.Send(context.Background(), proto.FData, proto.AppendAck(nil, upTo), false); err != nil {
				return // the watch is over
			}
			sent = upTo
		}
	}
}

// Location is a parsed zx://HOST[:PORT]/PATH address. A first path
// element "@NAME" names an exported tree other than the default one.
//
// It may also be an ssh://[USER@]HOST[:PORT]/DIR address: the client runs
// ssh to start "zx serve --stdio DIR" on HOST and speaks zx over the pipe.
// The served DIR is the root of the tree, so Path is "/", unless the
// address goes on after "//": ssh://host/srv/proj//src/main.go is
// /src/main.go in the tree served from /srv/proj. A DIR of "~" or
// starting with "~/" is taken from the remote user's home directory.
type Location struct {
	Addr string // host:port; for ssh://, "ssh://[USER@]HOST[:PORT]/DIR", one connection per DIR
	Tree string // "" for the server's default tree
	Path string // clean path in the tree
	SSH  SSHTarget
}

// SSHTarget is where an ssh:// location runs its server.
type SSHTarget struct {
	User string // "" for ssh's default
	Host string // "" if the location is not ssh://
	Port string // "" for ssh's default
	Dir  string // directory to serve: absolute, or relative to the remote home
}

// IsSSH reports whether l is an ssh:// location.
func (l Location) IsSSH() bool { return l.SSH.Host != "" }

// ParseLocation parses a zx:// or ssh:// address.
func ParseLocation(s string) (Location, error) {
	if strings.HasPrefix(s, "ssh://") {
		return parseSSH(s)
	}
	if !strings.HasPrefix(s, "zx://") {
		return Location{}, zx.E(zx.ErrInvalid, "", s, "not a zx:// or ssh:// address")
	}
	u, err := url.Parse(s)
	if err != nil {
		return Location{}, zx.E(zx.ErrInvalid, "", s, err.Error())
	}
	if u.Host == "" {
		return Location{}, zx.E(zx.ErrInvalid, "", s, "no host in address")
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), DefaultPort)
	}
	p := u.Path
	var tree string
	if strings.HasPrefix(p, "/@") {
		rest := p[2:]
		tree, p, _ = strings.Cut(rest, "/")
		p = "/" + p
	}
	p, err = zx.CleanPath(p)
	if err != nil {
		return Location{}, err
	}
	return Location{Addr: host, Tree: tree, Path: p}, nil
}

func parseSSH(s string) (Location, error) {
	bad := func(msg string) (Location, error) {
		return Location{}, zx.E(zx.ErrInvalid, "", s, msg+" (want ssh://[USER@]HOST[:PORT]/DIR)")
	}
	rest := strings.TrimPrefix(s, "ssh://")
	authority, p, hasPath := strings.Cut(rest, "/")
	p = "/" + p
	if !hasPath {
		p = "/~" // ssh://host is the home directory, as sshfs's host:
	}
	var t SSHTarget
	if u, h, ok := strings.Cut(authority, "@"); ok {
		if u == "" || strings.ContainsAny(u, "@:") {
			return bad("bad user")
		}
		t.User, authority = u, h
	}
	host, port := authority, ""
	if strings.HasPrefix(authority, "[") {
		i := strings.Index(authority, "]")
		if i < 0 {
			return bad("unterminated [")
		}
		host, port = authority[1:i], strings.TrimPrefix(authority[i+1:], ":")
		if authority[i+1:] != "" && !strings.HasPrefix(authority[i+1:], ":") {
			return bad("bad host")
		}
	} else if h, pt, ok := strings.Cut(authority, ":"); ok {
		host, port = h, pt
	}
	if host == "" {
		return bad("no host")
	}
	if strings.HasPrefix(host, "-") || strings.ContainsAny(host, " \t'\"\\;&|$`<>()") {
		return bad("bad host")
	}
	if port != "" {
		for _, r := range port {
			if r < '0' || r > '9' {
				return bad("bad port")
			}
		}
	}
	t.Host, t.Port = host, port
	dir, inner, _ := strings.Cut(p, "//")
	if strings.ContainsRune(dir, 0) {
		return bad("bad path")
	}
	switch {
	case dir == "/~" || dir == "/~/":
		dir = "."
	case strings.HasPrefix(dir, "/~/"):
		dir = strings.TrimPrefix(dir, "/~/")
	}
	if len(dir) > 1 {
		dir = strings.TrimRight(dir, "/")
	}
	if dir == "" {
		dir = "/"
	}
	t.Dir = dir
	ip, err := zx.CleanPath("/" + inner)
	if err != nil {
		return Location{}, err
	}
	l := Location{Tree: "", Path: ip, SSH: t}
	l.Addr = l.sshAddr()
	return l, nil
}

// sshAddr is the identity of an ssh location's connection.
func (l Location) sshAddr() string {
	s := "ssh://"
	if l.SSH.User != "" {
		s += l.SSH.User + "@"
	}
	h := l.SSH.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	s += h
	if l.SSH.Port != "" {
		s += ":" + l.SSH.Port
	}
	d := l.SSH.Dir
	switch {
	case d == ".":
		d = "/~"
	case !strings.HasPrefix(d, "/"):
		d = "/~/" + d
	}
	return s + d
}

func (l Location) String() string {
	if l.IsSSH() {
		s := l.sshAddr()
		if l.Path != "/" {
			s += "/" + l.Path
		}
		return s
	}
	s := "zx://" + l.Addr
	if l.Tree != "" {
		s += "/@" + l.Tree
	}
	if l.Path != "/" || l.Tree == "" {
		s += l.Path
	}
	return s
}
