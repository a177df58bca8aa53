package lfs

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
)

var _ zx.Allocator = (*FS)(nil)

// Allocate implements zx.Allocator with fallocate(2) of the file, in the
// mode given: what the disk's file system cannot do fails with
// zx.ErrNotSupp (EOPNOTSUPP), lack of space with zx.ErrNoSpace. As a
// write by a user other than root would, it clears the file's set-id bits
// for such a user (see killSetID). It takes its place in the order of
// requests on path as a write.
func (f *FS) Allocate(ctx context.Context, path string, mode zx.AllocMode, off, n int64) <-chan zx.Reply {
	if ctl.Is(path) {
		return reply(nil, e(zx.ErrNotSupp, "allocate", ctl.Path, "the control file has no storage"))
	}
	p, err := f.check("allocate", path, true)
	if err == nil {
		err = zx.CheckAlloc(p, mode, off, n)
	}
	if err != nil {
		return reply(nil, err)
	}
	op := f.q.Enter(true, p)
	c := make(chan zx.Reply, 1)
	go func() {
		defer close(c)
		if err := op.Wait(ctx); err != nil {
			op.Done()
			c <- zx.Reply{Err: errf("allocate", p, err)}
			return
		}
		nd, err := f.allocate(ctx, p, mode, off, n)
		op.Done()
		c <- zx.Reply{Dir: nd, Err: errf("allocate", p, err)}
	}()
	return c
}

func (f *FS) allocate(ctx context.Context, p string, mode zx.AllocMode, off, n int64) (zx.Dir, error) {
	pd, name, err := f.openParent(p)
	if err != nil {
		return nil, err
	}
	defer pd.close()
	var st unix.Stat_t
	if err := lstat(pd.fd, name, &st); err != nil {
		return nil, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return nil, e(zx.ErrIsDir, "", "", "")
	default:
		return nil, e(zx.ErrInvalid, "", "", "not a regular file")
	}
	fd, err := openat(pd.fd, name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, e(zx.ErrInvalid, "", "", "not a regular file") // replaced meanwhile
	}
	if m := killSetID(ctx, st.Mode&07777); m != st.Mode&07777 {
		if err := unix.Fchmod(fd, m); err != nil {
			return nil, err
		}
	}
	if err := fallocate(fd, mode, off, n); err != nil {
		if err == unix.EOPNOTSUPP {
			return nil, e(zx.ErrNotSupp, "", "", "the server's disk cannot "+mode.String())
		}
		return nil, err
	}
	return f.statAt(pd.fd, name, p)
}

// fallocate is fallocate(2), retried when interrupted.
func fallocate(fd int, mode zx.AllocMode, off, n int64) error {
	for {
		if err := unix.Fallocate(fd, uint32(mode), off, n); err != unix.EINTR {
			return err
		}
	}
}
