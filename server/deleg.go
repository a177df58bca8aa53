package server

import (
	"context"
	"path"
	"sync"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/deleg"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/proto"
)

// Delegations (docs/protocol.md, "Delegations"; docs/design.md). A client
// opens a recalls stream per tree, naming its owner id; it may then ask
// for delegations of paths of that tree. A request of another connection
// that conflicts with a delegation is held (not handed to the tree) until
// the holder gave the delegation back (return, a barrier behind its
// earlier requests on the path) or lost it (the lease); the connection's
// later requests that overlap a held one are held behind it, so its order
// is kept, and the others go on.

// recallHolder is a connection's recalls stream for one tree: the holder
// of the owner's delegations of that tree.
type recallHolder struct {
	c     *conn
	st    *mux.Stream
	tree  string
	owner string // the table's owner key: the key's user and the client's id

	mu   sync.Mutex
	q    []string // paths to recall, in order
	kick chan struct{}
}

// Recall implements deleg.Holder.
func (h *recallHolder) Recall(tree, p string) {
	h.mu.Lock()
	h.q = append(h.q, p)
	h.mu.Unlock()
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// send sends the recalls queued until the stream ends.
func (h *recallHolder) send() {
	ctx := h.st.Context()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.kick:
		}
		h.mu.Lock()
		q := h.q
		h.q = nil
		h.mu.Unlock()
		for _, p := range q {
			ev := proto.Event{Kind: proto.EventRecall, Dir: zx.Dir{zx.APath: p, zx.AName: path.Base(p)}}
			if err := h.st.Send(ctx, proto.FEvent, appendEvent(&ev), false); err != nil {
				return
			}
		}
	}
}

// recalls serves a recalls stream: the connection holds owner's
// delegations of tree through it until it ends.
func (c *conn) recalls(st *mux.Stream, tree, owner string) {
	defer c.done(st)
	key := owner
	if c.grant != nil {
		key = c.grant.User + "/" + owner
	}
	h := &recallHolder{c: c, st: st, tree: tree, owner: key, kick: make(chan struct{}, 1)}
	c.mu.Lock()
	if c.holders == nil {
		c.holders = make(map[string]*recallHolder)
	}
	if old := c.holders[tree]; old != nil {
		c.mu.Unlock()
		st.Send(st.Context(), proto.FErr, proto.AppendError(nil, zx.E(zx.ErrInvalid, "recalls", "", "a recalls stream for this tree is open already")), true)
		return
	}
	c.holders[tree] = h
	if c.watches == nil {
		c.watches = make(map[*mux.Stream]struct{})
	}
	c.watches[st] = struct{}{} // ended by drain, as watches are
	c.mu.Unlock()
	tb := c.srv.delegs
	tb.Attach(key, h)
	// The stream is open: the first event says so, as a watch's ready.
	ev := proto.Event{Kind: uint8(zx.Ready), Dir: zx.Dir{zx.APath: "/", zx.AName: "/"}}
	if st.Send(st.Context(), proto.FEvent, appendEvent(&ev), false) == nil {
		h.send()
	}
	tb.Detach(key, h)
	c.mu.Lock()
	delete(c.holders, tree)
	delete(c.watches, st)
	c.mu.Unlock()
}

// holder returns the connection's recalls stream for tree, or nil.
func (c *conn) holder(tree string) *recallHolder {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holders[tree]
}

// delegate answers a request for a delegation of p with a proto.Grant:
// granted, held already, or refused, with what the owner should know of
// its delegations there that were revoked. Other clients' acknowledged
// watches on p drop what they cached of it before a grant is answered.
func (c *conn) delegate(ctx context.Context, st *mux.Stream, tree string, req *proto.Request, t zx.Tree) {
	defer c.done(st)
	h := c.holder(tree)
	var err error
	switch {
	case h == nil:
		err = zx.E(zx.ErrInvalid, "delegate", req.Path, "open a recalls stream for the tree first")
	case isReadOnly(t):
		err = zx.E(zx.ErrReadOnly, "delegate", req.Path, "read-only access: nothing to delegate")
	}
	if err != nil {
		st.Send(ctx, proto.FErr, proto.AppendError(nil, err), true)
		return
	}
	ok, held, rv := c.srv.delegs.Grant(tree, req.Path, h.owner, h)
	g := proto.Grant{Refused: !ok, Held: held}
	if rv != nil {
		g.Revoked, g.All = true, rv.All
		size := 0
		for p := range rv.Touched {
			if size += len(p) + 4; size > proto.MaxPayload/2 {
				g.All, g.Touched = true, nil
				break
			}
			g.Touched = append(g.Touched, p)
		}
	}
	if ok && !held {
		c.breakCallbacks(ctx, tree, &proto.Request{Op: proto.OpWstat, Path: req.Path}, nil)
	}
	st.Send(ctx, proto.FData, proto.AppendGrant(nil, &g), true)
}

