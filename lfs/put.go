package lfs

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
)

// Put creates or updates path and writes data to it, as zx.Tree says.
//
// A Put that creates a regular file, or sets its "size" to 0, builds the
// new file aside (see the package comment) and renames it into place when
// all data is in; it replaces the file's inode. A file with other names
// (hard links) is the exception: it is truncated and written in place, as
// open(2) with O_TRUNC would, so that all its names keep seeing one file;
// and so is a file emptied with no data, truncated in place (as atomic as
// a replacement), so that it keeps its inode.
// Any other Put to a file writes in place.
// New files get mode 0644 and new directories 0755 unless d says otherwise,
// whatever the umask. Put of a symbolic link (type "l", "target") ignores
// "mode", as links have none, and fails with ErrExist if a link with
// another target is there. Fifos, sockets and devices (with "rdev") are
// made with mknodat; devices need privilege (ErrNotPermit otherwise).
func (f *FS) Put(ctx context.Context, path string, d zx.Dir, off int64, data io.Reader) <-chan zx.Reply {
	if ctl.Is(path) {
		return f.ctl.Put(ctx, d, off, data)
	}
	p, err := f.check("put", path, true)
	if err != nil {
		return reply(nil, err)
	}
	a, err := parseAttrs("put", p, d)
	if err != nil {
		return reply(nil, err)
	}
	op := f.q.Enter(true, p)
	c := make(chan zx.Reply, 1)
	go func() {
		defer close(c)
		if err := op.Wait(ctx); err != nil {
			op.Done()
			c <- zx.Reply{Err: errf("put", p, err)}
			return
		}
		nd, err := f.put(ctx, p, a, off, data)
		op.Done()
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			c <- zx.Reply{Err: errf("put", p, err)}
			return
		}
		c <- zx.Reply{Dir: nd}
	}()
	return c
}

