package cache

// Tree streams: the escalation of sibling streams for a reader that walks
// a subtree (grep -r, diff -r, cp -r, tar -c). Such a program reads a
// directory's files in name order and descends into each subdirectory as
// its name comes, which is exactly the order of the server's find (depth
// first, names sorted, walkCmp). Once a reader has read files of a
// directory and then moves into one of its subdirectories (or into the
// next directory after the subtree a tree stream covered), the cache
// streams the small files of the whole enclosing subtree, from there on
// in walk order, with one findget at a time, instead of one sibling
// stream (one round trip) per directory.
//
// A tree stream stays a bounded number of bytes ahead of its reader (the
// last file of its subtree read, in walk order): past the window it is
// cut (cancelled), and once the reader has consumed half of what it
// brought ahead, it is resumed with a findget whose predicate prunes
// everything up to the last file delivered, with twice the window (up to
// sibMax). So a reader that stops or moves elsewhere costs at most one
// window of bytes, and one that goes on never waits for a round trip
// while the window is large enough. Files are installed under the
// sibling streams' coherence rule (sibInstall); a Get of a file the
// stream will still bring waits for it (sibWait). See docs/cache.md
// ("Tree streams").
//
// Tree streams are guarded by Cache.mu.

import (
	"context"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zxfs/zx"
)

// defaultTreeFile is Options.TreeFile's default: big enough for most
// of the files a source tree holds above SiblingFile (Go's has 72 between
// 256 KiB and 4 MiB), small enough that one is a modest part of a window.
const defaultTreeFile = 4 << 20

// maxTrees bounds the tree streams remembered (diff -r walks two trees
// in step); starting another replaces the least recently read one.
const maxTrees = 2

// treeFileCost is what a file counts in a window beside its data (its
// entry, its place in the reader's queue), so that a subtree of tiny
// files is not streamed by the hundred thousand.
const treeFileCost = 256

// minTreeReads is the number of files read in a directory (through its
// sibling streams) that shows a walk when the reader then moves into a
// subdirectory: one file read (cat, an editor) does not.
const minTreeReads = 2

// treeStream streams the regular files (up to Options.TreeFile) of the subtree at root in
// walk order, after a position.
type treeStream struct {
	root   string
	after  string // the current findget brings files after this path
	upto   string // and up to this one, when planned from the listings ("": to the end)
	window int64  // bytes it may bring ahead of the reader
	s, ep  uint64 // c.seq and c.epoch when the current findget was issued
	at     time.Time
	gen    int    // findgets issued; a finished one that is not the latest is ignored
	last   string // the last file that arrived ("" none yet)
	open   bool   // last's data is still arriving
	ended  string // the last file whose data all arrived
	pos    string // the furthest file of the subtree the reader read
	ahead  []treeFile
	bytes  int64 // of the files in ahead
	run    bool  // a findget is in flight
	dead   bool  // cancelled: it brings nothing more
	all    bool  // the whole subtree was streamed
	used   time.Time
	wake   chan struct{} // closed (and replaced) on progress
	cancel context.CancelFunc
}

// treeFile is a file a tree stream brought that its reader has not
// passed yet.
type treeFile struct {
	path string
	size int64
}

// covers reports whether t is (or may again be) responsible for streaming
// the files of p, a path under its root.
func (t *treeStream) covers(p string, now time.Time) bool {
	return !t.dead && p != t.root && zx.HasPrefix(p, t.root) && now.Sub(t.used) < sibForget
}

// pending reports whether t's findget in flight will still bring p.
func (t *treeStream) pending(p string) bool {
	if !t.run || walkCmp(p, t.after) <= 0 || t.upto != "" && walkCmp(p, t.upto) > 0 {
		return false
	}
	if t.last == "" {
		return true
	}
	c := walkCmp(p, t.last)
	return c > 0 || c == 0 && t.open
}

// treeFor returns the live tree stream covering p, if any. c.mu is held.
func (c *Cache) treeFor(p string, now time.Time) *treeStream {
	for _, t := range c.sib.trees {
		if t.covers(p, now) {
			return t
		}
	}
	return nil
}

