// Package server serves zx trees over connections.
//
// Each connection is a mux.Conn. The server takes its requests in the order
// the client sent them and issues each to the tree at once, from one
// goroutine, so the tree's ordering guarantee (requests touching the same
// path take effect in the order issued) extends over the network: a client
// may pipeline create → write → rename → remove without waiting. Replies
// are pumped back by one goroutine per request, so a slow request never
// delays others.
//
// With Config.TLS set, every connection is TLS 1.3 and the client must
// present a key that Config.Authorized grants: the connection then sees only
// the trees granted (others are reported as not existing), read-only ones
// through a guard that refuses every write, and each request acts as the
// key's user (see auth.Grant.Identity), which the tree learns from the
// request's context (zx.CallerFrom).
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/auth"
	"github.com/zxfs/zx/ctl"
	"github.com/zxfs/zx/deleg"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/pred"
	"github.com/zxfs/zx/proto"
)

// DefaultPort is the TCP port zx servers listen on.
const DefaultPort = "5640"

// Config configures a Server. Zero fields take the defaults given beside
// them; the limits of each connection (frame size, streams, buffers,
// stalled replies, dead and idle peers) are in Mux.
type Config struct {
	Mux    mux.Config
	Logger *slog.Logger // nil: discard
	// LogLevel, if set, is the level of Logger's handler: the /Ctl flags
	// "verbose" (connections, refusals) and "debug" (also every request)
	// lower it to info while they are on, and restore it when off.
	LogLevel *slog.LevelVar

	// TLS, if set, makes the server speak TLS on every connection (see
	// auth.ServerConfig: TLS 1.3 only, client certificates requested).
	TLS *tls.Config
	// Authorized says which client keys may connect and what they may
	// do. With TLS and no Authorized, any client is served with full
	// rights (encryption only; zx serve never does this).
	Authorized *auth.Authorized
	// HandshakeTimeout bounds a TLS handshake; default 10s.
	HandshakeTimeout time.Duration
	// MaxConns is how many connections are served at once (1024). One
	// more is told so (a goaway of kind zx.ErrLimit) and closed.
	MaxConns int
	// MaxMemory bounds the bytes all connections buffer together
	// (1 GiB): see mux.Budget. Each connection's own bound is
	// Mux.MaxBuffer (64 MiB each way).
	MaxMemory int64
	// RequestRate is the requests per second each connection may make,
	// on average (10000/s), in bursts of up to RequestBurst (as many as
	// RequestRate). A faster client is slowed down, not refused: its
	// requests wait, and it sees backpressure. < 0: no limit.
	RequestRate  float64
	RequestBurst int

	// NoSync makes the server behave as one older than the sync request
	// (docs/protocol.md): it does not offer proto.FeatureSync and answers
	// OpSync as an unknown request. For tests of clients' fallback.
	NoSync bool
	// CallbackWait bounds how long a write's reply waits for another
	// client's acknowledged watch to apply the change's notice (2s); the
	// wait is 4 of that client's round trips, at least 250ms. A watch
	// that misses it lags (see callback.go). < 0: never wait.
	CallbackWait time.Duration
	// NoWatchAck makes the server behave as one older than acknowledged
	// watches: it does not offer proto.FeatureWatchAck, and serves every
	// watch as a version 1 one. For tests of clients' fallback.
	NoWatchAck bool

	// DelegLease is how long a delegation outlives its holder's lost
	// connection, or a recall it does not answer (15s; see package
	// deleg). NoDeleg makes the server behave as one older than
	// delegations: it does not offer proto.FeatureDeleg and answers
	// their requests as unknown.
	DelegLease time.Duration
	NoDeleg    bool

	// NoAlloc makes the server behave as one older than the allocate
	// request: it does not offer proto.FeatureAlloc and answers
	// OpAllocate as an unknown request. For tests of clients' fallback.
	NoAlloc bool

	// minCallbackWait, if set, replaces minCallbackWait (tests that
	// assert every wait is met, on a machine whose load can delay an
	// acknowledgement past 250ms; see export_test.go).
	minCallbackWait time.Duration
}