func (f *FS) put(ctx context.Context, p string, a *attrs, off int64, data io.Reader) (zx.Dir, error) {
	pd, name, err := f.openParent(p)
	if err != nil {
		return nil, err
	}
	defer pd.close()
	var st unix.Stat_t
	exists := true
	if err := lstat(pd.fd, name, &st); err != nil {
		if err != unix.ENOENT {
			return nil, err
		}
		exists = false
	}
	hasData := data != nil
	typ := a.typ
	if exists {
		cur := zx.TypeOfUnix(st.Mode)
		switch {
		case a.excl:
			return nil, zx.ErrExist
		case cur == zx.TypeDir && (typ != "" && typ != zx.TypeDir || hasData || a.size >= 0):
			return nil, zx.ErrIsDir
		case cur == zx.TypeLink && typ != "" && typ != cur:
			return nil, e(zx.ErrExist, "", "", linkThere)
		case typ != "" && typ != cur:
			return nil, zx.ErrExist
		case cur == zx.TypeLink && a.target != nil && *a.target != f.existingTarget(pd.fd, name, &st):
			return nil, zx.ErrExist
		case cur == zx.TypeLink && (hasData || a.size >= 0):
			return nil, e(zx.ErrInvalid, "", "", linkThere)
		case cur != zx.TypeFile && cur != zx.TypeDir && (hasData || a.size >= 0):
			return nil, e(zx.ErrInvalid, "", "", "not a regular file")
		}
		typ = cur
	} else {
		switch {
		case typ == "":
			return nil, zx.ErrNotExist
		case typ == zx.TypeDir && (hasData || a.size >= 0):
			return nil, zx.ErrIsDir
		case typ == zx.TypeLink && a.target == nil:
			return nil, e(zx.ErrInvalid, "", "", "link without target")
		case typ != zx.TypeFile && typ != zx.TypeDir && (hasData || a.size >= 0):
			return nil, e(zx.ErrInvalid, "", "", "data for a "+typ+" entry")
		}
		if isTemp(name) {
			return nil, e(zx.ErrInvalid, "", "", "reserved name")
		}
		ownByCaller(ctx, a)
	}
	if typ == zx.TypeFile {
		// A file with other names (hard links) is truncated in place, as
		// open(O_TRUNC) does: replacing it would split it from them.
		if exists && a.size == 0 && st.Nlink <= 1 {
			// Emptied, with no data: truncating in place is as
			// atomic as a replacement, and the file keeps its inode
			// (a mount that empties an open file and writes to it
			// later goes on writing to one file; so do the
			// server's own processes).
			var empty bool
			if empty, data, err = noData(ctx, data); err != nil {
				return nil, err
			}
			if empty {
				return f.update(ctx, pd.fd, name, p, a, &st, off, nil)
			}
		}
		if !exists || a.size == 0 && st.Nlink <= 1 {
			if exists && a.mode < 0 {
				// The new file takes the old one's mode, less the
				// set-id bits this writer clears.
				if m := killSetID(ctx, st.Mode&07777); m != st.Mode&07777 {
					a.mode = int64(m)
				}
			}
			return f.replace(ctx, pd.fd, name, p, a, exists, &st, off, data)
		}
		return f.update(ctx, pd.fd, name, p, a, &st, off, data)
	}
	if !exists {
		if err := f.mknod(pd.fd, name, typ, a); err != nil {
			return nil, err
		}
		if err := lstat(pd.fd, name, &st); err != nil {
			return nil, err
		}
		if a.mode < 0 && typ != zx.TypeLink {
			a.mode = 0644
			if typ == zx.TypeDir {
				a.mode = 0755
			}
		}
	}
	// A link's target, known before its times change: reading it after
	// would set its atime (see linkMemo).
	var target string
	switch {
	case typ == zx.TypeLink && !exists:
		target = *a.target
	case typ == zx.TypeLink:
		target = f.existingTarget(pd.fd, name, &st)
	}
	if err := f.setMeta(a, pd.fd, name, &st); err != nil {
		return nil, err
	}
	if err := a.setTimes(pd.fd, name, false); err != nil {
		return nil, err
	}
	if target != "" {
		f.keepLink(pd.fd, name, st.Ino, target)
	}
	return f.statAt(pd.fd, name, p)
}

// linkThere says that a write met a symbolic link, and what to do:
// requests never follow links (docs/design.md), so writing "through" one,
// as cp does locally, is not done. The target is not named: an absolute
// one would tell the client where the export is on the server's disk.
const linkThere = "is a symbolic link, which requests never follow: " +
	"write to the path of its target, or remove the link first to replace it"

// noData reports whether data holds no bytes, reading at most one of
// them; rest is data with what was read put back. It reads in another
// goroutine, as copyIn does, so that a cancelled ctx stops it.
func noData(ctx context.Context, data io.Reader) (empty bool, rest io.Reader, err error) {
	if data == nil {
		return true, nil, nil
	}
	type peek struct {
		b   []byte
		err error
	}
	c := make(chan peek, 1)
	go func() {
		b := make([]byte, 1)
		var n int
		var err error
		for n == 0 && err == nil {
			n, err = data.Read(b)
		}
		c <- peek{b[:n], err}
	}()
	select {
	case <-ctx.Done():
		return false, nil, ctx.Err()
	case pk := <-c:
		switch {
		case len(pk.b) == 0 && pk.err == io.EOF:
			return true, nil, nil
		case len(pk.b) == 0:
			return false, nil, pk.err
		case pk.err == io.EOF:
			return false, bytes.NewReader(pk.b), nil
		case pk.err != nil:
			return false, io.MultiReader(bytes.NewReader(pk.b), failReader{pk.err}), nil
		}
		return false, io.MultiReader(bytes.NewReader(pk.b), data), nil
	}
}

// failReader fails every Read with err.
type failReader struct{ err error }

func (r failReader) Read([]byte) (int, error) { return 0, r.err }

