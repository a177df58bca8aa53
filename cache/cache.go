// Package cache is a caching zx.Tree layer over a remote tree (normally
// the client): it keeps entries, complete directory listings, negative
// lookups and whole-file data in memory (and file data on disk too, with
// Options.Dir), and keeps them coherent with the remote's change notices
// (zx.Watcher; acknowledged, zx.AckWatcher, when the remote can), falling
// back to a coherency window when it has none. Writes go through and
// update the cache from their replies, or, with a write-back journal
// (Options.Journal), are journaled on local disk and sent in the
// background. See docs/cache.md for the exact rules.
package cache

import (
	"container/list"
	"context"
	"errors"
	"io"
	"log/slog"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
)

// Inval says what an invalidation concerns.
type Inval uint8

// Invalidation kinds (a bit set).
const (
	InvalAttr  Inval = 1 << iota // the attributes of path changed
	InvalData                    // the contents of the file at path changed
	InvalEntry                   // the name path appeared, went away or names another file
	InvalAll                     // anything may have changed (path is "/")
)

// Options configure a Cache.
type Options struct {
	// Coherency is how long cached metadata is trusted when the cache
	// has no live watch. Default 1s; negative: never trust without a watch.
	Coherency time.Duration

	// MaxFileCache is the largest file whose whole contents are cached.
	// Default 64 MiB; negative: no data caching.
	MaxFileCache int64

	// MemBytes bounds the memory used for cached file data (LRU).
	// Default 512 MiB.
	MemBytes int64

	// OnInvalidate, if set, is called from the cache's watch goroutine
	// (never with a lock held, never from a Tree call) for each change
	// notice that invalidated something cached, so an upper layer (the
	// FUSE mount) can invalidate its own copy.
	OnInvalidate func(path string, what Inval)

	// NoWatch: do not subscribe to change notices even if the remote
	// can send them.
	NoWatch bool

	// WatchTimeout bounds how long New waits for the watch to be in
	// place. Default 10s.
	WatchTimeout time.Duration

	// NoPrefetch: a Stat that misses does not also list the parent,
	// and no subtree is prefetched.
	NoPrefetch bool

	// PrefetchEntries bounds the subtree prefetch that the first cold
	// listing of a directory starts (see prefetch.go): its find is cut
	// off after that many entries. Default 20000; negative: none.
	PrefetchEntries int

	// PrefetchWait bounds how long a request waits for a prefetch to
	// bring what it wants before asking the remote itself. Default: four
	// round trips of the remote (if it tells its RTT), at least 250 ms;
	// negative: as long as the prefetch makes progress.
	PrefetchWait time.Duration

	// Dir, if set, keeps whole-file data on disk too, persistent across
	// sessions (see disk.go for the format and crash rules), bounded by
	// DiskBytes (default 1 GiB) with LRU eviction.
	Dir       string
	DiskBytes int64

	// SiblingBytes bounds the bytes one sibling stream brings: when a
	// file's data misses, the directory's other small files are streamed
	// ahead with one findget (see siblings.go); and the window of a tree
	// stream, which streams a subtree a reader walks (treestream.go).
	// Default 8 MiB; negative: no sibling or tree streams.
	SiblingBytes int64

	// SiblingFile is the largest file a sibling stream brings. Default
	// 256 KiB (at most MaxFileCache).
	SiblingFile int64

	// TreeFile is the largest file a tree stream brings: a reader
	// walking a subtree reads its big files too, in the same order.
	// Default 4 MiB; never more than MaxFileCache, a quarter of MemBytes
	// or the largest stream window, never less than SiblingFile.
	TreeFile int64

	// Journal, if set, is the directory of the write-back journal: the
	// cache then has a WriteBack queue (see WriteBack), and records an
	// earlier session left there wait for WriteBack().Replay.
	Journal string

	// Delegate, with a Journal and a remote that can delegate
	// (zx.Delegator), takes delegations: see Cache.Delegate and
	// Cache.Delegated.
	Delegate bool

	Logger *slog.Logger
}

// Stats counts what the cache did.
type Stats struct {
	Hits, Misses  int64 // reads answered from the cache / sent on
	DiskHits      int64 // file data read from the disk cache
	DiskBytes     int64 // bytes of file data on disk
	DiskFiles     int   // files in the disk cache
	Events        int64 // change notices applied
	Invalidations int64 // notices that invalidated something, and losses of the watch (everything dropped)
	DataBytes     int64 // bytes of file data cached
	Entries       int   // entries cached (positive and negative)

	SiblingStreams int64 // sibling streams started
	SiblingFiles   int64 // files they brought and cached
	SiblingBytes   int64 // the bytes of those files
	SiblingLive    int   // sibling streams in flight (tree streams' findgets too)
	TreeStreams    int64 // tree streams started (their findgets count in SiblingStreams)

	Prefetches      int64 // subtree prefetches started
	Prefetched      int64 // entries they brought
	PrefetchCuts    int64 // prefetches cut off at Options.PrefetchEntries
	PrefetchWaits   int64 // requests that waited for a prefetch
	PrefetchGiveUps int64 // of those, requests that stopped waiting (PrefetchWait)
}

// Cache is a caching zx.Tree, zx.Finder and zx.Watcher over a remote tree.
type Cache struct {
	remote zx.Tree
	opts   Options
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	dl     *delegs // delegations held (deleg.go); nil without
	done   chan struct{}

	pfStall time.Duration // prefetchStall, unless a test set it

	mu        sync.Mutex
	ents      map[string]*entry
	files     map[string]*file
	entIdx    pathIndex // the paths in ents, for drop
	fileIdx   pathIndex // the paths in files, for drop
	lru       list.List // of *file, most recent first
	mem       int64
	seq       uint64 // counts changes (local writes issued, notices applied)
	recs      []rec  // recent changes, oldest first
	recsMin   uint64 // changes with seq below this are forgotten
	pend      map[string]int
	pendBelow map[string]int
	dataPend  map[string]int        // of pend: data-only write-back writes (see dataOnly)
	dataBelow map[string]int        // of pendBelow: the same
	removing  map[string]int        // of pend: Removes (see KnownEmpty)
	rmBelow   map[string]int        // of pendBelow: Removes
	deferred  map[string][]zx.Event // notices about paths with local writes pending
	listing   map[string]bool       // directories being listed by a prefetch
	pfs       []*prefetch           // subtree prefetches in flight (prefetch.go)
	pfCuts    []pfCut               // where recent ones were cut off
	links     map[string][]string   // the cached names of each file, by linkKey (link.go)
	multi     map[string]bool       // the names whose entries have nlink > 1
	linkChs   []linkChange          // recent changes of files, by linkKey (link.go)
	linkLost  time.Time             // changes noted before this are forgotten
	watching  bool
	epoch     uint64 // changes when watching changes
	ready     chan struct{}
	stats     Stats

	cbmu    sync.Mutex
	onInval func(string, Inval)
	barrier func(done func()) // see SetInvalidateBarrier

	ctlFlags *ctl.Flags // see ctl.go

	wb   *WriteBack
	disk *disk
	sib  siblings // see siblings.go
}