// withDefaults fills in the defaults. Mux.IdleTimeout defaults to 30
// minutes on a server (< 0: never).
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Mux.Logger == nil {
		c.Mux.Logger = c.Logger
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 1024
	}
	if c.MaxMemory <= 0 {
		c.MaxMemory = 1 << 30
	}
	if c.Mux.Budget == nil {
		c.Mux.Budget = mux.NewBudget(c.MaxMemory)
	}
	if c.RequestRate == 0 {
		c.RequestRate = 10000
	}
	if c.RequestBurst <= 0 {
		c.RequestBurst = max(int(c.RequestRate), 1)
	}
	if c.Mux.IdleTimeout == 0 {
		c.Mux.IdleTimeout = 30 * time.Minute
	}
	if c.CallbackWait == 0 {
		c.CallbackWait = 2 * time.Second
	}
	if !c.NoSync && !slices.Contains(c.Mux.Features, proto.FeatureSync) {
		c.Mux.Features = append(slices.Clip(c.Mux.Features), proto.FeatureSync)
	}
	if !c.NoWatchAck && !slices.Contains(c.Mux.Features, proto.FeatureWatchAck) {
		c.Mux.Features = append(slices.Clip(c.Mux.Features), proto.FeatureWatchAck)
	}
	if !c.NoAlloc && !slices.Contains(c.Mux.Features, proto.FeatureAlloc) {
		c.Mux.Features = append(slices.Clip(c.Mux.Features), proto.FeatureAlloc)
	}
	if !c.NoDeleg && !slices.Contains(c.Mux.Features, proto.FeatureDeleg) {
		c.Mux.Features = append(slices.Clip(c.Mux.Features), proto.FeatureDeleg)
	}
	return c
}

// Server serves a set of named trees.
type Server struct {
	trees   map[string]zx.Tree
	defName string
	cfg     Config
	log     *slog.Logger

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	pending   map[net.Conn]struct{} // in a TLS handshake or being refused: closed at shutdown
	closing   bool
	wg        sync.WaitGroup

	// For the control file (see ctl.go).
	since             time.Time
	reqs              ctl.Counts
	flags             *ctl.Flags
	baseLevel         slog.Level // LogLevel's level with verbose and debug off
	bytesIn, bytesOut int64      // of connections that ended; guarded by mu

	cb     callbacks    // acknowledged watches (see callback.go)
	delegs *deleg.Table // delegations (see deleg.go)
}

// New returns a server for trees, keyed by name. Requests that name no tree
// go to the tree named def.
func New(trees map[string]zx.Tree, def string, cfg Config) (*Server, error) {
	if _, ok := trees[def]; !ok {
		return nil, fmt.Errorf("server: default tree %q is not among the trees", def)
	}
	cfg = cfg.withDefaults()
	return &Server{
		trees:     trees,
		defName:   def,
		cfg:       cfg,
		log:       cfg.Logger,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		since:     time.Now(),
		flags:     ctl.NewFlags("debug", "verbose"),
		baseLevel: cfg.baseLevel(),
		delegs:    deleg.New(deleg.Config{Lease: cfg.DelegLease}),
	}, nil
}

// TreeNames returns the names of the served trees, sorted.
func (s *Server) TreeNames() []string {
	var names []string
	for n := range s.trees {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Serve accepts connections on l until Shutdown or Close.
func (s *Server) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errors.New("server: closed")
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	var delay time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.ServeConn(nc)
		}()
	}
}

// Memory returns the budget that bounds what all connections buffer: its
// Used, Peak and Limit.
func (s *Server) Memory() *mux.Budget { return s.cfg.Mux.Budget }

