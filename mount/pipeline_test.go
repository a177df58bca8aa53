package mount_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/mount"
	"github.com/zxfs/zx/wan"
)

// TestPipelined: changes whose outcome the cache knows do not wait for
// the server: removing twenty known files, renaming to a free name,
// chmod and touch cost about one round trip in all, and a sync then finds
// them all applied.
func TestPipelined(t *testing.T) {
	srvDir := t.TempDir()
	e := wbMount(t, wbSetup{srvDir: srvDir})
	must(t, os.Mkdir(e.p("d"), 0o755))
	for i := range 20 {
		must(t, os.WriteFile(e.p(fmt.Sprintf("d/f%02d", i)), []byte("x"), 0o644))
	}
	must(t, os.WriteFile(e.p("a"), []byte("a"), 0o644))
	must(t, e.m.Sync(context.Background()))
	if _, err := os.ReadDir(e.p("d")); err != nil {
		t.Fatal(err)
	}
	e.proxy.SetConfig(wan.Config{RTT: 200 * time.Millisecond})
	rt := e.conn.Stats().RoundTrips
	for i := range 20 {
		must(t, os.Remove(e.p(fmt.Sprintf("d/f%02d", i))))
	}
	must(t, os.Rename(e.p("a"), e.p("b")))
	must(t, os.Chmod(e.p("b"), 0o600))
	now := time.Now().Add(-time.Hour).Truncate(time.Second)
	must(t, os.Chtimes(e.p("b"), now, now))
	n := e.conn.Stats().RoundTrips - rt
	t.Logf("20 removes, a rename, chmod and utimens at 200 ms RTT: %d round trips", n)
	// Waiting for each would take 23. The chmod waits for the rename
	// (the cache does not know b's entry while the rename is in flight),
	// and a late change notice of our own creates can cost one more.
	if n > 3 {
		t.Errorf("20 removes, a rename, chmod and utimens took %d round trips, want at most 3", n)
	}
	must(t, e.m.Sync(context.Background()))
	if ents, err := os.ReadDir(srvDir + "/d"); err != nil || len(ents) != 0 {
		t.Errorf("after sync the server's d holds %v (%v)", ents, err)
	}
	fi, err := os.Stat(srvDir + "/b")
	must(t, err)
	if fi.Mode().Perm() != 0o600 || !fi.ModTime().Equal(now) {
		t.Errorf("after sync the server's b is %v %v, want 0600 %v", fi.Mode(), fi.ModTime(), now)
	}
	if _, err := os.Stat(srvDir + "/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the server still has a: %v", err)
	}
	if e.m.Surprises() != 0 {
		t.Errorf("%d surprises", e.m.Surprises())
	}
}

