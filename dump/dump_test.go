package dump

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/memfs"
)

// trees are the kinds of source the tests run on.
var trees = []struct {
	name string
	new  func(t *testing.T) zx.Tree
}{
	{"memfs", func(t *testing.T) zx.Tree { return memfs.New() }},
	{"lfs", func(t *testing.T) zx.Tree {
		f, err := lfs.New(t.TempDir(), lfs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}},
	{"net", newNet}, // a client of a real server over lfs
}

func randBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// tick is a clock for mtimes: each file written gets a distinct one.
var tick atomic.Int64

func put(t *testing.T, tr zx.Tree, p, data string, mode uint32) {
	t.Helper()
	d := zx.Dir{}
	d.SetMode(mode)
	d.SetInt(zx.AMtime, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()+tick.Add(1)*1e6)
	if _, err := zx.WriteFile(t.Context(), tr, p, d, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, tr zx.Tree, p string) {
	t.Helper()
	if _, err := zx.Mkdir(t.Context(), tr, p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// state is what a tree held: entries and file contents by path.
type state map[string]struct {
	d    zx.Dir
	data []byte
}

// capture reads the whole tree with FindGet, without what excl prunes.
func capture(t *testing.T, tr zx.Tree, excl string) state {
	t.Helper()
	st := state{}
	var cur string
	for it := range tr.(zx.Finder).FindGet(t.Context(), "/", zx.FindOpts{Pred: excl, Spref: "/", Dpref: "/"}) {
		must(t, it.Err)
		if it.Dir != nil {
			cur = it.Dir.Path()
			st[cur] = struct {
				d    zx.Dir
				data []byte
			}{it.Dir, nil}
			continue
		}
		e := st[cur]
		e.data = append(e.data, it.Data...)
		st[cur] = e
	}
	return st
}

// checkSnapshot checks that the snapshot at pref of fs holds exactly st.
func checkSnapshot(t *testing.T, dfs *FS, pref string, st state) {
	t.Helper()
	ctx := t.Context()
	got := state{}
	var cur string
	for it := range dfs.FindGet(ctx, pref, zx.FindOpts{Spref: pref, Dpref: "/"}) {
		if it.Err != nil {
			t.Fatalf("findget %s: %v", pref, it.Err)
		}
		if it.Dir != nil {
			cur = it.Dir.Path()
			got[cur] = struct {
				d    zx.Dir
				data []byte
			}{it.Dir, []byte{}}
			continue
		}
		e := got[cur]
		e.data = append(e.data, it.Data...)
		got[cur] = e
	}
	if len(got) != len(st) {
		var g, w []string
		for p := range got {
			g = append(g, p)
		}
		for p := range st {
			w = append(w, p)
		}
		slices.Sort(g)
		slices.Sort(w)
		t.Fatalf("%s holds %v, want %v", pref, g, w)
	}
	for p, want := range st {
		g, ok := got[p]
		if !ok {
			t.Fatalf("%s: %s missing", pref, p)
		}
		for _, k := range []string{zx.AType, zx.AMode, zx.AMtime, zx.ATarget, zx.AUid, zx.AGid} {
			if g.d[k] != want.d[k] {
				t.Errorf("%s%s: %s=%q, want %q", pref, p, k, g.d[k], want.d[k])
			}
		}
		if want.d.Type() == zx.TypeFile {
			if !bytes.Equal(g.data, want.data) {
				t.Errorf("%s%s: contents differ (%d bytes, want %d)", pref, p, len(g.data), len(want.data))
			}
			if g.d.Size() != int64(len(want.data)) {
				t.Errorf("%s%s: size %d, want %d", pref, p, g.d.Size(), len(want.data))
			}
			// Get and Stat agree with FindGet.
			full := path.Join(pref, p)
			data, err := zx.ReadFile(ctx, dfs, full)
			must(t, err)
			if !bytes.Equal(data, want.data) {
				t.Errorf("get %s: contents differ", full)
			}
			if len(data) > 10 {
				var part bytes.Buffer
				zx.Copy(&part, dfs.Get(ctx, full, 3, 5))
				if !bytes.Equal(part.Bytes(), want.data[3:8]) {
					t.Errorf("get %s 3 5: %q", full, part.Bytes())
				}
			}
			d, err := zx.Stat(ctx, dfs, full)
			must(t, err)
			if d.Path() != full || d.Name() != path.Base(full) || len(d[AHash]) != 64 {
				t.Errorf("stat %s: %v", full, d)
			}
		}
		if want.d.IsDir() {
			ds, err := zx.ReadDir(ctx, dfs, path.Join(pref, p))
			must(t, err)
			var names []string
			for _, d := range ds {
				names = append(names, d.Name())
			}
			var wnames []string
			for q := range st {
				if q != "/" && path.Dir(q) == p {
					wnames = append(wnames, path.Base(q))
				}
			}
			slices.Sort(wnames)
			if strings.Join(names, ",") != strings.Join(wnames, ",") {
				t.Errorf("get %s%s: %v, want %v", pref, p, names, wnames)
			}
		}
	}
}

// blobs returns the number of blobs in a store and their total size.
func blobs(t *testing.T, dir string) (int, int64) {
	n, size := 0, int64(0)
	filepath.WalkDir(filepath.Join(dir, "blobs"), func(p string, d fs.DirEntry, err error) error {
		must(t, err)
		if d.Type().IsRegular() {
			fi, _ := d.Info()
			n++
			size += fi.Size()
		}
		return nil
	})
	return n, size
}

func day(d, h int) func() time.Time {
	return func() time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, time.Local) }
}

func TestThreeDumps(t *testing.T) {
	for _, tc := range trees {
		t.Run(tc.name, func(t *testing.T) { testThreeDumps(t, tc.new(t)) })
	}
}

func testThreeDumps(t *testing.T, tr zx.Tree) {
	ctx := t.Context()
	dir := t.TempDir()
	st, err := OpenStore(dir)
	must(t, err)
	big := string(randBytes(300<<10, 1)) // over smallBlob: goes through a temp file
	mkdir(t, tr, "/dir")
	mkdir(t, tr, "/keep")
	mkdir(t, tr, "/skip")
	put(t, tr, "/a.txt", "alpha\n", 0o644)
	put(t, tr, "/dir/b.txt", "beta\n", 0o600)
	put(t, tr, "/dir/c.bin", big, 0o644)
	put(t, tr, "/dup1", "same\n", 0o644)
	put(t, tr, "/dir/dup2", "same\n", 0o755)
	put(t, tr, "/keep/x", "x content\n", 0o644)
	put(t, tr, "/skip/secret", "do not dump\n", 0o600)
	put(t, tr, "/junk.o", "object\n", 0o600)
	_, err = zx.Mkdir(ctx, tr, "/empty", 0o700)
	must(t, err)
	r := <-tr.Put(ctx, "/link", zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: "a.txt"}, 0, nil)
	must(t, r.Err)

	excl := []string{"name=skip", "~*.o"}
	xp, err := ExcludePred(excl)
	must(t, err)
	opts := func(now func() time.Time) Options {
		return Options{Tree: "t", Source: "test", Exclude: excl, Now: now}
	}
	var states []state
	contents := map[string]bool{}
	record := func() {
		s := capture(t, tr, xp)
		for _, e := range s {
			if e.d.Type() == zx.TypeFile {
				contents[string(e.data)] = true
			}
		}
		states = append(states, s)
	}

	record()
	st1, err := st.Dump(ctx, tr, "/", opts(day(21, 3)))
	must(t, err)
	if st1.Snapshot != "t/2026/1121" || st1.Files != 6 || st1.Read != 6 || st1.NewBlobs != 5 || st1.Reused != 0 || st1.Errors != 0 {
		t.Errorf("first dump: %+v", st1)
	}
	if _, ok := states[0]["/skip"]; ok {
		t.Fatal("the exclude predicate does not prune")
	}

	// Day 2: an edit, an add, a delete, a rename, a mode change.
	put(t, tr, "/a.txt", "alpha, edited\n", 0o644)
	put(t, tr, "/new.txt", "new\n", 0o644)
	must(t, <-tr.Remove(ctx, "/dir/b.txt"))
	must(t, <-tr.Move(ctx, "/keep/x", "/keep/y"))
	_, err = zx.Wstat(ctx, tr, "/dup1", zx.Dir{zx.AMode: "0600"})
	must(t, err)
	record()
	st2, err := st.Dump(ctx, tr, "/", opts(day(22, 3)))
	must(t, err)
	// Read: a.txt, new.txt, keep/y (renamed: its path is new); dup1's
	// mtime did not change.
	if st2.Snapshot != "t/2026/1122" || st2.Read != 3 || st2.NewBlobs != 2 || st2.Reused != 3 || st2.Files != 6 {
		t.Errorf("second dump: %+v", st2)
	}

	// Same day again: a.txt back to its first contents, a copy of the
	// big file elsewhere.
	put(t, tr, "/a.txt", "alpha\n", 0o644)
	put(t, tr, "/dir/c-copy.bin", big, 0o644)
	record()
	st3, err := st.Dump(ctx, tr, "/", opts(day(22, 18)))
	must(t, err)
	if st3.Snapshot != "t/2026/1122.1" || st3.Read != 2 || st3.NewBlobs != 0 || st3.Reused != 5 {
		t.Errorf("third dump: %+v", st3)
	}

	// Nothing changed: nothing read.
	st4, err := st.Dump(ctx, tr, "/", opts(day(23, 3)))
	must(t, err)
	if st4.Read != 0 || st4.ReadBytes != 0 || st4.NewBlobs != 0 || st4.Reused != 7 {
		t.Errorf("dump of an unchanged tree: %+v", st4)
	}

	// The store holds each distinct content once.
	n, size := blobs(t, dir)
	var want int64
	for c := range contents {
		want += int64(len(c))
	}
	if n != len(contents) || size != want {
		t.Errorf("store holds %d blobs, %d bytes; want %d, %d", n, size, len(contents), want)
	}

	names, err := st.Snapshots("t")
	must(t, err)
	if strings.Join(names, " ") != "2026/1121 2026/1122 2026/1122.1 2026/1123" {
		t.Errorf("snapshots %v", names)
	}
	dfs, err := Open(dir)
	must(t, err)
	for i, name := range names[:3] {
		checkSnapshot(t, dfs, "/t/"+name, states[i])
	}

	// History.
	hist := func(p string) string {
		vs, err := st.History("t", p)
		must(t, err)
		var s []string
		for _, v := range vs {
			if v.Dir == nil {
				s = append(s, v.Snapshot+" absent")
			} else {
				s = append(s, v.Snapshot)
			}
		}
		return strings.Join(s, ", ")
	}
	for p, want := range map[string]string{
		"/a.txt":          "2026/1121, 2026/1122, 2026/1122.1",
		"/dir/b.txt":      "2026/1121, 2026/1122 absent",
		"/dir/c.bin":      "2026/1121",
		"/dup1":           "2026/1121, 2026/1122",
		"/keep/x":         "2026/1121, 2026/1122 absent",
		"/keep/y":         "2026/1122",
		"/new.txt":        "2026/1122",
		"/dir":            "2026/1121, 2026/1122, 2026/1122.1",
		"/keep":           "2026/1121, 2026/1122",
		"/empty":          "2026/1121",
		"/link":           "2026/1121",
		"/skip":           "",
		"/dir/c-copy.bin": "2026/1122.1",
	} {
		if got := hist(p); got != want {
			t.Errorf("history of %s: %s, want %s", p, got, want)
		}
	}
	for which, want := range map[string]string{"-1": "alpha\n", "-2": "alpha, edited\n", "-3": "alpha\n", "2026/1122": "alpha, edited\n", "2026/1123": "alpha\n"} {
		v, err := st.Pick("t", "/a.txt", which)
		must(t, err)
		data, err := st.ReadBlob(v.Dir[AHash])
		must(t, err)
		if string(data) != want {
			t.Errorf("version %s of /a.txt: %q, want %q", which, data, want)
		}
	}
	if _, err := st.Pick("t", "/a.txt", "-4"); !errors.Is(err, zx.ErrNotExist) {
		t.Errorf("version -4 of a file with 3: %v", err)
	}
}

func TestFS(t *testing.T) {
	ctx := t.Context()
	tr := memfs.New()
	put(t, tr, "/f", "hello\n", 0o644)
	dir := t.TempDir()
	st, err := OpenStore(dir)
	must(t, err)
	_, err = st.Dump(ctx, tr, "/", Options{Tree: "a", Now: day(1, 1)})
	must(t, err)
	_, err = st.Dump(ctx, tr, "/", Options{Tree: "b", Now: day(2, 1)})
	must(t, err)
	dfs, err := Open(dir)
	must(t, err)
	var paths []string
	for it := range dfs.Find(ctx, "/", zx.FindOpts{}) {
		must(t, it.Err)
		paths = append(paths, it.Dir.Path()+":"+it.Dir.Type())
	}
	want := "/:d /a:d /a/2026:d /a/2026/1101:d /a/2026/1101/f:- /b:d /b/2026:d /b/2026/1102:d /b/2026/1102/f:-"
	if got := strings.Join(paths, " "); got != want {
		t.Errorf("find /: %s\nwant %s", got, want)
	}
	// Predicates and rewriting work as in any tree.
	var got []string
	for it := range dfs.Find(ctx, "/b", zx.FindOpts{Pred: "type=- | depth<1", Spref: "/b", Dpref: "/x"}) {
		must(t, it.Err)
		got = append(got, it.Dir.Path())
	}
	if strings.Join(got, " ") != "/x /x/2026/1102/f" {
		t.Errorf("find with a predicate: %v", got)
	}
	for _, p := range []string{"/c", "/a/2025", "/a/2026/1102", "/a/2026/1101/g", "/a/2026/1101/f/g"} {
		if _, err := zx.Stat(ctx, dfs, p); !errors.Is(err, zx.ErrNotExist) && !errors.Is(err, zx.ErrNotDir) {
			t.Errorf("stat %s: %v", p, err)
		}
	}
	// Read-only.
	for what, err := range map[string]error{
		"put":       (<-dfs.Put(ctx, "/a/2026/1101/f", zx.Dir{zx.AType: "-"}, 0, strings.NewReader("x"))).Err,
		"wstat":     (<-dfs.Wstat(ctx, "/a/2026/1101/f", zx.Dir{zx.AMode: "0777"})).Err,
		"remove":    <-dfs.Remove(ctx, "/a/2026/1101/f"),
		"removeall": <-dfs.RemoveAll(ctx, "/a"),
		"move":      <-dfs.Move(ctx, "/a/2026/1101/f", "/a/2026/1101/g"),
		"new":       (<-dfs.Put(ctx, "/new", zx.Dir{zx.AType: "d"}, 0, nil)).Err,
	} {
		if !errors.Is(err, zx.ErrReadOnly) {
			t.Errorf("%s: %v, want read-only", what, err)
		}
	}
	// A cancelled stream ends.
	cctx, cancel := context.WithCancel(ctx)
	c := dfs.Find(cctx, "/", zx.FindOpts{})
	<-c
	cancel()
	for range c {
	}
}

// failing is a tree that fails with an I/O error once it has sent a
// number of file contents, as a server whose connection breaks.
type failing struct {
	zx.Tree
	left atomic.Int64
}

func (f *failing) Get(ctx context.Context, p string, off, count int64) <-chan zx.Item {
	if f.left.Add(-1) < 0 {
		c := make(chan zx.Item, 1)
		c <- zx.Item{Err: zx.E(zx.ErrIO, "get", p, "connection lost")}
		close(c)
		return c
	}
	return f.Tree.Get(ctx, p, off, count)
}

func (f *failing) Find(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	return f.Tree.(zx.Finder).Find(ctx, p, o)
}

func (f *failing) FindGet(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	c := make(chan zx.Item)
	go func() {
		defer close(c)
		for it := range f.Tree.(zx.Finder).FindGet(ctx, p, o) {
			if it.Dir != nil && it.Dir.Type() == zx.TypeFile && f.left.Add(-1) < 0 {
				c <- zx.Item{Err: zx.E(zx.ErrIO, "findget", p, "connection lost")}
				for range f.Tree.(zx.Finder).FindGet(ctx, "/", zx.FindOpts{Pred: "false"}) {
				}
				return
			}
			c <- it
		}
	}()
	return c
}

func TestInterrupted(t *testing.T) {
	ctx := t.Context()
	tr := memfs.New()
	for i := range 20 {
		put(t, tr, "/f"+string(rune('a'+i)), strings.Repeat(string(rune('a'+i)), 1000), 0o644)
	}
	dir := t.TempDir()
	st, err := OpenStore(dir)
	must(t, err)

	// The first dump fails midway: no snapshot.
	f := &failing{Tree: tr}
	f.left.Store(5)
	if _, err := st.Dump(ctx, f, "/", Options{Tree: "t", Now: day(1, 1)}); !errors.Is(err, zx.ErrIO) {
		t.Fatalf("dump of a failing tree: %v", err)
	}
	if names, _ := st.Snapshots("t"); len(names) != 0 {
		t.Fatalf("failed dump left snapshots %v", names)
	}
	good, err := st.Dump(ctx, tr, "/", Options{Tree: "t", Now: day(1, 2)})
	must(t, err)
	want := capture(t, tr, "")

	// Changes, and a dump that fails on the Gets.
	for i := range 10 {
		put(t, tr, "/f"+string(rune('a'+i)), "changed "+string(rune('a'+i)), 0o644)
	}
	f.left.Store(4)
	if _, err := st.Dump(ctx, f, "/", Options{Tree: "t", Now: day(2, 1)}); !errors.Is(err, zx.ErrIO) {
		t.Fatalf("dump of a failing tree: %v", err)
	}
	// And one cancelled midway.
	cctx, cancel := context.WithCancel(ctx)
	var got int64
	_, err = st.Dump(cctx, tr, "/", Options{Tree: "t", Now: day(2, 2), Window: 1, Progress: func(n int64) {
		if got += n; got > 20 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) && !errors.Is(err, zx.ErrCanceled) {
		t.Fatalf("cancelled dump: %v", err)
	}
	names, err := st.Snapshots("t")
	must(t, err)
	if len(names) != 1 || "t/"+names[0] != good.Snapshot {
		t.Fatalf("snapshots after interrupted dumps: %v", names)
	}
	dfs, err := Open(dir)
	must(t, err)
	checkSnapshot(t, dfs, "/"+good.Snapshot, want)
	if ents, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(ents) != 0 {
		t.Errorf("temporary files left: %v", ents)
	}

	// The next dump works, and stores what the interrupted ones did not.
	next, err := st.Dump(ctx, tr, "/", Options{Tree: "t", Now: day(2, 3)})
	must(t, err)
	if next.Snapshot != "t/2026/1102" || next.Read != 10 {
		t.Errorf("dump after interrupted ones: %+v", next)
	}
	checkSnapshot(t, dfs, "/"+next.Snapshot, capture(t, tr, ""))
	n, _ := blobs(t, dir)
	if n != 30 {
		t.Errorf("%d blobs, want 30", n)
	}
}

func TestSourceMismatch(t *testing.T) {
	tr := memfs.New()
	st, err := OpenStore(t.TempDir())
	must(t, err)
	_, err = st.Dump(t.Context(), tr, "/", Options{Tree: "t", Source: "/a"})
	must(t, err)
	if _, err = st.Dump(t.Context(), tr, "/", Options{Tree: "t", Source: "/b"}); err == nil {
		t.Error("dump of another source into the same tree")
	}
	if _, err = st.Dump(t.Context(), tr, "/", Options{Tree: "t", Source: "/b", Force: true}); err != nil {
		t.Error(err)
	}
	if _, err = st.Dump(t.Context(), tr, "/", Options{Tree: "../x"}); !errors.Is(err, zx.ErrInvalid) {
		t.Errorf("bad tree name: %v", err)
	}
	if _, err := ExcludePred([]string{"(bad"}); err == nil {
		t.Error("bad exclude predicate accepted")
	}
}
