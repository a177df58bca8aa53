// Package subtree presents a directory of a zx tree as a tree of its own,
// as `zx mount zx://host/some/dir` needs: paths given to it are taken below
// the directory, and paths in its replies are rewritten back.
package subtree

import (
	"context"
	"io"
	"path"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
)

// Tree is the subtree of T at Prefix.
type Tree struct {
	T      zx.Tree
	Prefix string // a clean path
}

var (
	_ zx.Tree       = (*Tree)(nil)
	_ zx.Finder     = (*Tree)(nil)
	_ zx.Watcher    = (*Tree)(nil)
	_ zx.AckWatcher = (*Tree)(nil)
	_ zx.Linker     = (*Tree)(nil)
	_ zx.StatFSer   = (*Tree)(nil)
	_ zx.Syncer     = (*Tree)(nil)
	_ zx.Allocator  = (*Tree)(nil)
)

// New returns the subtree of t at prefix; for "/" it returns t itself.
func New(t zx.Tree, prefix string) zx.Tree {
	if prefix == "/" || prefix == "" {
		return t
	}
	return &Tree{T: t, Prefix: prefix}
}

// real turns a path of the subtree into one of the whole tree (but /Ctl,
// the control file, is the whole tree's). A path that
// is not clean is passed on as it is below the prefix, for the tree to
// refuse: joining would clean away the "..".
func (t *Tree) real(p string) string {
	if ctl.Is(p) {
		return ctl.Path // the control file is the whole tree's
	}
	if c, err := zx.CleanPath(p); err == nil {
		return path.Join(t.Prefix, c)
	}
	return t.Prefix + "/" + p
}

// back turns a path of the whole tree into one of the subtree.
func (t *Tree) back(p string) string { return zx.Reprefix(p, t.Prefix, "/") }

func (t *Tree) dir(d zx.Dir) zx.Dir {
	if d == nil {
		return nil
	}
	if p, ok := d[zx.APath]; ok {
		d = d.Clone()
		d[zx.APath] = t.back(p)
		d[zx.AName] = path.Base(d[zx.APath])
	}
	return d
}

func (t *Tree) reply(in <-chan zx.Reply) <-chan zx.Reply {
	out := make(chan zx.Reply, 1)
	go func() {
		r := <-in
		r.Dir = t.dir(r.Dir)
		out <- r
	}()
	return out
}

func (t *Tree) items(ctx context.Context, in <-chan zx.Item) <-chan zx.Item {
	out := make(chan zx.Item)
	go func() {
		defer close(out)
		for it := range in {
			it.Dir = t.dir(it.Dir)
			select {
			case out <- it:
			case <-ctx.Done():
				for range in {
				}
				return
			}
		}
	}()
	return out
}

// Stat implements zx.Tree.
func (t *Tree) Stat(ctx context.Context, p string) <-chan zx.Reply {
	return t.reply(t.T.Stat(ctx, t.real(p)))
}

// Get implements zx.Tree.
func (t *Tree) Get(ctx context.Context, p string, off, count int64) <-chan zx.Item {
	return t.items(ctx, t.T.Get(ctx, t.real(p), off, count))
}

// Put implements zx.Tree.
func (t *Tree) Put(ctx context.Context, p string, d zx.Dir, off int64, data io.Reader) <-chan zx.Reply {
	return t.reply(t.T.Put(ctx, t.real(p), d, off, data))
}

// Move implements zx.Tree.
func (t *Tree) Move(ctx context.Context, from, to string) <-chan error {
	return t.T.Move(ctx, t.real(from), t.real(to))
}

// Link implements zx.Linker.
func (t *Tree) Link(ctx context.Context, oldpath, newpath string) <-chan zx.Reply {
	return t.reply(zx.Link(ctx, t.T, t.real(oldpath), t.real(newpath)))
}

// StatFS implements zx.StatFSer.
func (t *Tree) StatFS(ctx context.Context, p string) <-chan zx.Reply {
	return zx.StatFS(ctx, t.T, t.real(p))
}

// Allocate implements zx.Allocator.
func (t *Tree) Allocate(ctx context.Context, p string, mode zx.AllocMode, off, n int64) <-chan zx.Reply {
	return t.reply(zx.Allocate(ctx, t.T, t.real(p), mode, off, n))
}