// TestPipelineSurprise: a change the cache was wrong about (another
// client got there first, unseen without a watch) is counted and
// corrects the cache.
func TestPipelineSurprise(t *testing.T) {
	addr := serve(t, memfs.New())
	other, err := client.Dial(context.Background(), addr, client.Options{})
	must(t, err)
	defer other.Close()
	ctx := context.Background()
	if _, err := zx.WriteFile(ctx, other.Tree(""), "/x", zx.Dir{zx.AMode: "0644"}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	e := wbMount(t, wbSetup{addr: addr, copts: cache.Options{NoWatch: true, Coherency: time.Hour}, noProxy: true})
	if _, err := os.ReadDir(e.dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.p("x")); err != nil {
		t.Fatal(err)
	}
	// Nothing is pipelined before a first change shows the tree takes
	// changes from us.
	must(t, os.WriteFile(e.p("y"), []byte("y"), 0o644))
	must(t, <-other.Tree("").Remove(ctx, "/x"))
	// The cache still believes x exists: the remove is answered at once.
	must(t, os.Remove(e.p("x")))
	must(t, e.m.Sync(ctx))
	if n := e.m.Surprises(); n != 1 {
		t.Fatalf("%d surprises, want 1", n)
	}
	if d, known := e.c.Known("/x"); !known || d != nil {
		t.Errorf("after the surprise the cache has %v (known %v), want x known to be gone", d, known)
	}
	if ctl := readFile(t, e.p("Ctl")); !strings.Contains(ctl, "surprises 1") {
		t.Errorf("Ctl does not count the surprise:\n%s", ctl)
	}
}

// TestWriteBackUtimens: with write-back, setting times and modes right
// after close (as tar does) does not wait for the data to reach the
// server, and is applied after it.
func TestWriteBackUtimens(t *testing.T) {
	e := wbMount(t, wbSetup{copts: cache.Options{Journal: t.TempDir()}, opts: mount.Options{WriteBack: true}})
	must(t, os.WriteFile(e.p("first"), nil, 0o644)) // a first change, waited for
	must(t, e.m.Sync(context.Background()))
	e.proxy.SetConfig(wan.Config{RTT: 200 * time.Millisecond})
	rt := e.conn.Stats().RoundTrips
	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 5 {
		name := e.p(fmt.Sprintf("f%d", i))
		must(t, os.WriteFile(name, []byte("data"), 0o644))
		must(t, os.Chmod(name, 0o640))
		must(t, os.Chtimes(name, when, when))
	}
	n := e.conn.Stats().RoundTrips - rt
	t.Logf("5 × (create, write, close, chmod, utimens) with write-back at 200 ms RTT: %d round trips", n)
	if n > 2 {
		t.Errorf("took %d round trips, want at most 2", n)
	}
	must(t, e.m.Sync(context.Background()))
	for i := range 5 {
		fi, err := os.Stat(filepath.Join(e.srvDir, fmt.Sprintf("f%d", i)))
		must(t, err)
		if fi.Size() != 4 || fi.Mode().Perm() != 0o640 || !fi.ModTime().Equal(when) {
			t.Errorf("f%d on the server: size %d mode %v mtime %v", i, fi.Size(), fi.Mode(), fi.ModTime())
		}
	}
}

// TestPipelinedTree: with write-back, unpacking a tree (directories, and
// files in them, as tar -x does) does not wait for the server, even
// inside directories whose creation is still in flight.
func TestPipelinedTree(t *testing.T) {
	e := wbMount(t, wbSetup{copts: cache.Options{Journal: t.TempDir()}, opts: mount.Options{WriteBack: true}})
	must(t, os.WriteFile(e.p("first"), nil, 0o644)) // a first change, waited for
	must(t, e.m.Sync(context.Background()))
	e.proxy.SetConfig(wan.Config{RTT: 200 * time.Millisecond})
	rt := e.conn.Stats().RoundTrips
	var files []string
	for _, d := range []string{"t", "t/a", "t/a/b", "t/c"} {
		must(t, os.Mkdir(e.p(d), 0o755))
		for i := range 3 {
			f := fmt.Sprintf("%s/f%d", d, i)
			must(t, os.WriteFile(e.p(f), []byte(f), 0o644))
			files = append(files, f)
		}
	}
	n := e.conn.Stats().RoundTrips - rt
	t.Logf("4 directories and 12 files with write-back at 200 ms RTT: %d round trips", n)
	// Waiting for each would take 16 or more. Typically 1; but when a
	// reply or a change notice arrives midway (a loaded machine), the
	// kernel asks for a new directory's attributes, and the cache then
	// waits for the writes in flight below it: one round trip each.
	if n > 5 {
		t.Errorf("took %d round trips, want at most 5", n)
	}
	must(t, e.m.Sync(context.Background()))
	for _, f := range files {
		if got := e.server(t, f); got != f {
			t.Errorf("%s on the server: %q", f, got)
		}
	}
	if e.m.Surprises() != 0 {
		t.Errorf("%d surprises", e.m.Surprises())
	}
	// Listing a directory created without waiting shows what is in it.
	ents, err := os.ReadDir(e.p("t/a"))
	must(t, err)
	if len(ents) != 4 {
		t.Errorf("t/a lists %v", ents)
	}
}

// makeTree makes dirs × files files (and the directories, two levels)
// under root on the server's disk, and returns how many entries it made.
func makeTree(t *testing.T, root string, dirs, files int) int {
	t.Helper()
	n := 0
	for i := range dirs {
		for _, d := range []string{fmt.Sprintf("d%d", i), fmt.Sprintf("d%d/sub", i)} {
			must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
			n++
			for j := range files {
				must(t, os.WriteFile(filepath.Join(root, d, fmt.Sprintf("f%d", j)), []byte("x"), 0o644))
				n++
			}
		}
	}
	return n
}

// rmr removes the tree at dir as rm -r does (fts: list a directory,
// unlink its files, descend into its directories, then rmdir it).
func rmr(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() {
			rmr(t, p)
		} else {
			must(t, os.Remove(p))
		}
	}
	must(t, os.Remove(dir))
}

