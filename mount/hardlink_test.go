package mount_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/lfs"
)

// linkedTree makes under dir/tree 20 directories of 30 files each and
// dir/copy, a copy of it made of hard links (cp -al): every file has
// two names, nlink 2.
func linkedTree(t *testing.T, dir string) {
	t.Helper()
	tree := filepath.Join(dir, "tree")
	must(t, os.Mkdir(tree, 0o755))
	for i := range 20 {
		d := filepath.Join(tree, fmt.Sprintf("d%02d", i))
		must(t, os.Mkdir(d, 0o755))
		for j := range 30 {
			must(t, os.WriteFile(filepath.Join(d, fmt.Sprintf("f%02d", j)), []byte(d), 0o644))
		}
	}
	run(t, "", nil, "cp", "-al", tree, filepath.Join(dir, "copy"))
}

// TestHardLinkedWalk runs find, ls -lR and stat over a cold tree whose
// files all have two names (a tree and its cp -al copy) on a new mount
// over a 20 ms link: it costs about what a tree without links costs
// (TestPrefetchWalk), not a round trip per file.
func TestHardLinkedWalk(t *testing.T) {
	need(t, "find", "ls", "cp", "stat")
	srvDir := t.TempDir()
	linkedTree(t, srvDir)
	tr, err := lfs.New(srvDir, lfs.Options{})
	must(t, err)
	t.Cleanup(func() { tr.Close() })
	addr := serve(t, tr)
	want := strings.Count(run(t, "", nil, "find", srvDir), "\n")
	if want != 1+2*(1+20*31) {
		t.Fatalf("find on the server's disk: %d entries", want)
	}
	copts := cache.Options{PrefetchWait: -1}

	e := mnt(t, setup{addr: addr, rtt: 20 * time.Millisecond, copts: copts})
	if got := strings.Count(run(t, "", nil, "find", e.dir), "\n"); got != want {
		t.Errorf("find on the mount: %d entries, want %d", got, want)
	}
	n := e.conn.Stats().RoundTrips
	t.Logf("find: %d round trips; cache %+v", n, e.c.Stats())
	if n > 3 {
		t.Errorf("find over a cold hard-linked tree of 1,242 entries: %d round trips, want at most 3", n)
	}
	before := e.conn.Stats().RoundTrips
	out := run(t, "", nil, "ls", "-lR", e.dir)
	if n := e.conn.Stats().RoundTrips - before; n != 0 {
		t.Errorf("ls -lR after find: %d round trips, want 0", n)
	}
	if c := len(regexp.MustCompile(`(?m)^-\S+ 2 `).FindAllString(out, -1)); c != 1200 {
		t.Errorf("ls -lR: %d entries with link count 2, want 1200 files", c)
	}
	before = e.conn.Stats().RoundTrips
	st := strings.Fields(run(t, "", nil, "stat", "-c", "%h %i", e.p("tree/d00/f00"), e.p("copy/d00/f00"), e.p("copy/d19/f29")))
	if n := e.conn.Stats().RoundTrips - before; n != 0 {
		t.Errorf("stat after find: %d round trips, want 0", n)
	}
	if len(st) != 6 || st[0] != "2" || st[2] != "2" || st[4] != "2" || st[1] != st[3] || st[1] == st[5] {
		t.Errorf("stat of tree/d00/f00, copy/d00/f00, copy/d19/f29 (links, inode): %q; want 2 links each, the first two one inode", st)
	}

	e = mnt(t, setup{addr: addr, rtt: 20 * time.Millisecond, copts: copts})
	run(t, "", nil, "ls", "-lR", e.dir)
	n = e.conn.Stats().RoundTrips
	t.Logf("ls -lR: %d round trips; cache %+v", n, e.c.Stats())
	if n > 2 {
		t.Errorf("ls -lR over a cold hard-linked tree: %d round trips, want at most 2", n)
	}
}

