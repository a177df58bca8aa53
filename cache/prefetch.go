package cache

import (
	"context"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/zxfs/zx"
)

// Subtree prefetch (docs/cache.md, "Prefetching a subtree").
//
// A program that walks a tree (find, ls -R, du, grep -r) lists every
// directory in it. Listing each on demand costs one round trip per
// directory; so the first cold listing of a directory D, besides being
// answered as usual, starts a Find of D's whole subtree in the background,
// bounded by Options.PrefetchEntries. The find streams entries depth
// first, a directory before its contents, names sorted; each entry is
// cached as it arrives, and a directory's listing is complete, and
// installed, as soon as an entry outside its subtree arrives (or the find
// ends normally). A lookup or listing of a path the find has not reached
// yet waits for it instead of asking the server, then answers from the
// cache, and asks the server only if the cache still cannot answer (the
// find was cut off, failed, or a change made what it brought unusable).
//
// Coherence is the same as for any read: the find is issued at seq s, and
// an entry or listing is installed only if no change recorded since
// (a local write issued, a notice applied) may affect it (changedSince).
// Directories on the find's stack when it is cut off or fails, and
// directories it could not read, are not listed: their listings are not
// known to be complete.

const (
	// defaultPrefetchEntries bounds a subtree prefetch by default: about
	// 20 MB of cached entries, a few MB on the wire.
	defaultPrefetchEntries = 20000

	// maxPrefetches bounds the subtree prefetches in flight at once.
	maxPrefetches = 4

	// prefetchStall is how long a request waits for a prefetch that
	// makes no progress before it asks the server itself.
	prefetchStall = time.Second

	// minPrefetchWait is the least default Options.PrefetchWait.
	minPrefetchWait = 250 * time.Millisecond

	// prefetchTimeout bounds a prefetch as a whole.
	prefetchTimeout = 5 * time.Minute

	// maxCutOffs bounds the cut-off prefetches remembered for resuming.
	maxCutOffs = 8
)

// prefetch is one subtree Find in flight.
type prefetch struct {
	root   string
	pred   string    // prunes what an earlier, cut-off prefetch completed
	skip   []pfSkip  // the same, for this side
	s, ep  uint64    // c.seq and c.epoch when the find was issued
	at     time.Time // when it was issued
	max    int
	ctx    context.Context
	cancel context.CancelFunc

	// Guarded by c.mu.
	n       int      // entries received
	last    string   // path of the last entry received; "" before the first
	ended   bool     // the find ended, was cut off or failed
	stack   []*pfDir // directories whose contents are still arriving, root first
	waiters []*pfWaiter
}

// pfDir is a directory being listed by a prefetch.
type pfDir struct {
	path  string
	names []string // received so far, sorted
	bad   bool     // the find could not read it (or one of its entries)
}

// pfSkip is a range of paths a resumed prefetch does not descend into:
// the children of dir whose names sort before the one on the way to
// where an earlier prefetch was cut off (those subtrees it completed).
type pfSkip struct{ dir, below string }

func (k pfSkip) has(p string) bool {
	return p != k.dir && zx.HasPrefix(p, k.dir) && p < k.below
}

// pfCut is where a prefetch was cut off: the directories it left open,
// root first, then the last entry it sent.
type pfCut struct{ chain []string }

// pfWaiter is a request waiting for a prefetch to tell it about p.
type pfWaiter struct {
	p    string
	list bool // it wants p's listing, not only its entry
	ch   chan struct{}
}

// walkCmp compares clean paths in the order of a find's walk: depth
// first, names sorted byte-wise, a directory before what it holds.
func walkCmp(a, b string) int {
	for {
		ea, ra, oka := cutElem(a)
		eb, rb, okb := cutElem(b)
		switch {
		case !oka && !okb:
			return 0
		case !oka:
			return -1
		case !okb:
			return 1
		}
		if c := strings.Compare(ea, eb); c != 0 {
			return c
		}
		a, b = ra, rb
	}
}

func cutElem(p string) (elem, rest string, ok bool) {
	p = strings.TrimPrefix(p, "/")
	if p == "" {
		return "", "", false
	}
	elem, rest, _ = strings.Cut(p, "/")
	return elem, "/" + rest, true
}