// entry is what the cache knows about a path.
type entry struct {
	d       zx.Dir    // nil: the path does not exist
	at      time.Time // when the request that produced it was issued
	watched bool      // valid until a notice says otherwise
	stale   bool      // attributes out of date (a child changed); kids still valid

	// For directories: the names in it, when a complete listing is
	// cached. Their entries are in ents as long as the listing is valid.
	kids     map[string]bool
	listAt   time.Time
	listWtch bool
	unread   bool // listed by a prefetch, not asked for since (prefetch.go)
}

// file is cached file data, valid for the entry with that size and mtime.
type file struct {
	path  string
	size  string
	mtime string
	data  []byte
	el    *list.Element
}

// rec is one change, for reads in flight to check against.
type rec struct {
	seq   uint64
	paths []string
	kind  zx.EventKind
	local bool
}

const maxRecs = 4096

var (
	_ zx.Tree    = (*Cache)(nil)
	_ zx.Finder  = (*Cache)(nil)
	_ zx.Watcher = (*Cache)(nil)
)

// New returns a cache over remote. If remote is a zx.Watcher (and
// opts.NoWatch is not set), New subscribes to its notices for "/" and
// waits (up to opts.WatchTimeout) for the watch to be in place. A
// journal or disk cache directory that cannot be used is logged and
// left out; Open reports it instead.
func New(remote zx.Tree, opts Options) *Cache {
	c, err := Open(remote, opts)
	if err != nil {
		c.log.Error("cache: " + err.Error())
	}
	return c
}

// Open is New, failing if opts.Journal or opts.Dir cannot be used; the
// cache it returns then works without them.
func Open(remote zx.Tree, opts Options) (*Cache, error) {
	if opts.Coherency == 0 {
		opts.Coherency = time.Second
	}
	if opts.MaxFileCache == 0 {
		opts.MaxFileCache = 64 << 20
	}
	if opts.MemBytes <= 0 {
		opts.MemBytes = 512 << 20
	}
	if opts.SiblingBytes == 0 {
		opts.SiblingBytes = defaultSiblingBytes
	}
	if opts.SiblingFile <= 0 {
		opts.SiblingFile = defaultSiblingFile
	}
	opts.SiblingFile = min(opts.SiblingFile, max(opts.MaxFileCache, 0))
	if opts.TreeFile <= 0 {
		opts.TreeFile = defaultTreeFile
	}
	opts.TreeFile = max(opts.SiblingFile, min(opts.TreeFile, opts.MaxFileCache, opts.MemBytes/4, opts.SiblingBytes))
	if opts.WatchTimeout <= 0 {
		opts.WatchTimeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		remote: remote, opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel,
		done:      make(chan struct{}),
		ents:      make(map[string]*entry),
		files:     make(map[string]*file),
		entIdx:    newPathIndex(),
		fileIdx:   newPathIndex(),
		pend:      make(map[string]int),
		pendBelow: make(map[string]int),
		dataPend:  make(map[string]int),
		dataBelow: make(map[string]int),
		removing:  make(map[string]int),
		rmBelow:   make(map[string]int),
		deferred:  make(map[string][]zx.Event),
		listing:   make(map[string]bool),
		links:     make(map[string][]string),
		multi:     make(map[string]bool),
		ready:     make(chan struct{}),
		recsMin:   1,
		onInval:   opts.OnInvalidate,
		ctlFlags:  ctl.NewFlags("debug"),
		sib:       siblings{streams: make(map[string]*sibStream)},
	}
	var err error
	if opts.Journal != "" {
		var werr error
		if c.wb, werr = NewWriteBack(opts.Journal, c, c.log); werr != nil {
			err = werr
		} else {
			c.wb.maxFile, c.wb.maxMem = max(opts.MaxFileCache, 0), opts.MemBytes
			c.wb.base = c.wbBase
		}
	}
	if opts.Dir != "" {
		if derr := c.openDisk(); derr != nil {
			err = errors.Join(err, derr)
		}
	}
	if w, ok := remote.(zx.Watcher); !ok || opts.NoWatch {
		close(c.done)
	} else {
		go c.watchLoop(w)
		t := time.NewTimer(opts.WatchTimeout)
		select {
		case <-c.ready:
		case <-t.C:
			c.log.Warn("cache: watch not ready; using the coherency window", "timeout", opts.WatchTimeout)
		}
		t.Stop()
	}
	c.startDelegs()
	if c.disk != nil {
		c.mu.Lock()
		n := len(c.disk.idx)
		c.disk.ok = n == 0
		c.mu.Unlock()
		if n > 0 {
			// After the watch is up, so that what the find returns is
			// kept coherent by its notices.
			rctx, cancel := context.WithTimeout(ctx, 3*opts.WatchTimeout)
			if rerr := c.revalidate(rctx); rerr != nil {
				err = errors.Join(err, rerr)
			}
			cancel()
		}
	}
	return c, err
}

// WriteBack returns the cache's write-back queue, nil without
// Options.Journal.
func (c *Cache) WriteBack() *WriteBack { return c.wb }

// SetOnInvalidate replaces Options.OnInvalidate (nil: none). The FUSE
// mount sets it once it is mounted.
func (c *Cache) SetOnInvalidate(f func(path string, what Inval)) {
	c.cbmu.Lock()
	c.onInval = f
	c.cbmu.Unlock()
}

// SetInvalidateBarrier sets how the cache learns that the layer above
// has applied the invalidations it reported (nil: at once, when
// OnInvalidate returns). The cache acknowledges a notice of another
// client's change (zx.Event.Ack: that client's reply waits for it) only
// then: after reporting the notice's invalidations it calls f, which must
// call done, from any goroutine, once the layer above has applied every
// invalidation reported before. The FUSE mount sets it: its kernel
// invalidations run on a queue of their own.
func (c *Cache) SetInvalidateBarrier(f func(done func())) {
	c.cbmu.Lock()
	c.barrier = f
	c.cbmu.Unlock()
}

// Close stops the watch and the write-back queue (whose unsent records
// stay journaled). The remote is not closed.
func (c *Cache) Close() error {
	if c.dl != nil {
		// Given back while the connection is up: other clients need
		// not wait out the lease.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.dl.returnAll(ctx)
		cancel()
	}
	c.cancel()
	<-c.done
	c.sib.wg.Wait()
	if c.wb != nil {
		c.wb.Close()
	}
	c.closeDisk()
	return nil
}

// Watching reports whether the cache has a live watch, so that cached
// metadata is trusted until a notice says otherwise.
func (c *Cache) Watching() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watching
}

// Coherency returns the coherency window used without a watch.
func (c *Cache) Coherency() time.Duration { return max(c.opts.Coherency, 0) }

