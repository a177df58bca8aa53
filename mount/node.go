package mount

import (
	"context"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/ctl"
)

// node is a file, directory or other entry. Its path is where it hangs
// in the go-fuse inode tree.
type node struct {
	fs.Inode
	m *FS

	mu   sync.Mutex
	d    zx.Dir  // last entry seen
	kept string  // size/mtime of the data the kernel caches ("" none)
	ws   *wstate // shared by the open handles, nil if none
	// alt is another name of the file on the server, found when the
	// last name the mount knew was unlinked or replaced while the file
	// kept other links (see relink): "" if none.
	alt string
	// writing counts the writes of the open handles sent and not yet
	// answered (see sendingWrites).
	writing int
	// wgen counts the writes of the open handles sent so far: see
	// writeMark.
	wgen uint64
}

var (
	_ fs.NodeLookuper      = (*node)(nil)
	_ fs.NodeGetattrer     = (*node)(nil)
	_ fs.NodeSetattrer     = (*node)(nil)
	_ fs.NodeReaddirer     = (*node)(nil)
	_ fs.NodeOpener        = (*node)(nil)
	_ fs.NodeCreater       = (*node)(nil)
	_ fs.NodeMkdirer       = (*node)(nil)
	_ fs.NodeMknoder       = (*node)(nil)
	_ fs.NodeSymlinker     = (*node)(nil)
	_ fs.NodeReadlinker    = (*node)(nil)
	_ fs.NodeLinker        = (*node)(nil)
	_ fs.NodeUnlinker      = (*node)(nil)
	_ fs.NodeRmdirer       = (*node)(nil)
	_ fs.NodeRenamer       = (*node)(nil)
	_ fs.NodeStatfser      = (*node)(nil)
	_ fs.NodeGetxattrer    = (*node)(nil)
	_ fs.NodeSetxattrer    = (*node)(nil)
	_ fs.NodeListxattrer   = (*node)(nil)
	_ fs.NodeRemovexattrer = (*node)(nil)
	_ fs.NodeFsyncer       = (*node)(nil)
)

// path is where n is on the server: its name in the mount, or, once it
// has none, the other name relink found.
func (n *node) path() string {
	if n != n.m.root {
		if _, parent := n.Parent(); parent == nil {
			n.mu.Lock()
			alt := n.alt
			n.mu.Unlock()
			if alt != "" {
				return alt
			}
		}
	}
	return "/" + n.Path(n.m.root.EmbeddedInode())
}

// unlinked reports whether n has no name left, in the mount or found by
// relink.
func (n *node) unlinked() bool {
	_, parent := n.Parent()
	if parent != nil || n == n.m.root {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.alt == ""
}

func (n *node) setDir(d zx.Dir) {
	n.mu.Lock()
	old := n.d
	n.d = d
	n.mu.Unlock()
	if old != nil && d != nil && old[zx.AIno] != d[zx.AIno] && n != n.m.root {
		n.m.rekey(old, d, n.path(), n.StableAttr().Ino)
	}
}

// sendingWrites notes that writes of the open handles are about to be
// sent. A Put of ours may give the file a new server inode number (a
// server may write a whole file aside and rename it into place, as lfs
// did for a Put that empties one):
// until wroteWrites has learnt it from the reply, a lookup that meets
// the new number takes it for this file (see newChild), not for another
// one; the handles write by path, so the file at the path is theirs.
func (n *node) sendingWrites() {
	n.mu.Lock()
	n.writing++
	n.wgen++
	n.mu.Unlock()
	n.m.wgen.Add(1)
}

// wmark is where the writes of a node stood when a request was sent
// whose reply carries the node's attributes.
//
// The rule (docs/cache.md, "Attributes from the server and local
// writes"): attributes from the server (a stat, a lookup or a listing's
// entry, from the server or the cache, or the reply to a change) describe
// the file when they were produced. A write of the open handles sent
// while the request was in flight, or in flight when it was sent, may
// have changed the file since: the reply is stale. It is not kept as the
// node's entry, the size the open handles see stands, and the kernel is
// told not to cache it. A write sent before the request is not a race:
// the server applies requests in issue order, and the cache sends a
// request on a path with a write in flight to the server.
type wmark struct {
	n    *node  // the node marked; nil if none was known
	gen  uint64 // n.wgen then
	busy bool   // n had writes sent and not yet answered
	all  uint64 // FS.wgen then: for a reply that turns out to be another node's
}

// writeMark notes where n's writes stand before a stat is sent. The
// stat's reply says nothing of writes in flight then or sent while it
// is (the flush of a late release, of another handle): if racedWrites
// says so, the reply may be older than the size the handles made, and
// must neither answer for the size nor be kept as n's entry. The kernel
// would take that size (it only drops an attribute reply to a request
// sent before it changed the size itself), and an O_APPEND write after
// an O_TRUNC open would land at the old end.
func (n *node) writeMark() wmark {
	all := n.m.wgen.Load()
	n.mu.Lock()
	defer n.mu.Unlock()
	return wmark{n: n, gen: n.wgen, busy: n.writing > 0, all: all}
}

// markFor returns the write mark of cn, the node a request's reply is
// expected to describe (nil if none is known).
func (m *FS) markFor(cn *node) wmark {
	if cn == nil {
		return wmark{all: m.wgen.Load()}
	}
	return cn.writeMark()
}

// racedWrites reports whether writes of n were in flight at mark, or
// were sent since. A reply that found n by its inode number when mark
// was taken for another node (or none) raced if n has writes in flight
// or any node sent writes since.
func (n *node) racedWrites(mark wmark) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if mark.n != n {
		return n.writing > 0 || n.m.wgen.Load() != mark.all
	}
	return mark.busy || n.wgen != mark.gen
}

