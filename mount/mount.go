// Package mount is the FUSE adaptor: it serves any zx.Tree (normally a
// cache.Cache over a client.Tree) as a local file system, with go-fuse v2.
//
// Nodes hold no path of their own: a node's path is where it hangs in the
// go-fuse inode tree, so renames are right. Inode numbers are allocated by
// the mount, stable for its life, one per server inode ("ino"), so hard
// links share one. Errors are translated by zx.Errno only.
//
// When the tree has a live watch (cache.Cache.Watching), the kernel is
// told to cache entries and attributes for a long time (Options.Long), and
// the cache's change notices invalidate the kernel's copies; otherwise the
// kernel caches for the coherency window. See docs/cache.md.
package mount

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/ctl"
)

// Options configure a mount.
type Options struct {
	// Coherency is how long the kernel may cache entries and attributes
	// when the tree has no live watch. Default 1s.
	Coherency time.Duration
	// Long is how long the kernel may cache them with a live watch,
	// whose notices invalidate them. Default 1h.
	Long time.Duration
	// Timeout bounds every wait for the network: a request not answered
	// within it fails with ETIMEDOUT. Default 30s.
	Timeout time.Duration
	// WholeFile is the largest file read whole on first read (and so
	// cached whole by a cache below); larger files are streamed. Default
	// 64 MiB.
	WholeFile int64

	// NoPipeline: every change waits for the server's reply, even when
	// the cache knows how it will turn out (see pipeline.go).
	NoPipeline bool

	// IDMap translates owners (nil: none; see ParseIDMap).
	IDMap *IDMap

	// WriteBack: close() does not wait for the server; the file's data
	// is journaled on disk by the tree's write-back queue (the tree must
	// be a cache.Cache with a journal) and sent in the background. fsync
	// (of a file, or of any directory: the mount point is the whole
	// mount) waits for everything written before it.
	WriteBack bool
	// NoDelegations: never answer a close or a change without the
	// server (strict close-to-open, as before delegations). Otherwise,
	// with a cache that journals and a server that delegates, the mount
	// asks for a delegation of each directory it makes, and under one,
	// closes and changes return once journaled (docs/cache.md).
	NoDelegations bool
	// FsyncLocal: fsync and fdatasync of a file whose writes are
	// journaled (write-back, or under a delegation) return once the
	// journal survives a power loss of the client, not once the server
	// has the file on its disk (Coda's choice; docs/cache.md).
	FsyncLocal bool

	Debug              bool   // log every FUSE request
	AllowOther         bool   // let other users use the mount
	DefaultPermissions bool   // let the kernel check permissions
	ReadOnly           bool   // refuse every change with EROFS
	FsName             string // shown in /proc/mounts; default "zx"
	Logger             *slog.Logger
}

// FS is a mounted tree (the name Mount is taken by the function).
type FS struct {
	dir  string
	t    zx.Tree
	opts Options
	log  *slog.Logger
	srv  *fuse.Server
	root *node
	w    interface{ Watching() bool }
	wb   *cache.WriteBack // the cache's write-back queue, if it journals
	dl   delegator        // the cache's delegations, unless WriteBack or NoDelegations

	noSync sync.Once // the tree said it cannot sync (logged once)

	hooks atomic.Pointer[testHooks] // nil outside tests

	ctx    context.Context
	cancel context.CancelFunc

	surprises atomic.Int64 // pipelined changes that failed on the server
	unsent    atomic.Int64 // pipelined changes not journaled, not answered yet
	kinvals   atomic.Int64 // invalidations the mount asked of the kernel by itself
	writable  atomic.Int32 // 1: a change succeeded; -1: refused as read-only; 0: unknown
	pmu       sync.Mutex
	pseq      uint64
	pops      map[uint64]*pipeOp   // pipelined changes in flight
	fresh     map[string]*freshDir // directories being created without waiting; mu

	mu      sync.Mutex
	inos    map[string]uint64
	nextIno uint64
	open    map[uint64]*node // open files, by local inode number

	provisional atomic.Uint64 // numbers provisional inode numbers (createAhead)
	wgen        atomic.Uint64 // writes of open handles sent, on any node (see wmark)
	negs        map[negKey]bool
	unreached   map[string]unreached // lookups that failed for want of the server, by path

	sfmu   sync.Mutex // guards sf, sfAt
	sf     zx.Dir
	sfNone bool // the tree has no StatFS
	sfAt   time.Time

	invalq   chan inv
	invalOvf chan struct{}
	ovfDone  []func() // barriers (invalBarrier) that wait for the next invalAll; guarded by mu
	done     chan struct{}

	since time.Time  // for the control file (see ctl.go)
	flags *ctl.Flags // debug: log change notices and control commands
}

