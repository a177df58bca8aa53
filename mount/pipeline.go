package mount

import (
	"context"
	"strconv"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
)

// Pipelined metadata writes. Requests on a connection are applied in the
// order they are issued, so a change need not wait for its reply when the
// cache knows how it will turn out: removing an entry it knows exists,
// creating or renaming to a name it knows is free, in a directory the
// caller may write; chmod and utimens of a file it knows. Such a change
// is issued, answered at once from what the cache knows, and its reply
// awaited in the background. The rare surprise (another client got there
// first, a restriction the cache could not see) is logged, counted
// (Surprises, and "surprises" in /Ctl), and corrects the cache (the
// cache drops what the failed request touched) and the kernel (its
// entries and attributes for the paths are invalidated).

// knower is implemented by cache.Cache.
type knower interface {
	Known(p string) (zx.Dir, bool)
	KnownEmpty(p string) bool
	KnownDir(p string) (zx.Dir, bool)
	KnownFree(p string) bool
}

// known returns what the tree's cache knows of p without asking: the
// entry (nil: known not to exist) and whether it knows.
func (m *FS) known(p string) (zx.Dir, bool) {
	if m.opts.NoPipeline {
		return nil, false
	}
	k, ok := m.t.(knower)
	if !ok {
		return nil, false
	}
	return k.Known(p)
}

// knownDir returns the entry of directory p for its permissions.
func (m *FS) knownDir(p string) (zx.Dir, bool) {
	k, ok := m.t.(knower)
	if !ok || m.opts.NoPipeline {
		return nil, false
	}
	return k.KnownDir(p)
}

// knownFree reports whether a live watch tells the cache p is free.
func (m *FS) knownFree(p string) bool {
	k, ok := m.t.(knower)
	return ok && !m.opts.NoPipeline && k.KnownFree(p)
}

func (m *FS) knownEmpty(p string) bool {
	k, ok := m.t.(knower)
	return ok && !m.opts.NoPipeline && k.KnownEmpty(p)
}

// beforeChange sends again written-back data that failed for want of the
// server, so that a change about to be issued does not overtake it.
func (m *FS) beforeChange() {
	if m.wb != nil {
		m.wb.Retry()
	}
}

// wrote notes the outcome of a change the mount waited for: the first
// success shows the tree takes changes from us (a read-only key, or a
// read-only export, would refuse them); until then nothing is pipelined.
func (m *FS) wrote(err error) {
	switch {
	case err == nil:
		m.writable.CompareAndSwap(0, 1)
	case zx.KindOf(err) == zx.ErrReadOnly:
		m.writable.Store(-1)
	}
}

// mayChange reports whether the caller may certainly add or remove names
// in the directory whose entry is dir (for a removal, of the entry
// victim): the caller owns it and it is owner-writable, or it is
// writable by all and not sticky. Anything less certain is not pipelined.
func (m *FS) mayChange(ctx context.Context, dir, victim zx.Dir) bool {
	if dir == nil || !dir.IsDir() || m.writable.Load() != 1 {
		return false
	}
	c, ok := ctx.(*fuse.Context)
	if !ok {
		return false
	}
	uid := c.Caller.Owner.Uid
	mode := dir.Mode()
	owner := uint32(dir.Int(zx.AUid))
	owner = m.opts.IDMap.LocalUID(owner)
	sticky := mode&01000 != 0
	if sticky && victim != nil && m.opts.IDMap.LocalUID(uint32(victim.Int(zx.AUid))) != uid && owner != uid {
		return false
	}
	switch {
	case owner == uid && mode&0o200 != 0:
		return true
	case mode&0o002 != 0 && !sticky:
		return true
	}
	return false
}

// bg returns a context for a request whose reply is awaited in the
// background, bounded by the timeout, and registers the request as in
// flight on paths until done is called.
func (m *FS) bg(from context.Context, paths ...string) (ctx context.Context, done func()) {
	ctx, cancel := context.WithTimeout(m.ctx, m.opts.Timeout)
	if c := callerOf(from); c != nil {
		// Made for the caller of the FUSE request, as a request waited
		// for would be (see rctx).
		ctx = zx.WithCaller(ctx, *c)
	}
	ch := make(chan struct{})
	m.pmu.Lock()
	m.pseq++
	seq := m.pseq
	if m.pops == nil {
		m.pops = make(map[uint64]*pipeOp)
	}
	m.pops[seq] = &pipeOp{paths: paths, done: ch}
	m.pmu.Unlock()
	return ctx, func() {
		cancel()
		m.pmu.Lock()
		delete(m.pops, seq)
		m.pmu.Unlock()
		close(ch)
	}
}

