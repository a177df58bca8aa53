package mount

import (
	"bytes"
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
)

// handle is an open file. Its writes go to the node's wstate, shared by
// every handle of the file, so that, as on a local disk, a write through
// one descriptor is seen at once through the others (and fstat of any of
// them gives the size it made).
type handle struct {
	n      *node
	flags  uint32
	s      *wstate
	rmu    sync.Mutex // guards rs; taken after s.mu
	rs     *rstream
	direct bool // read as a stream, whatever the size (see Open)
}

// wstate is what the open handles of a file share. Reads of files up to
// Options.WholeFile load the whole file once (served by the cache below
// when it is valid); larger files are read through one streaming Get per
// handle. Writes are kept here and sent on flush (close, fsync): one
// create-or-truncate Put with the whole contents when the file was created
// or truncated to zero, or one pipelined Put per written extent (and a
// Wstat per truncation), in order.
//
// Lock order: wstate.mu, then node.mu.
type wstate struct {
	mu      sync.Mutex
	refs    int   // open handles, guarded by node.mu
	size    int64 // size as seen through the handles
	rewrite bool  // content is the whole new file, to be sent whole
	loaded  bool  // content holds the whole file
	content []byte
	ops     []wop // writes and truncations to send, in order (!rewrite)
	// whole: ops start with a truncation to zero, so they make the whole
	// file without the server's copy (which a file unlinked while open
	// no longer has).
	whole bool
	dirty bool
	// gen counts the changes made to the file's data on the server
	// other than by writes (Allocate): a read stream started before
	// one may hold what it changed.
	gen uint64

	// The first error of writes sent without waiting (flushAhead), for
	// the next flush (close) or fsync to return.
	amu  sync.Mutex
	aerr error
}

// takeErr returns and clears the error of writes sent without waiting.
func (ws *wstate) takeErr() error {
	ws.amu.Lock()
	defer ws.amu.Unlock()
	err := ws.aerr
	ws.aerr = nil
	return err
}

// wop is a write (data at off) or, with data nil, a truncation to off.
type wop struct {
	off  int64
	data []byte
}

var (
	_ fs.FileReader   = (*handle)(nil)
	_ fs.FileWriter   = (*handle)(nil)
	_ fs.FileFlusher  = (*handle)(nil)
	_ fs.FileFsyncer  = (*handle)(nil)
	_ fs.FileReleaser = (*handle)(nil)
)

// newHandle returns a handle on n, whose entry is d. If stale, d may be
// older than writes of n's open handles (see writeMark), whose size
// then stands.
func (n *node) newHandle(d zx.Dir, flags uint32, stale bool) *handle {
	n.mu.Lock()
	ws := n.ws
	fresh := ws == nil
	if fresh {
		ws = &wstate{size: d.Size()}
		n.ws = ws
	}
	ws.refs++
	n.mu.Unlock()
	if fresh {
		n.m.setOpen(n, true)
	}
	if !fresh && !stale {
		ws.mu.Lock()
		if !ws.dirty {
			// Nothing unsent: take the file as it is now.
			ws.size, ws.rewrite, ws.loaded, ws.content, ws.ops, ws.whole = d.Size(), false, false, nil, nil, false
		}
		ws.mu.Unlock()
	}
	return &handle{n: n, flags: flags, s: ws}
}