// Sync implements zx.Syncer. A sync of the root syncs the whole tree
// below, which holds the subtree: a sync of the subtree's top directory
// alone would not cover what lies below it.
func (t *Tree) Sync(ctx context.Context, p string) <-chan error {
	if c, err := zx.CleanPath(p); err == nil && c == "/" {
		return zx.Sync(ctx, t.T, "/")
	}
	return zx.Sync(ctx, t.T, t.real(p))
}

// Remove implements zx.Tree.
func (t *Tree) Remove(ctx context.Context, p string) <-chan error {
	if c, err := zx.CleanPath(p); err == nil && c == "/" {
		return errc(zx.E(zx.ErrInvalid, "remove", "/", "cannot remove the root"))
	}
	return t.T.Remove(ctx, t.real(p))
}

// RemoveAll implements zx.Tree.
func (t *Tree) RemoveAll(ctx context.Context, p string) <-chan error {
	if c, err := zx.CleanPath(p); err == nil && c == "/" {
		return errc(zx.E(zx.ErrInvalid, "removeall", "/", "cannot remove the root"))
	}
	return t.T.RemoveAll(ctx, t.real(p))
}

func errc(err error) <-chan error {
	c := make(chan error, 1)
	c <- err
	return c
}

// Wstat implements zx.Tree.
func (t *Tree) Wstat(ctx context.Context, p string, d zx.Dir) <-chan zx.Reply {
	if _, ok := d[zx.APath]; ok {
		d = d.Clone()
		d[zx.APath] = t.real(d[zx.APath])
		delete(d, zx.AName)
	}
	return t.reply(t.T.Wstat(ctx, t.real(p), d))
}

// opts returns find options for the tree below: the walk's paths come
// back relative to the subtree, unless the caller rewrites them itself.
func (t *Tree) opts(o zx.FindOpts) zx.FindOpts {
	if o.Spref == "" || o.Dpref == "" {
		o.Spref, o.Dpref = t.Prefix, "/"
	} else {
		o.Spref = t.real(o.Spref)
	}
	return o
}

// Find implements zx.Finder.
func (t *Tree) Find(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	f, ok := t.T.(zx.Finder)
	if !ok {
		return t.items(ctx, findFallback(ctx, t, p, o))
	}
	return f.Find(ctx, t.real(p), t.opts(o))
}

// FindGet implements zx.Finder.
func (t *Tree) FindGet(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	f, ok := t.T.(zx.Finder)
	if !ok {
		c := make(chan zx.Item, 1)
		c <- zx.Item{Err: zx.E(zx.ErrNotSupp, "findget", p, "tree cannot findget")}
		close(c)
		return c
	}
	return f.FindGet(ctx, t.real(p), t.opts(o))
}

// Watch implements zx.Watcher.
func (t *Tree) Watch(ctx context.Context, p string) <-chan zx.Event {
	w, ok := t.T.(zx.Watcher)
	if !ok {
		c := make(chan zx.Event, 1)
		c <- zx.Event{Err: zx.E(zx.ErrNotSupp, "watch", p, "tree cannot watch")}
		close(c)
		return c
	}
	return t.events(ctx, w.Watch(ctx, t.real(p)))
}

// WatchAcked implements zx.AckWatcher: with a tree below that is one, the
// notices' Ack passes through; otherwise it is Watch.
func (t *Tree) WatchAcked(ctx context.Context, p string) <-chan zx.Event {
	if w, ok := t.T.(zx.AckWatcher); ok {
		return t.events(ctx, w.WatchAcked(ctx, t.real(p)))
	}
	return t.Watch(ctx, p)
}

// events rewrites the paths of the notices of the tree below.
func (t *Tree) events(ctx context.Context, in <-chan zx.Event) <-chan zx.Event {
	out := make(chan zx.Event)
	go func() {
		defer close(out)
		for ev := range in {
			ev.Dir = t.dir(ev.Dir)
			if ev.From != "" {
				ev.From = t.back(ev.From)
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				for range in {
				}
				return
			}
		}
	}()
	return out
}