// Remote returns the tree below the cache.
func (c *Cache) Remote() zx.Tree { return c.remote }

// Stats returns the cache's counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.DataBytes = c.mem
	s.Entries = len(c.ents)
	s.SiblingLive = c.sib.live
	if c.disk != nil {
		s.DiskBytes = c.disk.used
		s.DiskFiles = len(c.disk.idx)
	}
	return s
}

// Flush drops everything cached.
func (c *Cache) Flush() {
	c.mu.Lock()
	c.dropAll()
	c.mu.Unlock()
}

// ---- validity and bookkeeping (c.mu held) ----

func (c *Cache) valid(at time.Time, watched bool) bool {
	if watched && c.watching {
		return true
	}
	return c.opts.Coherency > 0 && time.Since(at) < c.opts.Coherency
}

func (c *Cache) validEntry(e *entry) bool {
	return e != nil && !e.stale && c.valid(e.at, e.watched) && (e.d == nil || e.d[zx.AIno] != "" || !shared(e.d))
}

// listed returns the complete listing of dir p, if valid: every child's
// entry is present and valid.
func (c *Cache) listed(p string) (*entry, bool) {
	e := c.ents[p]
	if e == nil || e.d == nil || e.kids == nil || !c.valid(e.listAt, e.listWtch) {
		return nil, false
	}
	return e, true
}

// dataOnly reports whether a write-back record's write on p, issued now,
// changes only the data of an existing file (not a name: its directory's
// listing stays what it is), and if so counts it until release (see
// namesPending): the file exists (the cache has its entry, or the queue
// has it from an earlier record) and nothing but such writes is in flight
// on p.
func (c *Cache) dataOnly(p string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p == "/" || c.pend[p]-1 != c.dataPend[p] {
		return false // begin counted this write already
	}
	e := c.ents[p]
	if c.validEntry(e) && e.d != nil && e.d.Type() == zx.TypeFile {
		c.dataNoteLocked(p, 1)
		return true
	}
	if pe := c.ents[zx.Parent(p)]; (e == nil || e.d != nil) && pe != nil && pe.kids[path.Base(p)] {
		// Its entry dropped (an earlier record failed for want of
		// the server), the name still listed.
		if _, ok := c.wb.Entry(p); ok {
			c.dataNoteLocked(p, 1)
			return true
		}
	}
	return false
}

// dataNoteLocked counts (by one, or down by one) a data-only write of p
// in flight. c.mu is held.
func (c *Cache) dataNoteLocked(p string, n int) {
	if c.dataPend[p] += n; c.dataPend[p] <= 0 {
		delete(c.dataPend, p)
	}
	for q := p; q != "/"; {
		q = zx.Parent(q)
		if c.dataBelow[q] += n; c.dataBelow[q] <= 0 {
			delete(c.dataBelow, q)
		}
	}
}

// dirUnchanged reports whether p is a directory the cache has an entry
// for and no local write in flight changes (namesPending), although some
// overlap it (pendingOverlap): data-only writes of files below it.
func (c *Cache) dirUnchanged(p string) bool {
	if c.wb == nil || len(c.dataPend) == 0 {
		return false
	}
	e := c.ents[p]
	return e != nil && e.d != nil && e.d.IsDir() && !c.namesPending(p)
}

// namesPending reports whether a local write in flight may change the
// directory p's listing or attributes: one on p or above it, or one
// below it that is not a data-only write (dataOnly). Listings and stats
// of directories are answered from the cache when none is, so that a
// directory whose files have written-back data on its way (with the link
// down, for as long as that lasts) can still be listed.
func (c *Cache) namesPending(p string) bool {
	for q := p; ; q = zx.Parent(q) {
		if c.pend[q] > 0 {
			return true
		}
		if q == "/" {
			break
		}
	}
	return c.pendBelow[p] > c.dataBelow[p]
}

// pendingOverlap reports whether a local write on a path overlapping p is
// in flight: then p must not be answered from the cache, but by the remote,
// which applies requests in issue order.
func (c *Cache) pendingOverlap(p string) bool {
	for q := p; ; q = zx.Parent(q) {
		if c.pend[q] > 0 {
			return true
		}
		if q == "/" {
			break
		}
	}
	return c.pendBelow[p] > 0
}

func (c *Cache) pendAdd(paths ...string) {
	for _, p := range paths {
		c.pend[p]++
		for q := p; q != "/"; {
			q = zx.Parent(q)
			c.pendBelow[q]++
		}
	}
}

func (c *Cache) pendDel(paths ...string) {
	for _, p := range paths {
		if c.pend[p]--; c.pend[p] <= 0 {
			delete(c.pend, p)
		}
		for q := p; q != "/"; {
			q = zx.Parent(q)
			if c.pendBelow[q]--; c.pendBelow[q] <= 0 {
				delete(c.pendBelow, q)
			}
		}
	}
}

// record notes a change and returns its sequence number.
func (c *Cache) record(kind zx.EventKind, local bool, paths ...string) uint64 {
	c.seq++
	c.recs = append(c.recs, rec{seq: c.seq, paths: paths, kind: kind, local: local})
	if len(c.recs) > maxRecs {
		n := len(c.recs) / 2
		c.recsMin = c.recs[n].seq
		c.recs = slices.Delete(c.recs, 0, n)
	}
	return c.seq
}

// changedSince reports whether a change recorded after seq s may affect
// what a read of p (an entry; or, with listing, the listing of p) returned.
func (c *Cache) changedSince(s uint64, p string, listing bool) bool {
	if s+1 < c.recsMin {
		return true
	}
	for i := len(c.recs) - 1; i >= 0 && c.recs[i].seq > s; i-- {
		r := &c.recs[i]
		for _, q := range r.paths {
			switch {
			case q == p:
				return true
			case zx.HasPrefix(p, q) && (r.local || r.kind != zx.Changed):
				return true // an ancestor was removed, moved or replaced
			case listing && q != "/" && zx.Parent(q) == p:
				return true
			case r.local && zx.HasPrefix(q, p):
				return true
			}
		}
	}
	return false
}

// drop forgets the entry at p and everything below it.
func (c *Cache) drop(p string) {
	for _, q := range c.entIdx.below(p) {
		if e := c.ents[q]; e != nil {
			c.linkDel(q, e.d, true)
		}
		delete(c.ents, q)
		c.entIdx.remove(q)
	}
	for _, q := range c.fileIdx.below(p) {
		if f := c.files[q]; f != nil {
			c.dropFile(f)
		}
	}
}

// forget drops the entry at p and below, and marks the parent's
// attributes stale (its mtime, size and link count change with it); the
// parent's listing is kept, with p's name in it if it was: a lookup of p
// then misses.
func (c *Cache) forget(p string) {
	c.drop(p)
	c.staleParent(p)
}