// Open implements fs.NodeOpener. The kernel keeps its cached pages when
// the file has not changed since it cached them.
func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if flags&fuse.O_ANYWRITE != 0 {
		if e := n.m.ro(); e != 0 {
			return nil, 0, e
		}
	}
	d, pending := n.pendingDir()
	stale := false
	if !pending {
		var err error
		if d, stale, err = n.statFresh(ctx); err != nil {
			return nil, 0, errno(err)
		}
		if d.IsDir() {
			return nil, 0, syscall.EISDIR
		}
		if !stale {
			n.setDir(d)
		}
	}
	h := n.newHandle(d, flags, stale)
	if flags&syscall.O_TRUNC != 0 {
		h.truncate(0)
	}
	var fl uint32
	if !pending && !stale {
		n.mu.Lock()
		if v := version(d); n.kept == v {
			fl |= fuse.FOPEN_KEEP_CACHE
		} else {
			n.kept = v
		}
		n.mu.Unlock()
	}
	if d.Type() == zx.TypeCtl || d.Type() == zx.TypeFile && d.Size() == 0 && flags&syscall.O_ACCMODE == syscall.O_RDONLY {
		// Synthetic and zero-length files (Op §8: a device or a
		// stream often says 0) are read as they come, never cached,
		// their size ignored. Only when opened for reading: a file
		// opened to write grows like any other, and may be mapped
		// shared (which direct I/O forbids).
		fl = fuse.FOPEN_DIRECT_IO
		h.direct = true
	}
	return h, fl, 0
}

// pendingDir returns the entry to open a file with, without asking the
// server, when written-back data of the file is still on its way to it:
// what the mount knows, with the size through the pending writes (as
// Getattr answers). The server has not seen those writes anyway, and may
// not be reachable: with the link down they wait in the journal, and a
// write-back open, write and close of the file must not wait for the link.
// The kernel's cached pages are not kept (no version to check them by).
func (n *node) pendingDir() (zx.Dir, bool) {
	m := n.m
	if m.wb == nil {
		return nil, false
	}
	sz, ok := m.wb.PendingSize(n.path())
	d := n.dir()
	if !ok || d == nil || d.Type() != zx.TypeFile {
		return nil, false
	}
	d = d.Clone()
	d.SetInt(zx.ASize, sz)
	return d, true
}

// truncate resizes the file as seen through h. It reports false, doing
// nothing, when h.s is no longer the node's: a truncate(2) by path that
// took the open handles' state just before the last of them was released
// (the kernel sends RELEASE after close returns, so a handle may outlive
// its descriptor). That state's writes were sent, and nothing would send
// this truncation: the caller sends it itself.
func (h *handle) truncate(size int64) bool {
	h.s.mu.Lock()
	defer h.s.mu.Unlock()
	h.n.mu.Lock()
	attached := h.n.ws == h.s
	h.n.mu.Unlock()
	if !attached {
		return false
	}
	h.s.dirty = true
	if (h.s.rewrite || h.s.loaded) && size > h.n.m.opts.WholeFile {
		h.spill()
	}
	switch {
	case size == 0 && !h.s.rewrite:
		h.s.rewrite, h.s.loaded, h.s.content, h.s.ops, h.s.whole = true, false, []byte{}, nil, false
	case h.s.rewrite || h.s.loaded:
		h.s.content = resize(h.s.content, size)
		if !h.s.rewrite {
			h.s.ops = append(h.s.ops, wop{off: size})
		}
	default:
		h.s.ops = append(h.s.ops, wop{off: size})
	}
	h.s.size = size
	return true
}

func resize(b []byte, size int64) []byte {
	if int64(len(b)) >= size {
		return b[:size]
	}
	if int64(cap(b)) >= size {
		n := len(b)
		b = b[:size]
		clear(b[n:])
		return b
	}
	nb := make([]byte, size, max(size, 2*int64(cap(b))))
	copy(nb, b)
	return nb
}

