package cache_test

import (
	"sync"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/memfs"
)

// TestHardLinks: a cache trusts the entries and data of a file with two
// names like any other (no round trip to stat or read either name again),
// and sees a change made through one name, by another client or by
// itself, through the other at once: contents, and link counts after
// links made and removed, also through a name it never looked up.
func TestHardLinks(t *testing.T) {
	ctx := t.Context()
	addr := serve(t, memfs.New())
	c1 := newCache(t, dial(t, addr).Tree(""), cache.Options{})
	conn2 := dial(t, lag(t, addr, 20*time.Millisecond))
	var mu sync.Mutex
	invals := map[string]bool{}
	c2 := newCache(t, conn2.Tree(""), cache.Options{NoPrefetch: true, OnInvalidate: func(p string, what cache.Inval) {
		mu.Lock()
		invals[p] = true
		mu.Unlock()
	}})
	if !c1.Watching() || !c2.Watching() {
		t.Fatal("no watch")
	}
	if _, err := zx.WriteFile(ctx, c1, "/a", nil, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if r := <-zx.Link(ctx, c1, "/a", "/b"); r.Err != nil {
		t.Fatal(r.Err)
	}
	read := func(p, want string) {
		t.Helper()
		if b, err := zx.ReadFile(ctx, c2, p); err != nil || string(b) != want {
			t.Fatalf("c2 reads %s: %q, %v; want %q", p, b, err, want)
		}
	}
	links := func(p string, want int64) {
		t.Helper()
		d, err := zx.Stat(ctx, c2, p)
		if err != nil || d.Int(zx.ANlink) != want {
			t.Fatalf("c2 stats %s: %v, %v; want nlink %d", p, d, err, want)
		}
	}
	read("/a", "one")
	read("/b", "one")
	before := rounds(conn2)
	read("/a", "one")
	read("/b", "one")
	links("/a", 2)
	links("/b", 2)
	if n := rounds(conn2) - before; n != 0 {
		t.Errorf("c2 read and stat /a and /b again: %d round trips, want 0 (cached)", n)
	}

	// Through c1's /a, seen through c2's /b; and reported to c2's layer
	// above for /b, which it may know only by that name.
	if _, err := zx.WriteFile(ctx, c1, "/a", nil, []byte("two, longer")); err != nil {
		t.Fatal(err)
	}
	read("/b", "two, longer")
	mu.Lock()
	if !invals["/b"] {
		t.Errorf("c2 reported no invalidation of /b after /a changed (got %v)", invals)
	}
	mu.Unlock()
	read("/a", "two, longer")
	// Same size, through c2's own /b, seen through c2's /a and c1's /a.
	if _, err := zx.WriteFile(ctx, c2, "/b", nil, []byte("TWO, LONGER")); err != nil {
		t.Fatal(err)
	}
	read("/a", "TWO, LONGER")
	if b, err := zx.ReadFile(ctx, c1, "/a"); err != nil || string(b) != "TWO, LONGER" {
		t.Fatalf("c1 reads /a after c2 wrote /b: %q, %v", b, err)
	}

	// Names made and removed by c1.
	if r := <-zx.Link(ctx, c1, "/a", "/c"); r.Err != nil {
		t.Fatal(r.Err)
	}
	links("/b", 3)
	if err := <-c1.Remove(ctx, "/c"); err != nil {
		t.Fatal(err)
	}
	links("/b", 2)
	// In a directory c2 never listed: it cannot know what the name was.
	if _, err := zx.Mkdir(ctx, c1, "/dir", 0o755); err != nil {
		t.Fatal(err)
	}
	if r := <-zx.Link(ctx, c1, "/a", "/dir/c"); r.Err != nil {
		t.Fatal(r.Err)
	}
	links("/b", 3)
	if err := <-c1.Remove(ctx, "/dir/c"); err != nil {
		t.Fatal(err)
	}
	links("/b", 2)
	if err := <-c1.Remove(ctx, "/a"); err != nil {
		t.Fatal(err)
	}
	links("/b", 1)

	// Names made and removed by c2.
	if r := <-zx.Link(ctx, c2, "/b", "/d"); r.Err != nil {
		t.Fatal(r.Err)
	}
	links("/b", 2)
	links("/d", 2)
	if err := <-c2.Remove(ctx, "/d"); err != nil {
		t.Fatal(err)
	}
	links("/b", 1)
}