// reached reports whether the find has sent p's entry, or would have
// sent it by now if p existed (c.mu held).
func (pf *prefetch) reached(p string) bool {
	return pf.last != "" && walkCmp(pf.last, p) >= 0
}

// open returns the directory p if the find is still sending its contents.
func (pf *prefetch) open(p string) *pfDir {
	for _, d := range pf.stack {
		if d.path == p {
			return d
		}
	}
	return nil
}

// satisfied reports whether the find can tell w no more than it has.
func (pf *prefetch) satisfied(w *pfWaiter) bool {
	if pf.ended || !zx.HasPrefix(w.p, pf.root) {
		return true
	}
	if !pf.reached(w.p) {
		return false
	}
	return !w.list || pf.open(w.p) == nil
}

func (pf *prefetch) unwait(w *pfWaiter) {
	if i := slices.Index(pf.waiters, w); i >= 0 {
		pf.waiters = slices.Delete(pf.waiters, i, i+1)
	}
}

// prefetchEntries is the bound of a subtree prefetch; 0: none.
func (c *Cache) prefetchEntries() int {
	switch n := c.opts.PrefetchEntries; {
	case n < 0 || c.opts.NoPrefetch:
		return 0
	case n == 0:
		return defaultPrefetchEntries
	default:
		return n
	}
}

// newPrefetch registers a prefetch of the subtree at p, whose valid
// directory entry is e, for a cold whole listing of p issued at (s, ep,
// at), if one is worth starting: the cache has a live watch (without one,
// what it brings would be trusted only for the coherency window), p was
// never listed, and no prefetch in flight will list p. The caller issues
// it with runPrefetch after its own request. c.mu is held.
func (c *Cache) newPrefetch(ctx context.Context, p string, e *entry, s, ep uint64, at time.Time) *prefetch {
	max := c.prefetchEntries()
	if max == 0 || !c.watching || e.kids != nil || len(c.pfs) >= maxPrefetches {
		return nil
	}
	if _, ok := c.remote.(zx.Finder); !ok {
		return nil
	}
	w := &pfWaiter{p: p, list: true}
	for _, pf := range c.pfs {
		if !pf.satisfied(w) {
			return nil
		}
	}
	// The find runs for the cache, not for the request that started it,
	// but as the same caller, if the request names one. It never waits
	// for a lost connection: the request does, once.
	pctx := zx.WithFailFast(c.ctx)
	if cl, ok := zx.CallerFrom(ctx); ok {
		pctx = zx.WithCaller(pctx, cl)
	}
	pctx, cancel := context.WithTimeout(pctx, prefetchTimeout)
	pf := &prefetch{root: p, s: s, ep: ep, at: at, max: max, ctx: pctx, cancel: cancel}
	pf.resume(c)
	c.pfs = append(c.pfs, pf)
	c.stats.Prefetches++
	return pf
}

// runPrefetch issues the find of pf (nil: none) and installs what it
// streams in the background.
func (c *Cache) runPrefetch(pf *prefetch) {
	if pf == nil {
		return
	}
	ic := c.remote.(zx.Finder).Find(pf.ctx, pf.root, zx.FindOpts{Pred: pf.pred})
	go func() {
		defer pf.cancel()
		ok := true
		for it := range ic {
			c.mu.Lock()
			if pf.ended {
				c.mu.Unlock()
				return // cancelled with the cache's contents
			}
			ok = c.prefetchItem(pf, it)
			if ok && pf.n >= pf.max {
				// Cut off: what is still on the stack is incomplete.
				ok = false
				c.stats.PrefetchCuts++
				c.log.Debug("cache: prefetch cut off", "root", pf.root, "at", pf.last, "entries", pf.n)
			}
			if !ok {
				if pf.n >= pf.max {
					c.noteCut(pf)
				}
				c.endPrefetch(pf, false)
				c.mu.Unlock()
				return
			}
			c.mu.Unlock()
		}
		c.mu.Lock()
		if !pf.ended {
			c.endPrefetch(pf, pf.ctx.Err() == nil)
		}
		c.mu.Unlock()
	}()
}