func (c *Cache) staleParent(p string) {
	if p != "/" {
		if pe := c.ents[zx.Parent(p)]; pe != nil {
			pe.stale = true
		}
	}
}

// staleParentAfter is staleParent for a local write on p that was queued
// on the connection by the time issued: a parent entry fetched by a
// request issued after that (a stat the mount sends beside a file's data
// at close) was applied after the write, so it shows its effect already.
func (c *Cache) staleParentAfter(p string, issued time.Time) {
	if p != "/" {
		if pe := c.ents[zx.Parent(p)]; pe != nil && !pe.at.After(issued) {
			pe.stale = true
		}
	}
}

// unlist marks the listing of dir p incomplete.
func (c *Cache) unlist(p string) {
	if e := c.ents[p]; e != nil {
		e.kids = nil
	}
}

func (c *Cache) dropAll() {
	c.stopPrefetches()
	c.stopTrees()
	c.stopSiblings()
	clear(c.ents)
	c.entIdx.clear()
	clear(c.links)
	clear(c.multi)
	for _, f := range c.files {
		c.dropFile(f)
	}
}

func (c *Cache) dropFile(f *file) {
	if c.files[f.path] == f {
		delete(c.files, f.path)
		c.fileIdx.remove(f.path)
	}
	if f.el != nil {
		c.lru.Remove(f.el)
		f.el = nil
		c.mem -= int64(len(f.data))
	}
}

// set installs the entry d at p, keeping p's listing if it stays a
// directory, and adds p to its parent's listing.
func (c *Cache) set(p string, d zx.Dir, at time.Time, watched bool) {
	old := c.ents[p]
	e := &entry{d: d, at: at, watched: watched}
	if old != nil && old.d != nil && d != nil && old.d.IsDir() && d.IsDir() {
		e.kids, e.listAt, e.listWtch, e.unread = old.kids, old.listAt, old.listWtch, old.unread
	}
	if old != nil && old.d != nil && (d == nil || old.d.Type() != d.Type()) {
		c.drop(p)
	} else if old != nil {
		c.linkDel(p, old.d, linkKey(old.d) != linkKey(d))
	}
	c.ents[p] = e
	c.entIdx.add(p)
	c.linkAdd(p, e)
	if p == "/" {
		return
	}
	if pe := c.ents[zx.Parent(p)]; pe != nil && pe.kids != nil {
		name := path.Base(p)
		if d == nil {
			delete(pe.kids, name)
		} else {
			pe.kids[name] = true
		}
	}
	if f := c.files[p]; f != nil && (d == nil || f.size != d[zx.ASize] || f.mtime != d[zx.AMtime]) {
		c.dropFile(f)
	}
}

// cachedData returns the cached contents of the file whose entry is d.
func (c *Cache) cachedData(p string, d zx.Dir) ([]byte, bool) {
	f := c.files[p]
	if f == nil || f.size != d[zx.ASize] || f.mtime != d[zx.AMtime] {
		return nil, false
	}
	c.lru.MoveToFront(f.el)
	return f.data, true
}

func (c *Cache) setData(p string, d zx.Dir, data []byte) {
	if d.Size() == 0 {
		// Zero-length files are never cached: synthetic files and
		// streams say 0 whatever they hold (Op §8).
		return
	}
	if int64(len(data)) > c.opts.MaxFileCache || int64(len(data)) > c.opts.MemBytes {
		return
	}
	if f := c.files[p]; f != nil {
		c.dropFile(f)
	}
	c.storeDisk(p, d, data)
	f := &file{path: p, size: d[zx.ASize], mtime: d[zx.AMtime], data: data}
	f.el = c.lru.PushFront(f)
	c.files[p] = f
	c.fileIdx.add(p)
	c.mem += int64(len(data))
	for c.mem > c.opts.MemBytes {
		c.dropFile(c.lru.Back().Value.(*file))
	}
}

// ---- requests ----

func replyc(r zx.Reply) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	c <- r
	return c
}

func errc(err error) <-chan error {
	c := make(chan error, 1)
	c <- err
	return c
}

func notExist(op, p string) error { return zx.E(zx.ErrNotExist, op, p, "") }

// Stat implements zx.Tree. An entry is answered from the cache when it
// is cached and valid, or when the parent's complete listing is cached
// and lacks the name. Otherwise the remote is asked and, unless
// Options.NoPrefetch, the parent is listed in the same round trip.
func (c *Cache) Stat(ctx context.Context, p string) <-chan zx.Reply {
	if ctl.Is(p) {
		return c.ctlFile().Stat(ctx)
	}
	cp, err := zx.CleanPath(p)
	if err != nil {
		return replyc(zx.Reply{Err: zx.Errorf("stat", p, err)})
	}
	p = cp
	if c.wb != nil {
		// A file with written-back data not yet on the server: as the
		// mount left it (see Get).
		if d, ok := c.wb.Entry(p); ok {
			c.mu.Lock()
			c.stats.Hits++
			c.mu.Unlock()
			return replyc(zx.Reply{Dir: d})
		}
	}
	c.awaitPrefetch(ctx, p, false)
	c.mu.Lock()
	if !c.pendingOverlap(p) || c.dirUnchanged(p) {
		if e := c.ents[p]; c.validEntry(e) {
			c.stats.Hits++
			c.mu.Unlock()
			if e.d == nil {
				return replyc(zx.Reply{Err: notExist("stat", p)})
			}
			return replyc(zx.Reply{Dir: e.d.Clone()})
		}
		if pe, ok := c.listed(zx.Parent(p)); ok && p != "/" && !pe.kids[path.Base(p)] {
			c.stats.Hits++
			c.mu.Unlock()
			return replyc(zx.Reply{Err: notExist("stat", p)})
		}
	}
	c.stats.Misses++
	s, ep, at := c.seq, c.epoch, time.Now()
	pp := zx.Parent(p)
	prefetch := !c.opts.NoPrefetch && p != "/" && !c.listing[pp] && !c.pendingOverlap(pp)
	if prefetch {
		if _, ok := c.listed(pp); ok {
			prefetch = false
		}
	}
	if prefetch {
		c.listing[pp] = true
	}
	c.mu.Unlock()
	rc := c.remote.Stat(ctx, p)
	if prefetch {
		c.prefetchDir(pp)
	}
	out := make(chan zx.Reply, 1)
	go func() {
		r := <-rc
		c.mu.Lock()
		if !c.changedSince(s, p, false) {
			w := c.watching && c.epoch == ep
			if r.Err == nil {
				c.set(p, r.Dir.Clone(), at, w)
			} else if zx.KindOf(r.Err) == zx.ErrNotExist {
				c.set(p, nil, at, w)
			}
		}
		c.mu.Unlock()
		out <- r
	}()
	return out
}