// localAttr lays over a, filled from d, an entry of n (at p) from the server,
// what local changes not yet on the server, or that d may not show, made
// of n: the size of unsent writes of the open handles, of written-back
// data on its way, and, if d raced writes of n (stale, see wmark), the
// size the open handles see. It reports whether the kernel must not
// cache a: d may be older than writes of n.
func (n *node) localAttr(d zx.Dir, p string, stale bool, a *fuse.Attr) (nocache bool) {
	if d.IsDir() {
		return false // written through no handle
	}
	sz, ok := n.dirtySize()
	if m := n.m; !ok && m.wb != nil {
		if sz, ok = m.wb.PendingSize(p); ok {
			stale = true // as pendingAttr: the server has not seen it
		}
	}
	if !ok && stale {
		sz, ok = n.wsSize()
	}
	if ok {
		a.Size = uint64(sz)
		a.Blocks = (a.Size + 511) / 512
	}
	return stale
}

// statFresh returns the entry at n's path, and whether it may be older
// than writes of n (see writeMark). It asks again (twice at most) when
// it may be and n has no open handles, whose size stands instead.
func (n *node) statFresh(ctx context.Context) (d zx.Dir, stale bool, err error) {
	for try := 0; ; try++ {
		mark := n.writeMark()
		d, err = n.m.stat(ctx, n.path())
		if th := n.m.hooks.Load(); th != nil && th.statted != nil {
			th.statted(n.path())
		}
		if stale = err == nil && n.racedWrites(mark); !stale || try == 2 || n.openState() != nil {
			return d, stale, err
		}
	}
}

// wroteWrites notes the reply to writes noted by sendingWrites: d, the
// entry the last of them left (nil if they failed), may carry a new
// server inode number, which the local inode now stands for.
func (n *node) wroteWrites(d zx.Dir) {
	if d != nil {
		n.learnIno(d)
	}
	n.mu.Lock()
	n.writing--
	n.mu.Unlock()
}

// writesInFlight reports whether writes noted by sendingWrites await
// their reply.
func (n *node) writesInFlight() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.writing > 0
}

// learnIno takes the server inode number of d, the entry a change of
// ours left, as that of n, keeping n's local inode. Only the number: the
// rest of the entry may be older than n's (a chmod sent after the change
// and answered at once).
func (n *node) learnIno(d zx.Dir) {
	si := d[zx.AIno]
	if si == "" || n == n.m.root || n.unlinked() {
		return
	}
	n.mu.Lock()
	old := n.d
	if old == nil || old[zx.AIno] == si || old.Type() != d.Type() {
		n.mu.Unlock()
		return
	}
	nd := old.Clone()
	nd[zx.AIno] = si
	n.d = nd
	n.mu.Unlock()
	n.m.rekey(old, nd, n.path(), n.StableAttr().Ino)
}

// linksChanged adds k to the link count of n, a directory, for a
// directory made in it or removed from it (or renamed into or out of it):
// until a stat brings the server's count, getattr may answer from n's
// entry (pendingAttr, while n's own creation is in flight), as tar -x
// does right after making the directories in one.
func (n *node) linksChanged(k int64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.d == nil || !n.d.IsDir() || n.d[zx.ANlink] == "" {
		return
	}
	nd := n.d.Clone()
	nd.SetInt(zx.ANlink, max(nd.Int(zx.ANlink)+k, 2))
	n.d = nd
}

func (n *node) dir() zx.Dir {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.d
}

// dataChanged notes that the kernel's cached pages are stale.
func (n *node) dataChanged() {
	n.mu.Lock()
	n.kept = ""
	n.mu.Unlock()
}

func version(d zx.Dir) string { return d[zx.ASize] + "/" + d[zx.AMtime] }

// stat returns the entry at p.
func (m *FS) stat(ctx context.Context, p string) (zx.Dir, error) {
	ctx, cancel := m.rctx(ctx)
	defer cancel()
	return zx.Stat(ctx, m.t, p)
}

