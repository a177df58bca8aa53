package cache

// Sibling streams: a program that reads one file of a directory usually
// reads its siblings next (grep -r, diff -r, cp -r, tar -c), each costing a
// round trip when fetched on demand. When a file's data misses, the cache
// also asks for the directory's other small regular files with one
// findget, and installs each file's entry and data as it arrives; a Get of
// a file such a stream will deliver waits for it instead of sending its own
// request. See docs/cache.md ("Sibling streams") for the rules.
//
// A stream is bounded in bytes: when the directory's listing is cached,
// the cache picks the files that fit (in name order after the file read)
// and asks for that name range only, so the server sends no more than
// that; otherwise it asks for everything after the file and cancels the
// stream at the bound. At most maxSibLive streams run at once: starting
// another cancels the one whose directory was least recently read from, so
// a reader that moved on does not keep the link busy. A directory whose
// stream ended (or was cancelled) before the file now read gets a new
// stream from there, so a directory larger than the bound is read in a
// few streams, one round trip each.
//
// Once a directory's files are being read, the listing of a subdirectory
// starts the subdirectory's stream too (sibStartDir), saving its first
// file's round trip. A directory's first stream brings an eighth of the
// bound, each next one there twice the last (sibFirst).
//
// The table of streams is guarded by Cache.mu.

import (
	"context"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zxfs/zx"
)

const (
	defaultSiblingBytes = 8 << 20
	defaultSiblingFile  = 256 << 10

	// maxSibLive bounds the sibling streams in flight.
	maxSibLive = 2

	// sibForget: a finished stream keeps a directory from being streamed
	// again (for the names it covered) for this long, so that a file it
	// could not deliver (changed meanwhile, say) is fetched alone, not
	// with another stream of the same files.
	sibForget = 30 * time.Second

	// maxSibRecs bounds the finished streams remembered.
	maxSibRecs = 512
)

// sibStream is one sibling stream of directory dir: the small regular
// files whose names are in (from, to] (to "": no upper bound).
type sibStream struct {
	dir      string
	from, to string
	plan     map[string]bool // names it should deliver, when chosen from a listing; nil: any small file in range
	budget   int64           // bytes it may bring
	s, ep    uint64          // c.seq and c.epoch when issued
	at       time.Time       // when issued
	seen     string          // name of the last entry that arrived
	open     bool            // seen's data is still arriving
	done     bool
	hi       string // when done: names up to hi were covered
	all      bool   // when done: the whole directory was covered
	ended    time.Time
	used     time.Time     // last Get of a file in dir
	reads    int           // Gets of files in dir since it was issued
	listed   bool          // started with the listing of dir, a guess (see sibStartDir)
	hops     int           // listed: directories up to one whose files were read
	wake     chan struct{} // closed (and replaced) on progress
	cancel   context.CancelFunc
	files    int
	bytes    int64
}

// siblings is the cache's table of sibling streams.
type siblings struct {
	streams map[string]*sibStream // by directory: the latest stream
	live    int
	trees   []*treeStream  // see treestream.go
	off     bool           // the remote cannot findget: never try again
	wg      sync.WaitGroup // the streams' goroutines, for Close

	// beforeInstall, if set (by tests), is called without c.mu before
	// a file a stream brought is installed, with its path.
	beforeInstall func(path string)
}

// sibFile reports whether d is a file a sibling stream would bring.
func (c *Cache) sibFile(d zx.Dir) bool {
	return d != nil && d.Type() == zx.TypeFile && d.Size() > 0 && d.Size() <= c.opts.SiblingFile
}

// sibTouch notes that a file in directory dir is being read.
func (c *Cache) sibTouch(dir string) {
	if s := c.sib.streams[dir]; s != nil {
		s.used = time.Now()
		s.reads++
	}
}

// sibWait returns a channel to wait on when an in-flight sibling stream
// will deliver the file p (entry d), whose data is not cached; nil when
// none will. The caller retries once it is closed.
func (c *Cache) sibWait(ctx context.Context, p string, d zx.Dir) (w <-chan struct{}, tree bool) {
	if t := c.treeFor(p, time.Now()); t != nil && c.treeFile(d) && t.pending(p) && treeWaitOK(ctx) {
		return t.wake, true
	}
	return c.sibWaitDir(p, d), false
}

// sibWaitDir is sibWait for the sibling stream of p's directory.
func (c *Cache) sibWaitDir(p string, d zx.Dir) <-chan struct{} {
	dir, name := zx.Parent(p), path.Base(p)
	s := c.sib.streams[dir]
	if s == nil || p == "/" {
		return nil
	}
	s.used = time.Now()
	s.reads++
	if s.done || !c.sibFile(d) || name <= s.from || s.to != "" && name > s.to {
		return nil
	}
	if s.plan != nil && !s.plan[name] {
		return nil
	}
	if name < s.seen || name == s.seen && !s.open {
		return nil // passed
	}
	return s.wake
}

