package cache_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/server"
	"github.com/zxfs/zx/wan"
	"github.com/zxfs/zx/zxtest"
)

func serve(t testing.TB, tr zx.Tree) string {
	t.Helper()
	_, addr := serveClosable(t, tr)
	return addr
}

// serveClosable serves tr on loopback until the test ends, and returns
// the server too, for tests that stop it early.
func serveClosable(t testing.TB, tr zx.Tree) (*server.Server, string) {
	t.Helper()
	srv, err := server.New(map[string]zx.Tree{"main": tr}, "main", server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return srv, l.Addr().String()
}

func lag(t testing.TB, addr string, rtt time.Duration) string {
	t.Helper()
	p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{RTT: rtt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p.Addr()
}

func dial(t testing.TB, addr string) *client.Conn {
	t.Helper()
	c, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newCache(t testing.TB, tr zx.Tree, opts cache.Options) *cache.Cache {
	c := cache.New(tr, opts)
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformanceOverNetwork(t *testing.T) {
	zxtest.TestTree(t, func(t *testing.T) zx.Tree {
		return newCache(t, dial(t, serve(t, memfs.New())).Tree(""), cache.Options{})
	}, zxtest.Options{})
}

func TestConformanceNoWatch(t *testing.T) {
	zxtest.TestTree(t, func(t *testing.T) zx.Tree {
		return newCache(t, memfs.New(), cache.Options{NoWatch: true})
	}, zxtest.Options{})
}

func TestConformanceMemfs(t *testing.T) {
	zxtest.TestTree(t, func(t *testing.T) zx.Tree {
		return newCache(t, memfs.New(), cache.Options{})
	}, zxtest.Options{})
}

func rounds(c *client.Conn) int64 { return c.Stats().RoundTrips }

// TestRoundTrips counts the round trips of cached requests through a WAN
// emulator at 20 ms.
func TestRoundTrips(t *testing.T) {
	ctx := t.Context()
	fs := memfs.New()
	zxtest.MkTree(t, fs, "/d/a:hello", "/d/b:world", "/d/sub/", "/big:"+string(make([]byte, 1000)))
	conn := dial(t, lag(t, serve(t, fs), 20*time.Millisecond))
	c := newCache(t, conn.Tree(""), cache.Options{})
	if !c.Watching() {
		t.Fatal("no watch")
	}
	step := func(what string, want int64, f func()) {
		t.Helper()
		time.Sleep(30 * time.Millisecond) // let prefetches of earlier steps land
		before := rounds(conn)
		f()
		if got := rounds(conn) - before; got != want {
			t.Errorf("%s: %d round trips, want %d", what, got, want)
		}
	}
	stat := func(p string) error { _, err := zx.Stat(ctx, c, p); return err }
	step("stat /d/a cold (with listing of /d)", 1, func() {
		if err := stat("/d/a"); err != nil {
			t.Fatal(err)
		}
	})
	// The listing of /d came with the stat: wait until it has landed,
	// which is what the next step counts on.
	waitFor(t, func() bool {
		for _, p := range []string{"/d/b", "/d/sub", "/d/missing"} {
			if _, ok := c.Known(p); !ok {
				return false
			}
		}
		return true
	})
	step("stat siblings and a missing name", 0, func() {
		for _, p := range []string{"/d/b", "/d/sub", "/d/a"} {
			if err := stat(p); err != nil {
				t.Fatal(err)
			}
		}
		if err := stat("/d/missing"); !errors.Is(err, zx.ErrNotExist) {
			t.Fatalf("stat missing: %v", err)
		}
	})
	step("list /d", 0, func() {
		ds, err := zx.ReadDir(ctx, c, "/d")
		if err != nil || len(ds) != 3 {
			t.Fatalf("readdir: %v %v", ds, err)
		}
	})
	step("list cold /d/sub", 1, func() {
		if _, err := zx.ReadDir(ctx, c, "/d/sub"); err != nil {
			t.Fatal(err)
		}
	})
	step("stat missing twice", 1, func() {
		for range 2 {
			if err := stat("/nope/x"); !errors.Is(err, zx.ErrNotExist) {
				t.Fatalf("stat missing: %v", err)
			}
		}
	})
	step("read a file twice", 1, func() {
		for range 2 {
			b, err := zx.ReadFile(ctx, c, "/d/a")
			if err != nil || string(b) != "hello" {
				t.Fatalf("read: %q %v", b, err)
			}
		}
	})
	step("read a range of the cached file", 0, func() {
		var buf bytes.Buffer
		if _, err := zx.Copy(&buf, c.Get(ctx, "/d/a", 1, 3)); err != nil || buf.String() != "ell" {
			t.Fatalf("read range: %q %v", buf.String(), err)
		}
	})
	step("write then stat", 1, func() {
		if _, err := zx.WriteFile(ctx, c, "/d/a", nil, []byte("HELLO!")); err != nil {
			t.Fatal(err)
		}
		d, err := zx.Stat(ctx, c, "/d/a")
		if err != nil || d.Size() != 6 {
			t.Fatalf("stat after write: %v %v", d, err)
		}
	})
}

// TestCoherence changes a file through one cache and sees it through
// another, invalidated by the watch.
func TestCoherence(t *testing.T) {
	ctx := t.Context()
	addr := serve(t, memfs.New())
	var mu sync.Mutex
	var invals []string
	c1 := newCache(t, dial(t, addr).Tree(""), cache.Options{})
	c2 := newCache(t, dial(t, addr).Tree(""), cache.Options{Coherency: -1, OnInvalidate: func(p string, what cache.Inval) {
		mu.Lock()
		invals = append(invals, p)
		mu.Unlock()
	}})
	if _, err := zx.WriteFile(ctx, c1, "/f", nil, []byte("one")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { b, _ := zx.ReadFile(ctx, c2, "/f"); return string(b) == "one" })
	if _, err := zx.WriteFile(ctx, c1, "/f", nil, []byte("two!")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { b, _ := zx.ReadFile(ctx, c2, "/f"); return string(b) == "two!" })
	if err := <-c1.Remove(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, err := zx.Stat(ctx, c2, "/f"); return errors.Is(err, zx.ErrNotExist) })
	mu.Lock()
	defer mu.Unlock()
	if len(invals) == 0 {
		t.Fatal("no invalidations reported")
	}
}

// A change made by another client is seen at once once its call returned,
// with no polling, by a cache further from the server than the writer:
// the server held the writer's reply until this cache had applied the
// notice and the layer above had applied its invalidations (the barrier,
// which the mount sets).
func TestCoherenceAcked(t *testing.T) {
	ctx := t.Context()
	srv, addr := serveClosable(t, memfs.New())
	conn1 := dial(t, addr)
	c1 := newCache(t, conn1.Tree(""), cache.Options{})
	c2 := newCache(t, dial(t, lag(t, addr, 50*time.Millisecond)).Tree(""), cache.Options{})
	if _, err := zx.WriteFile(ctx, c1, "/f", nil, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if b, err := zx.ReadFile(ctx, c2, "/f"); string(b) != "one" {
		t.Fatalf("after the create: %q %v", b, err)
	}
	dones := make(chan func(), 1)
	c2.SetInvalidateBarrier(func(done func()) { dones <- done })
	wrote := make(chan error, 1)
	go func() {
		_, err := zx.WriteFile(ctx, c1, "/f", nil, []byte("two!"))
		wrote <- err
	}()
	select {
	case done := <-dones:
		// The upper layer holds the acknowledgement: the writer waits
		// (a stat on its connection is answered, the write is not).
		if _, err := zx.Stat(ctx, conn1.Tree(""), "/f"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-wrote:
			t.Fatalf("the write returned (%v) before the other cache's upper layer was done", err)
		default:
		}
		done()
	case err := <-wrote:
		t.Fatalf("the write returned (%v) before the other cache reached its barrier", err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	c2.SetInvalidateBarrier(nil)
	if b, err := zx.ReadFile(ctx, c2, "/f"); string(b) != "two!" {
		t.Fatalf("after the rewrite: %q %v", b, err)
	}
	if err := <-c1.Remove(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	if _, err := zx.Stat(ctx, c2, "/f"); !errors.Is(err, zx.ErrNotExist) {
		t.Fatalf("after the remove: %v", err)
	}
	for _, l := range srv.Status(ctx).Lines {
		if strings.HasPrefix(l, "callbacks ") {
			if !strings.HasSuffix(l, " waits 3 lagged 0") {
				t.Fatalf("server: %s; want 3 writes that waited for c2, none lagged", l)
			}
			return
		}
	}
	t.Fatal("no callbacks line in the server's status")
}

// Two caches writing the same file at once do not wait for each other's
// acknowledgement until the bound: a notice of the other's change is
// applied and acknowledged even while a write of our own on the path is
// in flight (whose reply may wait for the other's acknowledgement).
func TestCoherenceAckedConcurrentWrites(t *testing.T) {
	ctx := t.Context()
	srv, addr := serveClosable(t, memfs.New())
	c1 := newCache(t, dial(t, lag(t, addr, 10*time.Millisecond)).Tree(""), cache.Options{})
	c2 := newCache(t, dial(t, lag(t, addr, 10*time.Millisecond)).Tree(""), cache.Options{})
	var wg sync.WaitGroup
	for i, c := range []*cache.Cache{c1, c2} {
		wg.Go(func() {
			for j := range 20 {
				if _, err := zx.WriteFile(ctx, c, "/f", nil, []byte{byte('a' + i), byte('0' + j)}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, l := range srv.Status(ctx).Lines {
		if strings.HasPrefix(l, "callbacks ") {
			if !strings.HasSuffix(l, " lagged 0") {
				t.Fatalf("a writer waited for the other until the bound: %s", l)
			}
			return
		}
	}
	t.Fatal("no callbacks line in the server's status")
}

func waitFor(t *testing.T, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPutRetriedThroughCache: a whole-file put through the cache, from
// data that can be read again, is sent again after a cut by a
// reconnecting client (the cache's copy of the data must not hide that it
// can seek), and the cache keeps the contents written once, not the bytes
// of both attempts.
func TestPutRetriedThroughCache(t *testing.T) {
	ctx := context.Background()
	tr := memfs.New()
	p, err := wan.Listen("127.0.0.1:0", serve(t, tr), wan.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	conn, err := client.Dial(ctx, p.Addr(), client.Options{Reconnect: true, ReconnectWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := newCache(t, conn.Tree(""), cache.Options{MaxFileCache: 8 << 20, MemBytes: 64 << 20})
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	p.SetConfig(wan.Config{CutAfter: 256 << 10})
	go func() {
		// One cut; the retry goes through.
		for p.Stats().Cuts == 0 {
			time.Sleep(time.Millisecond)
		}
		p.SetConfig(wan.Config{})
	}()
	d := zx.Dir{zx.AType: zx.TypeFile}
	d.SetInt(zx.ASize, int64(len(data)))
	if r := <-c.Put(ctx, "/f", d, 0, bytes.NewReader(data)); r.Err != nil {
		t.Fatalf("put through the cache across a cut: %v", r.Err)
	}
	if p.Stats().Cuts == 0 {
		t.Fatal("no connection was cut")
	}
	if got, err := zx.ReadFile(ctx, tr, "/f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the server has %d bytes (%v), want the %d written", len(got), err, len(data))
	}
	rt := conn.Stats().RoundTrips
	if got, err := zx.ReadFile(ctx, c, "/f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read through the cache: %d bytes (%v), want the %d written", len(got), err, len(data))
	}
	if n := conn.Stats().RoundTrips - rt; n != 0 {
		t.Errorf("read back after the put made %d round trips, want 0 (the cache keeps what was written)", n)
	}
}