// newChild returns the inode for entry d, a child of n, from a reply to
// a request sent at mark (see wmark).
func (n *node) newChild(ctx context.Context, d zx.Dir, p string, mark wmark, out *fuse.EntryOut) *fs.Inode {
	m := n.m
	if si := d[zx.AIno]; si != "" && !strings.HasPrefix(si, "~") {
		// The entry the kernel has here may be one created without
		// waiting, with a provisional number: this is that file, now
		// with the server's number; it keeps its inode (a directory
		// with two inodes makes the kernel fail a rename with ESTALE).
		// Or a file with writes of ours in flight, which may have
		// given it a new server number (see sendingWrites): a new
		// inode would leave its open handles writing to a file with
		// no name, and what they write would be lost. Unless the
		// number is that of another file the mount knows (one of
		// ours renamed over it, the tree not yet updated).
		if in := n.GetChild(path.Base(p)); in != nil {
			if cn, ok := in.Operations().(*node); ok {
				od := cn.dir()
				ino := in.StableAttr().Ino
				if od != nil && od.Type() == d.Type() && (strings.HasPrefix(od[zx.AIno], "~") || cn.writesInFlight() && m.inoFreeFor(d, p, ino)) {
					m.rekey(od, d, p, ino)
				}
			}
		}
	}
	ino := m.ino(d, p)
	child := &node{m: m, d: d}
	// go-fuse makes a new Inode here and, when the kernel already knows
	// one with this inode number, uses that one instead (so hard links
	// and repeated lookups get one inode).
	in := n.NewInode(ctx, child, fs.StableAttr{Mode: fileType(d), Ino: ino})
	m.fill(d, ino, &out.Attr)
	t := m.timeout()
	out.SetEntryTimeout(t)
	out.SetAttrTimeout(t)
	if d.IsDir() {
		return in
	}
	// The kernel takes these attributes for the inode it knows (a
	// lookup, or READDIRPLUS's, sent after its own last change of the
	// file): they must not undo local changes the entry may not show.
	cn := mark.n
	if cn == nil || cn.StableAttr().Ino != ino {
		cn = m.openNode(ino)
	}
	if cn != nil {
		if cn.localAttr(d, p, cn.racedWrites(mark), &out.Attr) {
			out.SetAttrTimeout(0)
		}
	} else if m.wb != nil {
		if sz, ok := m.wb.PendingSize(p); ok {
			out.Size = uint64(sz)
			out.Blocks = (out.Size + 511) / 512
			out.SetAttrTimeout(0)
		}
	}
	return in
}

// inoFreeFor reports whether the server inode number of d, at p, is
// given to no local inode, or to ino.
func (m *FS) inoFreeFor(d zx.Dir, p string, ino uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.inos[inoKey(d, p)]
	return !ok || cur == ino
}

// Lookup implements fs.NodeLookuper: from the cache when it knows.
func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if len(name) > zx.MaxName {
		return nil, syscall.ENAMETOOLONG
	}
	if name == ctl.Name && n == n.m.root {
		return n.ctlLookup(ctx, out), 0
	}
	p := zx.Join(n.path(), name)
	if _, free := n.m.freshFree(n.path(), name); free {
		// In a directory being created without waiting, and not
		// created in it since: the mount knows it is not there.
		n.m.noteNeg(n.EmbeddedInode(), name)
		return nil, syscall.ENOENT
	}
	var cn *node
	if in := n.GetChild(name); in != nil {
		cn, _ = in.Operations().(*node)
	}
	mark := n.m.markFor(cn)
	if d := n.delegatedChild(cn, p); d != nil {
		return n.newChild(ctx, d, p, mark, out), 0
	}
	if err := n.m.lookupFailed(p); err != nil {
		// Asked again at once (the kernel's lookup after its
		// revalidation failed): the server was not reached a moment
		// ago, and the program's operation has waited once already.
		return nil, errno(err)
	}
	d, err := n.m.stat(ctx, p)
	n.m.noteLookup(p, err)
	if th := n.m.hooks.Load(); th != nil && th.looked != nil {
		th.looked(p)
	}
	if err != nil {
		if zx.KindOf(err) == zx.ErrNotExist {
			n.m.noteNeg(n.EmbeddedInode(), name)
		}
		return nil, errno(err)
	}
	return n.newChild(ctx, d, p, mark, out), 0
}

// delegatedChild returns the entry of the child cn at p as the mount
// knows it, when a delegation covers p: nobody else changes it, and the
// mount's own changes (a rename over it, data on its way) may not be on
// the server yet, so asking would cost a round trip for what the mount
// knows already. Nil otherwise.
func (n *node) delegatedChild(cn *node, p string) zx.Dir {
	m := n.m
	if cn == nil || m.dl == nil || cn.unlinked() {
		return nil
	}
	rel, ok := m.backs(p)
	if !ok {
		return nil
	}
	defer rel()
	d := cn.dir()
	if d == nil {
		return nil
	}
	d = d.Clone()
	d[zx.APath], d[zx.AName] = p, path.Base(p)
	if sz, open := cn.wsSize(); open && !d.IsDir() {
		d.SetInt(zx.ASize, sz)
	}
	return d
}

// Getattr implements fs.NodeGetattrer.
func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if n.unlinkedAttr(out) {
		return 0
	}
	if n.pendingAttr(out) {
		return 0
	}
	d, stale, err := n.statFresh(ctx)
	if err != nil {
		// An open file that went away (unlinked) keeps its attributes.
		if d = n.dir(); d == nil || zx.KindOf(err) != zx.ErrNotExist {
			return errno(err)
		}
	} else if !stale {
		n.setDir(d)
	}
	n.m.fill(d, n.StableAttr().Ino, &out.Attr)
	// The reply may predate writes of the open handles: their size
	// stands (see wmark).
	if n.localAttr(d, n.path(), stale, &out.Attr) {
		out.SetTimeout(0)
	} else {
		out.SetTimeout(n.m.timeout())
	}
	return 0
}

// unlinkedAttr answers a getattr (fstat) of a file that has no name left
// but is still open: from what the mount last knew of it, with no link
// (st_nlink 0, as on a local disk) and the size the open handles see.
// The server is not asked: its path may name another file by now.
func (n *node) unlinkedAttr(out *fuse.AttrOut) bool {
	if n == n.m.root || !n.unlinked() {
		return false
	}
	d := n.dir()
	if d == nil {
		return false
	}
	n.m.fill(d, n.StableAttr().Ino, &out.Attr)
	out.Nlink = 0
	if sz, ok := n.wsSize(); ok {
		out.Size = uint64(sz)
		out.Blocks = (out.Size + 511) / 512
	}
	out.SetTimeout(0)
	return true
}