// sibStart decides whether a data miss of file p (entry d) starts a
// sibling stream of its directory. If so it registers the stream and returns the
// function that issues it, to be called without c.mu right after the
// file's own request (so that both share one round trip).
func (c *Cache) sibStart(p string, d zx.Dir) func() {
	if c.opts.SiblingBytes <= 0 || c.sib.off || p == "/" || d.Size() > c.opts.SiblingFile {
		// A big file gets the link to itself: its siblings are
		// streamed when a small one is read.
		return nil
	}
	f, ok := c.remote.(zx.Finder)
	if !ok {
		return nil
	}
	dir, name := zx.Parent(p), path.Base(p)
	now := time.Now()
	if c.treeFor(p, now) != nil {
		return nil // a tree stream brings it, or will once resumed (treeTouch)
	}
	if !c.pendingOverlap(dir) {
		if issue := c.treeStartAt(f, dir, p); issue != nil {
			return issue // the reader walks: the subtree from p on
		}
	}
	budget := c.sibFirst()
	if s := c.sib.streams[dir]; s != nil {
		if !s.done || (s.all || name <= s.hi) && now.Sub(s.ended) < sibForget {
			return nil
		}
		if s.reads > 0 && now.Sub(s.ended) < sibForget {
			// Going on in a directory whose files are read.
			budget = min(2*s.budget, c.sibMax())
		}
	}
	if c.pendingOverlap(dir) {
		return nil
	}
	s := &sibStream{dir: dir, from: name, budget: budget, s: c.seq, ep: c.epoch,
		at: now, used: now, reads: 1, wake: make(chan struct{})}
	if le, ok := c.listed(dir); ok && !c.sibPlan(s, le) {
		// Nothing to stream; the record still tells that the
		// directory's files are read (see sibStartDir).
		c.sibNone(s, now)
		return nil
	}
	return c.sibIssue(f, s, now)
}

// evidence says how far s's directory is from one whose files were read
// (0: its own), as far as its streams tell; -1: unknown.
func (s *sibStream) evidence() int {
	switch {
	case s.reads > 0:
		return 0
	case s.listed:
		return s.hops
	}
	return -1
}

// maxSibHops bounds the guesses made without files read: a listing miss
// of a directory starts a stream with it when a directory at most that
// many levels above had its files read.
const maxSibHops = 2

// sibStartDir decides whether a listing miss of directory dir (or the
// first listing of one a subtree prefetch listed) starts a sibling stream
// of it, issued with the listing: when its parent's files
// are being read (through a stream), dir's probably will be too, right
// after its listing (grep -r, diff -r), and this saves that first file's
// round trip. The guess carries down maxSibHops levels without evidence
// (a directory listed before the files of its parent are read, or one
// without files), so that a walk that reads nothing (ls -R, find) after
// reading a file costs little. The result is used as sibStart's.
func (c *Cache) sibStartDir(dir string) func() {
	if c.opts.SiblingBytes <= 0 || c.sib.off || dir == "/" {
		return nil
	}
	f, ok := c.remote.(zx.Finder)
	if !ok {
		return nil
	}
	now := time.Now()
	if c.treeFor(dir, now) != nil {
		return nil // a tree stream brings its files
	}
	if c.pendingOverlap(dir) {
		return nil
	}
	if issue := c.treeStart(f, dir); issue != nil {
		return issue
	}
	ps := c.sib.streams[zx.Parent(dir)]
	if ps == nil || now.Sub(ps.used) > sibForget {
		return nil
	}
	hops := ps.evidence()
	if hops < 0 || hops >= maxSibHops {
		return nil
	}
	if s := c.sib.streams[dir]; s != nil && (!s.done || now.Sub(s.ended) < sibForget) {
		return nil
	}
	if c.pendingOverlap(dir) {
		return nil
	}
	s := &sibStream{dir: dir, budget: c.sibFirst(), s: c.seq, ep: c.epoch,
		at: now, used: now, listed: true, hops: hops + 1, wake: make(chan struct{})}
	if le, ok := c.listed(dir); ok && !c.sibPlan(s, le) {
		// Listed already (by a subtree prefetch): nothing to stream,
		// but the guess goes on below.
		c.sibNone(s, now)
		return nil
	}
	return c.sibIssue(f, s, now)
}

// sibNone records s, which has nothing to bring, as done, without a
// request: what it tells of its directory is still of use.
func (c *Cache) sibNone(s *sibStream, now time.Time) {
	c.sibGC(now)
	s.done, s.ended, s.all = true, now, true
	close(s.wake)
	c.sib.streams[s.dir] = s
}

