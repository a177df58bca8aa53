package mount

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
)

// Changes under a delegation. While the mount holds a delegation of a
// subtree, nobody else changes it: what the kernel and the mount know of
// it (the kernel looked the names up before it asks for a rename or an
// unlink) is how the server will find it once the mount's changes in
// flight are applied. So a rename or unlink there is answered at once and
// journaled, even of a file whose data or creation is still on its way
// (the cache, which waits for the server's replies, does not know it
// yet): git writes each object and lock file, then renames it.

// nodeDir returns what the mount knows of the entry of in.
func nodeDir(in *fs.Inode) zx.Dir {
	if in == nil {
		return nil
	}
	if cn, ok := in.Operations().(*node); ok {
		return cn.dir()
	}
	return nil
}

// moveDelegated renames name in n to newName in np without waiting, if a
// delegation covers the source, the target is covered too or known to the
// cache, and what the mount knows of them allows it:
// the source a file or symbolic link with one name, the target absent or
// such a file. It reports whether it did.
func (n *node) moveDelegated(ctx context.Context, name string, np fs.InodeEmbedder, newName, from, to string, noReplace bool) (syscall.Errno, bool) {
	m := n.m
	if m.opts.WriteBack || m.writable.Load() != 1 {
		return 0, false // write-back has its own rules (pipeline.go)
	}
	rel1, ok1 := m.backs(from)
	if !ok1 {
		return 0, false
	}
	defer rel1()
	src := nodeDir(n.GetChild(name))
	tin := np.EmbeddedInode().GetChild(newName)
	dst := nodeDir(tin)
	if rel2, ok2 := m.backs(to); ok2 {
		defer rel2()
	} else {
		// The target is outside the delegation: the cache must know
		// how it turns out there, as for any change made without
		// waiting (moveAhead).
		td, known := m.known(to)
		tpd, dirKnown := m.knownDir(zx.Parent(to))
		if !known || !dirKnown || !m.mayChange(ctx, tpd, td) {
			return 0, false
		}
		if td == nil {
			tin, dst = nil, nil
		} else if dst == nil {
			dst = td
		}
	}
	switch {
	case src == nil || src.IsDir() || src.Int(zx.ANlink) > 1:
		return 0, false
	case tin != nil && dst == nil:
		return 0, false
	case dst != nil && noReplace:
		return syscall.EEXIST, true
	case dst != nil && (dst.IsDir() || dst.Int(zx.ANlink) > 1):
		return 0, false
	}
	if tin != nil {
		preserve(ctx, tin) // open handles of the file replaced keep reading it
	}
	bctx, done := m.bg(ctx, from, to)
	m.awaitErr("move", from, errOf(m.changeAhead(bctx, from, cache.Change{Op: "move", To: to})), done, to)
	m.freshNote(from, true)
	m.freshNote(to, false)
	if dst != nil && dst[zx.AIno] != src[zx.AIno] {
		m.forgetIno(dst, to)
	}
	return 0, true
}

// removeDelegated unlinks name in n without waiting, if a delegation
// covers it and the mount knows it as a file or symbolic link with one
// name. It reports whether it did.
func (n *node) removeDelegated(ctx context.Context, name, p string) (syscall.Errno, bool) {
	m := n.m
	if m.opts.WriteBack || m.writable.Load() != 1 {
		return 0, false
	}
	rel, ok := m.backs(p)
	if !ok {
		return 0, false
	}
	defer rel()
	in := n.GetChild(name)
	d := nodeDir(in)
	if d == nil || d.IsDir() || d.Int(zx.ANlink) > 1 {
		return 0, false
	}
	preserve(ctx, in)
	bctx, done := m.bg(ctx, p)
	m.awaitErr("remove", p, errOf(m.changeAhead(bctx, p, cache.Change{Op: "remove"})), done)
	m.freshNote(p, true)
	m.forgetIno(d, p)
	return 0, true
}