// NumConns returns how many connections are being served.
func (s *Server) NumConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// ServeConn serves one connection until it ends.
func (s *Server) ServeConn(nc net.Conn) {
	var grant *auth.Grant
	if s.cfg.TLS != nil {
		var ok bool
		if nc, grant, ok = s.handshake(nc); !ok {
			return
		}
	}
	c := &conn{srv: s, mc: mux.Server(nc, s.cfg.Mux), grant: grant, remote: nc.RemoteAddr().String(), since: time.Now()}
	if grant != nil {
		c.user = grant.User
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		c.mc.Close()
		return
	}
	if len(s.conns) >= s.cfg.MaxConns {
		s.mu.Unlock()
		s.log.Warn("connection refused: too many", "remote", nc.RemoteAddr(), "limit", s.cfg.MaxConns)
		c.mc.Goaway(zx.E(zx.ErrLimit, "", "", fmt.Sprintf("server has too many connections (limit %d); try again later", s.cfg.MaxConns)))
		c.mc.Close()
		return
	}
	if !s.cfg.Mux.Budget.TryTake(connCost) {
		s.mu.Unlock()
		s.log.Warn("connection refused: no memory", "remote", nc.RemoteAddr(), "limit", s.cfg.Mux.Budget.Limit())
		c.mc.Goaway(zx.E(zx.ErrLimit, "", "", fmt.Sprintf("server's memory is full (%d bytes; raise its --max-memory); try again later", s.cfg.Mux.Budget.Limit())))
		c.mc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.log.Info("connection", "remote", nc.RemoteAddr())
	c.serve()
	c.reqs.Wait()
	c.mc.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.cfg.Mux.Budget.Release(connCost)
	s.noteEnded(c.mc.Stats())
	s.log.Info("connection ended", "remote", nc.RemoteAddr(), "err", c.mc.Err())
}

// Shutdown stops accepting connections and requests, lets the requests in
// flight finish (watches are ended), and closes every connection. If ctx
// ends first, it closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	for l := range s.listeners {
		l.Close()
	}
	for nc := range s.pending {
		nc.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.drain(ctx)
		}()
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close closes every listener and connection at once.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s.Shutdown(ctx)
	s.wg.Wait()
	return nil
}

// connCost is what a connection costs the server's memory (MaxMemory)
// while it is open, whatever it does: its socket buffers (256 KiB each
// way), goroutines and tables (measured: about 550 KiB), and a zstd
// decoder (90 KiB). A zstd encoder is counted when made (mux).
const connCost = 640 << 10

type conn struct {
	srv   *Server
	mc    *mux.Conn
	grant *auth.Grant        // nil: no authentication, full rights
	seen  map[string]zx.Tree // trees as the grant shows them; used by the accept loop only
	reqs  sync.WaitGroup     // requests in flight

	remote string    // the client's address
	since  time.Time // when it connected
	user   string    // who it is, once authenticated ("" unknown)

	mu       sync.Mutex
	draining bool
	watches  map[*mux.Stream]struct{}
	holders  map[string]*recallHolder // recalls streams, by tree name
	held     []*heldReq               // requests held for a recall (deleg.go)
}

// drain finishes a connection gracefully.
func (c *conn) drain(ctx context.Context) {
	c.mu.Lock()
	c.draining = true
	for st := range c.watches {
		st.Cancel(zx.E(zx.ErrCanceled, "watch", "", "server shutting down"))
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.reqs.Wait(); close(done) }()
	select {
	case <-done:
		c.mc.Goaway(zx.E(zx.ErrIO, "", "", "server shutting down"))
	case <-ctx.Done():
	}
	c.mc.Close()
}

func (c *conn) serve() {
	lim := newLimiter(c.srv.cfg.RequestRate, c.srv.cfg.RequestBurst)
	for {
		st, err := c.mc.Accept()
		if err != nil {
			return
		}
		if c.mc.Err() != nil || !lim.wait(c.mc.Done()) {
			// The connection ended while the request waited its turn:
			// there is no one to answer (and the thousands a client may
			// have queued must not each take a goroutine to find out).
			st.Release()
			continue
		}
		// Requests are counted under c.mu so that drain, once it has set
		// draining, waits for a count that can only fall.
		c.mu.Lock()
		draining := c.draining
		if !draining {
			c.reqs.Add(1)
		}
		c.mu.Unlock()
		if draining {
			go st.Send(st.Context(), proto.FErr, proto.AppendError(nil, zx.E(zx.ErrLimit, "", "", "server shutting down")), true)
			continue
		}
		req, err := proto.ParseRequest(st.Request())
		if err != nil {
			go c.fail(st, err)
			continue
		}
		// The request waits here, and those after it behind it, until
		// the connection and the server have room to serve it: a
		// client's requests queue in the connection's buffers (at most
		// maxstreams of them), instead of each taking goroutines.
		if err := st.Admit(st.Context(), requestCost(req)); err != nil {
			go c.fail(st, zx.Errorf(proto.OpName(req.Op), req.Path, err))
			continue
		}
		c.dispatch(st, req)
	}
}

