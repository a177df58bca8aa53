package lfs

import (
	"context"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
)

var _ ctl.Controller = (*FS)(nil)

// Status implements ctl.Controller: the tree's section of /Ctl. The
// address is the base name of the directory, not its host path, which
// clients have no business knowing.
func (f *FS) Status(ctx context.Context) ctl.Section {
	s := ctl.Section{Kind: "lfs", Addr: f.name}
	s.Lines = append(s.Lines,
		"since "+ctl.Since(f.since),
		f.reqs.Line(),
		f.synced.line(),
		fmt.Sprintf("readonly %v", f.opts.ReadOnly),
		fmt.Sprintf("xattrs %v", !f.opts.NoXattrs),
	)
	f.mu.Lock()
	watching := f.hub != nil
	f.mu.Unlock()
	s.Lines = append(s.Lines, fmt.Sprintf("watching %v", watching))
	s.Lines = append(s.Lines, f.flags.Lines()...)
	return s
}

// Command implements ctl.Controller. "sync" flushes the file system that
// holds the tree to its disk (syncfs(2)): lfs itself keeps nothing back,
// as every Put is written before it replies.
func (f *FS) Command(ctx context.Context, cmd string) error {
	if ok, err := f.flags.Command(cmd); ok {
		return err
	}
	if cmd == "sync" {
		if f.closed.Load() {
			return zx.E(zx.ErrIO, "sync", "/", "tree closed")
		}
		err := unix.Syncfs(f.rootfd)
		f.synced.note(err)
		if f.opts.OnSync != nil {
			f.opts.OnSync("/", err)
		}
		if err != nil {
			return zx.Errorf("sync", "/", err)
		}
		return nil
	}
	return ctl.Unknown("lfs", cmd)
}