// Write implements fs.FileWriter: the data stays in the handle until
// flush.
func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if e := h.n.m.ro(); e != 0 {
		return 0, e
	}
	h.s.mu.Lock() // not given up on an interrupt: see FS.rctx
	defer h.s.mu.Unlock()
	// O_APPEND: the kernel has already put off at the end, and a write
	// through a shared mapping (any writable handle) must stay where it is.
	end := off + int64(len(data))
	if (h.s.rewrite || h.s.loaded) && end > h.n.m.opts.WholeFile {
		h.spill()
	}
	if h.s.rewrite || h.s.loaded {
		if end > int64(len(h.s.content)) {
			h.s.content = resize(h.s.content, end)
		}
		copy(h.s.content[off:], data)
	}
	if !h.s.rewrite {
		// Extend the last write when this one continues it.
		if k := len(h.s.ops) - 1; k >= 0 && h.s.ops[k].data != nil && h.s.ops[k].off+int64(len(h.s.ops[k].data)) == off {
			h.s.ops[k].data = append(h.s.ops[k].data, data...)
		} else {
			h.s.ops = append(h.s.ops, wop{off: off, data: bytes.Clone(data)})
		}
	}
	h.s.size = max(h.s.size, end)
	h.s.dirty = true
	if !h.s.rewrite && h.pending() > h.n.m.opts.WholeFile {
		// Bound the memory a big write holds: send what we have.
		if _, e := h.flushLocked(ctx, false); e != 0 {
			return 0, e
		}
	}
	return uint32(len(data)), 0
}

// spill turns a handle that holds the whole file in memory into one that
// keeps only its writes, when the file grows past Options.WholeFile: a
// sparse file of terabytes must not be held whole. A file unlinked while
// open has no copy on the server: its writes are all it has, and they
// stay in memory (as on tmpfs). h.s.mu is held.
func (h *handle) spill() {
	if h.s.rewrite || h.s.loaded && h.n.unlinked() {
		// The file was created or truncated to zero (or has nothing
		// else): say so first.
		h.s.ops = []wop{{off: 0}}
		if len(h.s.content) > 0 {
			h.s.ops = append(h.s.ops, wop{off: 0, data: h.s.content})
		}
		h.s.whole = true
	}
	h.s.rewrite, h.s.loaded, h.s.content = false, false, nil
}

// pending is the number of bytes of unsent writes. h.s.mu is held.
func (h *handle) pending() int64 {
	var n int64
	for _, op := range h.s.ops {
		n += int64(len(op.data))
	}
	return n
}

// Read implements fs.FileReader.
func (h *handle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.s.mu.Lock() // not given up on an interrupt: see FS.rctx
	defer h.s.mu.Unlock()
	if h.direct && !h.s.dirty && !h.s.loaded {
		n, e := h.readStream(ctx, dest, off)
		if e != 0 {
			return nil, e
		}
		return fuse.ReadResultData(dest[:n]), 0
	}
	if off >= h.s.size {
		return fuse.ReadResultData(nil), 0
	}
	want := min(int64(len(dest)), h.s.size-off)
	if !h.s.rewrite && !h.s.loaded && !h.s.whole && max(h.baseSize(), h.s.size) <= h.n.m.opts.WholeFile {
		if e := h.load(ctx); e != 0 {
			return nil, e
		}
	}
	if h.s.rewrite || h.s.loaded {
		if off >= int64(len(h.s.content)) {
			return fuse.ReadResultData(nil), 0
		}
		k := copy(dest, h.s.content[off:min(off+want, int64(len(h.s.content)))])
		return fuse.ReadResultData(dest[:k]), 0
	}
	// A large file: stream it, then lay the unsent writes over it.
	buf := dest[:want]
	n := 0
	if !h.s.whole {
		var e syscall.Errno
		if n, e = h.readStream(ctx, buf, off); e != 0 {
			return nil, e
		}
	}
	clear(buf[n:])
	for _, op := range h.s.ops {
		if op.data == nil {
			if op.off < off+want {
				clear(buf[max(op.off-off, 0):])
			}
			continue
		}
		lo, hi := max(op.off, off), min(op.off+int64(len(op.data)), off+want)
		if lo < hi {
			copy(buf[lo-off:hi-off], op.data[lo-op.off:hi-op.off])
		}
	}
	return fuse.ReadResultData(buf), 0
}

// preserve loads the contents of in, a file about to lose its last
// name, into its open handles (if it has any, and it is not too big), so
// that they can go on reading it, as on a local disk.
func preserve(ctx context.Context, in *fs.Inode) {
	n, ok := in.Operations().(*node)
	if !ok {
		return
	}
	n.mu.Lock()
	ws := n.ws
	n.mu.Unlock()
	if ws == nil {
		return
	}
	h := &handle{n: n, s: ws}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if !ws.rewrite && !ws.loaded && max(h.baseSize(), ws.size) <= n.m.opts.WholeFile {
		h.load(ctx)
	}
}