// TestHardLinkCoherence: with every name of a hard-linked tree cached by
// a mount (b, over a 20 ms link), a change made through one name, by
// another mount (a) or by b itself, is seen through the other names at
// once: contents, and link counts after ln and rm.
func TestHardLinkCoherence(t *testing.T) {
	need(t, "find", "cp")
	srvDir := t.TempDir()
	linkedTree(t, srvDir)
	tr, err := lfs.New(srvDir, lfs.Options{})
	must(t, err)
	t.Cleanup(func() { tr.Close() })
	addr := serve(t, tr)
	a := mnt(t, setup{addr: addr})
	b := mnt(t, setup{addr: addr, rtt: 20 * time.Millisecond, copts: cache.Options{PrefetchWait: -1}})
	if !a.c.Watching() || !b.c.Watching() {
		t.Fatal("caches have no watch")
	}
	run(t, "", nil, "find", b.dir)
	syncDir := func(e *env) {
		t.Helper()
		d, err := os.Open(e.dir)
		must(t, err)
		defer d.Close()
		must(t, d.Sync())
	}
	nlink := func(p string) uint64 {
		t.Helper()
		fi, err := os.Stat(p)
		must(t, err)
		return uint64(fi.Sys().(*syscall.Stat_t).Nlink)
	}
	for _, p := range []string{"tree/d00/f00", "copy/d00/f00", "copy/d01/f00"} {
		if got := readFile(t, b.p(p)); got != filepath.Join(srvDir, "tree", filepath.Dir(p)[5:]) {
			t.Fatalf("b reads %s: %q", p, got)
		}
	}

	// Written through a's tree name, read through b's copy name.
	must(t, os.WriteFile(a.p("tree/d00/f00"), []byte("written through tree/d00/f00 on a"), 0o644))
	if got := readFile(t, b.p("copy/d00/f00")); got != "written through tree/d00/f00 on a" {
		t.Errorf("b reads copy/d00/f00 after a wrote tree/d00/f00: %q", got)
	}
	// Written through b's copy name, read through b's and a's tree name.
	must(t, os.WriteFile(b.p("copy/d01/f00"), []byte("written through copy/d01/f00 on b"), 0o644))
	if got := readFile(t, b.p("tree/d01/f00")); got != "written through copy/d01/f00 on b" {
		t.Errorf("b reads tree/d01/f00 after writing copy/d01/f00: %q", got)
	}
	if got := readFile(t, a.p("tree/d01/f00")); got != "written through copy/d01/f00 on b" {
		t.Errorf("a reads tree/d01/f00 after b wrote copy/d01/f00: %q", got)
	}
	if b, err := os.ReadFile(filepath.Join(srvDir, "tree/d01/f00")); err != nil || string(b) != "written through copy/d01/f00 on b" {
		t.Errorf("server's disk, tree/d01/f00 after b wrote copy/d01/f00: %q, %v", b, err)
	}

	// Names made and removed by a: b's link counts follow.
	must(t, os.Link(a.p("tree/d02/f00"), a.p("tree/d02/extra")))
	syncDir(a)
	if n := nlink(b.p("copy/d02/f00")); n != 3 {
		t.Errorf("b: copy/d02/f00 has %d links after a made a third name, want 3", n)
	}
	must(t, os.Remove(a.p("tree/d02/extra")))
	syncDir(a)
	if n := nlink(b.p("copy/d02/f00")); n != 2 {
		t.Errorf("b: copy/d02/f00 has %d links after a removed the third name, want 2", n)
	}
	must(t, os.Remove(a.p("copy/d03/f00")))
	syncDir(a)
	if n := nlink(b.p("tree/d03/f00")); n != 1 {
		t.Errorf("b: tree/d03/f00 has %d links after a removed copy/d03/f00, want 1", n)
	}
	// A name b never looked up (not listed: a new directory).
	must(t, os.Mkdir(a.p("new"), 0o755))
	must(t, os.Link(a.p("tree/d04/f00"), a.p("new/f")))
	syncDir(a)
	if n := nlink(b.p("copy/d04/f00")); n != 3 {
		t.Errorf("b: copy/d04/f00 has %d links after a made new/f, want 3", n)
	}
	must(t, os.Remove(a.p("new/f")))
	syncDir(a)
	if n := nlink(b.p("copy/d04/f00")); n != 2 {
		t.Errorf("b: copy/d04/f00 has %d links after a removed new/f, want 2", n)
	}

	// Names made and removed by b itself.
	must(t, os.Link(b.p("copy/d05/f00"), b.p("copy/d05/extra")))
	if n := nlink(b.p("tree/d05/f00")); n != 3 {
		t.Errorf("b: tree/d05/f00 has %d links after b made a third name, want 3", n)
	}
	if got := readFile(t, b.p("copy/d05/extra")); got != filepath.Join(srvDir, "tree/d05") {
		t.Errorf("b reads copy/d05/extra: %q", got)
	}
	must(t, os.Remove(b.p("copy/d05/extra")))
	if n := nlink(b.p("tree/d05/f00")); n != 2 {
		t.Errorf("b: tree/d05/f00 has %d links after b removed the third name, want 2", n)
	}
	syncDir(b)
	if n := nlink(a.p("copy/d05/f00")); n != 2 {
		t.Errorf("a: copy/d05/f00 has %d links after b made and removed a name, want 2", n)
	}
}
