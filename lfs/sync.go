package lfs

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
)

var _ zx.Syncer = (*FS)(nil)

// Sync implements zx.Syncer: it returns once what earlier requests wrote
// to path is on the disk. For the root, that is syncfs(2) of the file
// system holding the tree. For any other entry, it is fsync(2) of the
// entry (a regular file or a directory; other types have no data) and
// then of the directory holding it, so that its name (a create or a
// rename into that directory) survives a power loss too. The request
// takes its place in the order of requests on path, as a write does: it
// waits for earlier writes at, above or below path, and later ones wait
// for it.
func (f *FS) Sync(ctx context.Context, path string) <-chan error {
	if ctl.Is(path) {
		return errc(nil) // the control file is never stored
	}
	p, err := f.check("sync", path, false)
	if err != nil {
		return errc(err)
	}
	op := f.q.Enter(true, p)
	c := make(chan error, 1)
	go func() {
		defer close(c)
		defer op.Done()
		if err := op.Wait(ctx); err != nil {
			c <- errf("sync", p, err)
			return
		}
		err := f.sync(p)
		f.synced.note(err)
		if f.opts.OnSync != nil {
			f.opts.OnSync(p, err)
		}
		if err != nil {
			c <- errf("sync", p, err)
			return
		}
		c <- nil
	}()
	return c
}

func (f *FS) sync(p string) error {
	if p == "/" {
		return unix.Syncfs(f.rootfd)
	}
	pd, name, err := f.openParent(p)
	if err != nil {
		return err
	}
	defer pd.close()
	var st unix.Stat_t
	if err := lstat(pd.fd, name, &st); err != nil {
		return err
	}
	if m := st.Mode & unix.S_IFMT; m == unix.S_IFREG || m == unix.S_IFDIR {
		// O_RDONLY is enough for fsync, and needs no write permission:
		// the server may be syncing a file its client opened to read.
		fd, err := openat(pd.fd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		err = fsync(fd)
		unix.Close(fd)
		if err != nil {
			return err
		}
	}
	return fsync(pd.fd)
}

// fsync is fsync(2), retried when interrupted.
func fsync(fd int) error {
	for {
		if err := unix.Fsync(fd); err != unix.EINTR {
			return err
		}
	}
}

// syncStats counts the Sync requests an FS carried out, for its /Ctl
// section: an operator sees that fsyncs on mounts reach the disk.
type syncStats struct {
	mu        sync.Mutex
	n, failed int64
}

func (s *syncStats) note(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.failed++
	}
	s.n++
}

// line returns "synced N failed M".
func (s *syncStats) line() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("synced %d failed %d", s.n, s.failed)
}