// baseSize is the size of the file on the server, as last seen.
func (h *handle) baseSize() int64 {
	d := h.n.dir()
	if d == nil {
		return 0
	}
	return d.Size()
}

// load reads the whole file into h.s.content and replays the unsent
// writes over it. h.s.mu is held.
func (h *handle) load(ctx context.Context) syscall.Errno {
	rctx, cancel := h.n.m.rctx(ctx)
	defer cancel()
	b, err := zx.ReadFile(rctx, h.n.m.t, h.n.path())
	if err != nil {
		return errno(err)
	}
	for _, op := range h.s.ops {
		if op.data == nil {
			b = resize(b, op.off)
			continue
		}
		end := op.off + int64(len(op.data))
		if end > int64(len(b)) {
			b = resize(b, end)
		}
		copy(b[op.off:], op.data)
	}
	h.s.content, h.s.loaded = resize(b, h.s.size), true
	return 0
}

// Flush implements fs.FileFlusher: close returns once the server has
// the data (close-to-open).
func (h *handle) Flush(ctx context.Context) syscall.Errno { return h.flush(ctx) }

// Fsync implements fs.FileFsyncer (fsync and fdatasync alike): it sends
// the handle's writes and has the server make the file durable on its
// disk (zx.Syncer), with the sync sent right behind the writes when it
// can (the default mode), so that it costs no round trip of its own. With
// write-back, it waits for everything written before it, and then syncs.
func (h *handle) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	h.s.mu.Lock() // not given up on an interrupt: see FS.rctx
	synced, e := h.flushLocked(ctx, true)
	h.s.mu.Unlock()
	if e != 0 {
		return e
	}
	m := h.n.m
	if rel, back := m.backs(h.n.path()); back {
		rel()
		// Journaled (with write-back, or under a delegation): this
		// file's records, then its sync, which the server applies
		// after them; other files' records are not waited for.
		return h.fsyncBack(ctx)
	}
	if e := m.sync(ctx); e != 0 {
		return e
	}
	if !synced && !h.n.unlinked() {
		if e := m.durable(ctx, h.n.path()); e != 0 {
			return e
		}
	}
	if err := h.s.takeErr(); err != nil {
		return errno(err)
	}
	return 0
}

// fsyncBack is fsync of a file whose writes are journaled: with
// Options.FsyncLocal, once the journal survives a power loss of the
// client; otherwise once the server has the file's records and has made
// the file durable on its disk: the sync is sent at once, behind them,
// so it costs one round trip.
func (h *handle) fsyncBack(ctx context.Context) syscall.Errno {
	m := h.n.m
	if m.opts.FsyncLocal {
		if err := m.wb.Commit(); err != nil {
			m.log.Error("mount: committing the journal", "err", err)
			return syscall.EIO
		}
		return errno(h.s.takeErr())
	}
	if h.n.unlinked() {
		return 0
	}
	p := h.n.path()
	rctx, cancel := m.rctx(ctx)
	defer cancel()
	m.wb.Retry() // what waits for the link goes first
	sc := zx.Sync(rctx, m.t, p)
	if err := m.waitPipelined(rctx, p); err != nil {
		return errno(err)
	}
	if err := m.wb.SyncPath(rctx, p); err != nil {
		m.log.Warn("mount: fsync", "path", p, "err", err)
		if zx.KindOf(err) == zx.ErrTimeout {
			return syscall.ETIMEDOUT
		}
		return errno(err)
	}
	if e := m.syncErrno(p, <-sc); e != 0 {
		return e
	}
	return errno(h.s.takeErr())
}