// TestPipelinedRemoveTree: rm -r of a tree whose listings the cache
// knows does not wait, directories included: an rmdir after the unlinks
// in flight below it is known to empty it.
func TestPipelinedRemoveTree(t *testing.T) {
	srvDir := t.TempDir()
	n := makeTree(t, filepath.Join(srvDir, "tree"), 4, 6)
	e := wbMount(t, wbSetup{srvDir: srvDir})
	must(t, os.WriteFile(e.p("first"), nil, 0o644)) // a first change, waited for
	// Know the tree (what a prefetch or an earlier walk leaves).
	must(t, filepath.WalkDir(e.p("tree"), func(string, fs.DirEntry, error) error { return nil }))
	must(t, e.m.Sync(context.Background()))
	e.proxy.SetConfig(wan.Config{RTT: 100 * time.Millisecond})
	rt := e.conn.Stats().RoundTrips
	rmr(t, e.p("tree"))
	got := e.conn.Stats().RoundTrips - rt
	t.Logf("rm -r of %d known entries at 100 ms RTT: %d round trips", n+1, got)
	if got > 2 {
		t.Errorf("rm -r of %d known entries took %d round trips, want at most 2", n+1, got)
	}
	must(t, e.m.Sync(context.Background()))
	if _, err := os.Lstat(filepath.Join(srvDir, "tree")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after sync the server still has the tree: %v", err)
	}
	if s := e.m.Surprises(); s != 0 {
		t.Errorf("%d surprises", s)
	}
}

// TestRmdirSurprise: another client creates a file in a directory the
// mount believes it is emptying: the rmdir answered at once fails on the
// server, is counted, and the directory is seen again with that file.
func TestRmdirSurprise(t *testing.T) {
	srvDir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(srvDir, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(srvDir, "d/a"), []byte("a"), 0o644))
	tr, err := lfs.New(srvDir, lfs.Options{})
	must(t, err)
	addr := serve(t, tr)
	other, err := client.Dial(context.Background(), addr, client.Options{})
	must(t, err)
	defer other.Close()
	e := wbMount(t, wbSetup{srvDir: srvDir, addr: addr, copts: cache.Options{NoWatch: true, Coherency: time.Hour}, noProxy: true})
	must(t, os.WriteFile(e.p("first"), nil, 0o644)) // a first change, waited for
	if _, err := os.ReadDir(e.p("d")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := zx.WriteFile(ctx, other.Tree(""), "/d/b", zx.Dir{zx.AMode: "0644"}, []byte("b")); err != nil {
		t.Fatal(err)
	}
	// The mount does not know of b: both answered at once.
	must(t, os.Remove(e.p("d/a")))
	must(t, os.Remove(e.p("d")))
	must(t, e.m.Sync(ctx))
	if n := e.m.Surprises(); n != 1 {
		t.Fatalf("%d surprises, want 1 (the rmdir)", n)
	}
	ents, err := os.ReadDir(e.p("d"))
	if err != nil || len(ents) != 1 || ents[0].Name() != "b" {
		t.Errorf("after the surprise d lists %v (%v), want b", ents, err)
	}
	if got := e.server(t, "d/b"); got != "b" {
		t.Errorf("the server's d/b: %q", got)
	}
}

