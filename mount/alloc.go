package mount

import (
	"context"
	"math"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/zxfs/zx"
)

var _ fs.FileAllocater = (*handle)(nil)

// Allocate implements fs.FileAllocater: fallocate(2) in the modes the
// kernel passes on (the zero mode, keep-size, punch-hole and zero-range),
// by the tree's Allocate (zx.Allocator). A tree or server that cannot
// allocate answers EOPNOTSUPP, never ENOSYS (which would make the kernel
// stop asking for the life of the mount).
//
// It waits for the server, with write-back too: what fallocate is for is
// to learn now that the space is there (ENOSPC) and that the disk can do
// it (EOPNOTSUPP), which an answer from the journal could not tell. So
// the handles' unsent writes go first (with write-back, journaled and
// sent), then the journaled records of the file are waited for (an
// allocate sent behind them could overtake one that failed for want of
// the link and is sent again later), then the allocate. With the server
// out of reach, fallocate fails as a stat would.
//
// The kernel drops its cached pages of a punched or zeroed range itself
// and takes the new size; the mount lays the change over the contents
// the open handles hold, and restarts their streaming reads (which may
// have read the range before), and the cache below drops its copy.
func (h *handle) Allocate(ctx context.Context, off, n uint64, mode uint32) syscall.Errno {
	m := h.n.m
	if e := m.ro(); e != 0 {
		return e
	}
	if off > math.MaxInt64 || n > math.MaxInt64 {
		return syscall.EFBIG
	}
	am, o, k := zx.AllocMode(mode), int64(off), int64(n)
	if err := zx.CheckAlloc(h.n.path(), am, o, k); err != nil {
		return errno(err)
	}
	h.s.mu.Lock() // not given up on an interrupt: see FS.rctx
	defer h.s.mu.Unlock()
	if h.n.unlinked() {
		// Its data is what the handles hold: nothing on the server.
		h.allocLocal(am, o, k)
		return 0
	}
	if _, e := h.flushLocked(ctx, false); e != 0 {
		return e
	}
	p := h.n.path()
	rctx, cancel := m.rctx(ctx)
	defer cancel()
	if m.wb != nil {
		if err := m.wb.SyncPath(rctx, p); err != nil {
			m.log.Warn("mount: allocate: written-back data of the file is not on the server", "path", p, "err", err)
			return errno(err)
		}
	}
	h.n.sendingWrites() // a stat answered meanwhile may predate it (see wmark)
	r := <-zx.Allocate(rctx, m.t, p, am, o, k)
	h.n.wroteWrites(r.Dir)
	m.wrote(r.Err)
	if r.Err != nil {
		return errno(r.Err)
	}
	h.s.gen++
	size := r.Dir.Size()
	if h.s.rewrite || h.s.loaded {
		// Nothing unsent (flushed above): the contents are the file's.
		if size > m.opts.WholeFile {
			h.s.content, h.s.loaded = nil, false
		} else {
			if zx.AllocZeroes(am) && o < int64(len(h.s.content)) {
				clear(h.s.content[o:min(o+k, int64(len(h.s.content)))])
			}
			h.s.content, h.s.loaded = resize(h.s.content, size), true
		}
		// In place from now on: a whole new file sent at the next
		// flush would fill the holes.
		h.s.rewrite = false
	}
	h.s.size = size
	h.n.setDir(r.Dir)
	h.n.mu.Lock()
	h.n.kept = version(r.Dir) // the kernel's pages hold the file (see above)
	h.n.mu.Unlock()
	return 0
}

// allocLocal applies an allocate to a file with no name left, whose
// contents are what its handles hold (see spill): a zeroed range is
// cleared in them, a new size is a truncation. h.s.mu is held.
func (h *handle) allocLocal(mode zx.AllocMode, off, n int64) {
	size := zx.AllocSize(h.s.size, mode, off, n)
	if zx.AllocZeroes(mode) && off < h.s.size {
		end := min(off+n, h.s.size)
		if h.s.rewrite || h.s.loaded {
			clear(h.s.content[off:min(end, int64(len(h.s.content)))])
		}
		// What the writes put in the range: under them is nothing
		// (the ops start with a truncation to zero), or the contents
		// above.
		for _, op := range h.s.ops {
			if lo, hi := max(op.off, off), min(op.off+int64(len(op.data)), end); lo < hi {
				clear(op.data[lo-op.off : hi-op.off])
			}
		}
	}
	if size != h.s.size {
		if (h.s.rewrite || h.s.loaded) && size > h.n.m.opts.WholeFile {
			h.spill()
		}
		if h.s.rewrite || h.s.loaded {
			h.s.content = resize(h.s.content, size)
		}
		if !h.s.rewrite {
			h.s.ops = append(h.s.ops, wop{off: size})
		}
	}
	h.s.size = size
	h.s.dirty = true
	h.s.gen++
}
