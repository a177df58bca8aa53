package mount_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSymlinkTimes: the times set on a symbolic link itself
// (utimensat with AT_SYMLINK_NOFOLLOW) are the ones lstat reports,
// through the mount and on the server's disk, however often the link is
// stat'ed, listed or read: reading the link's target for each entry set
// its atime to now on a relatime disk.
func TestSymlinkTimes(t *testing.T) {
	addr, disk := serveLFS(t)
	e := mnt(t, setup{addr: addr})
	must(t, os.Mkdir(e.p("d"), 0755))
	must(t, os.Symlink("../target", e.p("d/l")))
	atime := time.Date(2020, 1, 2, 3, 4, 5, 123456789, time.UTC)
	mtime := time.Date(2021, 6, 7, 8, 9, 10, 987654321, time.UTC)
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	must(t, unix.UtimesNanoAt(unix.AT_FDCWD, e.p("d/l"), ts, unix.AT_SYMLINK_NOFOLLOW))
	// The change may have been sent without waiting (pipelined).
	must(t, e.m.Sync(context.Background()))

	check := func(when string) {
		t.Helper()
		for _, p := range []string{e.p("d/l"), filepath.Join(disk, "d/l")} {
			var st unix.Stat_t
			must(t, unix.Lstat(p, &st))
			if got := time.Unix(st.Atim.Unix()); !got.Equal(atime) {
				t.Errorf("%s: %s: atime %v, want %v", when, p, got.UTC(), atime)
			}
			if got := time.Unix(st.Mtim.Unix()); !got.Equal(mtime) {
				t.Errorf("%s: %s: mtime %v, want %v", when, p, got.UTC(), mtime)
			}
		}
	}
	check("after utimensat")
	if got, err := os.Readlink(e.p("d/l")); err != nil || got != "../target" {
		t.Fatalf("readlink: %q %v", got, err)
	}
	check("after readlink through the mount")
	if out, err := exec.Command("ls", "-lR", e.dir).CombinedOutput(); err != nil {
		t.Fatalf("ls -lR: %v\n%s", err, out)
	}
	check("after ls -lR")
	// The server asked afresh: its entry of the link, and a listing.
	e.c.Flush()
	if _, err := os.ReadDir(e.p("d")); err != nil {
		t.Fatal(err)
	}
	check("after the cache was dropped")
}