// A fresh directory is one the mount is creating without waiting: until
// its reply is in, the cache knows nothing below it (a write on it is in
// flight), but the mount does: it is empty but for what the mount
// created in it since. So files and directories can be created in it
// without waiting too (tar -x).
type freshDir struct {
	d     zx.Dir          // the entry the mount made up for it
	names map[string]bool // created in it since
}

// freshFree reports whether name is known to be free in the fresh
// directory dir, and returns dir's entry.
func (m *FS) freshFree(dir, name string) (zx.Dir, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.fresh[dir]
	if f == nil || f.names[name] {
		return nil, false
	}
	return f.d, true
}

// freshNote records that name in dir was created (or, with gone, went
// away), if dir is fresh.
func (m *FS) freshNote(p string, gone bool) {
	dir, name := zx.Split(p)
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.fresh[dir]; f != nil {
		if gone {
			delete(f.names, name)
		} else {
			f.names[name] = true
		}
	}
}

// freshDrop forgets that the directories at p and below are fresh: one
// renamed over p, or from it, is not the one the mount made there, and
// may hold anything (the reply to the create, which forgets it too, may
// not have been handled yet).
func (m *FS) freshDrop(p string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for q := range m.fresh {
		if zx.HasPrefix(q, p) {
			delete(m.fresh, q)
		}
	}
}

// pipeOp is a pipelined change in flight.
type pipeOp struct {
	paths []string
	done  chan struct{}
}

// waitPipelined waits for the pipelined changes issued so far that touch
// p (all of them if p is ""), bounded by ctx.
func (m *FS) waitPipelined(ctx context.Context, p string) error {
	m.pmu.Lock()
	var chs []chan struct{}
	for _, op := range m.pops {
		for _, q := range op.paths {
			if p == "" || zx.Overlaps(p, q) {
				chs = append(chs, op.done)
				break
			}
		}
	}
	m.pmu.Unlock()
	for _, ch := range chs {
		select {
		case <-ch:
		case <-ctx.Done():
			return zx.E(zx.ErrTimeout, "sync", p, "changes still in flight")
		}
	}
	return nil
}

// surprise notes that a pipelined change failed.
func (m *FS) surprise(op, p string, err error, paths ...string) {
	m.surprises.Add(1)
	m.wrote(err)
	m.log.Warn("mount: a change answered without waiting failed on the server", "op", op, "path", p, "err", err)
	for _, q := range append([]string{p}, paths...) {
		m.correct(q, cache.InvalEntry|cache.InvalAttr)
		if q != "/" {
			dir, _ := zx.Split(q)
			m.correct(dir, cache.InvalAttr)
		}
	}
}

// Surprises returns how many pipelined changes failed on the server.
func (m *FS) Surprises() int64 { return m.surprises.Load() }

// changeAhead issues the change c of the entry at p without waiting for
// it. With write-back, the change goes through the journal first, so
// that a crash before the server has it loses nothing that depends on
// it (a file written in a directory made without waiting, or after a
// rename): replayed in order at the next mount. The reply comes once the
// change is settled; while the server cannot be reached, it waits in the
// journal. Otherwise (or if the journal cannot be written) it is sent to
// the tree under ctx.
func (m *FS) changeAhead(ctx context.Context, p string, c cache.Change) <-chan zx.Reply {
	if m.wb != nil {
		rc, err := m.wb.Change(m.origin(ctx, p), p, c)
		if err == nil {
			return rc
		}
		m.log.Error("mount: the change could not be journaled; sent without", "op", c.Op, "path", p, "err", err)
	}
	// Until its reply comes, the change is only in this process's
	// memory: the control file counts it ("pipelined"), so that zx
	// umount knows what unmounting would lose.
	m.unsent.Add(1)
	var rc <-chan zx.Reply
	switch c.Op {
	case "put":
		rc = m.t.Put(ctx, p, c.Dir, 0, nil)
	case "wstat":
		rc = m.t.Wstat(ctx, p, c.Dir)
	case "move":
		rc = replyOf(m.t.Move(ctx, p, c.To))
	default:
		rc = replyOf(m.t.Remove(ctx, p))
	}
	out := make(chan zx.Reply, 1)
	go func() {
		r := <-rc
		m.unsent.Add(-1)
		out <- r
	}()
	return out
}

