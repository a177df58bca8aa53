package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/memfs"
)

// TestKnownEmptyRemovesInFlight: a directory whose every name is being
// removed is known empty while the removes are in flight (rm -r's rmdir
// need not wait for them); one name left, or another write in flight
// below it, and it is not.
func TestKnownEmptyRemovesInFlight(t *testing.T) {
	ctx := context.Background()
	fs := memfs.New()
	for _, p := range []string{"/d", "/d/sub", "/e"} {
		if _, err := zx.Mkdir(ctx, fs, p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/d/a", "/d/b", "/d/sub/x", "/e/a", "/e/b"} {
		if _, err := zx.WriteFile(ctx, fs, p, nil, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	conn := dial(t, lag(t, serve(t, fs), 200*time.Millisecond))
	c := newCache(t, conn.Tree(""), cache.Options{})
	for _, p := range []string{"/d", "/d/sub", "/e"} {
		if _, err := zx.ReadDir(ctx, c, p); err != nil {
			t.Fatal(err)
		}
	}
	if c.KnownEmpty("/d") {
		t.Fatal("d is known empty with its files in it")
	}
	var ecs []<-chan error
	for _, p := range []string{"/d/a", "/d/b", "/d/sub/x", "/e/a"} {
		ecs = append(ecs, c.Remove(ctx, p))
	}
	// In flight for a round trip of 200 ms.
	if !c.KnownEmpty("/d/sub") {
		t.Error("sub is not known empty with the remove of its file in flight")
	}
	if c.KnownEmpty("/d") {
		t.Error("d is known empty with sub not being removed")
	}
	ecs = append(ecs, c.Remove(ctx, "/d/sub"))
	if !c.KnownEmpty("/d") {
		t.Error("d is not known empty with the removes of all it holds in flight")
	}
	if c.KnownEmpty("/e") {
		t.Error("e is known empty with b not being removed")
	}
	wc := c.Wstat(ctx, "/e/b", zx.Dir{zx.AMode: "0600"})
	ecs = append(ecs, c.Remove(ctx, "/e/b"))
	if c.KnownEmpty("/e") {
		t.Error("e is known empty with a wstat in flight below it")
	}
	for _, ec := range ecs {
		if err := <-ec; err != nil {
			t.Fatal(err)
		}
	}
	if r := <-wc; r.Err != nil {
		t.Fatal(r.Err)
	}
	for _, p := range []string{"/d", "/e"} {
		if !c.KnownEmpty(p) {
			t.Errorf("%s not known empty once its removes are in", p)
		}
	}
	if d, ok := c.Known("/d/sub"); !ok || d != nil {
		t.Errorf("sub once removed: %v (known %v), want known gone", d, ok)
	}
}