type negKey struct {
	parent *fs.Inode
	name   string
}

// unreached is a lookup that failed because the server could not be
// reached: when and why.
type unreached struct {
	at  time.Time
	err error
}

// unreachedFor is how long a failed lookup is remembered. When the
// kernel's revalidation of a cached name fails, it looks the name up
// again at once: without the memory, one stat of a program waited for the
// server twice (and a path of several cached names, twice per name).
const unreachedFor = time.Second

// lookupFailed returns why a lookup of p failed for want of the server
// just now, if it did.
func (m *FS) lookupFailed(p string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.unreached[p]
	if !ok || time.Since(u.at) > unreachedFor {
		return nil
	}
	return u.err
}

// noteLookup records the outcome of a lookup of p: a failure for want of
// the server (the connection lost and not re-established, or no answer in
// time) is remembered for unreachedFor; anything else forgets p.
func (m *FS) noteLookup(p string, err error) {
	k := zx.KindOf(err)
	unreachable := k == zx.ErrIO || k == zx.ErrTimeout
	m.mu.Lock()
	defer m.mu.Unlock()
	if !unreachable {
		delete(m.unreached, p)
		return
	}
	now := time.Now()
	for q, u := range m.unreached {
		if now.Sub(u.at) > unreachedFor {
			delete(m.unreached, q)
		}
	}
	if m.unreached == nil {
		m.unreached = make(map[string]unreached)
	}
	m.unreached[p] = unreached{now, err}
}

type inv struct {
	path string
	what cache.Inval
	node *fs.Inode // set: invalidate this node's attributes
	done func()    // set: a barrier; call it (everything before it is done)
}

// Invalidator is implemented by trees (cache.Cache) that report changes.
type Invalidator interface {
	SetOnInvalidate(func(path string, what cache.Inval))
}

// invalBarrierer is implemented by trees (cache.Cache) that wait for the
// kernel's invalidations before acknowledging a change notice.
type invalBarrierer interface {
	SetInvalidateBarrier(func(done func()))
}