// treeTouch notes that the reader read (or is about to read) file p: the
// tree stream covering p moves its reader there, drops what it passed
// from its window, and, if it stopped short of its subtree's end with
// little left ahead, is resumed after the later of p and its last file.
// The result, if not nil, issues the resumed findget; it is called
// without c.mu. c.mu is held.
func (c *Cache) treeTouch(p string) func() {
	now := time.Now()
	t := c.treeFor(p, now)
	if t == nil {
		return nil
	}
	t.used = now
	if t.pos == "" || walkCmp(p, t.pos) > 0 {
		t.pos = p
	}
	i := 0
	for ; i < len(t.ahead) && walkCmp(t.ahead[i].path, t.pos) <= 0; i++ {
		t.bytes -= t.ahead[i].size
	}
	t.ahead = t.ahead[i:]
	if t.run || t.all || t.bytes > t.window/2 {
		return nil
	}
	from := t.ended
	if walkCmp(t.pos, from) > 0 {
		from = t.pos
	}
	t.window = min(2*t.window, c.sibMax())
	return c.treeIssue(t, from)
}

// treeStart decides whether the first listing of directory dir escalates
// to a tree stream: the reader read files of dir's parent (at least
// minTreeReads) and moves into dir, or it moves into dir right after a
// tree stream's subtree, dir's previous sibling. The root is the highest
// ancestor of dir whose files were being read, or dir's parent; the
// stream starts at dir. The result is used as sibStart's. c.mu is held.
func (c *Cache) treeStart(f zx.Finder, dir string) func() {
	return c.treeStartAt(f, dir, dir)
}

// treeStartAt is treeStart for a stream that starts after from, dir or
// a file in it: the data miss of a file of dir whose listing was read
// before (by ls -R, say) escalates too. c.mu is held.
func (c *Cache) treeStartAt(f zx.Finder, dir, from string) func() {
	if dir == "/" {
		return nil
	}
	now := time.Now()
	pp := zx.Parent(dir)
	walking := false
	for _, t := range c.sib.trees {
		if !t.dead && t.root != "/" && zx.Parent(t.root) == pp && path.Base(t.root) < path.Base(dir) && now.Sub(t.used) < sibForget {
			walking = true // the next directory after a tree streamed
		}
	}
	if ps := c.sib.streams[pp]; ps != nil && ps.reads >= minTreeReads && now.Sub(ps.used) < sibForget {
		walking = true
	}
	if !walking {
		return nil
	}
	root := pp
	for root != "/" {
		s := c.sib.streams[zx.Parent(root)]
		if s == nil || s.reads < minTreeReads || now.Sub(s.used) >= sibForget {
			break
		}
		root = zx.Parent(root)
	}
	// The sibling streams in the subtree are replaced by this one.
	for _, s := range c.sib.streams {
		if !s.done && zx.HasPrefix(s.dir, root) {
			c.sibEnd(s, false)
		}
	}
	// And so are the tree streams it holds, or the least recently read
	// one when there are too many.
	trees := c.sib.trees[:0]
	for _, t := range c.sib.trees {
		if zx.HasPrefix(t.root, root) {
			c.treeStop(t)
			continue
		}
		trees = append(trees, t)
	}
	c.sib.trees = trees
	if len(c.sib.trees) >= maxTrees {
		old := 0
		for i, t := range c.sib.trees {
			if t.used.Before(c.sib.trees[old].used) {
				old = i
			}
		}
		c.treeStop(c.sib.trees[old])
		c.sib.trees = append(c.sib.trees[:old], c.sib.trees[old+1:]...)
	}
	t := &treeStream{root: root, window: c.treeFirst(), used: now, wake: make(chan struct{})}
	c.sib.trees = append(c.sib.trees, t)
	c.stats.TreeStreams++
	return c.treeIssue(t, from)
}

// stopTrees cancels every tree stream (the cache is dropped: a walk
// that goes on starts another). c.mu is held.
func (c *Cache) stopTrees() {
	for _, t := range c.sib.trees {
		c.treeStop(t)
	}
	c.sib.trees = nil
}

// treeStop cancels t for good. c.mu is held.
func (c *Cache) treeStop(t *treeStream) {
	if t.dead {
		return
	}
	t.dead = true
	c.treeHalt(t)
}

// treeHalt stops t's findget in flight, if any, and wakes its waiters.
// c.mu is held.
func (c *Cache) treeHalt(t *treeStream) {
	if t.run {
		t.run = false
		t.cancel()
		c.sib.live--
	}
	close(t.wake)
	t.wake = make(chan struct{})
}