// prefetchDir lists directory p in the background and caches the listing.
// It is issued at once, so that it shares the caller's round trip.
func (c *Cache) prefetchDir(p string) {
	c.mu.Lock()
	s, ep, at := c.seq, c.epoch, time.Now()
	c.mu.Unlock()
	// The listing is the cache's, not the caller's: it never waits for
	// a lost connection (zx.WithFailFast), so that the request it rides
	// along with waits once, not once for each.
	ctx, cancel := context.WithTimeout(zx.WithFailFast(c.ctx), time.Minute)
	var sc <-chan zx.Reply
	if e := c.peek(p); !c.validEntryLocked(e) {
		sc = c.remote.Stat(ctx, p)
	}
	ic := c.remote.Get(ctx, p, 0, -1)
	go func() {
		defer cancel()
		var r zx.Reply
		if sc != nil {
			r = <-sc
		}
		var ds []zx.Dir
		ok := true
		for it := range ic {
			if it.Err != nil || it.Data != nil {
				ok = false
			}
			if it.Dir != nil {
				ds = append(ds, it.Dir)
			}
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.listing, p)
		if sc != nil && r.Err == nil && r.Dir.IsDir() && !c.changedSince(s, p, false) {
			c.set(p, r.Dir.Clone(), at, c.watching && c.epoch == ep)
		}
		if ok && ctx.Err() == nil {
			c.installListing(p, ds, s, ep, at)
		}
	}()
}

func (c *Cache) peek(p string) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ents[p]
}

// validEntryLocked is validEntry for callers without c.mu.
func (c *Cache) validEntryLocked(e *entry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.validEntry(e)
}

// installListing caches the complete listing ds of directory p, fetched
// by a request issued at seq s, epoch ep, time at.
func (c *Cache) installListing(p string, ds []zx.Dir, s, ep uint64, at time.Time) {
	e := c.ents[p]
	if e == nil || e.d == nil || !e.d.IsDir() || c.changedSince(s, p, true) {
		if e == nil && len(ds) > 0 && !c.changedSince(s, p, true) {
			// We know it is a directory, but not its entry: the
			// children are still worth keeping.
			w := c.watching && c.epoch == ep
			for _, d := range ds {
				c.set(d.Path(), d, at, w)
			}
		}
		return
	}
	w := c.watching && c.epoch == ep
	kids := make(map[string]bool, len(ds))
	for _, d := range ds {
		kids[d.Name()] = true
		c.set(d.Path(), d, at, w)
	}
	// Children that went away since an earlier listing.
	if e.kids != nil {
		for name := range e.kids {
			if !kids[name] {
				c.drop(zx.Join(p, name))
			}
		}
	}
	e.kids, e.listAt, e.listWtch = kids, at, w
}

// Get implements zx.Tree. Complete listings and whole files up to
// Options.MaxFileCache are served from the cache when valid; a whole
// listing or a small file is fetched whole, in one request, and cached.
func (c *Cache) Get(ctx context.Context, p string, off, count int64) <-chan zx.Item {
	if ctl.Is(p) {
		return c.ctlFile().Get(ctx, off, count)
	}
	cp, err := zx.CleanPath(p)
	if err != nil || off < 0 {
		return c.remote.Get(ctx, p, off, count)
	}
	p = cp
	if c.wb != nil {
		// A file with written-back data not yet on the server is read
		// from what was written (the server may be out of reach, and
		// would answer the same once it has the data).
		if data, ok := c.wb.Contents(p); ok {
			c.mu.Lock()
			c.stats.Hits++
			c.mu.Unlock()
			return itemsFrom(ctx, dataItems(data, off, count))
		}
	}
	whole := off == 0 && count < 0
	if whole {
		c.awaitPrefetch(ctx, p, true)
	}
	c.mu.Lock()
	var e *entry
	if !c.pendingOverlap(p) || c.dirUnchanged(p) {
		e = c.ents[p]
		if !c.validEntry(e) {
			e = nil
		}
	}
	if e != nil {
		if e.d == nil {
			c.stats.Hits++
			c.mu.Unlock()
			return itemsFrom(ctx, []zx.Item{{Err: notExist("get", p)}})
		}
		if e.d.IsDir() {
			if le, ok := c.listed(p); ok {
				var its []zx.Item
				names := make([]string, 0, len(le.kids))
				for name := range le.kids {
					names = append(names, name)
				}
				slices.Sort(names)
				complete := true
				for _, name := range names {
					cp := zx.Join(p, name)
					if c.wb != nil {
						// Written back, not yet on the server:
						// as the mount left it (see Stat).
						if d, ok := c.wb.Entry(cp); ok {
							its = append(its, zx.Item{Dir: d})
							continue
						}
					}
					ce := c.ents[cp]
					if !c.validEntry(ce) || ce.d == nil {
						complete = false
						break
					}
					its = append(its, zx.Item{Dir: ce.d.Clone()})
				}
				if complete {
					c.stats.Hits++
					sibs := c.firstListing(p, le, whole)
					c.mu.Unlock()
					if sibs != nil {
						sibs()
					}
					its = its[min(off, int64(len(its))):]
					if count >= 0 && count < int64(len(its)) {
						its = its[:count]
					}
					return itemsFrom(ctx, its)
				}
			}
		} else if e.d.Type() == zx.TypeFile {
			if data, ok := c.cachedData(p, e.d); ok {
				c.stats.Hits++
				c.sibTouch(zx.Parent(p))
				resume := c.treeTouch(p)
				c.mu.Unlock()
				if resume != nil {
					resume()
				}
				return itemsFrom(ctx, dataItems(data, off, count))
			}
			if c.disk != nil {
				d := e.d
				c.mu.Unlock()
				if data, ok := c.diskData(p, d); ok {
					c.mu.Lock()
					c.stats.Hits++
					resume := c.treeTouch(p)
					c.mu.Unlock()
					if resume != nil {
						resume()
					}
					return itemsFrom(ctx, dataItems(data, off, count))
				}
				c.mu.Lock()
			}
		}
	}
	var sibs func()
	if e != nil && e.d.Type() == zx.TypeFile && e.d.Size() <= c.opts.MaxFileCache {
		resume := c.treeTouch(p)
		if w, tree := c.sibWait(ctx, p, e.d); w != nil {
			// A sibling stream brings it: wait, then ask again.
			c.mu.Unlock()
			if resume != nil {
				resume()
			}
			return c.afterWait(ctx, w, tree, p, off, count)
		}
		sibs = c.sibStart(p, e.d)
		if resume != nil {
			sibs = resume // sibStart starts nothing under a tree stream
		}
	}
	c.stats.Misses++
	s, ep, at := c.seq, c.epoch, time.Now()
	var pf *prefetch
	if e != nil && e.d.IsDir() && whole {
		pf = c.newPrefetch(ctx, p, e, s, ep, at)
	}
	c.mu.Unlock()

	switch {
	case e != nil && e.d.IsDir() && whole:
		c.mu.Lock()
		sibs = c.sibStartDir(p)
		c.mu.Unlock()
		rc := c.fetchDir(ctx, p, s, ep, at)
		c.runPrefetch(pf) // after the listing, in the same round trip
		if sibs != nil {
			sibs()
		}
		return rc
	case e != nil && e.d.Type() == zx.TypeFile && e.d.Size() <= c.opts.MaxFileCache:
		rc := c.fetchFile(ctx, p, e.d, nil, off, count, s, ep, at)
		if sibs != nil {
			sibs()
		}
		return rc
	case e == nil && whole:
		// Unknown: ask for the entry in the same round trip.
		sc := c.remote.Stat(ctx, p)
		rc := c.remote.Get(ctx, p, 0, -1)
		return c.fetchAny(ctx, p, sc, rc, s, ep, at)
	}
	return c.remote.Get(ctx, p, off, count)
}

