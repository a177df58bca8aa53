package cache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/zxtest"
)

// plainTree is a tree that cannot watch: only zx.Tree's methods show.
type plainTree struct{ zx.Tree }

// countingWatcher counts the watches asked of a tree.
type countingWatcher struct {
	zx.Tree
	w     zx.Watcher
	calls atomic.Int32
}

func (c *countingWatcher) Watch(ctx context.Context, p string) <-chan zx.Event {
	c.calls.Add(1)
	return c.w.Watch(ctx, p)
}

// TestServerCannotWatch checks that a cache over a server whose tree
// cannot watch asks once, is ready at once, and serves with the coherency
// window, instead of asking again (and dropping what it cached) with
// backoff for ever.
func TestServerCannotWatch(t *testing.T) {
	fs := memfs.New()
	zxtest.MkTree(t, fs, "/a:hello")
	conn := dial(t, serve(t, plainTree{fs}))
	remote := conn.Tree("")
	cw := &countingWatcher{Tree: remote, w: remote}
	c := newCache(t, cw, cache.Options{WatchTimeout: 5 * time.Second})
	if c.Watching() {
		t.Fatal("watching a tree that cannot watch")
	}
	ctx := t.Context()
	if b, err := zx.ReadFile(ctx, c, "/a"); err != nil || string(b) != "hello" {
		t.Fatalf("read: %q %v", b, err)
	}
	// The first retries would come after 100, 200 and 400 ms.
	time.Sleep(time.Second)
	if n := cw.calls.Load(); n != 1 {
		t.Fatalf("%d watches asked of a tree that cannot watch, want 1", n)
	}
}