// prefetchItem handles one item of pf's find: it caches the entry,
// installs the listings it completes and wakes the requests it answers.
// It returns false if the find failed or is not in walk order. c.mu is
// held.
func (c *Cache) prefetchItem(pf *prefetch, it zx.Item) bool {
	if it.Dir == nil || it.Dir.Path() == "" {
		if it.Err != nil {
			c.log.Debug("cache: prefetch failed", "root", pf.root, "err", it.Err)
			if pf.n == 0 && zx.KindOf(it.Err) == zx.ErrNotSupp {
				// The tree cannot find: do not ask again.
				c.opts.PrefetchEntries = -1
			}
		}
		return false // the find failed, or data we did not ask for
	}
	q, err := zx.CleanPath(it.Dir.Path())
	if err != nil || q != it.Dir.Path() || !zx.HasPrefix(q, pf.root) {
		return false
	}
	if pf.last == "" && q != pf.root || pf.last != "" && walkCmp(q, pf.last) < 0 {
		return false // not in walk order: nothing can be concluded
	}
	// Every open directory that q is not in is complete.
	for len(pf.stack) > 0 {
		top := pf.stack[len(pf.stack)-1]
		if zx.HasPrefix(q, top.path) {
			break
		}
		pf.stack = pf.stack[:len(pf.stack)-1]
		c.prefetchList(pf, top)
	}
	if it.Err != nil {
		// A directory the find could not read comes right after its
		// entry; an entry it could not read, in its place.
		for _, d := range pf.stack {
			if d.path == q || d.path == zx.Parent(q) {
				d.bad = true
			}
		}
		if walkCmp(q, pf.last) > 0 {
			pf.last = q
		}
		c.wakePrefetched(pf)
		return true
	}
	if q == pf.last {
		return false
	}
	if q != pf.root {
		top := (*pfDir)(nil)
		if len(pf.stack) > 0 {
			top = pf.stack[len(pf.stack)-1]
		}
		if top == nil || top.path != zx.Parent(q) {
			return false
		}
		top.names = append(top.names, it.Dir.Name())
	}
	if !c.changedSince(pf.s, q, false) {
		c.set(q, it.Dir, pf.at, c.watching && c.epoch == pf.ep)
	}
	if it.Dir.IsDir() {
		d := &pfDir{path: q}
		for _, k := range pf.skip {
			// Pruned: its listing is not sent. It is kept on the stack
			// as a directory whose contents are not known.
			d.bad = d.bad || k.has(q)
		}
		pf.stack = append(pf.stack, d)
	}
	pf.last = q
	pf.n++
	c.stats.Prefetched++
	c.wakePrefetched(pf)
	return true
}

// prefetchList installs the complete listing of d, if it can be trusted.
// c.mu is held.
func (c *Cache) prefetchList(pf *prefetch, d *pfDir) {
	e := c.ents[d.path]
	if d.bad || e == nil || e.d == nil || !e.d.IsDir() || c.changedSince(pf.s, d.path, true) {
		return
	}
	kids := make(map[string]bool, len(d.names))
	for _, name := range d.names {
		if ce := c.ents[zx.Join(d.path, name)]; ce == nil || ce.d == nil {
			return // dropped since (Flush): not complete
		}
		kids[name] = true
	}
	// Children that went away since an earlier listing.
	for name := range e.kids {
		if !kids[name] {
			c.drop(zx.Join(d.path, name))
		}
	}
	e.unread = e.unread || e.kids == nil
	e.kids, e.listAt, e.listWtch = kids, pf.at, c.watching && c.epoch == pf.ep
}

// firstListing is called when a whole listing of p is answered from the
// cache: the first one of a listing a prefetch brought stands for the
// listing miss the prefetch saved, so what a miss would start (a sibling
// stream, see siblings.go) starts now. The result is for the caller to
// call after unlocking. c.mu is held.
func (c *Cache) firstListing(p string, le *entry, whole bool) func() {
	if !le.unread || !whole {
		return nil
	}
	le.unread = false
	return c.sibStartDir(p)
}

