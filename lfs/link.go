package lfs

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
)

var _ zx.Linker = (*FS)(nil)

// Link implements zx.Linker with linkat(2). A symbolic link is linked
// itself, never followed.
func (f *FS) Link(ctx context.Context, oldpath, newpath string) <-chan zx.Reply {
	fp, err := f.check("link", oldpath, true)
	if err != nil {
		return reply(nil, err)
	}
	tp, err := f.check("link", newpath, true)
	if err != nil {
		return reply(nil, err)
	}
	if tp == "/" {
		return reply(nil, e(zx.ErrExist, "link", tp, ""))
	}
	op := f.q.Enter(true, fp, tp)
	c := make(chan zx.Reply, 1)
	go func() {
		defer close(c)
		defer op.Done()
		if err := op.Wait(ctx); err != nil {
			c <- zx.Reply{Err: errf("link", fp, err)}
			return
		}
		d, err := f.link(fp, tp)
		c <- zx.Reply{Dir: d, Err: errf("link", fp, err)}
	}()
	return c
}

func (f *FS) link(fp, tp string) (zx.Dir, error) {
	if fp == "/" {
		return nil, zx.ErrNotPermit
	}
	fd, fn, err := f.openParent(fp)
	if err != nil {
		return nil, err
	}
	defer fd.close()
	td, tn, err := f.openParent(tp)
	if err != nil {
		return nil, err
	}
	defer td.close()
	if err := unix.Linkat(fd.fd, fn, td.fd, tn, 0); err != nil {
		return nil, err
	}
	return f.statAt(td.fd, tn, tp)
}

var _ zx.StatFSer = (*FS)(nil)

// StatFS implements zx.StatFSer with fstatfs(2) of the root: an export
// is one file system (mounts below it are not looked at).
func (f *FS) StatFS(ctx context.Context, path string) <-chan zx.Reply {
	if _, err := f.check("statfs", path, false); err != nil {
		return reply(nil, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(f.rootfd, &st); err != nil {
		return reply(nil, errf("statfs", "/", err))
	}
	d := zx.Dir{}
	d.SetInt("bsize", st.Bsize)
	d.SetInt("blocks", int64(st.Blocks))
	d.SetInt("bfree", int64(st.Bfree))
	d.SetInt("bavail", int64(st.Bavail))
	d.SetInt("files", int64(st.Files))
	d.SetInt("ffree", int64(st.Ffree))
	return reply(d, nil)
}