// replyOf turns the outcome of a Move or Remove into a Reply.
func replyOf(ec <-chan error) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	go func() { c <- zx.Reply{Err: <-ec} }()
	return c
}

// origin says how a journal record of a change of p is made: for whom,
// and under which delegation.
func (m *FS) origin(ctx context.Context, p string) cache.Origin {
	o := cache.Origin{Caller: callerOf(ctx)}
	if m.dl != nil {
		o.Under = m.dl.DelegationOf(p)
	}
	return o
}

// callerOf returns the user a request is made for: the caller of the
// FUSE request ctx, or the one ctx carries; nil if none.
func callerOf(ctx context.Context) *zx.Caller {
	if c, ok := ctx.(*fuse.Context); ok {
		return &zx.Caller{Uid: int(c.Caller.Owner.Uid), Gid: int(c.Caller.Owner.Gid)}
	}
	if c, ok := zx.CallerFrom(ctx); ok {
		return &c
	}
	return nil
}

// errOf turns a Reply into the outcome of a Move or Remove.
func errOf(rc <-chan zx.Reply) <-chan error {
	c := make(chan error, 1)
	go func() { c <- (<-rc).Err }()
	return c
}

// awaitErr waits for the reply of a pipelined change in the background.
func (m *FS) awaitErr(op, p string, ec <-chan error, done func(), paths ...string) {
	go func() {
		defer done()
		if err := <-ec; err != nil {
			m.surprise(op, p, err, paths...)
		}
	}()
}

// removeAhead removes the entry d at p, in n, without waiting, if the
// cache knows enough. It reports whether it did.
func (n *node) removeAhead(ctx context.Context, p string, dir bool) (syscall.Errno, bool) {
	m := n.m
	d, ok := m.known(p)
	if !ok && dir {
		// Removals in flight below it (rm -r unlinked its files
		// without waiting) hide the directory from Known; its type
		// and owner are known, and knownEmpty says whether those
		// removals empty it.
		d, ok = m.knownDir(p)
	}
	if !ok {
		return 0, false
	}
	switch {
	case d == nil:
		return syscall.ENOENT, true
	case dir && !d.IsDir():
		return syscall.ENOTDIR, true
	case !dir && d.IsDir():
		return syscall.EISDIR, true
	case dir && !m.knownEmpty(p):
		return 0, false
	case d.Int(zx.ANlink) > 1 && !dir:
		return 0, false
	}
	pd, ok := m.knownDir(n.path())
	if !ok || !m.mayChange(ctx, pd, d) {
		return 0, false
	}
	if !dir {
		if in := m.lookupInode(p); in != nil {
			preserve(ctx, in) // open handles keep reading it
		}
	}
	bctx, done := m.bg(ctx, p)
	m.awaitErr("remove", p, errOf(m.changeAhead(bctx, p, cache.Change{Op: "remove"})), done)
	m.forgetIno(d, p)
	return 0, true
}

