package lfs

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
)

// reply returns a channel holding one reply.
func reply(d zx.Dir, err error) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	c <- zx.Reply{Dir: d, Err: err}
	close(c)
	return c
}

func errc(err error) <-chan error {
	c := make(chan error, 1)
	c <- err
	close(c)
	return c
}

func items(err error) <-chan zx.Item {
	c := make(chan zx.Item, 1)
	c <- zx.Item{Err: err}
	close(c)
	return c
}

// send sends it on c unless ctx is done first.
func send(ctx context.Context, c chan<- zx.Item, it zx.Item) bool {
	select {
	case c <- it:
		return true
	case <-ctx.Done():
		return false
	}
}

// Stat returns the entry for path. For a symbolic link it is the link's.
func (f *FS) Stat(ctx context.Context, path string) <-chan zx.Reply {
	if ctl.Is(path) {
		return f.ctl.Stat(ctx)
	}
	p, err := f.check("stat", path, false)
	if err != nil {
		return reply(nil, err)
	}
	op := f.q.Enter(false, p)
	c := make(chan zx.Reply, 1)
	go func() {
		defer close(c)
		if err := op.Wait(ctx); err != nil {
			op.Done()
			c <- zx.Reply{Err: errf("stat", p, err)}
			return
		}
		d, err := f.stat(p)
		op.Done()
		c <- zx.Reply{Dir: d, Err: errf("stat", p, err)}
	}()
	return c
}

// Move renames from to to, replacing to if it is a file or an empty
// directory. Either may be a symbolic link, which is moved itself.
func (f *FS) Move(ctx context.Context, from, to string) <-chan error {
	fp, err := f.check("move", from, true)
	if err != nil {
		return errc(err)
	}
	tp, err := f.check("move", to, true)
	if err != nil {
		return errc(err)
	}
	if fp == "/" || tp == "/" {
		return errc(e(zx.ErrInvalid, "move", fp, "cannot move the root"))
	}
	if fp != tp && zx.HasPrefix(tp, fp) {
		return errc(e(zx.ErrInvalid, "move", fp, "cannot move a directory into itself"))
	}
	op := f.q.Enter(true, fp, tp)
	c := make(chan error, 1)
	go func() {
		defer close(c)
		defer op.Done()
		if err := op.Wait(ctx); err != nil {
			c <- errf("move", fp, err)
			return
		}
		c <- errf("move", fp, f.move(fp, tp))
	}()
	return c
}

func (f *FS) move(fp, tp string) error {
	fd, fn, err := f.openParent(fp)
	if err != nil {
		return err
	}
	defer fd.close()
	td, tn, err := f.openParent(tp)
	if err != nil {
		return err
	}
	defer td.close()
	if fp == tp {
		var st unix.Stat_t
		return lstat(fd.fd, fn, &st)
	}
	return unix.Renameat(fd.fd, fn, td.fd, tn)
}

// Remove removes path, a file, link or empty directory.
func (f *FS) Remove(ctx context.Context, path string) <-chan error {
	return f.remove(ctx, "remove", path, false)
}

// RemoveAll removes path and everything below it. The root itself cannot
// be removed.
func (f *FS) RemoveAll(ctx context.Context, path string) <-chan error {
	return f.remove(ctx, "removeall", path, true)
}

func (f *FS) remove(ctx context.Context, opn, path string, all bool) <-chan error {
	p, err := f.check(opn, path, true)
	if err != nil {
		return errc(err)
	}
	if p == "/" {
		return errc(e(zx.ErrInvalid, opn, p, "cannot remove the root"))
	}
	op := f.q.Enter(true, p)
	c := make(chan error, 1)
	go func() {
		defer close(c)
		defer op.Done()
		if err := op.Wait(ctx); err != nil {
			c <- errf(opn, p, err)
			return
		}
		pd, name, err := f.openParent(p)
		if err != nil {
			c <- errf(opn, p, err)
			return
		}
		defer pd.close()
		if all {
			err = removeAll(ctx, pd.fd, name)
		} else {
			err = removeEntry(pd.fd, name)
		}
		c <- errf(opn, p, err)
	}()
	return c
}

// removeEntry removes name from directory dfd.
func removeEntry(dfd int, name string) error {
	var st unix.Stat_t
	if err := lstat(dfd, name, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
		if err == unix.EEXIST {
			err = unix.ENOTEMPTY
		}
		return err
	}
	return unix.Unlinkat(dfd, name, 0)
}

// removeAll removes name from directory dfd, and everything below it. It
// goes on after errors and returns the first one.
func removeAll(ctx context.Context, dfd int, name string) error {
	var st unix.Stat_t
	if err := lstat(dfd, name, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return unix.Unlinkat(dfd, name, 0)
	}
	var first error
	fd, err := openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	db := &dirbuf{ents: make([]byte, 8<<10)}
	for {
		// Reread until empty: entries may be added while we remove.
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			first = err
			break
		}
		names, err := readAllNames(fd, db)
		if err != nil {
			first = err
			break
		}
		if len(names) == 0 {
			break
		}
		progress := false
		for _, n := range names {
			if err := ctx.Err(); err != nil {
				unix.Close(fd)
				return err
			}
			if err := removeAll(ctx, fd, n); err != nil && err != unix.ENOENT {
				if first == nil {
					first = err
				}
			} else {
				progress = true
			}
		}
		if !progress {
			break
		}
	}
	unix.Close(fd)
	if first != nil {
		return first
	}
	err = unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR)
	if err == unix.EEXIST {
		err = unix.ENOTEMPTY
	}
	return err
}

// readAllNames is readNames including temporaries, unsorted. It reads
// from the current offset of dfd: from the start for a fresh descriptor.
func readAllNames(dfd int, db *dirbuf) ([]string, error) {
	names := db.names[:0]
	for {
		n, err := unix.Getdents(dfd, db.ents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(db.ents[:n], -1, names)
	}
	db.names = names
	return names, nil
}
