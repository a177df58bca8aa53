package cache

import (
	"context"
	"time"

	"github.com/zxfs/zx"
)

var _ zx.Linker = (*Cache)(nil)

// Link implements zx.Linker by passing the request on and caching the new
// name's entry from the reply.
//
// Entries are cached by path, and a change notice names the path it was
// made through, so a change through one name of a file with several names
// says nothing about the others. Therefore an entry whose nlink is over 1
// is never trusted (see validEntry): such files cost a round trip per
// stat, and their data is not served from the cache.
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

var _ zx.Syncer = (*Cache)(nil)

// Sync implements zx.Syncer by passing the request on, at once: the
// writes it is to cover were issued to the remote before it (write-back
// records too, when they are journaled), and the remote applies it after
// them. It changes nothing the cache holds.
func (c *Cache) Sync(ctx context.Context, p string) <-chan error {
	return zx.Sync(ctx, c.remote, p)
}
