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

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/client"
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