// wbBase returns the contents of the file at p that a write-back record
// written now applies to, when the cache holds them (see WriteBack.base):
// the entry is valid, the data matches it, and no write of p is in
// flight (whose outcome the cached data would not show).
func (c *Cache) wbBase(p string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pendingOverlap(p) {
		return nil, false
	}
	e := c.ents[p]
	if !c.validEntry(e) || e.d == nil || e.d.Type() != zx.TypeFile {
		return nil, false
	}
	if e.d.Size() == 0 {
		return nil, true // never cached, and nothing to cache
	}
	return c.cachedData(p, e.d)
}

// fetchDir lists p, forwarding the entries, and caches the listing.
func (c *Cache) fetchDir(ctx context.Context, p string, s, ep uint64, at time.Time) <-chan zx.Item {
	rc := c.remote.Get(ctx, p, 0, -1)
	out := make(chan zx.Item)
	go func() {
		defer close(out)
		var ds []zx.Dir
		ok := true
		for it := range rc {
			if it.Err != nil || it.Data != nil {
				ok = false
			}
			if it.Dir != nil {
				ds = append(ds, it.Dir.Clone())
			}
			if !sendItem(ctx, out, it) {
				ok = false
			}
		}
		if ok && ctx.Err() == nil {
			c.mu.Lock()
			c.installListing(p, ds, s, ep, at)
			c.mu.Unlock()
		}
	}()
	return out
}

// fetchFile gets the whole file p, whose entry is d, forwards the range
// asked for, and caches the data if it matches d.
func (c *Cache) fetchFile(ctx context.Context, p string, d zx.Dir, rc <-chan zx.Item, off, count int64, s, ep uint64, at time.Time) <-chan zx.Item {
	if rc == nil {
		rc = c.remote.Get(ctx, p, 0, -1)
	}
	out := make(chan zx.Item)
	go func() {
		defer close(out)
		var buf []byte
		var pos int64
		ok := true
		end := int64(-1)
		if count >= 0 {
			end = off + count
		}
		for it := range rc {
			if it.Err != nil || it.Dir != nil {
				ok = false
				if !sendItem(ctx, out, it) {
					break
				}
				continue
			}
			buf = append(buf, it.Data...)
			// Forward the part of this chunk in [off, end).
			lo, hi := pos, pos+int64(len(it.Data))
			pos = hi
			a, b := max(lo, off), hi
			if end >= 0 {
				b = min(hi, end)
			}
			if a < b {
				if !sendItem(ctx, out, zx.Item{Data: it.Data[a-lo : b-lo]}) {
					ok = false
				}
			}
		}
		if ok && ctx.Err() == nil && int64(len(buf)) == d.Size() {
			c.mu.Lock()
			if !c.changedSince(s, p, false) {
				if e := c.ents[p]; e == nil || e.d == nil || e.d[zx.ASize] == d[zx.ASize] && e.d[zx.AMtime] == d[zx.AMtime] {
					if e == nil {
						c.set(p, d, at, c.watching && c.epoch == ep)
					}
					c.setData(p, d, buf)
				}
			}
			c.mu.Unlock()
		}
	}()
	return out
}

// fetchAny handles a whole Get of a path whose type is unknown: sc is a
// Stat and rc a Get of it, issued together.
func (c *Cache) fetchAny(ctx context.Context, p string, sc <-chan zx.Reply, rc <-chan zx.Item, s, ep uint64, at time.Time) <-chan zx.Item {
	out := make(chan zx.Item)
	go func() {
		defer close(out)
		r := <-sc
		c.mu.Lock()
		if !c.changedSince(s, p, false) {
			if r.Err == nil {
				c.set(p, r.Dir.Clone(), at, c.watching && c.epoch == ep)
			} else if zx.KindOf(r.Err) == zx.ErrNotExist {
				c.set(p, nil, at, c.watching && c.epoch == ep)
			}
		}
		c.mu.Unlock()
		var in <-chan zx.Item
		switch {
		case r.Err == nil && r.Dir.IsDir():
			var ds []zx.Dir
			ok := true
			for it := range rc {
				if it.Err != nil || it.Data != nil {
					ok = false
				}
				if it.Dir != nil {
					ds = append(ds, it.Dir.Clone())
				}
				if !sendItem(ctx, out, it) {
					ok = false
				}
			}
			if ok && ctx.Err() == nil {
				c.mu.Lock()
				c.installListing(p, ds, s, ep, at)
				c.mu.Unlock()
			}
			return
		case r.Err == nil && r.Dir.Type() == zx.TypeFile && r.Dir.Size() <= c.opts.MaxFileCache:
			in = c.fetchFile(ctx, p, r.Dir, rc, 0, -1, s, ep, at)
		default:
			in = rc
		}
		for it := range in {
			sendItem(ctx, out, it)
		}
	}()
	return out
}