// requestCost is what serving req costs beside the data its work holds
// (which the tree counts with zx.TakeMemory, and the server as it sends
// it): the goroutines of the server and the tree and their stacks (about
// 4.5 KiB each, measured with thousands of requests waiting), contexts,
// timers and the order queue's entry; for a find, also the entries it
// hands over ahead of its reader (64, of about 1 KiB each) and its
// readers' goroutines; for a put, the message of its data being written
// (at most proto.MaxPayload).
func requestCost(req *proto.Request) int {
	switch req.Op {
	case proto.OpFind, proto.OpFindGet:
		return baseCost + 80<<10
	case proto.OpPut:
		return baseCost + proto.MaxPayload
	}
	return baseCost
}

const baseCost = 16 << 10

// done ends the work on a request.
func (c *conn) done(st *mux.Stream) {
	st.Release()
	c.reqs.Done()
}

// fail answers a stream with one error.
func (c *conn) fail(st *mux.Stream, err error) {
	defer c.done(st)
	st.Send(st.Context(), proto.FErr, proto.AppendError(nil, err), true)
}

// tree returns the named tree as the connection's grant shows it. A tree
// not granted is reported exactly as one that does not exist.
func (c *conn) tree(name string) (zx.Tree, error) {
	if name == "" {
		name = c.srv.defName
	}
	if t, ok := c.seen[name]; ok {
		return t, nil
	}
	t, ok := c.srv.trees[name]
	if c.grant == nil {
		if !ok {
			return nil, zx.E(zx.ErrNotExist, "attach", name, "no tree named "+name)
		}
		return t, nil
	}
	access := c.grant.Access(name)
	if !ok || access == auth.NoAccess {
		return nil, zx.E(zx.ErrNotExist, "attach", name, "no tree named "+name+" that user "+c.grant.User+" may use")
	}
	g := &guard{t: t, readOnly: access == auth.ReadOnly,
		why: "user " + c.grant.User + " has read-only access to tree " + name}
	if c.grant.MapsIDs() {
		g.multi = c.grant
	}
	if c.seen == nil {
		c.seen = make(map[string]zx.Tree)
	}
	c.seen[name] = g
	return g, nil
}

// caller returns the identity a request acts as, if the connection's key
// gives one.
func (c *conn) caller(req *proto.Request) (zx.Caller, bool) {
	if c.grant == nil {
		return zx.Caller{}, false
	}
	cuid, cgid := int64(-1), int64(-1)
	if req.HasCaller {
		cuid, cgid = int64(req.Uid), int64(req.Gid)
	}
	id := c.grant.Identity(cuid, cgid)
	if id.Uid < 0 && id.Gid < 0 {
		return zx.Caller{}, false
	}
	return zx.Caller{Uid: id.Uid, Gid: id.Gid}, true
}

// dispatch issues one request to its tree. It runs on the accept loop, so
// requests reach the tree in the order they were sent; it must not block.
func (c *conn) dispatch(st *mux.Stream, req *proto.Request) {
	op := proto.OpName(req.Op)
	// What the tree holds for the request counts against the
	// connection's and the server's buffers, and a reply the client does
	// not read stops the work for it (zx.Memory).
	ctx := zx.WithMemory(st.Context(), st)
	if who, ok := c.caller(req); ok {
		ctx = zx.WithCaller(ctx, who)
	}
	if g := c.grant; g != nil && !g.MultiUser && req.HasCaller && (g.Uid >= 0 || g.Gid >= 0) {
		ctx = context.WithValue(ctx, selfMapKey{}, selfMap{cuid: req.Uid, cgid: req.Gid, uid: g.Uid, gid: g.Gid})
	}
	t, err := c.tree(req.Tree)
	if err == nil {
		req.Path, err = zx.CleanPath(req.Path)
		if err == nil && (req.Op == proto.OpMove || req.Op == proto.OpLink) {
			req.To, err = zx.CleanPath(req.To)
		}
	}
	if err != nil {
		go c.fail(st, zx.Errorf(op, req.Path, err))
		return
	}
	c.srv.reqs.Add(op)
	if c.srv.flags.On("debug") {
		c.srv.log.Info("request", "remote", c.remote, "op", op, "tree", req.Tree, "path", req.Path)
	}
	if ctl.Is(req.Path) && c.ctlRequest(ctx, st, req, t) {
		return
	}
	tname := req.Tree
	if tname == "" {
		tname = c.srv.defName
	}
	switch req.Op {
	case proto.OpDelegate, proto.OpRecalls, proto.OpReturn:
		if c.srv.cfg.NoDeleg {
			go c.fail(st, zx.E(zx.ErrProtocol, "decode", "", fmt.Sprintf("unknown request %d", req.Op)))
			return
		}
		switch req.Op {
		case proto.OpDelegate:
			go c.delegate(ctx, st, tname, req, t)
		case proto.OpRecalls:
			go c.recalls(st, tname, req.Owner)
		default:
			c.giveBack(ctx, st, tname, req, t) // issues its barrier now, in order
		}
		return
	}
	issue := func() { c.issue(ctx, st, req, t, tname) }
	if !c.hold(ctx, tname, req, issue) {
		issue()
	}
}