// wakePrefetched wakes the waiters pf has answered. A lookup of a name
// the find passed without sending, in a directory it is listing, gets a
// negative entry: the name was not there when the directory was read.
// c.mu is held.
func (c *Cache) wakePrefetched(pf *prefetch) {
	ws := pf.waiters[:0]
	for _, w := range pf.waiters {
		if !pf.satisfied(w) {
			ws = append(ws, w)
			continue
		}
		c.prefetchAbsent(pf, w.p)
		close(w.ch)
	}
	clear(pf.waiters[len(ws):])
	pf.waiters = ws
}

// prefetchAbsent caches a negative entry for p if pf passed p's place
// in a directory it is listing without sending it: p was not there when
// the directory was read. It reports whether it did. c.mu is held.
func (c *Cache) prefetchAbsent(pf *prefetch, p string) bool {
	if pf.ended || p == pf.root || p == pf.last || !pf.reached(p) {
		return false
	}
	d := pf.open(zx.Parent(p))
	if d == nil || d.bad {
		return false
	}
	if _, found := slices.BinarySearch(d.names, p[strings.LastIndexByte(p, '/')+1:]); found || c.changedSince(pf.s, p, false) {
		return false
	}
	c.set(p, nil, pf.at, c.watching && c.epoch == pf.ep)
	return true
}

// endPrefetch ends pf: when the find ended normally (complete), the
// directories still open are complete too. c.mu is held.
func (c *Cache) endPrefetch(pf *prefetch, complete bool) {
	for i := len(pf.stack) - 1; complete && i >= 0; i-- {
		c.prefetchList(pf, pf.stack[i])
	}
	pf.stack = nil
	pf.ended = true
	pf.cancel()
	c.pfs = slices.DeleteFunc(c.pfs, func(x *prefetch) bool { return x == pf })
	c.wakePrefetched(pf)
}

// stopPrefetches ends every prefetch in flight without installing more:
// the cache was dropped. c.mu is held.
func (c *Cache) stopPrefetches() {
	for _, pf := range slices.Clone(c.pfs) {
		c.endPrefetch(pf, false)
	}
	c.pfCuts = nil
}

// noteCut remembers where pf was cut off, so that a prefetch of one of
// the directories it left open can skip what it completed. c.mu is held.
func (c *Cache) noteCut(pf *prefetch) {
	if len(pf.stack) == 0 {
		return
	}
	var chain []string
	for _, d := range pf.stack {
		chain = append(chain, d.path)
	}
	if pf.last != chain[len(chain)-1] {
		chain = append(chain, pf.last)
	}
	c.pfCuts = append(c.pfCuts, pfCut{chain: chain})
	if len(c.pfCuts) > maxCutOffs {
		c.pfCuts = slices.Delete(c.pfCuts, 0, len(c.pfCuts)-maxCutOffs)
	}
}

// resume makes pf, if its root is a directory an earlier prefetch left
// open when it was cut off, or the next directory after the cut in one
// it left open, go on from where that one stopped: it becomes a find of
// that earlier prefetch's root that skips the subtrees it completed
// (their entries are sent again, their contents not). pf's root comes
// first in that walk, then what follows it, so a walk of a big tree costs
// one round trip per PrefetchEntries entries, not one per directory met
// after a cut. (A directory further on gets a find of its own: resuming
// would stream everything between the cut and it first.) It uses the
// cut-off up. c.mu is held.
func (pf *prefetch) resume(c *Cache) {
	for i, cut := range c.pfCuts {
		if !slices.Contains(cut.chain[:len(cut.chain)-1], pf.root) && !c.nextAfterCut(cut.chain, pf.root) {
			continue
		}
		var terms []string
		for k := 0; k+1 < len(cut.chain); k++ {
			dir, below := cut.chain[k], cut.chain[k+1]
			pf.skip = append(pf.skip, pfSkip{dir, below})
			lo, op := dir+"/", ">="
			if dir == "/" {
				lo, op = "/", ">"
			}
			terms = append(terms, "path"+op+quotePred(lo)+" & path<"+quotePred(below)+" & prune")
		}
		pf.root = cut.chain[0]
		pf.pred = strings.Join(append(terms, "true"), " | ")
		c.pfCuts = slices.Delete(c.pfCuts, i, i+1)
		return
	}
}