// untar creates files in a new directory of the mount as tar -x does:
// open(O_CREAT|O_EXCL), write, futimens, fchown (to the owner it has),
// fchmod, close.
func untar(t *testing.T, dir string, files int, when time.Time) {
	t.Helper()
	must(t, os.Mkdir(dir, 0o700))
	for i := range files {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		must(t, err)
		_, err = f.Write([]byte(fmt.Sprintf("data of f%d", i)))
		must(t, err)
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(when.UnixNano())}
		must(t, unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), ts, 0))
		must(t, f.Chown(os.Getuid(), os.Getgid()))
		must(t, f.Chmod(0o644))
		must(t, f.Close())
	}
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(when.UnixNano())}
	must(t, unix.UtimesNanoAt(unix.AT_FDCWD, dir, ts, unix.AT_SYMLINK_NOFOLLOW))
	must(t, os.Lchown(dir, os.Getuid(), os.Getgid()))
	must(t, os.Chmod(dir, 0o755))
}

// checkUntar checks on the server's disk what untar made.
func checkUntar(t *testing.T, dir string, files int, when time.Time) {
	t.Helper()
	for i := range files {
		p := filepath.Join(dir, fmt.Sprintf("f%d", i))
		b, err := os.ReadFile(p)
		must(t, err)
		fi, err := os.Stat(p)
		must(t, err)
		if string(b) != fmt.Sprintf("data of f%d", i) || fi.Mode().Perm() != 0o644 || !fi.ModTime().Equal(when) {
			t.Errorf("f%d on the server: %q %v %v", i, b, fi.Mode(), fi.ModTime())
		}
	}
	fi, err := os.Stat(dir)
	must(t, err)
	if fi.Mode().Perm() != 0o755 || !fi.ModTime().Equal(when) {
		t.Errorf("the directory on the server: %v %v, want 0755 %v", fi.Mode(), fi.ModTime(), when)
	}
}

// TestUntarRoundTrips: unpacking files as tar -x does waits only for
// each file's data at close in the default mode (close-to-open), and for
// nothing with write-back.
func TestUntarRoundTrips(t *testing.T) {
	const files = 6
	when := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, wb := range []bool{false, true} {
		t.Run(fmt.Sprintf("writeback=%v", wb), func(t *testing.T) {
			s := wbSetup{}
			if wb {
				s.copts, s.opts = cache.Options{Journal: t.TempDir()}, mount.Options{WriteBack: true}
			}
			e := wbMount(t, s)
			must(t, os.WriteFile(e.p("first"), nil, 0o644)) // a first change, waited for
			must(t, e.m.Sync(context.Background()))
			e.proxy.SetConfig(wan.Config{RTT: 100 * time.Millisecond})
			rt, inv := e.conn.Stats().RoundTrips, e.m.OwnInvalidations()
			untar(t, e.p("x"), files, when)
			n := e.conn.Stats().RoundTrips - rt
			want := int64(files + 1) // close waits for each file's data
			if wb {
				want = 1
			}
			t.Logf("tar -x of a directory and %d files at 100 ms RTT: %d round trips", files, n)
			if n > want {
				t.Errorf("took %d round trips, want at most %d", n, want)
			}
			if !wb {
				// Close-to-open: each file's data is there already.
				for i := range files {
					if got := e.server(t, fmt.Sprintf("x/f%d", i)); got != fmt.Sprintf("data of f%d", i) {
						t.Errorf("f%d on the server after close: %q", i, got)
					}
				}
			}
			must(t, e.m.Sync(context.Background()))
			checkUntar(t, filepath.Join(e.srvDir, "x"), files, when)
			if s := e.m.Surprises(); s != 0 {
				t.Errorf("%d surprises", s)
			}
			if wb {
				// Everything went as the mount told the kernel: it
				// asks for no invalidation (each costs a notification
				// and a GETATTR), neither after journaling nor after
				// the replies to times, owner and mode (it was 4 per
				// file).
				if n := e.m.OwnInvalidations() - inv; n != 0 {
					t.Errorf("the mount invalidated the kernel's copies %d times for %d files", n, files)
				}
			}
			// What the mount shows agrees with the server.
			for i := range files {
				fi, err := os.Stat(e.p(fmt.Sprintf("x/f%d", i)))
				must(t, err)
				if fi.Size() != int64(len(fmt.Sprintf("data of f%d", i))) || fi.Mode().Perm() != 0o644 {
					t.Errorf("f%d on the mount: size %d mode %v", i, fi.Size(), fi.Mode())
				}
			}
		})
	}
}

