package cache

import (
	"path"

	"github.com/zxfs/zx"
)

// Known answers from the cache alone, never asking the remote, what the
// cache knows for certain of p: its entry (nil: p does not exist) and
// true; or false when the cache does not know, or a local write
// overlapping p is in flight (its outcome is not known yet). The mount
// uses it to decide which changes it may pipeline without waiting for
// their replies (see docs/cache.md, "Pipelined metadata writes").
func (c *Cache) Known(p string) (zx.Dir, bool) {
	p, err := zx.CleanPath(p)
	if err != nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pendingOverlap(p) {
		return nil, false
	}
	if e := c.ents[p]; c.validEntry(e) {
		if e.d == nil {
			return nil, true
		}
		return e.d.Clone(), true
	}
	if pe, ok := c.listed(zx.Parent(p)); ok && p != "/" && !pe.kids[path.Base(p)] {
		return nil, true
	}
	return nil, false
}

// KnownFree reports whether the cache knows that p does not exist from
// a live watch, not merely because the coherency window has not run out:
// without a watch, another client may have made p a moment ago, unseen.
// The mount creates a file without waiting for the server only then:
// an exclusive create answered at once would report success for a name
// another client took, and a create without O_TRUNC must open, not
// replace, a file that is there (see mount.Create).
func (c *Cache) KnownFree(p string) bool {
	p, err := zx.CleanPath(p)
	if err != nil || p == "/" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.watching || c.pendingOverlap(p) {
		return false
	}
	if e := c.ents[p]; e != nil {
		return e.d == nil && e.watched && c.validEntry(e)
	}
	pe, ok := c.listed(zx.Parent(p))
	return ok && pe.listWtch && !pe.kids[path.Base(p)]
}

// KnownEmpty reports whether the cache knows for certain that the
// directory p is empty, or will be once the Removes in flight below it
// are applied: its complete listing is valid, each name in it is being
// removed, and every local write in flight below p is such a Remove (of
// a child, or of something below a child being removed). The mount
// pipelines an rmdir after the unlinks it pipelined (rm -r); if one of
// them fails, so does the rmdir (ENOTEMPTY), a surprise like any other.
// The directory's own attributes may be stale (its children changed):
// they do not matter here.
func (c *Cache) KnownEmpty(p string) bool {
	p, err := zx.CleanPath(p)
	if err != nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for q := p; ; q = zx.Parent(q) {
		if c.pend[q] > 0 {
			return false
		}
		if q == "/" {
			break
		}
	}
	e, ok := c.listed(p)
	if !ok || !e.d.IsDir() || !c.valid(e.at, e.watched) || c.pendBelow[p] != c.rmBelow[p] {
		return false
	}
	for name := range e.kids {
		if c.removing[zx.Join(p, name)] == 0 {
			return false
		}
	}
	return true
}

// KnownDir returns the entry of directory p for its permissions (mode,
// owner), which changes made below it do not alter: it answers while
// such changes are in flight, or have made its other attributes (mtime,
// size, link count) stale, as long as no change to p itself or above it
// is in flight.
func (c *Cache) KnownDir(p string) (zx.Dir, bool) {
	p, err := zx.CleanPath(p)
	if err != nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for q := p; ; q = zx.Parent(q) {
		if c.pend[q] > 0 {
			return nil, false
		}
		if q == "/" {
			break
		}
	}
	e := c.ents[p]
	if e == nil || e.d == nil || !e.d.IsDir() || !c.valid(e.at, e.watched) {
		return nil, false
	}
	return e.d.Clone(), true
}