// pendingAttr answers a getattr of a file whose written data is still on
// its way to the server (write-back), or with changes the mount did not
// wait for in flight, from what the mount knows, so that stat after close
// does not wait for the data to arrive.
func (n *node) pendingAttr(out *fuse.AttrOut) bool {
	m := n.m
	p := n.path()
	var sz int64
	ok := false
	if m.wb != nil {
		sz, ok = m.wb.PendingSize(p)
	}
	d := n.dir()
	if !ok && d != nil && m.inFlight(p) {
		// A create, writes or attributes sent without waiting (fchown
		// makes the kernel ask right after tar's futimens).
		sz, ok = d.Size(), true
		if wsz, open := n.wsSize(); open {
			sz = wsz
		}
	}
	if !ok || d == nil {
		return false
	}
	m.fill(d, n.StableAttr().Ino, &out.Attr)
	out.Size = uint64(sz)
	out.Blocks = (out.Size + 511) / 512
	if dsz, ok := n.dirtySize(); ok {
		out.Size = uint64(dsz)
	}
	out.SetTimeout(0)
	return true
}

// dirtySize returns the size seen through the open handles when they
// have unsent writes.
func (n *node) dirtySize() (int64, bool) {
	n.mu.Lock()
	ws := n.ws
	n.mu.Unlock()
	if ws == nil {
		return 0, false
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.size, ws.dirty
}

// flushAll sends the unsent writes of the open handles of n.
func (n *node) flushAll(ctx context.Context) syscall.Errno {
	n.mu.Lock()
	ws := n.ws
	n.mu.Unlock()
	if ws == nil {
		return 0
	}
	return (&handle{n: n, s: ws}).flush(ctx)
}

// flushAhead sends the unsent writes of the open handles of n without
// waiting (see handle.flushAhead).
func (n *node) flushAhead(ctx context.Context) syscall.Errno {
	n.mu.Lock()
	ws := n.ws
	n.mu.Unlock()
	if ws == nil {
		return 0
	}
	h := &handle{n: n, s: ws}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return h.flushAhead(ctx)
}

func (m *FS) ro() syscall.Errno {
	if m.opts.ReadOnly {
		return syscall.EROFS
	}
	return 0
}

// Setattr implements fs.NodeSetattrer: chmod, chown, truncate, utimens.
func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := n.m.ro(); e != 0 {
		return e
	}
	d := zx.Dir{}
	if mode, ok := in.GetMode(); ok {
		d[zx.AMode] = zx.FormatMode(mode & 07777)
	}
	if uid, ok := in.GetUID(); ok {
		d.SetInt(zx.AUid, int64(n.m.opts.IDMap.ServerUID(uid)))
	}
	if gid, ok := in.GetGID(); ok {
		d.SetInt(zx.AGid, int64(n.m.opts.IDMap.ServerGID(gid)))
	}
	if mt, ok := in.GetMTime(); ok {
		d.SetTime(zx.AMtime, mt)
	}
	if at, ok := in.GetATime(); ok {
		d.SetTime(zx.AAtime, at)
	}
	size, hasSize := in.GetSize()
	if hasSize {
		// The open handles share the file's unsent writes: truncate
		// there (the kernel does not always say through which handle;
		// truncate(2) names none), and send it with them.
		h, ok := f.(*handle)
		if !ok {
			n.mu.Lock()
			if n.ws != nil {
				h, ok = &handle{n: n, s: n.ws}, true
			}
			n.mu.Unlock()
		}
		if th := n.m.hooks.Load(); ok && th != nil && th.truncating != nil {
			th.truncating(n.path())
		}
		if ok && h.truncate(int64(size)) {
			hasSize = false
		} else if !ok && n.truncateBack(ctx, int64(size)) {
			hasSize = false
		}
	}
	if len(d) > 0 || hasSize {
		// Unsent writes go first: a later flush would undo the change
		// (a Put sets mtime). They need not be waited for: the change
		// is applied after them.
		if e := n.flushAhead(ctx); e != 0 {
			return e
		}
	}
	if hasSize {
		d.SetInt(zx.ASize, int64(size))
	}
	if len(d) == 0 {
		return n.Getattr(ctx, f, out)
	}
	n.m.beforeChange()
	n.m.changing(n.path())
	// Writes in flight now were sent before the change, which the
	// server applies after them: only those sent from now on race it.
	mark := n.writeMark()
	mark.busy = false
	stale := false
	nd, ahead := n.wstatAhead(ctx, n.path(), d)
	if !ahead {
		rctx, cancel := n.m.rctx(ctx)
		defer cancel()
		if gid, ok := in.GetGID(); ok {
			rctx = n.m.groupCaller(ctx, rctx, gid)
		}
		var err error
		nd, err = zx.Wstat(rctx, n.m.t, n.path(), d)
		n.m.wrote(err)
		if err != nil {
			return errno(err)
		}
		stale = n.racedWrites(mark)
	}
	if !stale {
		n.setDir(nd)
	}
	n.m.fill(nd, n.StableAttr().Ino, &out.Attr)
	// Answered ahead, nd is what the mount knows (written-back data
	// pending included): the kernel may keep it. (A GETATTR after tar's
	// futimens would cost its chown one more request.)
	if n.localAttr(nd, n.path(), stale, &out.Attr) && !ahead {
		out.SetTimeout(0)
	} else {
		out.SetTimeout(n.m.timeout())
	}
	return 0
}