// Release implements fs.FileReleaser. Writes made after the last flush
// (through a shared mapping) are sent.
func (h *handle) Release(ctx context.Context) syscall.Errno {
	if th := h.n.m.hooks.Load(); th != nil && th.releasing != nil {
		th.releasing(h.n.path())
	}
	// The read stream goes first, and without the shared lock: a flush
	// by another handle may hold that lock waiting for its put, which
	// the server orders after this stream's get.
	h.rmu.Lock()
	rs := h.rs
	h.rs = nil
	h.rmu.Unlock()
	if rs != nil {
		rs.stop()
	}
	// The last flush and the detaching of the shared state go under one
	// lock: a truncation recorded between them (truncate(2) by path,
	// which goes to the open handles' state, and may come after close
	// returned, before this late release) would be sent by no one.
	h.s.mu.Lock() // not given up on an interrupt: see FS.rctx
	_, e := h.flushLocked(ctx, false)
	h.n.mu.Lock()
	last := false
	if h.s.refs--; h.s.refs == 0 && h.n.ws == h.s {
		h.n.ws, last = nil, true
	}
	h.n.mu.Unlock()
	h.s.mu.Unlock()
	if last {
		h.n.m.setOpen(h.n, false)
	}
	if th := h.n.m.hooks.Load(); th != nil && th.released != nil {
		th.released(h.n.path())
	}
	return e
}

// flush sends the handle's writes and waits for the server.
func (h *handle) flush(ctx context.Context) syscall.Errno {
	h.s.mu.Lock() // not given up on an interrupt: see FS.rctx
	defer h.s.mu.Unlock()
	_, e := h.flushLocked(ctx, false)
	return e
}

// flushLocked is flush with h.s.mu held. If durable, and it sends writes
// and waits for them, it also has the server sync the file, with a
// request sent right after the writes, and says so (synced).
func (h *handle) flushLocked(ctx context.Context, durable bool) (synced bool, _ syscall.Errno) {
	m := h.n.m
	if h.n.unlinked() {
		// The file has no name left: its data goes nowhere, as on a
		// local disk once the last descriptor is closed. Reads through
		// the open handles still see it.
		return false, 0
	}
	p := h.n.path()
	// With write-back (or under a delegation), what is journaled may be
	// sent again later (a record that failed): the caller syncs once the
	// journal is through.
	release, back := m.backs(p)
	if back {
		defer release()
	} else if h.s.dirty {
		m.changing(p)
	}
	durable = durable && !back
	var sc <-chan error // the sync, sent right behind the writes
	if !h.s.dirty {
		if !back && (durable || h.flags&fuse.O_ANYWRITE != 0) {
			// Close-to-open: a file created without waiting exists on
			// the server once close returns, even if nothing was
			// written, and writes sent without waiting are there.
			rctx, cancel := m.rctx(ctx)
			defer cancel()
			var dc <-chan zx.Reply
			if m.inFlight(p) {
				dc = m.statDirAhead(rctx, p)
			}
			if durable {
				sc = zx.Sync(rctx, m.t, p)
			}
			if err := m.waitPipelined(rctx, p); err != nil {
				return false, errno(err)
			}
			if dc != nil {
				<-dc
			}
			if sc != nil {
				if e := m.syncErrno(p, <-sc); e != 0 {
					return false, e
				}
			}
		}
		if err := h.s.takeErr(); err != nil {
			return false, errno(err)
		}
		return sc != nil, 0
	}
	if back {
		e := h.writeBack(ctx, p)
		if e == 0 {
			// The mount's idea of the file's mtime moved on (see
			// writeBack); the kernel may have fetched attributes
			// since its last write invalidated them.
			m.refreshAttrs(h.n.EmbeddedInode())
		}
		return false, e
	}
	rctx, cancel := m.rctx(ctx)
	defer cancel()
	var last zx.Reply
	h.n.sendingWrites()
	if h.s.rewrite {
		data := h.s.content[:h.s.size]
		rc := m.t.Put(rctx, p, zx.Dir{zx.AType: zx.TypeFile, zx.ASize: itoa(h.s.size)}, 0, bytes.NewReader(data))
		if durable {
			sc = zx.Sync(rctx, m.t, p)
		}
		dc := m.statDirAhead(rctx, p)
		last = <-rc
		h.n.wroteWrites(last.Dir)
		<-dc
		m.wrote(last.Err)
		if last.Err != nil {
			return false, errno(last.Err)
		}
	} else {
		// Pipelined: issue all, then wait for all, in order.
		var rcs []<-chan zx.Reply
		for _, op := range h.s.ops {
			if op.data == nil {
				rcs = append(rcs, m.t.Wstat(rctx, p, zx.Dir{zx.ASize: itoa(op.off)}))
			} else {
				rcs = append(rcs, m.t.Put(rctx, p, zx.Dir{}, op.off, bytes.NewReader(op.data)))
			}
		}
		if durable {
			sc = zx.Sync(rctx, m.t, p)
		}
		dc := m.statDirAhead(rctx, p)
		var first error
		var ld zx.Dir // the entry the last write answered left
		for _, rc := range rcs {
			last = <-rc
			if last.Err != nil && first == nil {
				first = last.Err
			}
			if last.Dir != nil {
				ld = last.Dir
			}
		}
		h.n.wroteWrites(ld)
		<-dc
		if first != nil {
			return false, errno(first)
		}
		h.s.ops, h.s.whole = nil, false
	}
	h.s.dirty = false
	if last.Dir != nil {
		h.n.setDir(last.Dir)
		h.n.mu.Lock()
		h.n.kept = version(last.Dir) // the kernel's pages hold what we wrote
		h.n.mu.Unlock()
		h.s.size = last.Dir.Size()
		if h.s.loaded || h.s.rewrite {
			h.s.content = resize(h.s.content, h.s.size)
		}
	}
	m.refreshAttrs(h.n.EmbeddedInode())
	if sc != nil {
		if e := m.syncErrno(p, <-sc); e != 0 {
			return false, e
		}
	}
	if err := h.s.takeErr(); err != nil {
		return false, errno(err)
	}
	return sc != nil, 0
}

