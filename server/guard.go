package server

import (
	"context"
	"io"
	"maps"
	"strconv"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/auth"
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
	why      string      // for read-only errors: "user alice has read-only access to tree main"
	multi    *auth.Grant // if set, a multi-user key whose ids are mapped (see ids)
}

var (
	_ zx.Tree      = (*guard)(nil)
	_ zx.Finder    = (*guard)(nil)
	_ zx.Watcher   = (*guard)(nil)
	_ zx.Linker    = (*guard)(nil)
	_ zx.StatFSer  = (*guard)(nil)
	_ zx.Syncer    = (*guard)(nil)
	_ zx.Allocator = (*guard)(nil)
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

// An idMap translates the uid and gid in entries between the ids a client
// sees and the server's.
type idMap interface {
	ServerID(attr string, client uint32) uint32
	ClientID(attr string, server uint32) uint32
}

var _ idMap = (*auth.Grant)(nil)

// selfMap is the idMap of a request on a single-user key with ids: the
// ids of the user the request comes from (as the client gave them) stand
// for the ids the key acts as, as sshfs's idmap=user does. Other ids are
// the same on both sides.
type selfMap struct {
	cuid, cgid uint32 // the client's
	uid, gid   int    // the key's; -1 if not given
}

type selfMapKey struct{}

func (m selfMap) ServerID(attr string, c uint32) uint32 {
	switch {
	case attr == zx.AUid && m.uid >= 0 && c == m.cuid:
		return uint32(m.uid)
	case attr == zx.AGid && m.gid >= 0 && c == m.cgid:
		return uint32(m.gid)
	}
	return c
}

func (m selfMap) ClientID(attr string, s uint32) uint32 {
	switch {
	case attr == zx.AUid && m.uid >= 0 && s == uint32(m.uid):
		return m.cuid
	case attr == zx.AGid && m.gid >= 0 && s == uint32(m.gid):
		return m.cgid
	}
	return s
}

// ids returns the id map of a request, or nil.
func (g *guard) ids(ctx context.Context) idMap {
	if g.multi != nil {
		return g.multi
	}
	if m, ok := ctx.Value(selfMapKey{}).(selfMap); ok {
		return m
	}
	return nil
}

// inDir maps the ids in an entry a client sent to the server's.
func (g *guard) inDir(m idMap, d zx.Dir) zx.Dir {
	if m == nil {
		return d
	}
	return mapIDs(d, m.ServerID)
}

// mapIDs returns d with its uid and gid mapped by f: a copy if they
// change, since trees may share the entries they return.
func mapIDs(d zx.Dir, f func(string, uint32) uint32) zx.Dir {
	if d == nil {
		return d
	}
	var out zx.Dir
	for _, a := range []string{zx.AUid, zx.AGid} {
		v, ok := d[a]
		if !ok {
			continue
		}
		id, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			continue // the tree says it is invalid
		}
		if m := strconv.FormatUint(uint64(f(a, uint32(id))), 10); m != v {
			if out == nil {
				out = maps.Clone(d)
			}
			out[a] = m
		}
	}
	if out == nil {
		return d
	}
	return out
}

// reply maps the entry of a reply back to the client's ids.
func (g *guard) reply(m idMap, rc <-chan zx.Reply) <-chan zx.Reply {
	if m == nil {
		return rc
	}
	c := make(chan zx.Reply, 1)
	go func() {
		r := <-rc
		r.Dir = mapIDs(r.Dir, m.ClientID)
		c <- r
	}()
	return c
}

// items maps the entries of a stream back to the client's ids. Its
// consumer, the server, reads every stream to its end.
func (g *guard) items(m idMap, ic <-chan zx.Item) <-chan zx.Item {
	if m == nil {
		return ic
	}
	c := make(chan zx.Item)
	go func() {
		defer close(c)
		for it := range ic {
			it.Dir = mapIDs(it.Dir, m.ClientID)
			c <- it
		}
	}()
	return c
}

func (g *guard) Stat(ctx context.Context, path string) <-chan zx.Reply {
	return g.reply(g.ids(ctx), g.t.Stat(ctx, path))
}

func (g *guard) Get(ctx context.Context, path string, off, count int64) <-chan zx.Item {
	return g.items(g.ids(ctx), g.t.Get(ctx, path, off, count))
}

func (g *guard) Put(ctx context.Context, path string, d zx.Dir, off int64, data io.Reader) <-chan zx.Reply {
	if g.readOnly {
		return replyErr(g.refuse("put", path))
	}
	m := g.ids(ctx)
	d = g.inDir(m, d)
	if err := ownerCheck(ctx, "put", path, d); err != nil {
		return replyErr(err)
	}
	return g.reply(m, g.t.Put(ctx, path, d, off, data))
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
	m := g.ids(ctx)
	d = g.inDir(m, d)
	if err := ownerCheck(ctx, "wstat", path, d); err != nil {
		return replyErr(err)
	}
	return g.reply(m, g.t.Wstat(ctx, path, d))
}

func (g *guard) Link(ctx context.Context, oldpath, newpath string) <-chan zx.Reply {
	if g.readOnly {
		return replyErr(g.refuse("link", newpath))
	}
	return g.reply(g.ids(ctx), zx.Link(ctx, g.t, oldpath, newpath))
}

func (g *guard) StatFS(ctx context.Context, path string) <-chan zx.Reply {
	return zx.StatFS(ctx, g.t, path)
}

func (g *guard) Allocate(ctx context.Context, path string, mode zx.AllocMode, off, n int64) <-chan zx.Reply {
	if g.readOnly {
		return replyErr(g.refuse("allocate", path))
	}
	return g.reply(g.ids(ctx), zx.Allocate(ctx, g.t, path, mode, off, n))
}

// Sync is allowed on a read-only grant: it changes nothing anyone can
// see, and a reader may want to know that what it read is on the disk.
func (g *guard) Sync(ctx context.Context, path string) <-chan error {
	return zx.Sync(ctx, g.t, path)
}

func (g *guard) Find(ctx context.Context, path string, o zx.FindOpts) <-chan zx.Item {
	if f, ok := g.t.(zx.Finder); ok {
		return g.items(g.ids(ctx), f.Find(ctx, path, o))
	}
	return g.items(g.ids(ctx), pred.Find(ctx, g.t, path, o))
}

func (g *guard) FindGet(ctx context.Context, path string, o zx.FindOpts) <-chan zx.Item {
	if f, ok := g.t.(zx.Finder); ok {
		return g.items(g.ids(ctx), f.FindGet(ctx, path, o))
	}
	c := make(chan zx.Item, 1)
	c <- zx.Item{Err: zx.E(zx.ErrNotSupp, "findget", path, "tree cannot findget")}
	close(c)
	return c
}

func (g *guard) Watch(ctx context.Context, path string) <-chan zx.Event {
	if w, ok := g.t.(zx.Watcher); ok {
		ec := w.Watch(ctx, path)
		m := g.ids(ctx)
		if m == nil {
			return ec
		}
		c := make(chan zx.Event)
		go func() {
			defer close(c)
			for ev := range ec {
				ev.Dir = mapIDs(ev.Dir, m.ClientID)
				c <- ev
			}
		}()
		return c
	}
	c := make(chan zx.Event, 1)
	c <- zx.Event{Err: zx.E(zx.ErrNotSupp, "watch", path, "tree cannot watch")}
	close(c)
	return c
}