// Mount mounts t on dir and serves it until Unmount.
func Mount(dir string, t zx.Tree, opts Options) (*FS, error) {
	if opts.Coherency == 0 {
		opts.Coherency = time.Second
	}
	if opts.Long <= 0 {
		opts.Long = time.Hour
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	if opts.WholeFile <= 0 {
		opts.WholeFile = 64 << 20
	}
	if opts.FsName == "" {
		opts.FsName = "zx"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &FS{
		dir: dir, t: t, opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel,
		inos: make(map[string]uint64), nextIno: 2, open: make(map[uint64]*node), negs: make(map[negKey]bool),
		invalq: make(chan inv, 8192), invalOvf: make(chan struct{}, 1), done: make(chan struct{}),
		since: time.Now(), flags: ctl.NewFlags("debug"),
	}
	m.w, _ = t.(interface{ Watching() bool })
	if wt, ok := t.(interface{ WriteBack() *cache.WriteBack }); ok {
		m.wb = wt.WriteBack()
	}
	if opts.WriteBack && m.wb == nil {
		cancel()
		return nil, errors.New("mount: write-back needs a cache with a journal")
	}
	if !opts.WriteBack && !opts.NoDelegations && m.wb != nil {
		m.dl, _ = t.(delegator)
	}

	// Check the tree, and fetch the root's listing: lookups of names in
	// the root then cost nothing.
	rctx, rcancel := context.WithTimeout(ctx, opts.Timeout)
	defer rcancel()
	rd, err := zx.Stat(rctx, t, "/")
	if err != nil {
		cancel()
		return nil, fmt.Errorf("mount: %w", err)
	}
	if !rd.IsDir() {
		cancel()
		return nil, fmt.Errorf("mount: the root is not a directory")
	}
	zx.ReadDir(rctx, t, "/")
	opts.IDMap.resolve(uint32(rd.Int(zx.AUid)), uint32(rd.Int(zx.AGid)), uint32(os.Getuid()), uint32(os.Getgid()))

	m.root = &node{m: m}
	m.root.setDir(rd)
	var neg time.Duration
	if m.watching() {
		neg = opts.Long
	} else {
		neg = max(opts.Coherency, 0)
	}
	fo := &fs.Options{
		MountOptions:    FUSEOptions(opts),
		NegativeTimeout: &neg,
		RootStableAttr:  &fs.StableAttr{Ino: 1, Mode: syscall.S_IFDIR},
		UID:             uint32(os.Getuid()),
		GID:             uint32(os.Getgid()),
		// A mode with no permission bits is shown as it is: go-fuse
		// would otherwise show 0644 (0755 for a directory), and a
		// shared mount's kernel would let anyone read the file.
		NullPermissions: true,
	}
	srv, err := fs.Mount(dir, m.root, fo)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("mount: %w", err)
	}
	m.srv = srv
	if iv, ok := t.(Invalidator); ok {
		iv.SetOnInvalidate(m.invalidate)
	}
	if b, ok := t.(invalBarrierer); ok {
		b.SetInvalidateBarrier(m.invalBarrier)
	}
	if m.dl != nil {
		// What the mount knows of a delegated subtree's names (see
		// freshDir) holds only while nobody else may change it.
		m.dl.SetDelegationHooks(m.delegated, m.freshDrop)
	}
	go m.invalLoop()
	return m, nil
}

// delegator is implemented by cache.Cache: the delegations it holds.
type delegator interface {
	Delegate(p string)
	Delegated(p string) (release func(), ok bool)
	DelegationOf(p string) string
	Delegating(p string) bool
	SetDelegationHooks(granted, lost func(p string))
}

// backs reports whether a change of p is answered once journaled,
// without waiting for the server: always with Options.WriteBack, and
// under a delegation (see cache.Cache.Delegated). The caller journals and
// issues the change, then calls release.
func (m *FS) backs(p string) (release func(), ok bool) {
	switch {
	case m.opts.WriteBack:
		return func() {}, true
	case m.dl != nil:
		return m.dl.Delegated(p)
	}
	return nil, false
}

// askDelegation asks, in the background, for a delegation of p, a
// directory or file the mount has just made: nobody else can have cached
// what it holds.
func (m *FS) askDelegation(p string) {
	if m.dl != nil {
		m.dl.Delegate(p)
	}
}

// changing notes that the mount is about to change p (create, write,
// rename, remove, attributes): if no delegation covers it, the mount asks
// for one of p's directory, so that the directory's next changes need
// not wait (git writes its index, refs and logs in directories it did not
// make). The mount root is never asked for: that would recall from this
// mount whatever any other client looks at.
func (m *FS) changing(p string) {
	if m.dl == nil {
		return
	}
	if dir := zx.Parent(p); dir != "/" {
		m.dl.Delegate(dir)
	}
}

// delegated is told that the mount holds a delegation of p: if p is a
// directory it did not make, the mount learns its names (the cache's
// listing, or the server's, plus what the mount made in it since), so
// that, as in a directory it made, lookups of other names and creates
// there need not ask the server while the delegation lasts.
func (m *FS) delegated(p string) {
	m.mu.Lock()
	_, known := m.fresh[p]
	m.mu.Unlock()
	if known {
		return
	}
	// Nobody waits for it: not a round trip of a program's.
	ctx, cancel := context.WithTimeout(zx.WithBackground(m.ctx), m.opts.Timeout)
	defer cancel()
	ds, err := zx.ReadDir(ctx, m.t, p)
	if err != nil {
		return
	}
	names := make(map[string]bool, len(ds))
	for _, d := range ds {
		names[d.Name()] = true
	}
	var d zx.Dir
	if in := m.lookupInode(p); in != nil {
		for name := range in.Children() {
			names[name] = true
		}
		d = nodeDir(in)
	}
	m.pmu.Lock()
	for _, op := range m.pops {
		for _, q := range op.paths {
			if zx.Parent(q) == p {
				names[zx.Base(q)] = true
			}
		}
	}
	m.pmu.Unlock()
	if d == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, known := m.fresh[p]; known || m.dl == nil || !m.dl.Delegating(p) {
		return
	}
	if m.fresh == nil {
		m.fresh = make(map[string]*freshDir)
	}
	m.fresh[p] = &freshDir{d: d, names: names}
}

// keepFresh reports whether the mount keeps knowing the names of the
// directory p it made (freshDir) once the server has it: while a
// delegation covers it, or is asked for, nobody else adds or removes
// names there.
func (m *FS) keepFresh(p string) bool {
	return m.dl != nil && m.dl.Delegating(p)
}

// FUSEOptions returns the FUSE mount options Mount uses with opts: the
// benchmark mounts a pass-through file system with them, to measure what
// FUSE itself costs.
func FUSEOptions(opts Options) fuse.MountOptions {
	if opts.FsName == "" {
		opts.FsName = "zx"
	}
	mo := fuse.MountOptions{
		AllowOther:    opts.AllowOther,
		FsName:        opts.FsName,
		Name:          "zx",
		Debug:         opts.Debug,
		MaxWrite:      1 << 20,
		MaxReadAhead:  1 << 20,
		MaxBackground: 64,
		// Files read with direct I/O (zero-length ones, opened to read)
		// can still be mapped, as on a local disk (kernels from 6.6).
		ExtraCapabilities: fuse.CAP_DIRECT_IO_ALLOW_MMAP,
	}
	if opts.DefaultPermissions {
		mo.Options = append(mo.Options, "default_permissions")
	}
	if opts.ReadOnly {
		mo.Options = append(mo.Options, "ro")
	}
	return mo
}

// Sync waits until every change made through the mount before it is on
// the server: pipelined changes, and written-back data (with WriteBack;
// otherwise close already waited), bounded by ctx.
func (m *FS) Sync(ctx context.Context) error {
	if m.wb != nil {
		// Changes journaled ahead that wait for the server are sent
		// again first: the wait below is for them too.
		m.wb.Retry()
	}
	if err := m.waitPipelined(ctx, ""); err != nil {
		return err
	}
	if m.wb == nil {
		return nil
	}
	return m.wb.Sync(ctx)
}

// sync is Sync for a FUSE request, bounded by Options.Timeout.
func (m *FS) sync(ctx context.Context) syscall.Errno {
	rctx, cancel := m.rctx(ctx)
	defer cancel()
	if err := m.Sync(rctx); err != nil {
		m.log.Warn("mount: sync", "err", err)
		if zx.KindOf(err) == zx.ErrTimeout {
			return syscall.ETIMEDOUT
		}
		return syscall.EIO
	}
	return 0
}

// durable has the server make what was written to p before it durable
// on its disk (zx.Syncer): fsync's last step. For "/" that is the whole
// export (zx sync, fsync of the mount point).
func (m *FS) durable(ctx context.Context, p string) syscall.Errno {
	rctx, cancel := m.rctx(ctx)
	defer cancel()
	return m.syncErrno(p, <-zx.Sync(rctx, m.t, p))
}

// syncErrno is fsync's errno for the outcome of a Sync of p. A tree that
// cannot sync (zx.ErrNotSupp) is not an error, as a local file system
// without fsync is not (the kernel takes ENOSYS as success): it is
// logged, once.
func (m *FS) syncErrno(p string, err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if zx.KindOf(err) == zx.ErrNotSupp {
		m.noSync.Do(func() {
			m.log.Warn("mount: the tree cannot make data durable on request; fsync only waits for the server", "err", err)
		})
		return 0
	}
	m.log.Warn("mount: fsync", "path", p, "err", err)
	return errno(err)
}

// Dir returns the mount point.
func (m *FS) Dir() string { return m.dir }

// Wait blocks until the file system is unmounted.
func (m *FS) Wait() {
	m.srv.Wait()
}

// Unmount unmounts the file system. If the kernel refuses (the mount is
// busy, or the server is gone and requests hang), it detaches it lazily,
// so Unmount always succeeds in taking the mount away.
func (m *FS) Unmount() error {
	defer func() {
		if iv, ok := m.t.(Invalidator); ok {
			iv.SetOnInvalidate(nil)
		}
		if b, ok := m.t.(invalBarrierer); ok {
			b.SetInvalidateBarrier(nil)
		}
		m.cancel()
	}()
	errc := make(chan error, 1)
	go func() { errc <- m.srv.Unmount() }()
	var err error
	select {
	case err = <-errc:
	case <-time.After(5 * time.Second):
		err = errors.New("unmount timed out")
	}
	if err != nil {
		m.log.Warn("mount: unmount failed; detaching lazily", "dir", m.dir, "err", err)
		if lerr := lazyUnmount(m.dir); lerr != nil {
			return fmt.Errorf("unmount %s: %v; lazy unmount: %v", m.dir, err, lerr)
		}
	}
	waited := make(chan struct{})
	go func() { m.srv.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
	}
	return nil
}

func lazyUnmount(dir string) error {
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err == nil {
		return nil
	}
	for _, prog := range []string{"fusermount3", "fusermount"} {
		if out, err := exec.Command(prog, "-u", "-z", dir).CombinedOutput(); err == nil {
			return nil
		} else if _, lerr := exec.LookPath(prog); lerr == nil {
			return fmt.Errorf("%s: %v: %s", prog, err, out)
		}
	}
	return errors.New("no way to unmount")
}

func (m *FS) watching() bool { return m.w != nil && m.w.Watching() }

// timeout is how long the kernel may cache what we tell it now.
func (m *FS) timeout() time.Duration {
	if m.watching() {
		return m.opts.Long
	}
	return max(m.opts.Coherency, 0)
}

// statfs returns the tree's StatFS, at most a second old.
func (m *FS) statfs(ctx context.Context) (zx.Dir, error) {
	m.sfmu.Lock()
	defer m.sfmu.Unlock()
	if m.sfNone {
		return nil, zx.ErrNotSupp
	}
	if m.sf != nil && time.Since(m.sfAt) < time.Second {
		return m.sf, nil
	}
	rctx, cancel := m.rctx(ctx)
	defer cancel()
	r := <-zx.StatFS(rctx, m.t, "/")
	if r.Err != nil {
		// A tree that cannot tell will not learn: stop asking.
		m.sfNone = zx.KindOf(r.Err) == zx.ErrNotSupp
		return nil, r.Err
	}
	m.sf, m.sfAt = r.Dir, time.Now()
	return r.Dir, nil
}

// ino returns the local inode number for entry d at path p.
func (m *FS) ino(d zx.Dir, p string) uint64 {
	key := inoKey(d, p)
	m.mu.Lock()
	defer m.mu.Unlock()
	var n uint64
	ok := false
	if key != "p:"+p {
		// Created without waiting, the file got a number by its path
		// before its server inode was known (pipeline.go): keep it. A
		// number the server's inode had before belonged to a file now
		// gone (the server reused it).
		if n, ok = m.inos["p:"+p]; ok {
			delete(m.inos, "p:"+p)
			m.inos[key] = n
		}
	}
	if !ok {
		n, ok = m.inos[key]
	}
	if !ok {
		n = m.nextIno
		m.nextIno++
		m.inos[key] = n
	}
	return n
}

func inoKey(d zx.Dir, p string) string {
	if si := d[zx.AIno]; si != "" {
		return d.Type() + si
	}
	return "p:" + p
}

// forgetIno forgets the server inode number of d, a file that went
// away: the server may give it to another file, which must not get the
// same local inode (go-fuse would take it for the same file).
func (m *FS) forgetIno(d zx.Dir, p string) {
	if d == nil || d.Int(zx.ANlink) > 1 {
		return
	}
	m.mu.Lock()
	delete(m.inos, inoKey(d, p))
	m.mu.Unlock()
}

// rekey notes that the file with local inode ino, last seen as old, is
// now nd (lfs gives a file a new inode when it replaces its contents), so
// that it keeps its local inode number.
func (m *FS) rekey(old, nd zx.Dir, p string, ino uint64) {
	ok, nk := inoKey(old, p), inoKey(nd, p)
	if old == nil || ok == nk {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inos[ok] == ino {
		delete(m.inos, ok)
	}
	m.inos[nk] = ino
}

// setOpen registers (or forgets) n as a file with open handles.
func (m *FS) setOpen(n *node, open bool) {
	ino := n.StableAttr().Ino
	m.mu.Lock()
	defer m.mu.Unlock()
	if open {
		m.open[ino] = n
	} else if m.open[ino] == n {
		delete(m.open, ino)
	}
}

// openNode returns the open file with local inode ino, or nil.
func (m *FS) openNode(ino uint64) *node {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.open[ino]
}

// rctx bounds a request's wait for the network by the mount's timeout,
// and only by it: the kernel's interrupts are not honoured. The kernel
// interrupts a request whenever the caller gets any signal, and Go
// programs get one every few milliseconds under load (preemption); a
// change already sent is applied by the server whatever the caller does,
// so answering EINTR would report a failure that did not happen. Linux's
// NFS client ignores all but fatal signals for the same reason; a caller
// killed by a fatal signal waits for the reply in the kernel, at most the
// timeout.
func (m *FS) rctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if c, ok := ctx.(*fuse.Context); ok {
		// Requests say which local user they are for: a server
		// honours it for a key trusted to speak for several users.
		ctx = zx.WithCaller(ctx, zx.Caller{Uid: int(c.Caller.Owner.Uid), Gid: int(c.Caller.Owner.Gid)})
	}
	return context.WithTimeout(context.WithoutCancel(ctx), m.opts.Timeout)
}

// groupCaller returns rctx acting for the caller of ctx with gid as its
// group when gid is one of the caller's supplementary groups: the
// server lets a user give a file only to the group the request acts as
// (chown(2) allows the owner any group the owner is in, and FUSE tells
// the effective gid alone).
func (m *FS) groupCaller(ctx, rctx context.Context, gid uint32) context.Context {
	c, ok := ctx.(*fuse.Context)
	if !ok || c.Caller.Owner.Uid == 0 || gid == c.Caller.Owner.Gid || !inGroups(c.Caller.Pid, gid) {
		return rctx
	}
	return zx.WithCaller(rctx, zx.Caller{Uid: int(c.Caller.Owner.Uid), Gid: int(gid)})
}

// errno translates err, logging surprises.
func errno(err error) syscall.Errno {
	return zx.Errno(err)
}

// fileType returns the stat(2) file type bits of d: a regular file's for
// an entry of a type zx does not know.
func fileType(d zx.Dir) uint32 {
	if t := zx.UnixType(d.Type()); t != 0 {
		return t
	}
	return syscall.S_IFREG
}

// fill sets a from entry d.
func (m *FS) fill(d zx.Dir, ino uint64, a *fuse.Attr) {
	a.Ino = ino
	size := d.Size()
	if d.IsDir() {
		size = 4096
	}
	a.Size = uint64(size)
	a.Blocks = (uint64(size) + 511) / 512
	a.Blksize = 4096
	a.Mode = fileType(d) | d.Mode()
	a.Nlink = 1
	if n := d.Int(zx.ANlink); n > 0 {
		a.Nlink = uint32(n)
	} else if d.IsDir() {
		a.Nlink = 2
	}
	if v, err := strconv.ParseUint(d[zx.AUid], 10, 32); err == nil {
		a.Uid = m.opts.IDMap.LocalUID(uint32(v))
	}
	if v, err := strconv.ParseUint(d[zx.AGid], 10, 32); err == nil {
		a.Gid = m.opts.IDMap.LocalGID(uint32(v))
	}
	if v, err := strconv.ParseUint(d[zx.ARdev], 10, 32); err == nil {
		a.Rdev = uint32(v)
	}
	mt := d.Time(zx.AMtime)
	at := d.Time(zx.AAtime)
	if _, ok := d[zx.AAtime]; !ok {
		at = mt
	}
	ct := d.Time(zx.ACtime)
	if _, ok := d[zx.ACtime]; !ok {
		ct = mt
	}
	a.SetTimes(&at, &mt, &ct)
}

// ---- invalidation of the kernel's caches ----

// invalidate is the cache's OnInvalidate: it queues the work for
// invalLoop, never blocking and never calling into the kernel from the
// caller's goroutine (which may be serving a FUSE request).
func (m *FS) invalidate(p string, what cache.Inval) {
	if m.flags.On("debug") {
		m.log.Info("mount: change notice", "path", p, "what", what)
	}
	select {
	case m.invalq <- inv{path: p, what: what}:
	default:
		select {
		case m.invalOvf <- struct{}{}:
		default:
		}
	}
}

// invalBarrier is the cache's invalidate barrier: done is called once
// invalLoop has done every invalidation queued before it, so that the
// cache acknowledges a change notice (and another client's write
// returns) only when the kernel no longer holds what the change made
// stale. If the queue is full, the overflow that invalidates everything
// comes first.
func (m *FS) invalBarrier(done func()) {
	select {
	case m.invalq <- inv{done: done}:
	default:
		m.mu.Lock()
		m.ovfDone = append(m.ovfDone, done)
		m.mu.Unlock()
		select {
		case m.invalOvf <- struct{}{}:
		default:
		}
	}
}

// testHooks let a test order a late release against a truncation
// (export_test.go): releasing runs as a release begins and released as
// it ends, truncating once a truncate(2) by path has taken the open
// handles' shared state, before it records the truncation there.
type testHooks struct {
	releasing, released, truncating func(p string)
	statted                         func(p string) // a stat of Getattr or Open was answered
	looked                          func(p string) // a stat of Lookup was answered
	refreshing                      func(p string) // invalLoop is about to drop a node's attributes (refreshAttrs)
}

// refreshAttrs asks the kernel to forget n's attributes, from invalLoop.
func (m *FS) refreshAttrs(n *fs.Inode) {
	m.kinvals.Add(1)
	select {
	case m.invalq <- inv{node: n}:
	default:
	}
}

// OwnInvalidations returns how many invalidations of the kernel's
// entries or attributes the mount asked for by itself, change notices
// aside: corrections of what it told the kernel without waiting, and
// refreshes after a write. Each costs a notification, and the kernel
// asks again.
func (m *FS) OwnInvalidations() int64 { return m.kinvals.Load() }

// correct invalidates the kernel's copy of p (what), which the mount
// filled with a guess the server's reply contradicted.
func (m *FS) correct(p string, what cache.Inval) {
	m.kinvals.Add(1)
	m.invalidate(p, what)
}

// lookupInode returns the inode at p that the kernel knows, or nil.
func (m *FS) lookupInode(p string) *fs.Inode {
	in := m.root.EmbeddedInode()
	for _, el := range zx.Elems(p) {
		if in = in.GetChild(el); in == nil {
			return nil
		}
	}
	return in
}

func (m *FS) invalLoop() {
	defer close(m.done)
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.invalOvf:
			// Barriers that could not be queued wait for this
			// invalAll: taken before it, so that one added meanwhile
			// (after a dropped invalidation) waits for the next.
			m.mu.Lock()
			dones := m.ovfDone
			m.ovfDone = nil
			m.mu.Unlock()
			m.invalAll()
			for _, f := range dones {
				f()
			}
		case iv := <-m.invalq:
			m.doInval(iv)
		}
	}
}

