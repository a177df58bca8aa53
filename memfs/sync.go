package memfs

import (
	"context"

	"github.com/zxfs/zx"
)

var _ zx.Syncer = (*FS)(nil)

// Sync implements zx.Syncer. Memory is all there is, so there is nothing
// to write: it only checks that path exists once earlier requests on it
// are done.
func (fs *FS) Sync(ctx context.Context, p string) <-chan error {
	p, err := zx.CleanPath(p)
	if err != nil {
		return errc(zx.Errorf("sync", p, err))
	}
	c := make(chan error, 1)
	o, wait := fs.enter(ctx, false, p)
	go func() {
		defer close(c)
		defer o.Done()
		if !wait() {
			c <- canceled("sync", p)
			return
		}
		fs.mu.RLock()
		defer fs.mu.RUnlock()
		if _, err := fs.lookup(p); err != nil {
			c <- fail("sync", p, err)
			return
		}
		c <- nil
	}()
	return c
}