// treeIssue registers a findget of t's files after from and returns the
// function that issues it. c.mu is held.
func (c *Cache) treeIssue(t *treeStream, from string) func() {
	f, ok := c.remote.(zx.Finder)
	if !ok || c.sib.off {
		return nil
	}
	ctx, cancel := context.WithCancel(zx.WithFailFast(c.ctx)) // read ahead: never waits for a lost connection
	t.after, t.last, t.open, t.ended = from, "", false, from
	t.s, t.ep, t.at = c.seq, c.epoch, time.Now()
	t.gen++
	t.run, t.cancel = true, cancel
	c.sib.live++
	c.stats.SiblingStreams++
	upto, ok := c.treeUpto(t.root, from, t.window)
	if !ok {
		upto = "" // bounded on this side
	}
	t.upto = upto
	pr := treePred(c.opts.TreeFile, t.root, from, upto)
	gen := t.gen
	c.sib.wg.Add(1)
	return func() {
		ic := f.FindGet(ctx, t.root, zx.FindOpts{Pred: pr})
		go c.runTree(ctx, cancel, t, gen, ic)
	}
}

// treePred is the predicate of a tree stream: the regular files of at
// most max bytes below root that come after from in walk order (and, if
// upto is not "", not after upto). For each level between root and from,
// the entries of that level before from's ancestor (or from) are pruned:
// their subtrees are not read; so are, for each level between root and
// upto, the entries after upto's ancestor (or upto).
func treePred(maxSize int64, root, from, upto string) string {
	var out []string
	for q := from; q != root && q != "/"; q = zx.Parent(q) {
		dir := zx.Parent(q)
		lo, op := dir+"/", ">="
		if dir == "/" {
			lo, op = "/", ">"
		}
		out = append(out, "path"+op+quotePred(lo)+" & path<"+quotePred(q))
	}
	if upto != "" {
		depth := strings.Count(strings.TrimPrefix(upto, root), "/")
		if root == "/" {
			depth++
		}
		for q := upto; q != root && q != "/"; q = zx.Parent(q) {
			// The children of dir after q: at q's depth, under dir
			// (dir's descendants are the paths in (dir/, dir0)).
			dir := zx.Parent(q)
			t := "depth=" + strconv.Itoa(depth) + " & name>" + quotePred(path.Base(q))
			if dir != "/" {
				t += " & path>" + quotePred(dir+"/") + " & path<" + quotePred(dir+"0")
			}
			out = append(out, t)
			depth--
		}
	}
	files := "type=- & size>0 & size<=" + strconv.FormatInt(maxSize, 10) + " & path!=" + quotePred(from)
	if len(out) == 0 {
		return files
	}
	x := "(" + strings.Join(out, " | ") + ")"
	return x + " & prune | !" + x + " & " + files
}

// maxTreePlan bounds the cached entries treeUpto looks at (under c.mu).
const maxTreePlan = 20000

// treeUpto plans a tree stream from the cached listings: the last small
// file after from, in walk order under root, such that the small files
// from there to it fit in budget; "" if all to the end of the subtree
// fit. ok is false when a listing or entry in the way is not cached (or
// the plan would look at too many): the stream is then cut on this side.
// Like a sibling stream's plan, it lets the server stop at the bound, so
// that no data in flight is wasted by a cancel. c.mu is held.
func (c *Cache) treeUpto(root, from string, budget int64) (upto string, ok bool) {
	var total int64
	seen := 0
	// walk reports whether the plan is done (full, or failed: !ok).
	var walk func(dir string) bool
	walk = func(dir string) bool {
		le, listed := c.listed(dir)
		if !listed {
			ok = false
			return true
		}
		names := make([]string, 0, len(le.kids))
		for k := range le.kids {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			p := zx.Join(dir, k)
			if walkCmp(p, from) < 0 && !zx.HasPrefix(from, p) {
				continue
			}
			if seen++; seen > maxTreePlan {
				ok = false
				return true
			}
			e := c.ents[p]
			if !c.validEntry(e) {
				ok = false
				return true
			}
			switch {
			case e.d == nil:
			case e.d.IsDir():
				if walk(p) {
					return true
				}
			case p != from && c.treeFile(e.d) && walkCmp(p, from) > 0:
				if upto != "" && total+e.d.Size()+treeFileCost > budget {
					// (A window brings at least one file: one
					// bigger than it, up to TreeFile, comes alone.)
					return true
				}
				total += e.d.Size() + treeFileCost
				upto = p
			}
		}
		return false
	}
	ok = true
	if !walk(root) {
		return "", ok // all fit
	}
	return upto, ok
}