// sendItem sends it on out unless ctx is done.
func sendItem(ctx context.Context, out chan<- zx.Item, it zx.Item) bool {
	select {
	case out <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// itemsFrom streams its.
func itemsFrom(ctx context.Context, its []zx.Item) <-chan zx.Item {
	out := make(chan zx.Item)
	go func() {
		defer close(out)
		for _, it := range its {
			if !sendItem(ctx, out, it) {
				return
			}
		}
	}()
	return out
}

// dataItems returns the range [off, off+count) of data as Items of at most
// 64 KiB, copied.
func dataItems(data []byte, off, count int64) []zx.Item {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	end := int64(len(data))
	if count >= 0 && off+count < end {
		end = off + count
	}
	var its []zx.Item
	for off < end {
		n := min(end-off, 64<<10)
		its = append(its, zx.Item{Data: slices.Clone(data[off : off+n])})
		off += n
	}
	return its
}

// ---- writes ----

// begin registers a local write on paths, issued now.
func (c *Cache) begin(paths ...string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pendAdd(paths...)
	for _, p := range paths {
		if e := c.ents[p]; e != nil {
			// Its other names must be asked for, behind the write.
			c.staleLinks(e.d, p)
		}
	}
	return c.record(zx.Changed, true, paths...)
}

// end unregisters a write issued at s, calls apply (with c.mu held) to
// update the cache from its outcome, then applies notices that arrived for
// its paths meanwhile.
func (c *Cache) end(s uint64, paths []string, apply func()) {
	c.endWith(s, paths, apply, nil)
}

// endWith is end, calling release (with c.mu held) as the write stops
// being pending.
func (c *Cache) endWith(s uint64, paths []string, apply, release func()) {
	c.mu.Lock()
	// A later local write on the same paths installs (or installed) its
	// own result: installing ours could go back in time. Paths no later
	// write covers are dropped instead (the cache cannot tell what our
	// result means for them).
	// A later write strictly below one of our paths (a file made in a
	// directory just made) changes only its attributes: our result
	// stands, with its attributes stale.
	later, covered, below := false, make(map[string]bool), make(map[string]bool)
	for i := len(c.recs) - 1; i >= 0 && c.recs[i].seq > s; i-- {
		if c.recs[i].local {
			for _, p := range paths {
				for _, q := range c.recs[i].paths {
					switch {
					case p == q:
						covered[p] = true
						later = true
					case zx.HasPrefix(q, p):
						below[p] = true
					case zx.HasPrefix(p, q):
						later = true
					}
				}
			}
		}
	}
	if later {
		for _, p := range paths {
			if !covered[p] {
				c.drop(p)
				c.unlist(zx.Parent(p))
			}
		}
	} else {
		apply()
		for p := range below {
			if e := c.ents[p]; e != nil {
				e.stale = true
			}
		}
	}
	if release != nil {
		release()
	}
	c.pendDel(paths...)
	var cbs []inval
	for _, p := range paths {
		if c.pend[p] > 0 {
			continue
		}
		evs := c.deferred[p]
		delete(c.deferred, p)
		for _, ev := range evs {
			cbs = append(cbs, c.apply(ev)...)
		}
	}
	c.mu.Unlock()
	c.callback(cbs)
}

func overlapsAny(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if zx.Overlaps(x, y) {
				return true
			}
		}
	}
	return false
}

// Put implements zx.Tree: it goes through, and the entry in its reply
// (the final attributes) is cached.
func (c *Cache) Put(ctx context.Context, p string, d zx.Dir, off int64, data io.Reader) <-chan zx.Reply {
	if ctl.Is(p) {
		return c.ctlFile().Put(ctx, d, off, data)
	}
	cp, err := zx.CleanPath(p)
	if err != nil {
		return c.remote.Put(ctx, p, d, off, data)
	}
	p = cp
	s := c.begin(p)
	at := time.Now()
	var release func()
	if c.wb != nil && ctx.Value(writeBackKey{}) != nil && c.dataOnly(p) {
		release = func() { c.dataNoteLocked(p, -1) } // endWith holds c.mu
	}
	if d.Type() == zx.TypeDir && d[zx.AExcl] == "y" && p != "/" {
		c.newDir(p, d, at)
	}
	// A Put that replaces the whole file tells us its new contents: keep
	// them, so reading back what was written costs nothing.
	var tee *teeReader
	if _, sized := d[zx.ASize]; sized && off == 0 && data != nil && c.opts.MaxFileCache > 0 {
		tee = &teeReader{r: data, max: c.opts.MaxFileCache}
		data = tee
		if sk, ok := tee.r.(io.Seeker); ok {
			if base, err := sk.Seek(0, io.SeekCurrent); err == nil {
				data = &seekTee{teeReader: tee, sk: sk, base: base}
			}
		}
	}
	rc := c.remote.Put(ctx, p, d, off, data)
	issued := time.Now()
	out := make(chan zx.Reply, 1)
	go func() {
		r := <-rc
		c.endWith(s, []string{p}, func() {
			c.applyReply(p, r, at, issued)
			if tee != nil && r.Err == nil && r.Dir != nil && r.Dir.Type() == zx.TypeFile {
				if b, ok := tee.captured(); ok && int64(len(b)) == r.Dir.Size() {
					c.setData(p, r.Dir, b)
				}
			}
		}, release)
		out <- r
	}()
	return out
}

// newDir notes that the directory p is being created exclusively: if it
// succeeds, it is empty but for what is created in it after, so its
// listing is complete from the start. The entry stands in for the reply's
// (which replaces it, keeping the listing) and, like anything with a
// write in flight, is not used before the reply is in; if the create
// fails, the reply drops it.
func (c *Cache) newDir(p string, d zx.Dir, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := d.Clone()
	delete(nd, zx.AExcl)
	nd[zx.APath], nd[zx.AName] = p, path.Base(p)
	c.drop(p)
	c.staleParent(p)
	c.ents[p] = &entry{d: nd, at: at, watched: c.watching, kids: map[string]bool{}, listAt: at, listWtch: c.watching}
	c.entIdx.add(p)
}

// teeReader keeps a copy of what is read through it, up to max bytes.
type teeReader struct {
	r    io.Reader
	max  int64
	mu   sync.Mutex
	buf  []byte
	over bool
	eof  bool
}

func (t *teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.mu.Lock()
	if !t.over {
		if int64(len(t.buf)+n) > t.max {
			t.over, t.buf = true, nil
		} else {
			t.buf = append(t.buf, p[:n]...)
		}
	}
	if err == io.EOF {
		t.eof = true
	}
	t.mu.Unlock()
	return n, err
}

// seekTee is a teeReader over an io.Seeker, and a Seeker itself, so that
// a put through the cache can be sent again after a lost connection: the
// client sends a put again only if it can read its data again (a
// write-back record's data, read from the journal, can). Seeking back
// drops what was captured past the new position.
type seekTee struct {
	*teeReader
	sk   io.Seeker
	base int64 // the position where the captured data starts
}

func (t *seekTee) Seek(off int64, whence int) (int64, error) {
	pos, err := t.sk.Seek(off, whence)
	t.mu.Lock()
	defer t.mu.Unlock()
	if keep := pos - t.base; err == nil && keep >= 0 && keep <= int64(len(t.buf)) && !t.over {
		t.buf, t.eof = t.buf[:keep], false
	} else {
		t.over, t.buf = true, nil
	}
	return pos, err
}

// captured returns everything read, if it was read to its end.
func (t *teeReader) captured() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf, t.eof && !t.over
}

// applyReply caches the entry of a Put reply; the Put was issued at at
// and queued by issued.
func (c *Cache) applyReply(p string, r zx.Reply, at, issued time.Time) {
	if r.Err != nil || r.Dir == nil || r.Dir.Path() != p {
		c.drop(p)
		if k := zx.KindOf(r.Err); r.Err != nil && (k == zx.ErrNotExist || k == zx.ErrExist) {
			// The parent's listing was wrong about p (or about
			// the way to it): an exclusive create of a name it
			// lacked found it taken.
			c.unlist(zx.Parent(p))
		}
		return
	}
	if f := c.files[p]; f != nil {
		c.dropFile(f) // written: even with the same size and mtime
	}
	if old := c.ents[p]; old == nil || old.d == nil || old.d.Type() != r.Dir.Type() {
		c.staleParentAfter(p, issued) // perhaps created
	}
	c.set(p, r.Dir.Clone(), at, c.watching)
}

