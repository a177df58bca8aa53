package mount_test

import (
	"testing"

	"github.com/zxfs/zx/mount"
)

func TestFSType(t *testing.T) {
	if typ, ok := mount.FSType("/proc"); !ok || typ != "proc" {
		t.Errorf("FSType(/proc) = %q, %v; want proc, true", typ, ok)
	}
	if typ, ok := mount.FSType(t.TempDir()); ok {
		t.Errorf("FSType of a plain directory = %q, true; want false", typ)
	}
	e := mnt(t, setup{})
	if typ, ok := mount.FSType(e.dir); !ok || typ != "fuse.zx" {
		t.Errorf("FSType of a zx mount = %q, %v; want fuse.zx, true", typ, ok)
	}
}