// nextAfterCut reports whether directory d comes right after where a
// prefetch was cut off (chain): its parent was left open, and the cached
// listing of the parent has nothing but files between the child that
// was open (or the last entry) and d. c.mu is held.
func (c *Cache) nextAfterCut(chain []string, d string) bool {
	if d == "/" {
		return false
	}
	pp := zx.Parent(d)
	j := slices.Index(chain[:len(chain)-1], pp)
	if j < 0 {
		return false
	}
	from, to := path.Base(chain[j+1]), path.Base(d)
	pe := c.ents[pp]
	if to <= from || pe == nil || !pe.kids[to] {
		return false
	}
	for name := range pe.kids {
		if name > from && name < to {
			if e := c.ents[zx.Join(pp, name)]; e == nil || e.d == nil || e.d.IsDir() {
				return false
			}
		}
	}
	return true
}

// knownFor reports whether the cache can answer a lookup of p (list:
// also p's listing, if p is a directory) without the remote. c.mu is
// held.
func (c *Cache) knownFor(p string, list bool) bool {
	if e := c.ents[p]; c.validEntry(e) {
		if !list || e.d == nil || !e.d.IsDir() {
			return true
		}
		_, ok := c.listed(p)
		return ok
	}
	pe, ok := c.listed(zx.Parent(p))
	return ok && p != "/" && !pe.kids[p[strings.LastIndexByte(p, '/')+1:]]
}

// prefetchWait is how long a request may wait for prefetches in all
// (Options.PrefetchWait); 0: no bound.
func (c *Cache) prefetchWait() time.Duration {
	switch w := c.opts.PrefetchWait; {
	case w < 0:
		return 0
	case w > 0:
		return w
	}
	w := minPrefetchWait
	if r, ok := c.remote.(interface{ RTT() time.Duration }); ok {
		w = max(w, 4*r.RTT())
	}
	return w
}

// awaitPrefetch waits, when the cache cannot answer a request for p (list:
// a whole listing) but a prefetch in flight will tell it, until that
// prefetch has reached p (for a listing: passed p's contents) or ended;
// or until ctx is done, the prefetch made no progress for prefetchStall,
// or the wait reached prefetchWait (the stream is far from p, or slow:
// one round trip costs less). The caller then answers as usual: from the
// cache, or from the remote.
func (c *Cache) awaitPrefetch(ctx context.Context, p string, list bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	waited := false
	var deadline <-chan time.Time
	for len(c.pfs) > 0 && !c.pendingOverlap(p) && !c.knownFor(p, list) {
		w := &pfWaiter{p: p, list: list, ch: make(chan struct{})}
		var pf *prefetch
		for _, x := range c.pfs {
			// The deepest one will get there first.
			if !x.satisfied(w) && (pf == nil || len(x.root) > len(pf.root)) {
				pf = x
			}
		}
		if pf == nil {
			// One may have passed p's place already.
			for _, x := range c.pfs {
				c.prefetchAbsent(x, p)
			}
			break
		}
		pf.waiters = append(pf.waiters, w)
		if !waited {
			waited = true
			c.stats.PrefetchWaits++
			if d := c.prefetchWait(); d > 0 {
				dt := time.NewTimer(d)
				defer dt.Stop()
				deadline = dt.C
			}
		}
		n := pf.n
		c.mu.Unlock()
		stall := c.pfStall
		if stall == 0 {
			stall = prefetchStall
		}
		t := time.NewTimer(stall)
		stalled := false
	wait:
		for {
			select {
			case <-w.ch:
				break wait
			case <-ctx.Done():
				stalled = true
				break wait
			case <-deadline:
				c.mu.Lock()
				c.stats.PrefetchGiveUps++
				c.mu.Unlock()
				stalled = true
				break wait
			case <-t.C:
				c.mu.Lock()
				moved := pf.n != n
				n = pf.n
				c.mu.Unlock()
				if !moved {
					stalled = true
					break wait
				}
				t.Reset(stall)
			}
		}
		t.Stop()
		c.mu.Lock()
		if stalled {
			pf.unwait(w)
			return
		}
	}
}
