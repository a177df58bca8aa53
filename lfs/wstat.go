package lfs

import (
	"context"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
)

// Wstat updates the attributes of path given in d, as zx.Tree says. On a
// symbolic link it acts on the link: ownership and times change; a "mode"
// other than the link's own (0777) fails with ErrNotSupp, as Linux cannot
// change it. "name", "path", "type", "target" and "rdev" must match the
// entry or be absent; "ctime", "ino" and "nlink" are ignored.
func (f *FS) Wstat(ctx context.Context, path string, d zx.Dir) <-chan zx.Reply {
	p, err := f.check("wstat", path, true)
	if err != nil {
		return reply(nil, err)
	}
	a, err := parseAttrs("wstat", p, d)
	if err != nil {
		return reply(nil, err)
	}
	op := f.q.Enter(true, p)
	c := make(chan zx.Reply, 1)
	go func() {
		defer close(c)
		if err := op.Wait(ctx); err != nil {
			op.Done()
			c <- zx.Reply{Err: errf("wstat", p, err)}
			return
		}
		nd, err := f.wstat(ctx, p, a)
		op.Done()
		c <- zx.Reply{Dir: nd, Err: errf("wstat", p, err)}
	}()
	return c
}

func (f *FS) wstat(ctx context.Context, p string, a *attrs) (zx.Dir, error) {
	pd, name, err := f.openParent(p)
	if err != nil {
		return nil, err
	}
	defer pd.close()
	var st unix.Stat_t
	if err := lstat(pd.fd, name, &st); err != nil {
		return nil, err
	}
	cur, err := f.entry(pd.fd, name, p, &st, nil)
	if err != nil {
		return nil, err
	}
	immutable := func(k string, v *string) error {
		if v != nil && *v != cur[k] {
			return e(zx.ErrInvalid, "", "", "cannot change "+k)
		}
		return nil
	}
	typ := a.typ
	var rdev *string
	if a.rdev != nil {
		s := strconv.FormatUint(*a.rdev, 10)
		rdev = &s
	}
	for _, c := range []struct {
		k string
		v *string
	}{{zx.AName, a.name}, {zx.APath, a.path}, {zx.ATarget, a.target}, {zx.ARdev, rdev}} {
		if err := immutable(c.k, c.v); err != nil {
			return nil, err
		}
	}
	if typ != "" {
		if err := immutable(zx.AType, &typ); err != nil {
			return nil, err
		}
	}
	if a.mode >= 0 && st.Mode&unix.S_IFMT == unix.S_IFLNK && uint32(a.mode) != st.Mode&07777 {
		// Linux gives a link no mode of its own (lchmod fails with
		// EOPNOTSUPP): say so, rather than change nothing quietly.
		return nil, e(zx.ErrNotSupp, "", "", "is a symbolic link: Linux cannot change a link's mode, "+
			"and requests never follow links; change the mode of its target's path")
	}
	isFile := st.Mode&unix.S_IFMT == unix.S_IFREG
	if a.size >= 0 && a.size != st.Size && !isFile {
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil, e(zx.ErrIsDir, "", "", "cannot resize a directory")
		}
		return nil, e(zx.ErrInvalid, "", "", "cannot resize a "+cur.Type()+" entry")
	}
	if a.size >= 0 && isFile && a.mode < 0 {
		// A truncation, even to the same size, clears the set-id bits
		// as it does on the disk for the user the request acts for.
		if m := killSetID(ctx, st.Mode&07777); m != st.Mode&07777 {
			a.mode = int64(m)
		}
	}
	if err := f.setMeta(a, pd.fd, name, &st); err != nil {
		return nil, err
	}
	resized := false
	if a.size >= 0 && isFile && a.size != st.Size {
		if err := truncateAt(pd.fd, name, a.size); err != nil {
			return nil, err
		}
		resized = true
	}
	if err := a.setTimes(pd.fd, name, resized); err != nil {
		return nil, err
	}
	if cur.Type() == zx.TypeLink {
		// The target is known: reading it again would set the atime.
		f.keepLink(pd.fd, name, st.Ino, cur[zx.ATarget])
	}
	return f.statAt(pd.fd, name, p)
}

// truncateAt resizes the regular file name in dfd.
func truncateAt(dfd int, name string, size int64) error {
	fd, err := openat(dfd, name, unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return e(zx.ErrInvalid, "", "", "not a regular file")
	}
	return unix.Ftruncate(fd, size)
}
