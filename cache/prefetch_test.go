package cache_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/wan"
)

// prefetchTree makes, in a new directory, a tree of 1+6+36+216 = 259
// directories, with two files in each leaf and one in each other
// directory: 734 entries.
func prefetchTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	var mk func(dir string, depth int)
	mk = func(dir string, depth int) {
		if depth == 3 {
			for _, f := range []string{"f0", "f1"} {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(dir), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return
		}
		if err := os.WriteFile(filepath.Join(dir, "f0"), []byte(dir), 0o644); err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			sub := filepath.Join(dir, fmt.Sprintf("d%d", i))
			if err := os.Mkdir(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			mk(sub, depth+1)
		}
	}
	mk(root, 0)
	return root
}

func serveDir(t *testing.T, dir string) (zx.Tree, string) {
	t.Helper()
	fs, err := lfs.New(dir, lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs, serve(t, fs)
}

// walk lists the tree at "/" as ls -lR does: a stat of the root, then
// for each directory its listing and a stat of each entry. It returns
// each path's type and size.
func walk(ctx context.Context, tr zx.Tree) (map[string]string, error) {
	return walkFrom(ctx, tr, "/")
}

func walkFrom(ctx context.Context, tr zx.Tree, root string) (map[string]string, error) {
	got := make(map[string]string)
	d, err := zx.Stat(ctx, tr, root)
	if err != nil {
		return nil, err
	}
	got[root] = d.Type()
	var rec func(p string) error
	rec = func(p string) error {
		ds, err := zx.ReadDir(ctx, tr, p)
		if err != nil {
			return err
		}
		for _, d := range ds {
			sd, err := zx.Stat(ctx, tr, d.Path())
			if err != nil {
				return err
			}
			got[sd.Path()] = sd.Type() + " " + sd[zx.ASize]
			if sd.IsDir() {
				if err := rec(sd.Path()); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return got, rec(root)
}

func sameTree(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if maps.Equal(got, want) {
		return
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if got[p] != want[p] {
			t.Errorf("%s: %s is %q, want %q", what, p, got[p], want[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: %s is %q, want nothing", what, p, got[p])
		}
	}
}

// TestPrefetchWalk walks a cold tree of 259 directories through the
// cache over a 20 ms link: the stat of the root and its listing (which
// starts the subtree prefetch in the same round trip) are the only round
// trips.
func TestPrefetchWalk(t *testing.T) {
	ctx := t.Context()
	fs, addr := serveDir(t, prefetchTree(t))
	want, err := walk(ctx, fs)
	if err != nil || len(want) != 734 {
		t.Fatalf("walking the server's tree: %d entries, %v", len(want), err)
	}
	conn := dial(t, lag(t, addr, 20*time.Millisecond))
	// Waits not bounded in time: the count must not depend on the load.
	c := newCache(t, conn.Tree(""), cache.Options{PrefetchWait: -1})
	if !c.Watching() {
		t.Fatal("no watch")
	}
	before := rounds(conn)
	got, err := walk(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, "cold walk", got, want)
	if n := rounds(conn) - before; n != 2 {
		t.Errorf("cold walk of 259 directories: %d round trips, want 2", n)
	}
	st := c.Stats()
	t.Logf("stats %+v", st)
	if st.Prefetches != 1 || st.Prefetched != 734 || st.PrefetchCuts != 0 {
		t.Errorf("prefetches %d entries %d cut %d, want 1, 734, 0", st.Prefetches, st.Prefetched, st.PrefetchCuts)
	}
	before = rounds(conn)
	if got, err = walk(ctx, c); err != nil {
		t.Fatal(err)
	}
	sameTree(t, "warm walk", got, want)
	if n := rounds(conn) - before; n != 0 {
		t.Errorf("warm walk: %d round trips, want 0", n)
	}
}

// TestPrefetchLookups looks up names deep in a tree right after the
// first listing started a prefetch: they wait for the prefetch, present
// or missing, instead of asking the server. So that the first lookup
// certainly waits (on a loaded machine the find's frames could otherwise
// all arrive before the listing's reply), the served tree's find stops
// before /d5 until a request waits for it.
func TestPrefetchLookups(t *testing.T) {
	ctx := t.Context()
	fs, err := lfs.New(prefetchTree(t), lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	h := &heldFind{FS: fs, held: "/d5", release: make(chan struct{})}
	addr := serve(t, h)
	p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{RTT: 20 * time.Millisecond, Rate: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	conn := dial(t, p.Addr())
	c := newCache(t, conn.Tree(""), cache.Options{PrefetchWait: -1})
	cache.SetPrefetchStall(c, time.Minute)
	if _, err := zx.Stat(ctx, c, "/"); err != nil {
		t.Fatal(err)
	}
	before := rounds(conn)
	if _, err := zx.ReadDir(ctx, c, "/"); err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	go func() {
		defer close(released)
		defer close(h.release)
		for c.Stats().PrefetchWaits == 0 && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
	}()
	t.Cleanup(func() { <-released })
	d, err := zx.Stat(ctx, c, "/d5/d4/d3/f1")
	if err != nil || d.Path() != "/d5/d4/d3/f1" || d.Size() == 0 {
		t.Fatalf("stat of a deep file: %v %v", d, err)
	}
	for _, p := range []string{"/d5/d4/d3/missing", "/d5/d4/a", "/d5/zz"} {
		if _, err := zx.Stat(ctx, c, p); !errors.Is(err, zx.ErrNotExist) && !errors.Is(err, zx.ErrNotDir) {
			t.Errorf("stat %s: %v, want not found", p, err)
		}
	}
	ds, err := zx.ReadDir(ctx, c, "/d2/d2")
	if err != nil || len(ds) != 7 {
		t.Fatalf("listing /d2/d2: %d entries, %v", len(ds), err)
	}
	if n := rounds(conn) - before; n != 1 {
		t.Errorf("listing, then lookups and a listing below it: %d round trips, want 1", n)
	}
	if st := c.Stats(); st.PrefetchWaits == 0 {
		t.Errorf("no request waited for the prefetch: %+v", st)
	}
}

// TestPrefetchCutOff walks the tree with prefetches bounded to 100
// entries: each but the last is cut off, the listings stay complete and
// correct, and a cold listing in what a cut-off prefetch left unexplored
// resumes it.
func TestPrefetchCutOff(t *testing.T) {
	ctx := t.Context()
	fs, addr := serveDir(t, prefetchTree(t))
	want, err := walk(ctx, fs)
	if err != nil {
		t.Fatal(err)
	}
	conn := dial(t, lag(t, addr, 20*time.Millisecond))
	c := newCache(t, conn.Tree(""), cache.Options{PrefetchEntries: 100, PrefetchWait: -1})
	before := rounds(conn)
	got, err := walk(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, "cut-off walk", got, want)
	n := rounds(conn) - before
	st := c.Stats()
	t.Logf("%d round trips; stats %+v", n, st)
	if st.PrefetchCuts < 734/100 || st.PrefetchCuts+1 < st.Prefetches {
		t.Errorf("prefetches %d, cut %d: want at least %d, all but one cut", st.Prefetches, st.PrefetchCuts, 734/100)
	}
	// Without prefetch it would be 260. A resumed prefetch sends again
	// the directories it skips (at most 3 levels of 7): 80 new entries
	// at least, for 734 in all; plus the stat of the root.
	if n > 734/80+2 {
		t.Errorf("walk with prefetches of 100 entries: %d round trips, want at most %d", n, 734/80+2)
	}
	if got, err = walk(ctx, c); err != nil {
		t.Fatal(err)
	}
	sameTree(t, "warm walk", got, want)
}

// TestPrefetchJump walks a subtree far after where a prefetch was cut
// off: it gets a find of its own, not the rest of the cut-off one (which
// would stream what lies between first, and be cut off again before
// getting there).
func TestPrefetchJump(t *testing.T) {
	ctx := t.Context()
	fs, addr := serveDir(t, prefetchTree(t))
	want, err := walkFrom(ctx, fs, "/d5/d2")
	if err != nil || len(want) != 20 {
		t.Fatalf("walking the server's /d5/d2: %d entries, %v", len(want), err)
	}
	conn := dial(t, lag(t, addr, 20*time.Millisecond))
	c := newCache(t, conn.Tree(""), cache.Options{PrefetchEntries: 100, PrefetchWait: -1})
	if _, err := zx.Stat(ctx, c, "/"); err != nil {
		t.Fatal(err)
	}
	if _, err := zx.ReadDir(ctx, c, "/"); err != nil {
		t.Fatal(err)
	}
	// The root's prefetch must have had its first reply (it is cut off
	// after 100): a request opened while it still waits for one is not a
	// round trip of its own, and the count below would be 1.
	waitFor(t, func() bool { return c.Stats().PrefetchCuts == 1 })
	before := rounds(conn)
	got, err := walkFrom(ctx, c, "/d5/d2")
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, "walk of /d5/d2", got, want)
	// The stat of /d5/d2 (with the listing of /d5), and its listing
	// with its prefetch: 2. It is 1 when the listing of /d5, sent with
	// the stat, has not had its reply yet when the listing of /d5/d2 is
	// sent (the stat's reply came first): that request then overlaps a
	// waiting one and is not a round trip of its own.
	if n := rounds(conn) - before; n < 1 || n > 2 {
		t.Errorf("walk of /d5/d2 after a prefetch of / cut off in /d0: %d round trips, want 2 (or 1)", n)
	}
	if st := c.Stats(); st.Prefetches != 2 || st.PrefetchCuts != 1 {
		t.Errorf("prefetches %d, cut %d: want 2, 1", st.Prefetches, st.PrefetchCuts)
	}
}

// TestPrefetchCoherence changes the tree while a prefetch streams it
// (through a slow link) and after: directly on the server's disk and
// through another client. The cache comes to see every change (by the
// notices: with a watch, nothing cached expires).
func TestPrefetchCoherence(t *testing.T) {
	ctx := t.Context()
	dir := prefetchTree(t)
	fs, addr := serveDir(t, dir)
	p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{RTT: 20 * time.Millisecond, Rate: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	conn := dial(t, p.Addr())
	other := dial(t, addr).Tree("")
	c := newCache(t, conn.Tree(""), cache.Options{})

	change := func(i int) {
		t.Helper()
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		// On the server's disk: a new file early in the walk, one late,
		// a removed file and a new directory late.
		n := fmt.Sprint(i)
		must(os.WriteFile(filepath.Join(dir, "d0/d0/new"+n), []byte("x"), 0o644))
		must(os.WriteFile(filepath.Join(dir, "d5/d5/d5/new"+n), []byte("xy"), 0o644))
		must(os.Remove(filepath.Join(dir, "d5/d4/d"+n+"/f1")))
		must(os.Mkdir(filepath.Join(dir, "d5/d3/dir"+n), 0o755))
		// Through another client: a file written, one removed.
		_, err := zx.WriteFile(ctx, other, "/d4/d4/w"+n, nil, []byte("written"))
		must(err)
		must(<-other.Remove(ctx, "/d5/d2/d"+n+"/f0"))
	}
	converges := func(what string) {
		t.Helper()
		want, err := walk(ctx, fs)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			got, err := walk(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if maps.Equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				sameTree(t, what, got, want)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	if _, err := zx.Stat(ctx, c, "/"); err != nil {
		t.Fatal(err)
	}
	// The listing starts the prefetch, which then streams for a while.
	if _, err := zx.ReadDir(ctx, c, "/"); err != nil {
		t.Fatal(err)
	}
	change(1)
	converges("changed during the prefetch")
	if st := c.Stats(); st.Prefetches == 0 || st.PrefetchCuts != 0 {
		t.Errorf("stats %+v: want a prefetch, not cut", st)
	}
	// After it: every directory is listed in the cache.
	change(2)
	converges("changed after the prefetch")
}

// heldFind is a tree whose finds stop before the first entry at or
// under held, until release is closed (or the find's context ends): a
// prefetch that cannot have reached held, however the link and the
// scheduler go.
type heldFind struct {
	*lfs.FS
	held    string
	release chan struct{}
}

func (h *heldFind) Find(ctx context.Context, path string, o zx.FindOpts) <-chan zx.Item {
	in := h.FS.Find(ctx, path, o)
	out := make(chan zx.Item)
	go func() {
		defer close(out)
		for it := range in {
			if it.Dir != nil && zx.HasPrefix(it.Dir.Path(), h.held) {
				select {
				case <-h.release:
				case <-ctx.Done():
					return
				}
			}
			select {
			case out <- it:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// TestPrefetchWaitHonoursContext cancels a listing waiting for a
// prefetch that is held up: the served tree's find stops before /d5, so
// /d5/d5 cannot have arrived, and the cache would wait for a prefetch
// without progress for a minute (SetPrefetchStall). The wait ends with
// the listing's context (200 ms). A wait that did not would end only
// when the find goes on, which the test lets it do after 10 s.
func TestPrefetchWaitHonoursContext(t *testing.T) {
	fs, err := lfs.New(prefetchTree(t), lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	h := &heldFind{FS: fs, held: "/d5", release: make(chan struct{})}
	addr := serve(t, h)
	p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{RTT: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	conn := dial(t, p.Addr())
	c := newCache(t, conn.Tree(""), cache.Options{PrefetchWait: -1})
	cache.SetPrefetchStall(c, time.Minute)
	ctx := t.Context()
	if _, err := zx.Stat(ctx, c, "/"); err != nil {
		t.Fatal(err)
	}
	if _, err := zx.ReadDir(ctx, c, "/"); err != nil {
		t.Fatal(err)
	}
	listed := make(chan struct{})
	watchdog := make(chan bool, 1)
	go func() {
		select {
		case <-listed:
			watchdog <- false
		case <-time.After(10 * time.Second):
			watchdog <- true
		}
		close(h.release)
	}()
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = zx.ReadDir(cctx, c, "/d5/d5")
	close(listed)
	if <-watchdog {
		t.Fatal("listing of a path a held-up prefetch will bring: the wait did not end with its context")
	}
	if err == nil {
		t.Fatal("listing with a context that expired while waiting: no error")
	}
	if st := c.Stats(); st.PrefetchWaits != 1 || st.Prefetches != 1 {
		t.Errorf("prefetches %d, waits %d; want 1, 1", st.Prefetches, st.PrefetchWaits)
	}
}

// TestPrefetchWaitBound looks up a name far ahead of a prefetch that is
// held up (the served tree's find stops before /d5, so the name cannot
// have arrived, whatever order the listing and the find's frames take on
// the link; the cache would wait for a prefetch without progress for a
// minute): the lookup stops waiting after PrefetchWait (250 ms here) and
// asks the server. The time is not asserted, the round trip is.
func TestPrefetchWaitBound(t *testing.T) {
	fs, err := lfs.New(prefetchTree(t), lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	h := &heldFind{FS: fs, held: "/d5", release: make(chan struct{})}
	addr := serve(t, h)
	t.Cleanup(func() { close(h.release) }) // before the server closes
	p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{RTT: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	conn := dial(t, p.Addr())
	c := newCache(t, conn.Tree(""), cache.Options{})
	cache.SetPrefetchStall(c, time.Minute)
	ctx := t.Context()
	if _, err := zx.Stat(ctx, c, "/"); err != nil {
		t.Fatal(err)
	}
	if _, err := zx.ReadDir(ctx, c, "/"); err != nil {
		t.Fatal(err)
	}
	before := rounds(conn)
	d, err := zx.Stat(ctx, c, "/d5/d5/d5/f1")
	if err != nil || d.Path() != "/d5/d5/d5/f1" || d.Size() == 0 {
		t.Fatalf("stat: %v %v", d, err)
	}
	if n := rounds(conn) - before; n != 1 {
		t.Errorf("lookup far ahead of a held-up prefetch: %d round trips, want 1 (its own)", n)
	}
	if st := c.Stats(); st.PrefetchWaits != 1 || st.PrefetchGiveUps != 1 {
		t.Errorf("waits %d, gave up %d; want 1, 1", st.PrefetchWaits, st.PrefetchGiveUps)
	}
}