// Readdir implements fs.NodeReaddirer: one Get of the directory, whose
// entries fill the cache, so the lookups READDIRPLUS makes cost nothing.
func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	p := n.path()
	rctx, cancel := n.m.rctx(ctx)
	defer cancel()
	ds, err := zx.ReadDir(rctx, n.m.t, p)
	if err != nil {
		return nil, errno(err)
	}
	es := make([]fuse.DirEntry, 0, len(ds))
	for _, d := range ds {
		es = append(es, fuse.DirEntry{Name: d.Name(), Mode: fileType(d), Ino: n.m.ino(d, d.Path())})
	}
	return fs.NewListDirStream(es), 0
}

// create makes the entry d (with a type) at name in n, exclusively
// (d has "Excl"), or, for a file with "size" 0, creating or truncating
// it. With ahead, it may do so without waiting (see createAhead).
func (n *node) create(ctx context.Context, name string, d zx.Dir, ahead bool, out *fuse.EntryOut) (*fs.Inode, zx.Dir, syscall.Errno) {
	if e := n.m.ro(); e != 0 {
		return nil, nil, e
	}
	if len(name) > zx.MaxName {
		return nil, nil, syscall.ENAMETOOLONG
	}
	p := zx.Join(n.path(), name)
	n.callerOwns(ctx, d)
	n.m.beforeChange()
	n.m.changing(p)
	mark := n.m.markFor(nil)
	if ahead {
		if nd, ok := n.createAhead(ctx, p, d); ok {
			if nd.IsDir() {
				n.linksChanged(+1)
				n.m.askDelegation(p)
			}
			return n.newChild(ctx, nd, p, mark, out), nd, 0
		}
	}
	rctx, cancel := n.m.rctx(ctx)
	defer cancel()
	r := <-n.m.t.Put(rctx, p, d, 0, nil)
	n.m.wrote(r.Err)
	if r.Err != nil {
		return nil, nil, errno(r.Err)
	}
	n.m.freshNote(p, false)
	if r.Dir.IsDir() {
		n.linksChanged(+1)
		if n.m.dl != nil {
			// Made now, so empty: the mount knows its names while
			// the delegation it asks for lasts (see keepFresh).
			n.m.mu.Lock()
			if n.m.fresh == nil {
				n.m.fresh = make(map[string]*freshDir)
			}
			n.m.fresh[p] = &freshDir{d: r.Dir.Clone(), names: map[string]bool{}}
			n.m.mu.Unlock()
		}
		n.m.askDelegation(p)
	}
	return n.newChild(ctx, r.Dir, p, mark, out), r.Dir, 0
}

// callerOwns makes a caller other than root the owner of the entry d
// to be created, unless d names one.
func (n *node) callerOwns(ctx context.Context, d zx.Dir) {
	if c, ok := ctx.(*fuse.Context); ok && c.Caller.Owner.Uid != 0 && d[zx.AUid] == "" {
		d.SetInt(zx.AUid, int64(n.m.opts.IDMap.ServerUID(c.Caller.Owner.Uid)))
		d.SetInt(zx.AGid, int64(n.m.opts.IDMap.ServerGID(c.Caller.Owner.Gid)))
	}
}

// Create implements fs.NodeCreater. The kernel calls it for a name it
// believes is free, which it may not be on the server (another client
// made it, unseen without a watch): each flag combination must do what
// open(2) says against the server's file, in one round trip that cannot
// race another client's create.
//
//   - O_CREAT|O_EXCL: an exclusive create (Excl); EEXIST if it is there.
//   - O_CREAT|O_TRUNC: a create with size 0, which truncates a file that
//     is there.
//   - O_CREAT alone: see createOrOpen. Never truncated: that lost other
//     clients' files.
//
// Creates are answered without waiting (createAhead) with O_TRUNC, and
// with O_EXCL when a watch tells the cache the name is free (see
// createAhead). O_CREAT alone always waits: the kernel must be given
// the file that is there, if one is.
func (n *node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	d := zx.Dir{zx.AType: zx.TypeFile, zx.AMode: zx.FormatMode(mode & 07777)}
	if flags&(syscall.O_EXCL|syscall.O_TRUNC) == 0 {
		in, h, e := n.createOrOpen(ctx, name, d, flags, out)
		return in, h, 0, e
	}
	d[zx.ASize] = "0"
	if flags&syscall.O_EXCL != 0 {
		d[zx.AExcl] = "y"
	}
	in, nd, e := n.create(ctx, name, d, true, out)
	if e != 0 {
		return nil, nil, 0, e
	}
	return in, n.createdHandle(in, nd, flags), 0, 0
}

// createdHandle returns a handle on the file in, just created (empty)
// with entry nd.
func (n *node) createdHandle(in *fs.Inode, nd zx.Dir, flags uint32) *handle {
	cn := in.Operations().(*node)
	h := cn.newHandle(nd, flags, false)
	h.s.rewrite, h.s.content = true, []byte{}
	cn.mu.Lock()
	cn.kept = version(nd)
	cn.mu.Unlock()
	return h
}