// sibFirst is the budget of a directory's first stream: an eighth of
// the bound (but room for one file). Each stream that goes on in a
// directory whose files were read doubles it, up to the bound, so a guess
// that is not used costs little and one that is soon streams at full size.
func (c *Cache) sibFirst() int64 {
	return min(c.sibMax(), max(c.opts.SiblingBytes/8, c.opts.SiblingFile))
}

// sibMax bounds a stream: Options.SiblingBytes, and a quarter of the
// memory for cached data, so that what it brings is still there when
// read.
func (c *Cache) sibMax() int64 {
	return min(c.opts.SiblingBytes, c.opts.MemBytes/4)
}

// sibPlan chooses the files s brings from le, the listing of its
// directory. It reports false if there are none.
func (c *Cache) sibPlan(s *sibStream, le *entry) bool {
	// The files after s.from that fit in the budget, stopping at the
	// first that does not.
	names := make([]string, 0, len(le.kids))
	for k := range le.kids {
		if k > s.from {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	s.plan = make(map[string]bool)
	var total int64
	for _, k := range names {
		p := zx.Join(s.dir, k)
		e := c.ents[p]
		if !c.validEntry(e) {
			// Not sure after all: bound it on our side.
			s.plan, s.to = nil, ""
			return true
		}
		if !c.sibFile(e.d) {
			continue
		}
		if f := c.files[p]; f != nil && f.size == e.d[zx.ASize] && f.mtime == e.d[zx.AMtime] {
			continue // cached already (it still comes if inside the range)
		}
		if total+e.d.Size() > s.budget {
			break
		}
		total += e.d.Size()
		s.plan[k] = true
		s.to = k
	}
	return len(s.plan) > 0
}

// sibIssue registers s and returns the function that issues it.
func (c *Cache) sibIssue(f zx.Finder, s *sibStream, now time.Time) func() {
	dir := s.dir
	c.sibGC(now)
	// Make room: cancel the streams of the directories least recently
	// read from.
	for c.sib.live >= maxSibLive {
		var old *sibStream
		for _, o := range c.sib.streams {
			if !o.done && o.cancel != nil && (old == nil || o.used.Before(old.used)) {
				old = o
			}
		}
		if old == nil {
			break
		}
		c.sibEnd(old, false)
	}
	c.sib.streams[dir] = s
	c.sib.live++
	c.stats.SiblingStreams++
	ctx, cancel := context.WithCancel(zx.WithFailFast(c.ctx)) // read ahead: never waits for a lost connection
	s.cancel = cancel
	pr := sibPred(c.opts.SiblingFile, s.from, s.to)
	c.sib.wg.Add(1)
	return func() {
		ic := f.FindGet(ctx, dir, zx.FindOpts{Pred: pr})
		go c.runSiblings(ctx, s, ic)
	}
}

// sibGC forgets finished streams, oldest first, beyond maxSibRecs.
func (c *Cache) sibGC(now time.Time) {
	if len(c.sib.streams) < maxSibRecs {
		return
	}
	for k, s := range c.sib.streams {
		if s.done && now.Sub(s.ended) >= sibForget {
			delete(c.sib.streams, k)
		}
	}
	if len(c.sib.streams) < maxSibRecs {
		return
	}
	var done []*sibStream
	for _, s := range c.sib.streams {
		if s.done {
			done = append(done, s)
		}
	}
	slices.SortFunc(done, func(a, b *sibStream) int { return a.ended.Compare(b.ended) })
	for _, s := range done[:len(done)/2] {
		delete(c.sib.streams, s.dir)
	}
}

// sibEnd marks s finished and wakes its waiters: complete, it brought
// all it was to (its end is perhaps still to come); otherwise it is
// cancelled. c.mu is held.
func (c *Cache) sibEnd(s *sibStream, complete bool) {
	if s.done {
		return
	}
	if !complete {
		s.cancel()
	}
	s.done, s.ended = true, time.Now()
	switch {
	case complete && s.to != "":
		s.hi = s.to
	case complete:
		s.all = true
	default:
		s.hi = s.seen
	}
	c.sib.live--
	close(s.wake)
}

// stopSiblings cancels the sibling streams in flight, when everything
// cached is dropped: what they bring was read before the drop, and must
// not be installed after it. c.mu is held.
func (c *Cache) stopSiblings() {
	for _, s := range c.sib.streams {
		c.sibEnd(s, false)
	}
}

// sibPred is the predicate of a sibling stream: the regular files of the
// directory itself (no directory below it is read) of at most max bytes,
// with names in (from, to].
func sibPred(maxSize int64, from, to string) string {
	var b strings.Builder
	b.WriteString("depth=1 & !prune & type=- & size>0 & size<=")
	b.WriteString(strconv.FormatInt(maxSize, 10))
	b.WriteString(" & name>")
	b.WriteString(quotePred(from))
	if to != "" {
		b.WriteString(" & name<=")
		b.WriteString(quotePred(to))
	}
	return b.String()
}

// quotePred quotes s as a predicate value (docs/predicates.md).
func quotePred(s string) string {
	if !strings.Contains(s, "'") {
		return "'" + s + "'"
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(s) + `"`
}

// runSiblings consumes the stream of s, installing each file as it ends.
func (c *Cache) runSiblings(ctx context.Context, s *sibStream, ic <-chan zx.Item) {
	defer c.sib.wg.Done()
	defer s.cancel()
	var d zx.Dir
	var buf []byte
	complete, over := true, false
	// finish installs the file that was arriving (c.mu held).
	finish := func() {
		if d == nil {
			return
		}
		if !over && ctx.Err() == nil {
			c.sibInstall(s, d, buf)
		}
		d, buf = nil, nil
		s.open = false
		if s.plan != nil && s.seen == s.to {
			// All it was to bring is in: the directory may be
			// streamed on from there before the end comes.
			c.sibEnd(s, true)
		}
	}
	for it := range ic {
		switch {
		case it.Err != nil:
			complete = false
			if zx.KindOf(it.Err) == zx.ErrNotSupp {
				c.mu.Lock()
				c.sib.off = true
				c.mu.Unlock()
			}
		case it.Dir != nil:
			c.sibBeforeInstall(d)
			c.mu.Lock()
			finish()
			if it.Dir.Type() == zx.TypeFile && zx.Parent(it.Dir.Path()) == s.dir {
				d = it.Dir.Clone()
				s.seen, s.open = d.Name(), true
			}
			c.sibWake(s)
			c.mu.Unlock()
		case d != nil && !over:
			buf = append(buf, it.Data...)
			s.bytes += int64(len(it.Data))
			if s.plan == nil && s.bytes > s.budget || s.bytes > 2*s.budget {
				// Past the bound (without a plan; or files grew
				// since the listing): stop here.
				over, complete = true, false
				s.cancel()
			}
		}
	}
	c.sibBeforeInstall(d)
	c.mu.Lock()
	finish()
	if ctx.Err() != nil {
		complete = false
	}
	c.sibEnd(s, complete)
	c.mu.Unlock()
}

// sibBeforeInstall calls the test hook for the file d about to be
// installed, if any.
func (c *Cache) sibBeforeInstall(d zx.Dir) {
	if h := c.sib.beforeInstall; h != nil && d != nil {
		h(d.Path())
	}
}

// sibWake wakes the waiters of s. c.mu is held.
func (c *Cache) sibWake(s *sibStream) {
	if !s.done {
		close(s.wake)
		s.wake = make(chan struct{})
	}
}

// sibInstall caches the entry d and data of a file a sibling stream
// brought, unless something changed it since the stream was issued.
// c.mu is held.
func (c *Cache) sibInstall(s *sibStream, d zx.Dir, data []byte) {
	p := d.Path()
	if int64(len(data)) != d.Size() || c.changedSince(s.s, p, false) || c.pendingOverlap(p) {
		return
	}
	if e := c.ents[p]; e == nil || e.d == nil || e.d.Type() != d.Type() || e.d[zx.ASize] != d[zx.ASize] || e.d[zx.AMtime] != d[zx.AMtime] {
		c.set(p, d, s.at, c.watching && c.epoch == s.ep)
	}
	c.setData(p, d, data)
	s.files++
	c.stats.SiblingFiles++
	c.stats.SiblingBytes += int64(len(data))
}

// afterWait waits for w (a sibling stream's progress; with tree, a tree
// stream's), then gets p again. The first wait starts the bound on waits
// for tree streams (treeWait).
func (c *Cache) afterWait(ctx context.Context, w <-chan struct{}, tree bool, p string, off, count int64) <-chan zx.Item {
	out := make(chan zx.Item, 1)
	if ctx.Value(treeWaitKey{}) == nil {
		tw := &treeWait{over: make(chan struct{})}
		if b := c.prefetchWait(); b > 0 {
			tw.timer = time.AfterFunc(b, func() { close(tw.over) })
		}
		ctx = context.WithValue(ctx, treeWaitKey{}, tw)
	}
	tw := ctx.Value(treeWaitKey{}).(*treeWait)
	var over <-chan struct{}
	if tree {
		over = tw.over
	}
	go func() {
		defer close(out)
		if tw.timer != nil {
			defer tw.timer.Stop()
		}
		select {
		case <-w:
		case <-over:
			// Waited long enough for a tree stream: Get asks the
			// remote now (treeWaitOK).
		case <-ctx.Done():
			out <- zx.Item{Err: zx.Errorf("get", p, ctx.Err())} // buffered: never blocks
			return
		}
		for it := range c.Get(ctx, p, off, count) {
			if !sendItem(ctx, out, it) {
				return
			}
		}
	}()
	return out
}