// issue hands a request to its tree. It must not block.
func (c *conn) issue(ctx context.Context, st *mux.Stream, req *proto.Request, t zx.Tree, tname string) {
	op := proto.OpName(req.Op)
	// brk reports a write's outcome to other clients' acknowledged
	// watches, before the writer hears it (callback.go).
	brk := func(d zx.Dir) { c.breakCallbacks(ctx, tname, req, d) }
	switch req.Op {
	case proto.OpAttach:
		go c.reply(st, t.Stat(ctx, "/"), nil)
	case proto.OpStat:
		go c.reply(st, t.Stat(ctx, req.Path), nil)
	case proto.OpWstat:
		go c.reply(st, t.Wstat(ctx, req.Path, req.Dir), brk)
	case proto.OpPut:
		var data io.Reader
		if !st.RecvEnded() {
			data = &streamReader{ctx: ctx, st: st}
		}
		go c.reply(st, t.Put(ctx, req.Path, req.Dir, req.Off, data), brk)
	case proto.OpMove:
		go c.status(st, t.Move(ctx, req.Path, req.To), brk, false)
	case proto.OpLink:
		go c.reply(st, zx.Link(ctx, t, req.Path, req.To), brk)
	case proto.OpStatFS:
		go c.reply(st, zx.StatFS(ctx, t, req.Path), nil)
	case proto.OpSync:
		if c.srv.cfg.NoSync {
			go c.fail(st, zx.E(zx.ErrProtocol, "decode", "", fmt.Sprintf("unknown request %d", req.Op)))
			return
		}
		go c.status(st, zx.Sync(ctx, t, req.Path), nil, false)
	case proto.OpAllocate:
		if c.srv.cfg.NoAlloc {
			go c.fail(st, zx.E(zx.ErrProtocol, "decode", "", fmt.Sprintf("unknown request %d", req.Op)))
			return
		}
		go c.reply(st, zx.Allocate(ctx, t, req.Path, zx.AllocMode(req.Mode), req.Off, req.Count), brk)
	case proto.OpRemove:
		go c.status(st, t.Remove(ctx, req.Path), brk, false)
	case proto.OpRemoveAll:
		// A removeall that failed may have removed part of the tree.
		go c.status(st, t.RemoveAll(ctx, req.Path), brk, true)
	case proto.OpGet:
		go c.items(st, t.Get(ctx, req.Path, req.Off, req.Count))
	case proto.OpFind, proto.OpFindGet:
		var items <-chan zx.Item
		if f, ok := t.(zx.Finder); ok {
			if req.Op == proto.OpFind {
				items = f.Find(ctx, req.Path, zx.FindOpts{Pred: req.Pred, Spref: req.Spref, Dpref: req.Dpref, Depth0: int(req.Depth)})
			} else {
				items = f.FindGet(ctx, req.Path, zx.FindOpts{Pred: req.Pred, Spref: req.Spref, Dpref: req.Dpref, Depth0: int(req.Depth)})
			}
		} else if req.Op == proto.OpFind {
			items = pred.Find(ctx, t, req.Path, zx.FindOpts{Pred: req.Pred, Spref: req.Spref, Dpref: req.Dpref, Depth0: int(req.Depth)})
		} else {
			go c.fail(st, zx.E(zx.ErrNotSupp, op, req.Path, "tree cannot findget"))
			return
		}
		go c.items(st, items)
	case proto.OpWatch:
		w, ok := t.(zx.Watcher)
		if !ok {
			go c.fail(st, zx.E(zx.ErrNotSupp, op, req.Path, "tree cannot watch"))
			return
		}
		c.mu.Lock()
		if c.watches == nil {
			c.watches = make(map[*mux.Stream]struct{})
		}
		c.watches[st] = struct{}{}
		c.mu.Unlock()
		if c.wantsAcks(st) {
			aw := &ackWatch{c: c, st: st, tree: tname, path: req.Path, kick: make(chan struct{}, 1), ackc: make(chan struct{})}
			go c.ackedEvents(aw, w.Watch(ctx, req.Path))
			return
		}
		go c.events(st, w.Watch(ctx, req.Path))
	default:
		go c.fail(st, zx.E(zx.ErrNotSupp, op, req.Path, "unknown request"))
	}
}