// createOrOpen is open(O_CREAT) without O_EXCL or O_TRUNC: an exclusive
// create of the file d at name in n, with a stat of it sent right behind
// it, in the same round trip. The server applies them in order, so if
// the create fails with EEXIST, the stat's entry is the file that was
// there: it is opened as it is, as Open would, and the kernel gets its
// attributes (size included), so that reads and O_APPEND writes see its
// contents and other writes land in place. If it was removed between the
// two, the create is tried again.
func (n *node) createOrOpen(ctx context.Context, name string, d zx.Dir, flags uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, syscall.Errno) {
	if e := n.m.ro(); e != 0 {
		return nil, nil, e
	}
	if len(name) > zx.MaxName {
		return nil, nil, syscall.ENAMETOOLONG
	}
	m := n.m
	p := zx.Join(n.path(), name)
	n.callerOwns(ctx, d)
	d[zx.AExcl] = "y"
	m.beforeChange()
	m.changing(p)
	for try := 0; ; try++ {
		mark := m.markFor(nil)
		rctx, cancel := m.rctx(ctx)
		rc := m.t.Put(rctx, p, d, 0, nil)
		sc := m.t.Stat(rctx, p)
		r, sr := <-rc, <-sc
		cancel()
		m.wrote(r.Err)
		if r.Err == nil {
			m.freshNote(p, false)
			in := n.newChild(ctx, r.Dir, p, mark, out)
			return in, n.createdHandle(in, r.Dir, flags), 0
		}
		if zx.KindOf(r.Err) != zx.ErrExist {
			return nil, nil, errno(r.Err)
		}
		if sr.Err != nil {
			if zx.KindOf(sr.Err) == zx.ErrNotExist && try < 2 {
				continue // removed since: create it again
			}
			return nil, nil, errno(sr.Err)
		}
		sd := sr.Dir
		switch sd.Type() {
		case zx.TypeDir:
			return nil, nil, syscall.EISDIR
		case zx.TypeFile:
		default:
			// A link, fifo or device the kernel did not know: it must
			// look it up again and open what is there itself.
			m.correct(p, cache.InvalEntry)
			return nil, nil, syscall.EEXIST
		}
		in := n.newChild(ctx, sd, p, mark, out)
		cn := in.Operations().(*node)
		cn.setDir(sd) // an inode the kernel knew keeps its node
		h := cn.newHandle(sd, flags, false)
		cn.mu.Lock()
		cn.kept = version(sd)
		cn.mu.Unlock()
		return in, h, 0
	}
}

// Mkdir implements fs.NodeMkdirer.
func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	in, _, e := n.create(ctx, name, zx.Dir{zx.AType: zx.TypeDir, zx.AMode: zx.FormatMode(mode & 07777), zx.AExcl: "y"}, true, out)
	return in, e
}

// Mknod implements fs.NodeMknoder: fifos, sockets, devices and files.
func (n *node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d := zx.Dir{zx.AMode: zx.FormatMode(mode & 07777), zx.AExcl: "y"}
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		d[zx.AType] = zx.TypeFifo
	case syscall.S_IFSOCK:
		d[zx.AType] = zx.TypeSocket
	case syscall.S_IFCHR:
		d[zx.AType] = zx.TypeCharDev
		d.SetInt(zx.ARdev, int64(dev))
	case syscall.S_IFBLK:
		d[zx.AType] = zx.TypeBlkDev
		d.SetInt(zx.ARdev, int64(dev))
	case syscall.S_IFREG, 0:
		d[zx.AType] = zx.TypeFile
	default:
		return nil, syscall.EINVAL
	}
	in, _, e := n.create(ctx, name, d, true, out)
	return in, e
}

// Symlink implements fs.NodeSymlinker.
func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	in, _, e := n.create(ctx, name, zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: target, zx.AExcl: "y"}, true, out)
	return in, e
}

// Readlink implements fs.NodeReadlinker.
func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	d, err := n.m.stat(ctx, n.path())
	if err != nil {
		return nil, errno(err)
	}
	if d.Type() != zx.TypeLink {
		return nil, syscall.EINVAL
	}
	return []byte(d[zx.ATarget]), 0
}

// Link implements fs.NodeLinker with the tree's Link (zx.Linker); trees
// that cannot link give ENOTSUP.
func (n *node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.m.ro(); e != 0 {
		return nil, e
	}
	if len(name) > zx.MaxName {
		return nil, syscall.ENAMETOOLONG
	}
	if tn, ok := target.(*node); ok {
		// Its data must be on the server before it gets a second name.
		if e := tn.flushAll(ctx); e != 0 {
			return nil, e
		}
	}
	from := "/" + target.EmbeddedInode().Path(n.m.root.EmbeddedInode())
	if tn, ok := target.(*node); ok {
		from = tn.path() // also for an open file relinked elsewhere
	}
	p := zx.Join(n.path(), name)
	tn, _ := target.(*node)
	mark := n.m.markFor(tn)
	rctx, cancel := n.m.rctx(ctx)
	defer cancel()
	r := <-zx.Link(rctx, n.m.t, from, p)
	if r.Err != nil {
		return nil, errno(r.Err)
	}
	return n.newChild(ctx, r.Dir, p, mark, out), 0
}