// createAhead creates the entry d (with a type) at p, in n, without
// waiting, if the cache knows the name is free. It returns the entry the
// new file will have, as far as the mount can tell.
//
// An exclusive create (Excl: open O_EXCL, mkdir, mknod) is made so only
// if a live watch tells the cache: within the coherency window, the
// name may have been taken by another client unseen, and the create
// answered at once would report success where open(2) says EEXIST (see
// cache.KnownFree). A create-or-truncate of a file (O_TRUNC, "size" 0)
// does what open(2) says whether the file is there or not, so the
// coherency window is enough for it.
func (n *node) createAhead(ctx context.Context, p string, d zx.Dir) (zx.Dir, bool) {
	m := n.m
	if d.Type() == zx.TypeLink || d[zx.ARdev] != "" || len(p) > zx.MaxPath {
		return nil, false // the server says what is wrong
	}
	dir, name := zx.Split(p)
	var free bool
	if d[zx.AExcl] != "" || d.Type() != zx.TypeFile || d[zx.ASize] != "0" {
		free = m.knownFree(p)
	} else {
		cur, ok := m.known(p)
		free = ok && cur == nil
	}
	pd, pok := m.knownDir(dir)
	if !free {
		// In a directory being created without waiting?
		if fd, ffree := m.freshFree(dir, name); ffree {
			free, pd, pok = true, fd, true
		}
	}
	if !free || !pok || !m.mayChange(ctx, pd, nil) {
		return nil, false
	}
	c := ctx.(*fuse.Context)
	nd := d.Clone()
	delete(nd, zx.AExcl)
	now := time.Now()
	nd[zx.AName], nd[zx.APath] = name, p
	if nd[zx.AUid] == "" {
		nd.SetInt(zx.AUid, int64(m.opts.IDMap.ServerUID(c.Caller.Owner.Uid)))
		nd.SetInt(zx.AGid, int64(m.opts.IDMap.ServerGID(c.Caller.Owner.Gid)))
	}
	if nd[zx.ASize] == "" {
		nd.SetInt(zx.ASize, 0)
	}
	if nd.IsDir() {
		nd.SetInt(zx.ANlink, 2)
	} else {
		nd.SetInt(zx.ANlink, 1)
	}
	nd.SetTime(zx.AMtime, now)
	nd.SetTime(zx.AAtime, now)
	nd.SetTime(zx.ACtime, now)
	m.freshNote(p, false)
	if nd.IsDir() {
		m.mu.Lock()
		if m.fresh == nil {
			m.fresh = make(map[string]*freshDir)
		}
		m.fresh[p] = &freshDir{d: nd, names: map[string]bool{}}
		m.mu.Unlock()
	}
	// A provisional inode number of our own until the server's is known:
	// keyed by path, a later file made at p could be taken for this one.
	nd[zx.AIno] = "~" + strconv.FormatUint(m.provisional.Add(1), 10)
	tmp := inoKey(nd, p)
	bctx, done := m.bg(ctx, p)
	rc := m.changeAhead(bctx, p, cache.Change{Op: "put", Dir: d})
	go func() {
		defer done()
		r := <-rc
		if nd.IsDir() && (r.Err != nil || !m.keepFresh(p)) {
			m.mu.Lock()
			delete(m.fresh, p)
			m.mu.Unlock()
		}
		if r.Err != nil {
			m.surprise("create", p, r.Err)
			return
		}
		// The file has the server's inode number from now on: keep the
		// local one the kernel was given; and the kernel gets the
		// server's attributes (owner, times) in place of our guess.
		m.aliasIno(r.Dir, tmp)
		if r.Dir[zx.AUid] != nd[zx.AUid] || r.Dir[zx.AGid] != nd[zx.AGid] || r.Dir[zx.AMode] != nd[zx.AMode] {
			// Guessed wrong (the server chose the owner): the kernel
			// asks again. (Times differ by a little, as a local file
			// system's would from the clock at the server.)
			m.correct(p, cache.InvalAttr)
		}
	}()
	return nd, true
}

// moveAhead renames from to to without waiting, if the cache knows both
// how it will turn out.
func (n *node) moveAhead(ctx context.Context, from, to string, noReplace bool) (syscall.Errno, bool) {
	m := n.m
	if len(to) > zx.MaxPath {
		return 0, false
	}
	fd, ok := m.known(from)
	if !ok || fd == nil || fd.IsDir() || fd.Int(zx.ANlink) > 1 {
		return 0, false
	}
	td, ok := m.known(to)
	if !ok || td != nil && (noReplace || td.IsDir() || td.Int(zx.ANlink) > 1) {
		return 0, false
	}
	fdir, tdir := zx.Parent(from), zx.Parent(to)
	fpd, ok1 := m.knownDir(fdir)
	tpd, ok2 := m.knownDir(tdir)
	if !ok1 || !ok2 || !m.mayChange(ctx, fpd, fd) || !m.mayChange(ctx, tpd, td) {
		return 0, false
	}
	if td != nil {
		if in := m.lookupInode(to); in != nil {
			preserve(ctx, in)
		}
	}
	bctx, done := m.bg(ctx, from, to)
	m.awaitErr("move", from, errOf(m.changeAhead(bctx, from, cache.Change{Op: "move", To: to})), done, to)
	if td != nil && td[zx.AIno] != fd[zx.AIno] {
		m.forgetIno(td, to)
	}
	return 0, true
}

