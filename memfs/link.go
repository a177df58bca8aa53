package memfs

import (
	"context"

	"github.com/zxfs/zx"
)

var _ zx.Linker = (*FS)(nil)

// Link implements zx.Linker: both names hold the same node.
func (fs *FS) Link(ctx context.Context, oldpath, newpath string) <-chan zx.Reply {
	from, err := zx.CleanPath(oldpath)
	if err != nil {
		return reply(zx.Reply{Err: zx.Errorf("link", oldpath, err)})
	}
	to, err := zx.CleanPath(newpath)
	if err != nil {
		return reply(zx.Reply{Err: zx.Errorf("link", newpath, err)})
	}
	c := make(chan zx.Reply, 1)
	o, wait := fs.enter(ctx, true, from, to)
	go func() {
		defer close(c)
		defer o.Done()
		if !wait() {
			c <- zx.Reply{Err: canceled("link", from)}
			return
		}
		d, err := fs.link(from, to)
		c <- zx.Reply{Dir: d, Err: err}
	}()
	return c
}

func (fs *FS) link(from, to string) (zx.Dir, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.lookup(from)
	if err != nil {
		return nil, fail("link", from, err)
	}
	if n.typ == zx.TypeDir {
		return nil, zx.E(zx.ErrNotPermit, "link", from, "cannot link a directory")
	}
	tp, tn, err := fs.walk(to)
	switch {
	case err != nil:
		return nil, fail("link", to, err)
	case to == "/" || tn != nil:
		return nil, zx.E(zx.ErrExist, "link", to, "")
	}
	_, name := zx.Split(to)
	t := now()
	tp.children[name] = n
	tp.mtime, tp.ctime = t, t
	n.nlink++
	n.ctime = t
	fs.notify(zx.Event{Kind: zx.Changed, Dir: n.dir(from)})
	nd := n.dir(to)
	fs.notify(zx.Event{Kind: zx.Created, Dir: nd})
	return nd, nil
}

// unlinked notes that a name of n (and of everything below it) went.
// fs.mu must be held.
func unlinked(n *node) {
	if n.typ != zx.TypeDir {
		n.nlink--
		return
	}
	for _, c := range n.children {
		unlinked(c)
	}
}
