package cache

import (
	"context"
	"slices"
	"time"

	"github.com/zxfs/zx"
)

var _ zx.Linker = (*Cache)(nil)

// Link implements zx.Linker by passing the request on and caching the new
// name's entry from the reply.
//
// The entries of a file's other names are made stale (see the rules
// below, and docs/cache.md "Files with several names").
func (c *Cache) Link(ctx context.Context, oldpath, newpath string) <-chan zx.Reply {
	f, err1 := zx.CleanPath(oldpath)
	t, err2 := zx.CleanPath(newpath)
	if err1 != nil || err2 != nil {
		return zx.Link(ctx, c.remote, oldpath, newpath)
	}
	s := c.begin(f, t)
	at := time.Now()
	rc := zx.Link(ctx, c.remote, f, t)
	out := make(chan zx.Reply, 1)
	go func() {
		r := <-rc
		c.end(s, []string{f, t}, func() {
			if e := c.ents[f]; e != nil {
				e.stale = true // its nlink and ctime changed
				c.staleLinks(e.d, f)
			}
			if r.Err != nil {
				if zx.KindOf(r.Err) == zx.ErrExist {
					c.drop(t)
				}
				return
			}
			c.staleParent(t)
			if r.Dir != nil && r.Dir.Path() == t {
				c.set(t, r.Dir.Clone(), at, c.watching)
			} else {
				c.drop(t)
			}
		})
		out <- r
	}()
	return out
}

var _ zx.StatFSer = (*Cache)(nil)

// StatFS implements zx.StatFSer by passing the request on: free space
// is not cached.
func (c *Cache) StatFS(ctx context.Context, p string) <-chan zx.Reply {
	return zx.StatFS(ctx, c.remote, p)
}

// shared reports whether d is a file with more than one name.
func shared(d zx.Dir) bool {
	return d != nil && !d.IsDir() && d.Int(zx.ANlink) > 1
}

// Files with several names (hard links).
//
// Entries are cached by path, and a change notice names the path it was
// made through, so a change through one name of a file with several names
// says nothing about the others by itself. The cache keeps, for every file
// it has an entry for, the names it has entries for, by the file's server
// inode number (links, by linkKey), and trusts an entry with nlink over 1
// like any other, under these rules (c.mu held throughout):
//
//   - A change through one name (a notice of a change or creation, which
//     carries the file's inode number; a local write begun; a name made,
//     removed or replaced) makes the entries of its other names stale
//     (staleLinks) and, for notices, reports them to the layer above.
//   - Installing an entry of a name compares it with the cached entries
//     of the file's other names (linkCheck): if they differ, the older
//     one (by ctime, which the server sets on every change of the file)
//     is made stale.
//   - An entry from a read issued before a change of a file with several
//     names was noted (linkChs: changes of such files only) is installed
//     stale if it is of that file: the read may have been answered before
//     the change (by another name of the file, which changedSince does
//     not see).
//   - An entry with nlink over 1 but no inode number is never trusted:
//     the cache cannot tell which entries are of the same file.
//   - A removal or replacement of a name the cache has no entry for may
//     have been one of a cached file's names, whose link count then
//     dropped: every cached entry with nlink over 1 is made stale (multi)
//     and reported.

// linkChange is a change of a file noted at when, for reads in flight.
type linkChange struct {
	key  string
	when time.Time
}

const maxLinkChanges = 1024

// linkKey returns the key of the file d in c.links: its type and server
// inode number; "" for a directory, a missing entry, or one without ino.
func linkKey(d zx.Dir) string {
	if d == nil || d.IsDir() || d[zx.AIno] == "" {
		return ""
	}
	return d.Type() + d[zx.AIno]
}

