package lfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
)

// TestXattrMemo checks that a find sees every change of a file's extended
// attributes, whether or not the memo vouched for the file before.
func TestXattrMemo(t *testing.T) {
	f, dir := newFS(t, Options{})
	ctx := t.Context()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, nil, 0644); err != nil {
		t.Fatal(err)
	}
	find := func() zx.Dir {
		t.Helper()
		var got zx.Dir
		for it := range f.Find(ctx, "/", zx.FindOpts{}) {
			if it.Err != nil {
				t.Fatal(it.Err)
			}
			if it.Dir.Path() == "/f" {
				got = it.Dir
			}
		}
		if got == nil {
			t.Fatal("find did not return /f")
		}
		return got
	}
	counts := func() (hits, asked int64) {
		f.xattrs.mu.Lock()
		defer f.xattrs.mu.Unlock()
		return f.xattrs.hits, f.xattrs.asked
	}

	// Just created: too recent for the memo, which must ask each time.
	if d := find(); d["color"] != "" {
		t.Fatalf("color %q before any was set", d["color"])
	}
	if err := unix.Lsetxattr(p, "user.color", []byte("red"), 0); err != nil {
		t.Fatalf("no user xattrs on the test file system: %v", err)
	}
	if d := find(); d["color"] != "red" {
		t.Fatalf("color %q right after it was set, want red", d["color"])
	}
	if err := unix.Lremovexattr(p, "user.color"); err != nil {
		t.Fatal(err)
	}
	if d := find(); d["color"] != "" {
		t.Fatalf("color %q right after it was removed", d["color"])
	}

	// Once the file's ctime is older than racyMargin, a find remembers it
	// and the next one does not ask.
	waitClockPast(t, dir, p, racyMargin)
	find()
	h0, a0 := counts()
	find()
	h1, a1 := counts()
	if h1 == h0 || a1 != a0 {
		t.Fatalf("a find of an unchanged old file: %d memo hits, %d asked; want some hits, none asked", h1-h0, a1-a0)
	}
	// A change of its extended attributes is seen at once.
	if err := unix.Lsetxattr(p, "user.color", []byte("blue"), 0); err != nil {
		t.Fatal(err)
	}
	if d := find(); d["color"] != "blue" {
		t.Fatalf("color %q after it was set on a remembered file, want blue", d["color"])
	}
	waitClockPast(t, dir, p, racyMargin)
	find()
	if err := unix.Lremovexattr(p, "user.color"); err != nil {
		t.Fatal(err)
	}
	if d := find(); d["color"] != "" {
		t.Fatalf("color %q after it was removed from a file remembered with it", d["color"])
	}
	// The same for a file that replaces a remembered one under its name.
	waitClockPast(t, dir, p, racyMargin)
	find()
	q := filepath.Join(dir, "g")
	if err := os.WriteFile(q, nil, 0644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Lsetxattr(q, "user.color", []byte("green"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(q, p); err != nil {
		t.Fatal(err)
	}
	if d := find(); d["color"] != "green" {
		t.Fatalf("color %q of a file renamed over a remembered one, want green", d["color"])
	}
}

// waitClockPast waits until the file system's clock is more than d past
// the ctime of the file at p, as seen in the ctime of a probe file it
// writes in dir.
func waitClockPast(t *testing.T, dir, p string, d time.Duration) {
	t.Helper()
	ctime := func(p string) int64 {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ctim.Nano()
	}
	until := ctime(p) + d.Nanoseconds()
	probe := filepath.Join(dir, ".probe")
	defer os.Remove(probe)
	time.Sleep(d) // the clock has to move on; then check that it did
	for {
		if err := os.WriteFile(probe, nil, 0644); err != nil {
			t.Fatal(err)
		}
		if ctime(probe) > until {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestXattrMemoClockStep checks that the memo forgets what it knows when
// the wall clock steps back by more than it can cover.
func TestXattrMemoClockStep(t *testing.T) {
	var x xattrMemo
	now := time.Now()
	x.check(now)
	k := inodeKey{dev: 1, ino: 2}
	x.remember(k, now.Add(-time.Hour).UnixNano(), now)
	if !x.bare(k, now.Add(-time.Hour).UnixNano()) {
		t.Fatal("not remembered")
	}
	x.check(time.Now())
	if !x.bare(k, now.Add(-time.Hour).UnixNano()) {
		t.Fatal("forgotten with no step of the clock")
	}
	// As if the wall clock had read an hour more when the memo started:
	// it has stepped back since.
	x.baseWall += time.Hour.Nanoseconds()
	x.check(time.Now())
	if x.bare(k, now.Add(-time.Hour).UnixNano()) {
		t.Fatal("still remembered after the clock stepped back an hour")
	}
	// A step smaller than the margin covers is no reason to start over.
	x.remember(k, now.Add(-time.Hour).UnixNano(), now)
	x.baseWall += (racyMargin / 4).Nanoseconds()
	x.check(time.Now())
	if !x.bare(k, now.Add(-time.Hour).UnixNano()) {
		t.Fatal("forgotten after a step of a quarter of the margin")
	}
}