// statDirAhead asks for the attributes of the directory of p, beside a
// change to p that close is about to wait for, if the cache has them out
// of date (a file was made in it): issued after the change, the stat
// shows its effect and its reply comes with the change's, so a stat of
// the directory after close costs nothing (cc1 stats "." at each start,
// after the kernel dropped the directory's attributes for the object
// file made in it). Close waits for its reply too, which follows the
// change's at once, so that the cache has it when close returns.
func (m *FS) statDirAhead(ctx context.Context, p string) <-chan zx.Reply {
	if p == "/" {
		rc := make(chan zx.Reply, 1)
		rc <- zx.Reply{}
		return rc
	}
	return m.t.Stat(ctx, zx.Parent(p))
}

// flushAhead sends the handle's writes without waiting for the server
// (the default mode; with write-back, flush does not wait anyway). The
// requests are pipelined changes on the file's path: close waits for
// them (close-to-open) and returns their first error, as does fsync.
// Setattr uses it: tar sets times and modes on the open file before
// closing it, and a Put after them would undo them. h.s.mu is held.
func (h *handle) flushAhead(from context.Context) syscall.Errno {
	m := h.n.m
	if !h.s.dirty || h.n.unlinked() {
		return 0
	}
	p := h.n.path()
	if release, back := m.backs(p); back {
		defer release()
		return h.writeBack(from, p)
	}
	ctx, done := m.bg(from, p)
	h.n.sendingWrites()
	var rcs []<-chan zx.Reply
	if h.s.rewrite {
		// The Put reads its data after we return: a copy, as later
		// writes change the content in place.
		data := bytes.Clone(h.s.content[:h.s.size])
		rcs = append(rcs, m.t.Put(ctx, p, zx.Dir{zx.AType: zx.TypeFile, zx.ASize: itoa(h.s.size)}, 0, bytes.NewReader(data)))
	} else {
		for _, op := range h.s.ops {
			if op.data == nil {
				rcs = append(rcs, m.t.Wstat(ctx, p, zx.Dir{zx.ASize: itoa(op.off)}))
			} else {
				rcs = append(rcs, m.t.Put(ctx, p, zx.Dir{}, op.off, bytes.NewReader(op.data)))
			}
		}
		h.s.ops, h.s.whole = nil, false
	}
	h.s.dirty = false
	ws := h.s
	n := h.n
	go func() {
		defer done()
		var ld zx.Dir // the entry the last write answered left
		for _, rc := range rcs {
			r := <-rc
			if r.Dir != nil {
				ld = r.Dir
			}
			if r.Err != nil {
				ws.amu.Lock()
				first := ws.aerr == nil
				if first {
					ws.aerr = r.Err
				}
				ws.amu.Unlock()
				if first {
					// Logged, counted and invalidated as any
					// change answered without waiting; close
					// returns it.
					m.surprise("write", p, r.Err)
				}
			}
		}
		n.wroteWrites(ld) // before done: see sendingWrites
	}()
	h.n.dataChanged() // the kernel's pages: until the reply says what the file is
	return 0
}