// ownByCaller makes what a put creates belong to the user the request
// acts as (zx.CallerFrom), unless the put says otherwise. Only a server
// running as root can give files away; others create them as themselves.
func ownByCaller(ctx context.Context, a *attrs) {
	c, ok := zx.CallerFrom(ctx)
	if !ok || os.Geteuid() != 0 {
		return
	}
	if a.uid < 0 && c.Uid >= 0 {
		a.uid = c.Uid
	}
	if a.gid < 0 && c.Gid >= 0 {
		a.gid = c.Gid
	}
}

// killSetID returns mode less the set-user-ID bit, and the set-group-ID
// bit if the file is group-executable, when the request acts for a user
// other than root (zx.CallerFrom): Linux clears them so when a process
// without CAP_FSETID writes to or truncates a file, but the server, running
// as root, has it, so its kernel would keep them for a user who could not.
// A set-group-ID file that is not group-executable keeps its bit: Linux
// clears it only for a writer outside the file's group, and the server
// does not know the user's other groups (FUSE's kernel side keeps it too).
func killSetID(ctx context.Context, mode uint32) uint32 {
	c, ok := zx.CallerFrom(ctx)
	if !ok || c.Uid <= 0 {
		return mode
	}
	mode &^= unix.S_ISUID
	if mode&unix.S_IXGRP != 0 {
		mode &^= unix.S_ISGID
	}
	return mode
}

// existingTarget returns the target of the link name in dfd, whose stat
// is st, or "".
func (f *FS) existingTarget(dfd int, name string, st *unix.Stat_t) string {
	t, _ := f.linkTarget(dfd, name, st)
	return t
}

// statAt returns the entry name in dfd, whose path is p.
func (f *FS) statAt(dfd int, name, p string) (zx.Dir, error) {
	var st unix.Stat_t
	if err := lstat(dfd, name, &st); err != nil {
		return nil, err
	}
	return f.entry(dfd, name, p, &st, nil)
}

// mknod creates name in dfd with type typ (not a regular file).
func (f *FS) mknod(dfd int, name, typ string, a *attrs) error {
	switch typ {
	case zx.TypeDir:
		return unix.Mkdirat(dfd, name, 0700)
	case zx.TypeLink:
		return unix.Symlinkat(*a.target, dfd, name)
	case zx.TypeCharDev, zx.TypeBlkDev:
		var dev uint64
		if a.rdev != nil {
			dev = *a.rdev
		}
		return unix.Mknodat(dfd, name, zx.UnixType(typ)|0600, int(dev))
	}
	return unix.Mknodat(dfd, name, zx.UnixType(typ)|0600, 0)
}

// tempName returns a fresh temporary name: TempPrefix, "c" (creates a
// file) or "r" (replaces one), and random hex. Watch tells Created from
// Changed by that letter.
func tempName(replace bool) string {
	var b [8]byte
	n := rand.Uint64()
	for i := range b {
		b[i] = byte(n >> (8 * i))
	}
	k := "c"
	if replace {
		k = "r"
	}
	return TempPrefix + k + hex.EncodeToString(b[:])
}