// wstatAhead applies mode and times to the entry at p without waiting,
// if the mount knows it and the caller owns it. An owner and group equal
// to those the entry has (tar, as root, gives each file the owner it
// already has) are sent too, expected to change nothing. The entry is
// known from the cache; for a directory, from its permissions, which
// changes in flight below it do not alter; or, for a file or directory
// with changes of ours in flight (created, or written, without waiting:
// tar sets times, owner and mode right after writing), from what the
// mount made of it. It returns the entry the file will have.
func (n *node) wstatAhead(ctx context.Context, p string, d zx.Dir) (zx.Dir, bool) {
	m := n.m
	cur, ok := m.known(p)
	if !ok {
		if kd, dok := m.knownDir(p); dok {
			cur, ok = kd, true
		}
	}
	if !ok && m.inFlight(p) {
		// Written-back data, a create or writes sent without waiting:
		// the cache waits for their replies, but the mount knows the
		// file as they leave it.
		if cur = n.dir(); cur != nil {
			cur = cur.Clone()
			ok = true
		}
	}
	if !ok && m.wb != nil {
		if _, pending := m.wb.PendingSize(p); pending {
			if cur = n.dir(); cur != nil {
				cur = cur.Clone()
				ok = true
			}
		}
	}
	if !ok || cur == nil || cur.Int(zx.ANlink) > 1 && !cur.IsDir() || m.writable.Load() != 1 {
		return nil, false
	}
	if m.wb != nil {
		if sz, pending := m.wb.PendingSize(p); pending && !cur.IsDir() {
			cur.SetInt(zx.ASize, sz)
		}
	}
	if sz, dirty := n.wsSize(); dirty {
		cur.SetInt(zx.ASize, sz)
	}
	for k, v := range d {
		switch k {
		case zx.AMode, zx.AMtime, zx.AAtime:
		case zx.AUid, zx.AGid:
			if cur[k] != v || cur.Mode()&0o6000 != 0 {
				return nil, false // a real chown: the server decides
			}
		default:
			return nil, false
		}
	}
	c, ok := ctx.(*fuse.Context)
	if !ok || m.opts.IDMap.LocalUID(uint32(cur.Int(zx.AUid))) != c.Caller.Owner.Uid {
		return nil, false
	}
	nd := cur.Clone()
	for k, v := range d {
		nd[k] = v
	}
	nd.SetTime(zx.ACtime, time.Now())
	bctx, done := m.bg(ctx, p)
	rc := m.changeAhead(bctx, p, cache.Change{Op: "wstat", Dir: d})
	ws := n.openState()
	go func() {
		defer done()
		if r := <-rc; r.Err != nil {
			if ws != nil {
				// Reported by close and fsync, as the file's writes.
				ws.amu.Lock()
				if ws.aerr == nil {
					ws.aerr = r.Err
				}
				ws.amu.Unlock()
			}
			m.surprise("wstat", p, r.Err)
		} else if !sameAttrs(nd, r.Dir, d) {
			// The server made something else of it (a mode
			// it restricts, a clock of its own): the kernel
			// asks again. When it did as told, the kernel's
			// copy is right, and an invalidation would only
			// cost tar a GETATTR per file.
			m.correct(p, cache.InvalAttr)
		}
	}()
	return nd, true
}

// sameAttrs reports whether the server's entry got, after a wstat of
// the attributes d, what the mount told the kernel (nd) for them and for
// the size.
func sameAttrs(nd, got, d zx.Dir) bool {
	if got == nil || !got.IsDir() && got[zx.ASize] != nd[zx.ASize] {
		// (A directory's size is the server's business: the
		// kernel does not cache it for anything.)
		return false
	}
	for k := range d {
		if got[k] != nd[k] {
			return false
		}
	}
	return true
}

// inFlight reports whether a change the mount did not wait for is in
// flight on exactly p.
func (m *FS) inFlight(p string) bool {
	m.pmu.Lock()
	defer m.pmu.Unlock()
	for _, op := range m.pops {
		for _, q := range op.paths {
			if q == p {
				return true
			}
		}
	}
	return false
}

// openState returns the state the open handles of n share, nil if none.
func (n *node) openState() *wstate {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ws
}

// wsSize returns the size of the file as its open handles see it, if it
// has open handles.
func (n *node) wsSize() (int64, bool) {
	ws := n.openState()
	if ws == nil {
		return 0, false
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return ws.size, true
}

// aliasIno makes the server's inode number of d map to the local number
// its entry was given (under the provisional key tmp) before the server's
// was known.
func (m *FS) aliasIno(d zx.Dir, tmp string) {
	si := d[zx.AIno]
	if si == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.inos[tmp]; ok {
		// Also when the server's number is mapped already: it belonged
		// to a file now gone (the server reused it).
		m.inos[d.Type()+si] = n
		delete(m.inos, tmp)
	}
}
