package memfs

import (
	"context"

	"github.com/zxfs/zx"
)

var _ zx.Allocator = (*FS)(nil)

// Allocate implements zx.Allocator. Memory has no blocks to reserve, so
// the zero mode and AllocKeepSize only grow the file (the zero mode);
// AllocPunchHole and AllocZeroRange drop the stored blocks of the range
// (a hole reads as zeros) and zero the rest of it. A change of the data
// or the size sets mtime and ctime, as on a disk.
func (fs *FS) Allocate(ctx context.Context, p string, mode zx.AllocMode, off, n int64) <-chan zx.Reply {
	p, err := zx.CleanPath(p)
	if err == nil {
		err = zx.CheckAlloc(p, mode, off, n)
	}
	if err == nil && off+n > maxSize {
		err = zx.E(zx.ErrTooBig, "allocate", p, "range past the largest size")
	}
	if err != nil {
		return reply(zx.Reply{Err: zx.Errorf("allocate", p, err)})
	}
	c := make(chan zx.Reply, 1)
	o, wait := fs.enter(ctx, true, p)
	go func() {
		defer close(c)
		defer o.Done()
		if !wait() {
			c <- zx.Reply{Err: canceled("allocate", p)}
			return
		}
		nd, err := fs.allocate(p, mode, off, n)
		c <- zx.Reply{Dir: nd, Err: err}
	}()
	return c
}

func (fs *FS) allocate(p string, mode zx.AllocMode, off, n int64) (zx.Dir, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	nd, err := fs.lookup(p)
	switch {
	case err != nil:
		return nil, fail("allocate", p, err)
	case nd.typ == zx.TypeDir:
		return nil, zx.E(zx.ErrIsDir, "allocate", p, "")
	case nd.typ != zx.TypeFile:
		return nil, zx.E(zx.ErrInvalid, "allocate", p, "not a regular file")
	}
	d := nd.data
	changed := false
	if zx.AllocZeroes(mode) && off < d.size {
		d.zero(off, min(off+n, d.size))
		changed = true
	}
	if size := zx.AllocSize(d.size, mode, off, n); size != d.size {
		d.truncate(size)
		changed = true
	}
	if changed {
		t := now()
		nd.mtime, nd.ctime = t, t
	}
	dir := nd.dir(p)
	fs.notify(zx.Event{Kind: zx.Changed, Dir: dir})
	return dir, nil
}