// writeBack journals the handle's writes and issues them without
// waiting for the server (Options.WriteBack). h.s.mu is held.
func (h *handle) writeBack(ctx context.Context, p string) syscall.Errno {
	m := h.n.m
	var ops []cache.Op
	var data []byte
	if h.s.rewrite {
		data = h.s.content[:h.s.size]
		ops = []cache.Op{{Whole: true, Len: h.s.size}}
	} else {
		for _, op := range h.s.ops {
			if op.data == nil {
				ops = append(ops, cache.Op{Off: op.off, Trunc: true})
				continue
			}
			ops = append(ops, cache.Op{Off: op.off, Len: int64(len(op.data))})
			data = append(data, op.data...)
		}
	}
	if err := m.wb.Write(m.origin(ctx, p), p, ops, data, h.s.size); err != nil {
		m.log.Error("mount: write-back journal", "path", p, "err", err)
		return syscall.EIO
	}
	h.s.ops, h.s.whole = nil, false
	h.s.dirty = false
	if d := h.n.dir(); d != nil {
		nd := d.Clone()
		nd.SetInt(zx.ASize, h.s.size)
		nd.SetTime(zx.AMtime, time.Now())
		h.n.setDir(nd)
		// Lookups of the file are answered with it until the server
		// has the data (the kernel may forget the inode meanwhile).
		m.wb.SetEntry(p, nd)
	}
	// No invalidation of the kernel's attributes here: each write
	// already made the kernel drop the size and times it had, and
	// Setattr (tar's futimens right after writing, which sends the
	// writes through flushAhead) answers with the new ones; an
	// invalidation sent after that answer would cost a GETATTR before
	// the next chown or chmod. Flush asks for one.
	return 0
}

// truncateBack journals a truncation by path (truncate(2), no handle
// open) of a file whose written-back data is still on its way, as one
// more write-back record behind it, rather than sending a change that
// waits for the server: the queue (which reads of the file answer from)
// has it at once, and sends it in order, again if the link is down.
func (n *node) truncateBack(ctx context.Context, size int64) bool {
	m := n.m
	if m.wb == nil {
		return false
	}
	p := n.path()
	release, back := m.backs(p)
	if !back {
		return false
	}
	defer release()
	d := n.dir()
	if _, pending := m.wb.PendingSize(p); !pending || d == nil || d.Type() != zx.TypeFile {
		return false
	}
	if err := m.wb.Write(m.origin(ctx, p), p, []cache.Op{{Off: size, Trunc: true}}, nil, size); err != nil {
		m.log.Error("mount: write-back journal", "path", p, "err", err)
		return false
	}
	nd := d.Clone()
	nd.SetInt(zx.ASize, size)
	nd.SetTime(zx.AMtime, time.Now())
	n.setDir(nd)
	m.wb.SetEntry(p, nd)
	return true
}

func itoa(n int64) string {
	d := zx.Dir{}
	d.SetInt("n", n)
	return d["n"]
}