func (m *FS) doInval(iv inv) {
	if iv.done != nil {
		if len(m.invalOvf) > 0 {
			// An invalidation before the barrier was dropped (the
			// queue was full): the barrier waits for the invalAll.
			m.mu.Lock()
			m.ovfDone = append(m.ovfDone, iv.done)
			m.mu.Unlock()
			return
		}
		iv.done()
		return
	}
	if iv.node != nil {
		if th := m.hooks.Load(); th != nil && th.refreshing != nil {
			th.refreshing("/" + iv.node.Path(m.root.EmbeddedInode()))
		}
		iv.node.NotifyContent(-1, 0)
		return
	}
	if iv.what&cache.InvalAll != 0 {
		m.invalAll()
		return
	}
	p := iv.path
	if iv.what&cache.InvalEntry != 0 && p != "/" {
		dir, name := zx.Split(p)
		if pin := m.lookupInode(dir); pin != nil {
			pin.NotifyEntry(name)
			m.mu.Lock()
			delete(m.negs, negKey{pin, name})
			m.mu.Unlock()
		}
	}
	if iv.what&(cache.InvalAttr|cache.InvalData) != 0 {
		if in := m.lookupInode(p); in != nil {
			if iv.what&cache.InvalData != 0 {
				if n, ok := in.Operations().(*node); ok {
					n.dataChanged()
				}
				in.NotifyContent(0, 0)
			} else {
				in.NotifyContent(-1, 0)
			}
		}
	}
}

// invalAll invalidates every entry, attribute and page the kernel may
// hold for the mount.
func (m *FS) invalAll() {
	m.mu.Lock()
	negs := m.negs
	m.negs = make(map[negKey]bool)
	m.mu.Unlock()
	for k := range negs {
		k.parent.NotifyEntry(k.name)
	}
	var walk func(in *fs.Inode)
	walk = func(in *fs.Inode) {
		if n, ok := in.Operations().(*node); ok {
			n.dataChanged()
		}
		in.NotifyContent(0, 0)
		for name, ch := range in.Children() {
			in.NotifyEntry(name)
			walk(ch)
		}
	}
	walk(m.root.EmbeddedInode())
}

func (m *FS) noteNeg(parent *fs.Inode, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.negs) > 100000 {
		// Too many to remember: forget them; they expire anyway.
		select {
		case m.invalOvf <- struct{}{}:
		default:
		}
		return
	}
	m.negs[negKey{parent, name}] = true
}