// linkAdd indexes the entry e installed at p, and checks it against the
// entries of the file's other names.
func (c *Cache) linkAdd(p string, e *entry) {
	k := linkKey(e.d)
	if k == "" {
		return
	}
	if ps := c.links[k]; !slices.Contains(ps, p) {
		c.links[k] = append(ps, p)
	}
	if c.linkChangedAfter(k, e.at) {
		e.stale = true // from a read that may have been answered before
	}
	if !shared(e.d) {
		return
	}
	c.multi[p] = true
	for _, q := range c.links[k] {
		o := c.ents[q]
		if q == p || o == nil || o.d == nil || sameFile(o.d, e.d) {
			continue
		}
		if older(e.d, o.d) || c.pend[q] > 0 {
			e.stale = true
		} else {
			o.stale = true
		}
	}
}

// linkDel unindexes the entry d at p, which went; if gone, the name no
// longer names the file: the entries of its other names are made stale.
func (c *Cache) linkDel(p string, d zx.Dir, gone bool) {
	k := linkKey(d)
	if k == "" {
		return
	}
	delete(c.multi, p)
	ps := c.links[k]
	if i := slices.Index(ps, p); i >= 0 {
		ps = slices.Delete(ps, i, i+1)
	}
	if len(ps) == 0 {
		delete(c.links, k)
		return
	}
	c.links[k] = ps
	if gone {
		c.staleLinks(d, p)
	}
}

// staleLinks notes a change made through p of the file whose entry is d
// (for reads in flight, if it has several names), and makes the entries
// of its other names stale; it returns those names.
func (c *Cache) staleLinks(d zx.Dir, p string) []string {
	k := linkKey(d)
	if k == "" {
		return nil
	}
	if shared(d) {
		c.linkChs = append(c.linkChs, linkChange{k, time.Now()})
		if len(c.linkChs) > maxLinkChanges {
			n := len(c.linkChs) / 2
			c.linkLost = c.linkChs[n-1].when
			c.linkChs = slices.Delete(c.linkChs, 0, n)
		}
	}
	var qs []string
	for _, q := range c.links[k] {
		if q == p {
			continue
		}
		if e := c.ents[q]; e != nil {
			e.stale = true
			qs = append(qs, q)
		}
	}
	return qs
}

// linkChangedAfter reports whether a change of the file with key k was
// noted at or after at, or may have been (forgotten since).
func (c *Cache) linkChangedAfter(k string, at time.Time) bool {
	if !at.After(c.linkLost) && !c.linkLost.IsZero() {
		return true
	}
	for i := len(c.linkChs) - 1; i >= 0 && !c.linkChs[i].when.Before(at); i-- {
		if c.linkChs[i].key == k {
			return true
		}
	}
	return false
}

// staleMulti makes stale every cached entry with nlink over 1 that is
// not already, and returns their names: a name the cache knows nothing
// about went, which may have been one of theirs.
func (c *Cache) staleMulti() []string {
	var qs []string
	for q := range c.multi {
		if e := c.ents[q]; e != nil && !e.stale {
			e.stale = true
			qs = append(qs, q)
		}
	}
	return qs
}

// sameFile reports whether two entries of names of one file are equal
// but for the name and the times that change without the file changing.
func sameFile(a, b zx.Dir) bool {
	n := 0
	for k, v := range a {
		if k == zx.APath || k == zx.AName || k == zx.AAtime || k == zx.ACtime || zx.IsTransient(k) {
			continue
		}
		if b[k] != v {
			return false
		}
		n++
	}
	for k := range b {
		if k != zx.APath && k != zx.AName && k != zx.AAtime && k != zx.ACtime && !zx.IsTransient(k) {
			n--
		}
	}
	return n == 0
}

var _ zx.Syncer = (*Cache)(nil)

// Sync implements zx.Syncer by passing the request on, at once: the
// writes it is to cover were issued to the remote before it (write-back
// records too, when they are journaled), and the remote applies it after
// them. It changes nothing the cache holds.
func (c *Cache) Sync(ctx context.Context, p string) <-chan error {
	return zx.Sync(ctx, c.remote, p)
}