// ---- streaming reads of large files ----

// rstream is one streaming Get of a file from an offset: sequential reads
// share it.
type rstream struct {
	gen    uint64 // wstate.gen when it started
	off    int64  // file offset of the next byte
	c      <-chan zx.Item
	buf    []byte
	cancel context.CancelFunc
	err    error
	eof    bool

	// back holds the bytes the stream skipped over last (file offset
	// backOff), at most one skip's worth: the kernel's parallel
	// read-ahead sends reads out of order, and a read the stream has just
	// passed is served from here instead of by a Get of its own (a round
	// trip).
	back    []byte
	backOff int64
}

// fromBack copies the range [off, off+len(buf)) into buf if back holds
// all of it.
func (s *rstream) fromBack(buf []byte, off int64) bool {
	if off < s.backOff || off+int64(len(buf)) > s.backOff+int64(len(s.back)) {
		return false
	}
	copy(buf, s.back[off-s.backOff:])
	return true
}

// skipped keeps b, the bytes at offset off the stream skips over.
func (s *rstream) skipped(b []byte, off int64, limit int) {
	if s.backOff+int64(len(s.back)) != off {
		s.back, s.backOff = s.back[:0], off
	}
	s.back = append(s.back, b...)
	if over := len(s.back) - limit; over > 0 {
		s.back = s.back[over:]
		s.backOff += int64(over)
	}
}

func (s *rstream) stop() {
	s.cancel()
	go func() {
		for range s.c {
		}
	}()
}

// readStream fills buf from offset off, reusing the stream when the read
// continues it (or skips a little ahead). h.s.mu is held.
func (h *handle) readStream(ctx context.Context, buf []byte, off int64) (int, syscall.Errno) {
	h.rmu.Lock()
	defer h.rmu.Unlock()
	m := h.n.m
	const skip = 8 << 20
	if h.rs != nil && h.rs.gen != h.s.gen {
		h.rs.stop()
		h.rs = nil
	}
	if h.rs != nil && (off < h.rs.off || off > h.rs.off+skip || h.rs.err != nil) {
		if off < h.rs.off {
			// Out of order (parallel read-ahead): from what the stream
			// skipped, or else one Get for this range, keeping the
			// stream.
			if h.rs.fromBack(buf, off) {
				return len(buf), 0
			}
			rctx, cancel := m.rctx(ctx)
			defer cancel()
			var b bytes.Buffer
			if _, err := zx.Copy(&b, m.t.Get(rctx, h.n.path(), off, int64(len(buf)))); err != nil {
				return 0, errno(err)
			}
			return copy(buf, b.Bytes()), 0
		}
		h.rs.stop()
		h.rs = nil
	}
	if h.rs == nil {
		sctx, cancel := context.WithCancel(m.ctx)
		h.rs = &rstream{gen: h.s.gen, off: off, c: m.t.Get(sctx, h.n.path(), off, -1), cancel: cancel}
	}
	s := h.rs
	n := 0
	for n < len(buf) {
		if len(s.buf) == 0 {
			if s.eof {
				break
			}
			t := m.opts.Timeout
			tctx, cancel := context.WithTimeout(ctx, t)
			select {
			case it, ok := <-s.c:
				cancel()
				if !ok {
					s.eof = true
					continue
				}
				if it.Err != nil {
					s.err = it.Err
					return n, errno(it.Err)
				}
				s.buf = it.Data
			case <-tctx.Done():
				cancel()
				s.err = zx.E(zx.ErrTimeout, "get", h.n.path(), "")
				return n, syscall.ETIMEDOUT
			}
			continue
		}
		if s.off < off {
			k := min(int64(len(s.buf)), off-s.off)
			s.skipped(s.buf[:k], s.off, skip)
			s.buf = s.buf[k:]
			s.off += k
			continue
		}
		k := copy(buf[n:], s.buf)
		s.buf = s.buf[k:]
		s.off += int64(k)
		n += k
	}
	return n, 0
}