// replace writes a new file name in dfd aside and renames it into place.
func (f *FS) replace(ctx context.Context, dfd int, name, p string, a *attrs, exists bool, old *unix.Stat_t, off int64, data io.Reader) (zx.Dir, error) {
	var tmp string
	var fd int
	var err error
	for {
		tmp = tempName(exists)
		fd, err = openat(dfd, tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0600)
		if err != unix.EEXIST {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if fd >= 0 {
			unix.Close(fd)
		}
		if !ok {
			unix.Unlinkat(dfd, tmp, 0)
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	// Start from the old file's metadata.
	b := *a
	if exists {
		if b.mode < 0 {
			b.mode = int64(old.Mode & 07777)
		}
		if b.uid < 0 && old.Uid != st.Uid || b.gid < 0 && old.Gid != st.Gid {
			// Best effort: keep the owner if we may.
			if unix.Fchown(fd, int(old.Uid), int(old.Gid)) == nil {
				st.Uid, st.Gid = old.Uid, old.Gid
			}
		}
		if !f.opts.NoXattrs {
			if err := f.copyXattrs(dfd, name, fd); err != nil {
				return nil, err
			}
		}
	} else if b.mode < 0 {
		b.mode = 0644
	}
	if err := f.setMeta(&b, dfd, tmp, &st); err != nil {
		return nil, err
	}
	if a.size > 0 {
		if err := unix.Ftruncate(fd, a.size); err != nil {
			return nil, err
		}
	}
	if off < 0 {
		off = max(a.size, 0)
	}
	if err := copyIn(ctx, fd, off, false, data); err != nil {
		return nil, err
	}
	if exists {
		// Replacing a file: its new data reaches the disk before its
		// name does, so that a power loss leaves the old contents or
		// the new, never an empty file. A new file is not synced (a
		// disk flush per file, 1-5 ms: see docs/design.md, Durability
		// on the server): a power loss may lose it, or leave it empty,
		// as on a local disk after close without fsync. Sync makes it
		// durable.
		if err := fsync(fd); err != nil {
			return nil, err
		}
	}
	if err := a.setTimes(dfd, tmp, false); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Close before the rename, so that watchers see no write to name.
	err = unix.Close(fd)
	fd = -1
	if err != nil {
		return nil, err
	}
	if a.excl {
		err = unix.Renameat2(dfd, tmp, dfd, name, unix.RENAME_NOREPLACE)
		if err == unix.EINVAL || err == unix.ENOSYS {
			// The file system cannot: link, which never replaces.
			if err = unix.Linkat(dfd, tmp, dfd, name, 0); err == nil {
				unix.Unlinkat(dfd, tmp, 0)
			}
		}
	} else {
		err = unix.Renameat(dfd, tmp, dfd, name)
	}
	if err != nil {
		return nil, err
	}
	ok = true
	return f.statAt(dfd, name, p)
}

// update writes to the existing file name in dfd in place.
func (f *FS) update(ctx context.Context, dfd int, name, p string, a *attrs, st *unix.Stat_t, off int64, data io.Reader) (zx.Dir, error) {
	if a.mode < 0 && (data != nil || a.size >= 0) && st.Mode&unix.S_IFMT == unix.S_IFREG {
		// Cleared before the data goes in, as the kernel does: a
		// write that fails half way has cleared them too.
		if m := killSetID(ctx, st.Mode&07777); m != st.Mode&07777 {
			a.mode = int64(m)
		}
	}
	if err := f.setMeta(a, dfd, name, st); err != nil {
		return nil, err
	}
	fl := unix.O_WRONLY
	if off < 0 {
		fl |= unix.O_APPEND
	}
	fd, err := openat(dfd, name, fl|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		return nil, err
	}
	if fst.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, e(zx.ErrInvalid, "", "", "not a regular file")
	}
	if a.size >= 0 {
		if err := unix.Ftruncate(fd, a.size); err != nil {
			return nil, err
		}
	}
	if err := copyIn(ctx, fd, off, off < 0, data); err != nil {
		return nil, err
	}
	if err := a.setTimes(dfd, name, data != nil || a.size >= 0); err != nil {
		return nil, err
	}
	return f.statAt(dfd, name, p)
}

// copyXattrs copies the user attributes of name in dfd to fd.
func (f *FS) copyXattrs(dfd int, name string, fd int) error {
	pp := f.procPath(dfd, name)
	names, err := userXattrs(pp)
	if err != nil {
		if err == unix.ENOTSUP {
			return nil
		}
		return err
	}
	xb := xbufs.Get().(*xbuf)
	defer xbufs.Put(xb)
	for _, xn := range names {
		v, err := getxattr(pp, xn, xb)
		if err != nil {
			continue
		}
		if err := unix.Fsetxattr(fd, xn, []byte(v), 0); err != nil {
			return err
		}
	}
	return nil
}

var bufs = sync.Pool{New: func() any { b := make([]byte, chunk); return &b }}

// block is what copyIn's reader hands its writer: a buffer of n bytes
// (counted in the request's zx.Memory), or the bytes p of a Write, or an
// error.
type block struct {
	b   *[]byte
	n   int
	p   []byte
	err error
}

// copyIn writes what r holds to fd from off (appending if app). It reads
// in another goroutine, so that a cancelled ctx stops it even if r blocks;
// that goroutine ends when its Read returns. A reader that can write
// itself (io.WriterTo, as a server's request data does) hands over what it
// holds, and copyIn needs no buffer: a put whose data stops coming holds
// none. Otherwise each buffer is counted (zx.TakeMemory) from before it is
// filled until it is written.
func copyIn(ctx context.Context, fd int, off int64, app bool, r io.Reader) error {
	if r == nil {
		return nil
	}
	stop := make(chan struct{})
	defer close(stop)
	c := make(chan block, 1)
	written := make(chan error, 1)
	if wt, ok := r.(io.WriterTo); ok {
		go func() {
			defer close(c)
			_, err := wt.WriteTo(blockWriter{c: c, written: written, stop: stop})
			if err != nil && err != errStopped {
				select {
				case c <- block{err: err}:
				case <-stop:
				}
			}
		}()
	} else {
		go readBlocks(ctx, r, c, stop)
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case blk, ok := <-c:
			if !ok {
				return nil
			}
			switch {
			case blk.p != nil:
				err := writeAll(fd, blk.p, off, app)
				written <- err
				if err != nil {
					return err
				}
				off += int64(len(blk.p))
			case blk.n > 0:
				err := writeAll(fd, (*blk.b)[:blk.n], off, app)
				bufs.Put(blk.b)
				zx.GiveMemory(ctx, chunk)
				if err != nil {
					return err
				}
				off += int64(blk.n)
			}
			if blk.err != nil && blk.err != io.EOF {
				return blk.err
			}
		}
	}
}

// readBlocks reads r into buffers and hands them to copyIn on c, which it
// closes at the end.
func readBlocks(ctx context.Context, r io.Reader, c chan<- block, stop <-chan struct{}) {
	defer close(c)
	for {
		if err := zx.TakeMemory(ctx, chunk); err != nil {
			select {
			case c <- block{err: err}:
			case <-stop:
			}
			return
		}
		b := bufs.Get().(*[]byte)
		n, err := io.ReadFull(r, *b)
		if err == io.ErrUnexpectedEOF {
			err = io.EOF
		}
		if n == 0 {
			// (ReadFull reads nothing only with an error.)
			bufs.Put(b)
			zx.GiveMemory(ctx, chunk)
			b = nil
			if err == io.EOF {
				return
			}
		}
		select {
		case c <- block{b: b, n: n, err: err}:
		case <-stop:
			return
		}
		if err != nil {
			return
		}
	}
}

// blockWriter hands the bytes of each Write to copyIn, and returns once
// they are written.
type blockWriter struct {
	c       chan<- block
	written <-chan error
	stop    <-chan struct{}
}

var errStopped = errors.New("copy stopped")

func (w blockWriter) Write(p []byte) (int, error) {
	if p == nil {
		p = []byte{}
	}
	select {
	case w.c <- block{p: p}:
	case <-w.stop:
		return 0, errStopped
	}
	select {
	case err := <-w.written:
		if err != nil {
			return 0, err
		}
		return len(p), nil
	case <-w.stop:
		return 0, errStopped
	}
}

func writeAll(fd int, b []byte, off int64, app bool) error {
	for len(b) > 0 {
		var n int
		var err error
		if app {
			n, err = unix.Write(fd, b)
		} else {
			n, err = unix.Pwrite(fd, b, off)
		}
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
		off += int64(n)
	}
	return nil
}