func (n *node) remove(ctx context.Context, name string, dir bool) syscall.Errno {
	if e := n.m.ro(); e != 0 {
		return e
	}
	p := zx.Join(n.path(), name)
	n.m.beforeChange()
	n.m.changing(p)
	if !dir {
		if e, ok := n.removeDelegated(ctx, name, p); ok {
			return e
		}
	}
	if e, ok := n.removeAhead(ctx, p, dir); ok {
		if e == 0 && dir {
			n.linksChanged(-1)
		}
		return e
	}
	d, err := n.m.stat(ctx, p)
	if err != nil {
		return errno(err)
	}
	switch {
	case dir && !d.IsDir():
		return syscall.ENOTDIR
	case !dir && d.IsDir():
		return syscall.EISDIR
	}
	var linked *node // an open file that keeps other names
	if ch := n.GetChild(name); ch != nil && !dir {
		if d.Int(zx.ANlink) <= 1 {
			preserve(ctx, ch)
		} else if cn, ok := ch.Operations().(*node); ok {
			// The file keeps another name, which the mount may not
			// know: what was written through this one goes first.
			if e := cn.flushAll(ctx); e != 0 {
				return e
			}
			linked = cn
		}
	}
	rctx, cancel := n.m.rctx(ctx)
	defer cancel()
	err = <-n.m.t.Remove(rctx, p)
	n.m.wrote(err)
	if err != nil {
		return errno(err)
	}
	n.m.freshNote(p, true)
	n.m.forgetIno(d, p)
	if dir {
		n.linksChanged(-1)
	}
	if linked != nil {
		n.RmChild(name) // as go-fuse will once we return
		linked.relink(ctx, d, p)
	}
	return 0
}

// relink gives n, an open file that lost its name p (entry d) but keeps
// other links, one of those names to go on reading and writing through,
// when the mount knows none of them: zx addresses files by path.
func (n *node) relink(ctx context.Context, d zx.Dir, p string) {
	if _, parent := n.Parent(); parent != nil {
		return // the mount knows another name
	}
	n.mu.Lock()
	open := n.ws != nil
	n.mu.Unlock()
	if !open {
		return
	}
	alt := n.m.otherName(ctx, d, p)
	n.mu.Lock()
	n.alt = alt
	n.mu.Unlock()
	if alt == "" {
		n.m.log.Warn("mount: an open file lost its name and no other name of it was found: what is written to it now is lost", "path", p, "ino", d[zx.AIno])
	}
}

// otherName finds another name of the file d, which had more than one
// link and has just lost its name p: first in p's directory (from the
// cache when it has the listing), then in the whole tree with one find
// (bounded by the mount's timeout). "" if there is none.
func (m *FS) otherName(ctx context.Context, d zx.Dir, p string) string {
	ino := d[zx.AIno]
	if ino == "" || strings.HasPrefix(ino, "~") {
		return ""
	}
	rctx, cancel := m.rctx(ctx)
	defer cancel()
	same := func(e zx.Dir) bool {
		return e != nil && e.Type() == zx.TypeFile && e[zx.AIno] == ino && e.Path() != p
	}
	if ds, err := zx.ReadDir(rctx, m.t, path.Dir(p)); err == nil {
		for _, e := range ds {
			if !same(e) {
				continue
			}
			// The listing may be older than the entry: check.
			if cur, err := zx.Stat(rctx, m.t, e.Path()); err == nil && same(cur) {
				return cur.Path()
			}
		}
	}
	f, ok := m.t.(zx.Finder)
	if !ok {
		return ""
	}
	fctx, stop := context.WithCancel(rctx)
	defer stop()
	found := ""
	for it := range f.Find(fctx, "/", zx.FindOpts{Pred: "type=- & ino=" + ino}) {
		if found == "" && it.Err == nil && same(it.Dir) {
			found = it.Dir.Path()
			stop()
		}
	}
	return found
}

// Unlink implements fs.NodeUnlinker.
func (n *node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, false)
}

// Rmdir implements fs.NodeRmdirer.
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.remove(ctx, name, true)
}

// Rename implements fs.NodeRenamer, with RENAME_NOREPLACE.
func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if e := n.m.ro(); e != 0 {
		return e
	}
	if len(newName) > zx.MaxName {
		return syscall.ENAMETOOLONG
	}
	const noReplace = 1
	if flags&^noReplace != 0 {
		// RENAME_EXCHANGE and RENAME_WHITEOUT: zx cannot do them
		// atomically; EINVAL is what rename(2) says for flags a file
		// system does not support.
		return syscall.EINVAL
	}
	from := zx.Join(n.path(), name)
	to := zx.Join("/"+newParent.EmbeddedInode().Path(n.m.root.EmbeddedInode()), newName)
	n.m.beforeChange()
	n.m.changing(from)
	n.m.changing(to)
	if e, ok := n.moveDelegated(ctx, name, newParent, newName, from, to, flags&noReplace != 0); ok {
		return e
	}
	if e, ok := n.moveAhead(ctx, from, to, flags&noReplace != 0); ok {
		return e
	}
	if flags&noReplace != 0 {
		_, err := n.m.stat(ctx, to)
		if err == nil {
			return syscall.EEXIST
		}
		if zx.KindOf(err) != zx.ErrNotExist {
			return errno(err)
		}
	}
	// The file a rename replaces goes away (the kernel looked it up
	// already, so this costs nothing).
	src, _ := n.m.stat(ctx, from)
	replaced, _ := n.m.stat(ctx, to)
	var linked *node // an open file replaced that keeps other names
	if replaced != nil && replaced.Type() == zx.TypeFile && (src == nil || src[zx.AIno] != replaced[zx.AIno]) {
		if ch := newParent.EmbeddedInode().GetChild(newName); ch != nil {
			if replaced.Int(zx.ANlink) <= 1 {
				preserve(ctx, ch)
			} else if cn, ok := ch.Operations().(*node); ok {
				// As in remove: its writes go first.
				if e := cn.flushAll(ctx); e != 0 {
					return e
				}
				linked = cn
			}
		}
	}
	rctx, cancel := n.m.rctx(ctx)
	defer cancel()
	err := <-n.m.t.Move(rctx, from, to)
	n.m.wrote(err)
	if err != nil {
		return errno(err)
	}
	n.m.freshNote(from, true)
	n.m.freshNote(to, false)
	n.m.freshDrop(from)
	n.m.freshDrop(to)
	if np, ok := newParent.(*node); ok && np != n && src != nil && src.IsDir() {
		n.linksChanged(-1)
		if replaced == nil || !replaced.IsDir() {
			np.linksChanged(+1)
		}
	}
	if replaced != nil && (src == nil || src[zx.AIno] != replaced[zx.AIno]) {
		n.m.forgetIno(replaced, to)
	}
	if linked != nil {
		newParent.EmbeddedInode().RmChild(newName) // as go-fuse will once we return
		linked.relink(ctx, replaced, to)
	}
	return 0
}