// Wstat implements zx.Tree, as Put.
func (c *Cache) Wstat(ctx context.Context, p string, d zx.Dir) <-chan zx.Reply {
	cp, err := zx.CleanPath(p)
	if err != nil {
		return c.remote.Wstat(ctx, p, d)
	}
	p = cp
	ours := c.wb != nil && ctx.Value(writeBackKey{}) == nil
	if ours {
		// A chmod, utimes or truncate(2) of a file with written-back
		// data on its way: what the queue answers with changes too.
		c.wb.wstat(p, d)
	}
	s := c.begin(p)
	at := time.Now()
	rc := c.remote.Wstat(ctx, p, d)
	out := make(chan zx.Reply, 1)
	go func() {
		r := <-rc
		if ours && r.Err != nil && !transient(r.Err) {
			// Refused: the server says. (Not sent, or not answered,
			// for want of the link: it may yet be applied, as the
			// mount told the caller; the queue keeps the change.)
			c.wb.hide(p)
		}
		c.end(s, []string{p}, func() {
			if r.Err == nil && r.Dir != nil && r.Dir.Path() == p {
				// Keep cached data when only attributes changed.
				if e := c.ents[p]; e != nil && e.d != nil {
					if f := c.files[p]; f != nil && (f.size != r.Dir[zx.ASize] || f.mtime != r.Dir[zx.AMtime]) {
						c.dropFile(f)
					}
				}
				c.set(p, r.Dir.Clone(), at, c.watching)
				return
			}
			c.drop(p)
		})
		out <- r
	}()
	return out
}

// Move implements zx.Tree.
func (c *Cache) Move(ctx context.Context, from, to string) <-chan error {
	f, err1 := zx.CleanPath(from)
	t, err2 := zx.CleanPath(to)
	if err1 != nil || err2 != nil || f == "/" || t == "/" {
		return c.remote.Move(ctx, from, to)
	}
	restore := func() {}
	if c.wb != nil {
		rf, rt := c.wb.hide(f), c.wb.hide(t)
		restore = func() { rf(); rt() }
	}
	s := c.begin(f, t)
	at := time.Now()
	ec := c.remote.Move(ctx, f, t)
	issued := time.Now()
	out := make(chan error, 1)
	go func() {
		err := <-ec
		if err != nil {
			restore() // before c.mu: lock order
		}
		c.end(s, []string{f, t}, func() {
			if err != nil {
				if zx.KindOf(err) == zx.ErrNotExist {
					c.drop(f)
					c.unlist(zx.Parent(f))
				}
				return
			}
			if f == t {
				return
			}
			c.staleParentAfter(f, issued)
			c.staleParentAfter(t, issued)
			old := c.ents[f]
			c.drop(f)
			c.drop(t)
			c.set(f, nil, at, c.watching)
			if old != nil && old.d != nil {
				d := old.d.Clone()
				d[zx.APath], d[zx.AName] = t, path.Base(t)
				delete(d, zx.ACtime)
				c.set(t, d, old.at, old.watched)
				if e := c.ents[t]; e != nil {
					if d.IsDir() {
						e.kids = nil
					}
				}
			} else {
				c.unlist(zx.Parent(t))
			}
		})
		out <- err
	}()
	return out
}

// Remove implements zx.Tree.
func (c *Cache) Remove(ctx context.Context, p string) <-chan error {
	return c.remove(ctx, p, false)
}

// RemoveAll implements zx.Tree.
func (c *Cache) RemoveAll(ctx context.Context, p string) <-chan error {
	return c.remove(ctx, p, true)
}

func (c *Cache) remove(ctx context.Context, p string, all bool) <-chan error {
	cp, err := zx.CleanPath(p)
	if err != nil || cp == "/" {
		if all {
			return c.remote.RemoveAll(ctx, p)
		}
		return c.remote.Remove(ctx, p)
	}
	p = cp
	restore := func() {}
	if c.wb != nil {
		restore = c.wb.hide(p)
	}
	s := c.begin(p)
	at := time.Now()
	var ec <-chan error
	if all {
		ec = c.remote.RemoveAll(ctx, p)
	} else {
		c.removeNote(p, 1)
		ec = c.remote.Remove(ctx, p)
	}
	issued := time.Now()
	out := make(chan error, 1)
	go func() {
		err := <-ec
		if err != nil && zx.KindOf(err) != zx.ErrNotExist {
			restore() // before c.mu: lock order
		}
		var release func()
		if !all {
			// With the pending count: KnownEmpty sees the removes in
			// flight among the pending writes.
			release = func() { c.removeNoteLocked(p, -1) }
		}
		c.endWith(s, []string{p}, func() {
			switch {
			case err == nil || zx.KindOf(err) == zx.ErrNotExist:
				c.drop(p)
				c.staleParentAfter(p, issued)
				c.set(p, nil, at, c.watching && err == nil)
			case zx.KindOf(err) == zx.ErrNotEmpty:
				c.unlist(p)
			default:
				c.drop(p)
			}
		}, release)
		out <- err
	}()
	return out
}

// removeNote counts (by one, or down by one) a Remove of p in flight.
func (c *Cache) removeNote(p string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeNoteLocked(p, n)
}

// removeNoteLocked is removeNote with c.mu held.
func (c *Cache) removeNoteLocked(p string, n int) {
	for q := p; ; {
		m := c.rmBelow
		if q == p {
			m = c.removing
		}
		if m[q] += n; m[q] <= 0 {
			delete(m, q)
		}
		if q == "/" {
			break
		}
		q = zx.Parent(q)
	}
}

// Find implements zx.Finder by passing the request on.
func (c *Cache) Find(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	if f, ok := c.remote.(zx.Finder); ok {
		return f.Find(ctx, p, o)
	}
	return itemsFrom(ctx, []zx.Item{{Err: zx.E(zx.ErrNotSupp, "find", p, "")}})
}

// FindGet implements zx.Finder by passing the request on.
func (c *Cache) FindGet(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	if f, ok := c.remote.(zx.Finder); ok {
		return f.FindGet(ctx, p, o)
	}
	return itemsFrom(ctx, []zx.Item{{Err: zx.E(zx.ErrNotSupp, "findget", p, "")}})
}

// Watch implements zx.Watcher by passing the request on.
func (c *Cache) Watch(ctx context.Context, p string) <-chan zx.Event {
	if w, ok := c.remote.(zx.Watcher); ok {
		return w.Watch(ctx, p)
	}
	ch := make(chan zx.Event, 1)
	ch <- zx.Event{Err: zx.E(zx.ErrNotSupp, "watch", p, "")}
	close(ch)
	return ch
}