// reply sends a one-entry reply; brk, if set, first reports a successful
// write to other clients.
func (c *conn) reply(st *mux.Stream, rc <-chan zx.Reply, brk func(zx.Dir)) {
	defer c.done(st)
	r := <-rc
	ctx := st.Context()
	if brk != nil && r.Err == nil {
		brk(r.Dir)
	}
	if r.Err != nil {
		st.Send(ctx, proto.FErr, proto.AppendError(nil, r.Err), true)
		return
	}
	b := proto.AppendDir(nil, r.Dir)
	if len(b) > proto.MaxPayload {
		// Send would refuse it and the client wait for ever: say why.
		st.Send(ctx, proto.FErr, proto.AppendError(nil, zx.E(zx.ErrTooBig, "", r.Dir.Path(), "entry too large to send")), true)
		return
	}
	st.Send(ctx, proto.FDir, b, true)
}

// status sends a status reply; brk, if set, first reports the write to
// other clients, if it succeeded or always says so.
func (c *conn) status(st *mux.Stream, ec <-chan error, brk func(zx.Dir), always bool) {
	defer c.done(st)
	err := <-ec
	ctx := st.Context()
	if brk != nil && (err == nil || always) {
		brk(nil)
	}
	if err != nil {
		st.Send(ctx, proto.FErr, proto.AppendError(nil, err), true)
		return
	}
	st.Send(ctx, proto.FData, nil, true)
}

// maxBatch is the most bytes of entries the server puts in one DIRS
// message: enough to make the cost of a frame small beside the entries'
// (a hundred or so entries of a local tree), small enough that the client
// starts decoding soon.
const maxBatch = 16 << 10

// items sends a stream of items: entries, data and in-band errors. To a
// client that takes batches (proto.FeatureDirs), consecutive entries go in
// DIRS messages, but no entry waits for others: a batch is sent as soon as
// it is full or the tree has nothing more ready, so the first entries of a
// find leave at once and a slow walk delays nothing that is ready.
func (c *conn) items(st *mux.Stream, ic <-chan zx.Item) {
	defer c.done(st)
	ctx := st.Context()
	var failed, ended bool
	batching := peerTakesDirs(st)
	batch := proto.DirBatch{Max: maxBatch}
	flush := func() {
		if batch.Len() == 0 || failed {
			return
		}
		if err := st.Send(ctx, proto.FDirs, batch.Payload(), false); err != nil {
			failed = true
			st.Cancel(err)
		}
	}
	for {
		var it zx.Item
		var ok bool
		if batch.Len() > 0 {
			select {
			case it, ok = <-ic:
			default:
				// Let the tree's goroutine, which our last receive
				// may just have woken, run before deciding that
				// nothing is ready: trees that hand entries over an
				// unbuffered channel would otherwise make batches of
				// one or two. This waits for no entry, only for the
				// scheduler.
				runtime.Gosched()
				select {
				case it, ok = <-ic:
				default:
					flush() // nothing more ready
					it, ok = <-ic
				}
			}
		} else {
			it, ok = <-ic
		}
		if !ok {
			break
		}
		if failed || ended {
			continue // drain, so the tree's goroutine ends
		}
		if batching && it.Err == nil && it.Dir != nil {
			if batch.Add(it.Dir) {
				continue
			}
			flush()
			if !failed && batch.Add(it.Dir) {
				continue
			}
			// Too large for a batch: on its own, below.
		}
		flush()
		if failed {
			continue
		}
		var err error
		switch {
		case it.Err != nil && it.Dir != nil && it.Dir.Path() != "":
			// An error about one entry: the stream goes on.
			err = st.Send(ctx, proto.FErr, proto.AppendError(nil, zx.Errorf("", it.Dir.Path(), it.Err)), false)
		case it.Err != nil:
			// The request failed: this is the last message.
			err = st.Send(ctx, proto.FErr, proto.AppendError(nil, it.Err), true)
			ended = true
		case it.Dir != nil:
			b := proto.AppendDir(nil, it.Dir)
			if len(b) > proto.MaxPayload {
				b = proto.AppendError(nil, zx.E(zx.ErrTooBig, "", it.Dir.Path(), "entry too large to send"))
				err = st.Send(ctx, proto.FErr, b, false)
			} else {
				err = st.Send(ctx, proto.FDir, b, false)
			}
		case len(it.Data) > 0:
			// Counted until written. A tree that paces its reads
			// (zx.TakeMemory) gave its count back as it sent it.
			if err = st.Hold(ctx, len(it.Data)); err != nil {
				failed = true
				st.Fail(err)
				continue
			}
			err = st.SendHeld(ctx, proto.FData, it.Data, false)
		}
		if err != nil {
			failed = true
			st.Cancel(err)
		}
	}
	flush()
	if !failed && !ended {
		st.Send(ctx, proto.FData, nil, true)
	}
}