// TestWriteAheadError: writes sent without waiting (a chmod of a file
// with unsent writes sends them first, tar-like) that the server refuses
// are reported by close.
func TestWriteAheadError(t *testing.T) {
	srvDir := t.TempDir()
	tr, err := lfs.New(srvDir, lfs.Options{})
	must(t, err)
	addr := serve(t, tr)
	other, err := client.Dial(context.Background(), addr, client.Options{})
	must(t, err)
	defer other.Close()
	e := wbMount(t, wbSetup{srvDir: srvDir, addr: addr, copts: cache.Options{NoWatch: true, Coherency: time.Hour}, noProxy: true})
	ctx := context.Background()
	f, err := os.Create(e.p("f"))
	must(t, err)
	defer f.Close()
	must(t, e.m.Sync(ctx))
	// Another client puts a directory in its place, unseen by the mount.
	must(t, <-other.Tree("").Remove(ctx, "/f"))
	if _, err := zx.Mkdir(ctx, other.Tree(""), "/f", 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = f.Write([]byte("data"))
	must(t, err)
	must(t, f.Chmod(0o600)) // answered at once; the data goes ahead of it
	if err := f.Close(); err == nil {
		t.Errorf("close returned no error for data the server refused")
	}
	if n := e.m.Surprises(); n < 1 {
		t.Errorf("%d surprises, want the refused write counted", n)
	}
	if fi, err := os.Stat(filepath.Join(srvDir, "f")); err != nil || !fi.IsDir() {
		t.Errorf("the server's f: %v %v, want the other client's directory", fi, err)
	}
}

// TestStatDirAfterClose: a program that makes a file and then stats its
// directory (cc1 stats "." at each start, after as wrote the object file
// of the one before) waits only for the file's data at close: the
// directory's attributes come with it, and are the server's.
func TestStatDirAfterClose(t *testing.T) {
	const files = 5
	e := wbMount(t, wbSetup{})
	must(t, os.Mkdir(e.p("obj"), 0o755)) // a first change, waited for
	if _, err := os.Stat(e.p("obj")); err != nil {
		t.Fatal(err)
	}
	e.proxy.SetConfig(wan.Config{RTT: 100 * time.Millisecond})
	rt := e.conn.Stats().RoundTrips
	for i := range files {
		must(t, os.WriteFile(e.p(fmt.Sprintf("obj/f%d.o", i)), []byte("object code"), 0o644))
		fi, err := os.Stat(e.p("obj"))
		must(t, err)
		sfi, err := os.Stat(filepath.Join(e.srvDir, "obj"))
		must(t, err)
		if !fi.ModTime().Equal(sfi.ModTime()) {
			t.Errorf("after f%d.o the mount shows the directory's mtime %v, the server has %v", i, fi.ModTime(), sfi.ModTime())
		}
	}
	n := e.conn.Stats().RoundTrips - rt
	t.Logf("%d × (create, write, close, stat of the directory) at 100 ms RTT: %d round trips", files, n)
	// Waiting for each stat would take twice as many. A change notice
	// of our own that arrives before a stat (a loaded machine) makes the
	// directory's attributes stale again: one more.
	if n > files+1 {
		t.Errorf("took %d round trips, want at most %d", n, files+1)
	}
}
