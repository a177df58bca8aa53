package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	zxmount "github.com/zxfs/zx/mount"
)

// fuseFloor times tar -x of the archive into a pass-through FUSE mount
// (go-fuse's loopback file system over a directory of the server's disk,
// served by this process with the FUSE mount options zx's mount uses and
// its long entry and attribute timeouts): what FUSE itself costs, with no
// network, cache or journal. Best of runs.
func (r *runner) fuseFloor(ctx context.Context, tarFile string, runs int) (float64, error) {
	src := filepath.Join(r.dir, "fusefloor")
	mnt := filepath.Join(r.dir, "fusefloor-mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return 0, err
	}
	defer os.Remove(mnt)
	defer os.RemoveAll(src)
	best := 0.0
	for i := 0; i < runs; i++ {
		os.RemoveAll(src)
		if err := os.Mkdir(src, 0o755); err != nil {
			return 0, err
		}
		el, err := r.fuseFloorOnce(ctx, tarFile, src, mnt)
		if err != nil {
			return 0, err
		}
		if best == 0 || el < best {
			best = el
		}
	}
	return best, nil
}

// fuseFloorOnce mounts src on mnt afresh and times one extraction.
func (r *runner) fuseFloorOnce(ctx context.Context, tarFile, src, mnt string) (float64, error) {
	root, err := fs.NewLoopbackRoot(src)
	if err != nil {
		return 0, err
	}
	long := time.Hour
	srv, err := fs.Mount(mnt, root, &fs.Options{
		MountOptions:    zxmount.FUSEOptions(zxmount.Options{FsName: "zxbench-floor"}),
		EntryTimeout:    &long,
		AttrTimeout:     &long,
		NegativeTimeout: &long,
	})
	if err != nil {
		return 0, fmt.Errorf("mounting the FUSE floor's loopback: %w", err)
	}
	var once sync.Once
	unmount := func() {
		once.Do(func() {
			if srv.Unmount() != nil {
				exec.Command("fusermount3", "-uz", mnt).Run()
			}
		})
	}
	r.env.onCleanup(unmount)
	defer unmount()
	t0 := time.Now()
	// tar runs with its working directory off the mount (-C names it).
	if out, err := exec.CommandContext(ctx, "tar", "-xf", tarFile, "-C", mnt).CombinedOutput(); err != nil {
		return 0, fmt.Errorf("tar -x (FUSE floor): %v: %s", err, out)
	}
	return time.Since(t0).Seconds(), nil
}