// peerTakesDirs reports whether the client of st offered to take DIRS
// messages. Its hello came before any request.
func peerTakesDirs(st *mux.Stream) bool {
	h, err := st.Conn().PeerHello(st.Context())
	return err == nil && slices.Contains(h.Features, proto.FeatureDirs)
}

func (c *conn) events(st *mux.Stream, ec <-chan zx.Event) {
	defer c.done(st)
	defer func() {
		c.mu.Lock()
		delete(c.watches, st)
		c.mu.Unlock()
	}()
	ctx := st.Context()
	var failed bool
	for ev := range ec {
		if failed {
			continue
		}
		var err error
		if ev.Err != nil {
			err = st.Send(ctx, proto.FErr, proto.AppendError(nil, ev.Err), false)
		} else {
			err = st.Send(ctx, proto.FEvent, proto.AppendEvent(nil, &proto.Event{Kind: uint8(ev.Kind), From: ev.From, Dir: ev.Dir}), false)
		}
		if err != nil {
			failed = true
			st.Cancel(err)
		}
	}
	if !failed {
		st.Send(ctx, proto.FData, nil, true)
	}
}

// streamReader reads a put's data from its stream.
type streamReader struct {
	ctx context.Context
	st  *mux.Stream
	buf []byte
	err error
}

func (r *streamReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		m, err := r.st.Recv(r.ctx)
		if err != nil {
			r.err = err
			continue
		}
		if m.Type != proto.FData {
			r.err = zx.E(zx.ErrProtocol, "put", "", "put data stream holds a non-data message")
			continue
		}
		r.buf = m.Data
		if m.End {
			r.err = io.EOF
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// WriteTo hands whole messages to w, saving a copy.
func (r *streamReader) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for {
		if len(r.buf) > 0 {
			m, err := w.Write(r.buf)
			n += int64(m)
			r.buf = r.buf[m:]
			if err != nil {
				return n, err
			}
		}
		if r.err != nil {
			if r.err == io.EOF {
				return n, nil
			}
			return n, r.err
		}
		msg, err := r.st.Recv(r.ctx)
		if err != nil {
			r.err = err
			continue
		}
		if msg.Type != proto.FData {
			r.err = zx.E(zx.ErrProtocol, "put", "", "put data stream holds a non-data message")
			continue
		}
		r.buf = msg.Data
		if msg.End {
			r.err = io.EOF
		}
	}
}

// limiter is a token bucket: rate requests per second, in bursts of at
// most burst. It is used by one goroutine.
type limiter struct {
	rate, burst, tokens float64
	last                time.Time
}

func newLimiter(rate float64, burst int) *limiter {
	return &limiter{rate: rate, burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

// wait takes a token, waiting for one if need be; false if done closed
// first.
func (l *limiter) wait(done <-chan struct{}) bool {
	if l.rate <= 0 {
		return true
	}
	now := time.Now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		return true
	}
	d := time.Duration((1 - l.tokens) / l.rate * float64(time.Second))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-done:
		return false
	}
	l.tokens = 0
	l.last = now.Add(d)
	return true
}