// runTree consumes findget number gen of t, installing each file as it
// ends, and cuts it once t is a window ahead of its reader.
func (c *Cache) runTree(ctx context.Context, cancel context.CancelFunc, t *treeStream, gen int, ic <-chan zx.Item) {
	defer c.sib.wg.Done()
	defer cancel()
	var d zx.Dir
	var buf []byte
	complete, over := true, false
	finish := func() { // c.mu held
		if d == nil {
			return
		}
		if !over && ctx.Err() == nil && t.gen == gen {
			c.treeInstall(t, d, buf)
		}
		if t.gen == gen {
			t.open, t.ended = false, d.Path()
		}
		d, buf = nil, nil
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
			if t.gen == gen && t.run && it.Dir.Type() == zx.TypeFile {
				d = it.Dir.Clone()
				t.last, t.open = d.Path(), true
				if t.upto == "" && t.bytes > t.window || t.bytes > 2*t.window {
					// A window ahead of the reader: stop here
					// (resumed after the last file that ended).
					t.last, t.open = t.ended, false
					d, over, complete = nil, true, false
					c.treeHalt(t)
				}
			}
			if t.gen == gen && t.run {
				close(t.wake)
				t.wake = make(chan struct{})
			}
			c.mu.Unlock()
		case d != nil && !over:
			buf = append(buf, it.Data...)
		}
	}
	c.sibBeforeInstall(d)
	c.mu.Lock()
	finish()
	if ctx.Err() != nil {
		complete = false
	}
	if t.gen == gen && t.run {
		t.all = complete && t.upto == ""
		if complete && t.upto != "" {
			t.ended = t.upto // resumed after the planned end
		}
		if t.open {
			t.last = t.ended // cut off: resumed after the last file that ended
		}
		t.open = false
		c.treeHalt(t)
	}
	c.mu.Unlock()
}

// treeInstall caches the entry d and data of a file t brought, under the
// sibling streams' rule, and counts it ahead of the reader. c.mu is held.
func (c *Cache) treeInstall(t *treeStream, d zx.Dir, data []byte) {
	p := d.Path()
	if f := c.files[p]; f != nil && f.size == d[zx.ASize] && f.mtime == d[zx.AMtime] {
		if e := c.ents[p]; c.validEntry(e) && e.d != nil && e.d[zx.ASize] == d[zx.ASize] && e.d[zx.AMtime] == d[zx.AMtime] {
			return // cached already (a sibling stream brought it)
		}
	}
	if int64(len(data)) != d.Size() || c.changedSince(t.s, p, false) || c.pendingOverlap(p) {
		return
	}
	if e := c.ents[p]; e == nil || e.d == nil || e.d.Type() != d.Type() || e.d[zx.ASize] != d[zx.ASize] || e.d[zx.AMtime] != d[zx.AMtime] {
		c.set(p, d, t.at, c.watching && c.epoch == t.ep)
	}
	c.setData(p, d, data)
	c.stats.SiblingFiles++
	c.stats.SiblingBytes += int64(len(data))
	if t.pos == "" || walkCmp(p, t.pos) > 0 {
		t.ahead = append(t.ahead, treeFile{p, int64(len(data)) + treeFileCost})
		t.bytes += int64(len(data)) + treeFileCost
	}
}

// treeFirst is the window of a tree stream's first findget: as a
// sibling stream's (sibFirst), room for one file of the biggest it
// brings (Options.TreeFile), so that a big file early in the walk does
// not cost a resumption of its own.
func (c *Cache) treeFirst() int64 {
	return min(c.sibMax(), max(c.opts.SiblingBytes/8, c.opts.TreeFile))
}

// treeFile reports whether d is a file a tree stream would bring: a
// regular file of at most Options.TreeFile bytes (bigger than a sibling
// stream's, since a walk reads every file in order).
func (c *Cache) treeFile(d zx.Dir) bool {
	return d != nil && d.Type() == zx.TypeFile && d.Size() > 0 && d.Size() <= c.opts.TreeFile
}

// treeWait bounds the time a Get waits for a tree stream to bring its
// file: a stream far from the file (another program reads elsewhere in
// the subtree) or slow is not waited for beyond prefetchWait, as a
// prefetch is not; the Get then asks the remote.
type treeWait struct {
	timer *time.Timer
	over  chan struct{} // closed when the bound is reached
}

type treeWaitKey struct{}

// treeWaitOK reports whether a Get with ctx may (still) wait for a tree
// stream.
func treeWaitOK(ctx context.Context) bool {
	tw, _ := ctx.Value(treeWaitKey{}).(*treeWait)
	if tw == nil {
		return true
	}
	select {
	case <-tw.over:
		return false
	default:
		return true
	}
}