// Statfs implements fs.NodeStatfser with the tree's numbers (zx.StatFSer),
// asked at most once a second, or fixed, roomy ones for a tree that has
// none.
func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	d, err := n.m.statfs(ctx)
	if err != nil && zx.KindOf(err) != zx.ErrNotSupp {
		return errno(err)
	}
	const bs = 4096
	out.Bsize = bs
	out.Frsize = bs
	out.Blocks = 1 << 40 / bs
	out.Bfree = out.Blocks / 2
	out.Bavail = out.Blocks / 2
	out.Files = 1 << 30
	out.Ffree = 1 << 29
	out.NameLen = zx.MaxName
	if err == nil && d.Int("bsize") > 0 {
		out.Bsize = uint32(d.Int("bsize"))
		out.Frsize = out.Bsize
		out.Blocks = uint64(d.Int("blocks"))
		out.Bfree = uint64(d.Int("bfree"))
		out.Bavail = uint64(d.Int("bavail"))
		out.Files = uint64(d.Int("files"))
		out.Ffree = uint64(d.Int("ffree"))
	}
	return 0
}

// Fsync implements fs.NodeFsyncer (for fsync without a handle we know,
// and of directories). It waits for everything written through the mount
// before it and then has the server make the node durable: a directory's
// entries, or, for the mount point, the whole export (zx sync).
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if h, ok := f.(*handle); ok {
		return h.Fsync(ctx, flags)
	}
	if e := n.flushAll(ctx); e != 0 {
		return e
	}
	if e := n.m.sync(ctx); e != 0 {
		return e
	}
	if n.unlinked() {
		return 0
	}
	return n.m.durable(ctx, n.path())
}

// ---- extended attributes: "user.NAME" is the zx user attribute NAME ----

const xattrPrefix = "user."

func userAttr(attr string) (string, bool) {
	name, ok := strings.CutPrefix(attr, xattrPrefix)
	return name, ok && zx.IsUserAttr(name)
}

// Getxattr implements fs.NodeGetxattrer.
func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	name, ok := userAttr(attr)
	if !ok {
		return 0, syscall.ENODATA
	}
	d, err := n.m.stat(ctx, n.path())
	if err != nil {
		return 0, errno(err)
	}
	v, ok := d[name]
	if !ok {
		return 0, syscall.ENODATA
	}
	if len(dest) < len(v) {
		return uint32(len(v)), syscall.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// Listxattr implements fs.NodeListxattrer.
func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	d, err := n.m.stat(ctx, n.path())
	if err != nil {
		return 0, errno(err)
	}
	var b []byte
	for _, k := range d.Keys() {
		if zx.IsUserAttr(k) {
			b = append(append(b, xattrPrefix+k...), 0)
		}
	}
	if len(dest) < len(b) {
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

// Setxattr implements fs.NodeSetxattrer. zx deletes an attribute set to
// "", so an empty value cannot be stored: EINVAL.
func (n *node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	if e := n.m.ro(); e != 0 {
		return e
	}
	name, ok := strings.CutPrefix(attr, xattrPrefix)
	if !ok {
		return syscall.ENOTSUP
	}
	if !zx.IsUserAttr(name) || len(data) == 0 {
		return syscall.EINVAL
	}
	const xcreate, xreplace = 1, 2
	if flags&(xcreate|xreplace) != 0 {
		d, err := n.m.stat(ctx, n.path())
		if err != nil {
			return errno(err)
		}
		_, has := d[name]
		if flags&xcreate != 0 && has {
			return syscall.EEXIST
		}
		if flags&xreplace != 0 && !has {
			return syscall.ENODATA
		}
	}
	return n.wstat(ctx, zx.Dir{name: string(data)})
}

// Removexattr implements fs.NodeRemovexattrer.
func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	if e := n.m.ro(); e != 0 {
		return e
	}
	name, ok := userAttr(attr)
	if !ok {
		return syscall.ENODATA
	}
	d, err := n.m.stat(ctx, n.path())
	if err != nil {
		return errno(err)
	}
	if _, has := d[name]; !has {
		return syscall.ENODATA
	}
	return n.wstat(ctx, zx.Dir{name: ""})
}

func (n *node) wstat(ctx context.Context, d zx.Dir) syscall.Errno {
	rctx, cancel := n.m.rctx(ctx)
	defer cancel()
	mark := n.writeMark()
	mark.busy = false // as in Setattr
	nd, err := zx.Wstat(rctx, n.m.t, n.path(), d)
	if err != nil {
		return errno(err)
	}
	if !n.racedWrites(mark) {
		n.setDir(nd)
	}
	n.m.refreshAttrs(n.EmbeddedInode())
	return 0
}

var _ = time.Second