// giveBack answers the return of the delegation of p: once the tree has
// applied the connection's earlier requests on p (a stat of p, ordered
// behind them, is the barrier), the delegation ends and requests held for
// it go on.
func (c *conn) giveBack(ctx context.Context, st *mux.Stream, tree string, req *proto.Request, t zx.Tree) {
	var d *deleg.Deleg
	if h := c.holder(tree); h != nil {
		d = c.srv.delegs.Returning(tree, req.Path, h.owner)
	}
	rc := t.Stat(ctx, req.Path) // issued now, in the connection's order
	go func() {
		defer c.done(st)
		<-rc
		if d != nil {
			c.srv.delegs.Return(d)
		}
		st.Send(ctx, proto.FData, nil, true)
	}()
}

// isReadOnly reports whether t is a guard that refuses writes.
func isReadOnly(t zx.Tree) bool {
	g, ok := t.(*guard)
	return ok && g.readOnly
}

// scope returns the paths of req that delegations concern and how, and
// false for requests they do not hold (watches, statfs, the delegation
// requests themselves, the control file).
func scope(req *proto.Request) (deleg.Scope, []string, bool) {
	switch req.Op {
	case proto.OpFind, proto.OpFindGet, proto.OpRemoveAll:
		return deleg.Walk, []string{req.Path}, true
	case proto.OpMove:
		return deleg.Walk, []string{req.Path, req.To}, true
	case proto.OpLink:
		return deleg.Inside, []string{req.Path, req.To}, true
	case proto.OpStat, proto.OpGet, proto.OpPut, proto.OpWstat, proto.OpRemove, proto.OpSync, proto.OpAllocate:
		return deleg.Inside, []string{req.Path}, true
	}
	return 0, nil, false
}

// heldReq is a request held for a recall, or behind one.
type heldReq struct {
	paths  []string
	write  bool          // the request changes the tree
	issued chan struct{} // closed once handed to the tree
}

// hold reports whether req must wait before it is handed to the tree: it
// conflicts with another owner's delegation, or overlaps a request of the
// connection held before it. If so, it starts a goroutine that waits, then
// calls issue, and returns true.
func (c *conn) hold(ctx context.Context, tree string, req *proto.Request, issue func()) bool {
	s, paths, ok := scope(req)
	if !ok {
		return false
	}
	owner := ""
	if h := c.holder(tree); h != nil {
		owner = h.owner
	}
	ds := c.srv.delegs.Conflicts(tree, owner, s, paths...)
	write := writes(req)
	if write && c.srv.delegs.Revocations() {
		// Kept for the owners of revoked delegations there.
		c.srv.delegs.Touch(tree, owner, paths...)
	}
	c.mu.Lock()
	var before []*heldReq
	for _, hr := range c.held {
		// As in the tree's order: reads do not wait for reads.
		if (write || hr.write) && overlapsAny(hr.paths, paths) {
			before = append(before, hr)
		}
	}
	if len(ds) == 0 && len(before) == 0 {
		c.mu.Unlock()
		return false
	}
	hr := &heldReq{paths: paths, write: write, issued: make(chan struct{})}
	c.held = append(c.held, hr)
	c.mu.Unlock()
	go func() {
		for _, b := range before {
			select {
			case <-b.issued:
			case <-ctx.Done():
			}
		}
		// Recalled and answered, or revoked within the lease: either
		// way the request goes on (a cancelled one fails in the tree).
		c.srv.delegs.Recall(ctx, ds)
		issue()
		c.mu.Lock()
		for i, x := range c.held {
			if x == hr {
				c.held = append(c.held[:i], c.held[i+1:]...)
				break
			}
		}
		c.mu.Unlock()
		close(hr.issued)
	}()
	return true
}

// writes reports whether req changes the tree.
func writes(req *proto.Request) bool {
	switch req.Op {
	case proto.OpStat, proto.OpGet, proto.OpFind, proto.OpFindGet, proto.OpSync:
		return false
	}
	return true
}

func overlapsAny(a, b []string) bool {
	for _, p := range a {
		for _, q := range b {
			if zx.Overlaps(p, q) {
				return true
			}
		}
	}
	return false
}
