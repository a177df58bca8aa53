package cache

import (
	"context"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
)

var _ zx.Allocator = (*Cache)(nil)

// Allocate implements zx.Allocator by passing the request on, as a write
// of the file: the entry in its reply is cached, and the file's cached
// data is dropped (a punched or zeroed range reads as zeros now; the next
// read fetches the file again). What the write-back queue answers reads
// of the file with, if it has records of it pending, is set aside as for
// a remove (WriteBack.hide): reads go to the server, behind the allocate.
// A caller that keeps the file's size itself (the mount) waits for those
// records first (WriteBack.SyncPath), so that no size from before the
// allocate is answered after it.
func (c *Cache) Allocate(ctx context.Context, p string, mode zx.AllocMode, off, n int64) <-chan zx.Reply {
	if ctl.Is(p) {
		return replyc(zx.Reply{Err: zx.E(zx.ErrNotSupp, "allocate", ctl.Path, "the control file has no storage")})
	}
	cp, err := zx.CleanPath(p)
	if err != nil {
		return zx.Allocate(ctx, c.remote, p, mode, off, n)
	}
	p = cp
	var restore func()
	if c.wb != nil && ctx.Value(writeBackKey{}) == nil {
		restore = c.wb.hide(p)
	}
	s := c.begin(p)
	at := time.Now()
	rc := zx.Allocate(ctx, c.remote, p, mode, off, n)
	issued := time.Now()
	out := make(chan zx.Reply, 1)
	go func() {
		r := <-rc
		if restore != nil && r.Err != nil && !transient(r.Err) {
			// Refused, so not applied: what the queue knew stands.
			// (Not answered for want of the link, it may have been:
			// the server says.)
			restore()
		}
		c.end(s, []string{p}, func() { c.applyReply(p, r, at, issued) })
		out <- r
	}()
	return out
}
