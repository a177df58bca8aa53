package server

import (
	"context"
	"io"
	"strconv"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/pred"
)

// guard is the tree a client of an authenticated connection sees: the
// served tree, restricted to what the client's key may do. A read-only
// guard refuses every request that writes, before it reaches the tree, so
// nothing changes; any guard refuses to give entries to another user than
// the one the request acts as (see ownerCheck).
type guard struct {
	t        zx.Tree
	readOnly bool
	why      string // for read-only errors: "user alice has read-only access to tree main"
}

var (
	_ zx.Tree     = (*guard)(nil)
	_ zx.Finder   = (*guard)(nil)
	_ zx.Watcher  = (*guard)(nil)
	_ zx.Linker   = (*guard)(nil)
	_ zx.StatFSer = (*guard)(nil)
)

func (g *guard) refuse(op, path string) error {
	return zx.E(zx.ErrReadOnly, op, path, g.why)
}

func replyErr(err error) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	c <- zx.Reply{Err: err}
	return c
}

func statusErr(err error) <-chan error {
	c := make(chan error, 1)
	c <- err
	return c
}

// ownerCheck refuses a put or wstat that would give an entry to another
// user or group than the request acts as, unless it acts as root (or as
// the server's own user, with no uid mapped): as chown(2) does, and so that
// a server running as root cannot be made to create set-user-id files
// owned by someone else.
func ownerCheck(ctx context.Context, op, path string, d zx.Dir) error {
	c, ok := zx.CallerFrom(ctx)
	if !ok || c.Uid <= 0 {
		return nil
	}
	for _, a := range []struct {
		attr string
		id   int
	}{{zx.AUid, c.Uid}, {zx.AGid, c.Gid}} {
		if v, set := d[a.attr]; set && (a.id < 0 || v != strconv.Itoa(a.id)) {
			return zx.E(zx.ErrNotPermit, op, path, "may not set "+a.attr+" to "+v+": requests on this connection act as "+callerString(c))
		}
	}
	return nil
}

func callerString(c zx.Caller) string {
	s := "uid " + strconv.Itoa(c.Uid)
	if c.Uid < 0 {
		s = "the server's uid"
	}
	if c.Gid >= 0 {
		s += ", gid " + strconv.Itoa(c.Gid)
	}
	return s
}

func (g *guard) Stat(ctx context.Context, path string) <-chan zx.Reply { return g.t.Stat(ctx, path) }

func (g *guard) Get(ctx context.Context, path string, off, count int64) <-chan zx.Item {
	return g.t.Get(ctx, path, off, count)
}

func (g *guard) Put(ctx context.Context, path string, d zx.Dir, off int64, data io.Reader) <-chan zx.Reply {
	if g.readOnly {
		return replyErr(g.refuse("put", path))
	}
	if err := ownerCheck(ctx, "put", path, d); err != nil {
		return replyErr(err)
	}
	return g.t.Put(ctx, path, d, off, data)
}

func (g *guard) Move(ctx context.Context, from, to string) <-chan error {
	if g.readOnly {
		return statusErr(g.refuse("move", from))
	}
	return g.t.Move(ctx, from, to)
}

func (g *guard) Remove(ctx context.Context, path string) <-chan error {
	if g.readOnly {
		return statusErr(g.refuse("remove", path))
	}
	return g.t.Remove(ctx, path)
}

func (g *guard) RemoveAll(ctx context.Context, path string) <-chan error {
	if g.readOnly {
		return statusErr(g.refuse("removeall", path))
	}
	return g.t.RemoveAll(ctx, path)
}

func (g *guard) Wstat(ctx context.Context, path string, d zx.Dir) <-chan zx.Reply {
	if g.readOnly {
		return replyErr(g.refuse("wstat", path))
	}
	if err := ownerCheck(ctx, "wstat", path, d); err != nil {
		return replyErr(err)
	}
	return g.t.Wstat(ctx, path, d)
}

func (g *guard) Link(ctx context.Context, oldpath, newpath string) <-chan zx.Reply {
	if g.readOnly {
		return replyErr(g.refuse("link", newpath))
	}
	return zx.Link(ctx, g.t, oldpath, newpath)
}

func (g *guard) StatFS(ctx context.Context, path string) <-chan zx.Reply {
	return zx.StatFS(ctx, g.t, path)
}

func (g *guard) Find(ctx context.Context, path, p, spref, dpref string, depth0 int) <-chan zx.Item {
	if f, ok := g.t.(zx.Finder); ok {
		return f.Find(ctx, path, p, spref, dpref, depth0)
	}
	return pred.Find(ctx, g.t, path, p, spref, dpref, depth0)
}

func (g *guard) FindGet(ctx context.Context, path, p, spref, dpref string, depth0 int) <-chan zx.Item {
	if f, ok := g.t.(zx.Finder); ok {
		return f.FindGet(ctx, path, p, spref, dpref, depth0)
	}
	c := make(chan zx.Item, 1)
	c <- zx.Item{Err: zx.E(zx.ErrNotSupp, "findget", path, "tree cannot findget")}
	close(c)
	return c
}

func (g *guard) Watch(ctx context.Context, path string) <-chan zx.Event {
	if w, ok := g.t.(zx.Watcher); ok {
		return w.Watch(ctx, path)
	}
	c := make(chan zx.Event, 1)
	c <- zx.Event{Err: zx.E(zx.ErrNotSupp, "watch", path, "tree cannot watch")}
	close(c)
	return c
}
