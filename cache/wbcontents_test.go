package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/wan"
)

// TestWriteBackContents: while the link to the server is stalled, the
// cache answers reads and stats of files with pending write-back records
// from the records: whole files, writes in place over data it held,
// records stacked on records, truncations; not over data it did not
// hold, nor past its bounds. A move takes the contents away while in
// flight and gives them back when it fails. Nothing is sent to the
// server for any of it; once the records are acknowledged, the server
// answers again.
func TestWriteBackContents(t *testing.T) {
	fs := memfs.New()
	ctx := context.Background()
	for p, data := range map[string]string{"/cached": "0123456789", "/uncached": "abcdef"} {
		if _, err := zx.WriteFile(ctx, fs, p, zx.Dir{zx.AMode: "0644"}, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := wan.Listen("127.0.0.1:0", serve(t, fs), wan.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	conn := dial(t, p.Addr())
	c, err := cache.Open(conn.Tree(""), cache.Options{Journal: t.TempDir(), MaxFileCache: 64})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if b, err := zx.ReadFile(ctx, c, "/cached"); err != nil || string(b) != "0123456789" {
		t.Fatalf("read %q, %v", b, err)
	}

	p.Stall(-1)
	t.Cleanup(p.Resume)
	wb := c.WriteBack()
	write := func(path string, ops []cache.Op, data string, size int64) {
		t.Helper()
		if err := wb.Write(cache.Origin{}, path, ops, []byte(data), size); err != nil {
			t.Fatal(err)
		}
	}
	before := conn.Stats().Streams
	// A hang guard: a read that went to the stalled server would fail
	// when it is done, and be counted.
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	read := func(path, want string, ok bool) {
		t.Helper()
		got, has := wb.Contents(path)
		if has != ok || ok && string(got) != want {
			t.Errorf("Contents(%s) = %q, %v; want %q, %v", path, got, has, want, ok)
		}
		if !ok {
			return
		}
		b, err := zx.ReadFile(gctx, c, path)
		if err != nil || string(b) != want {
			t.Errorf("read %s: %q, %v; want %q", path, b, err, want)
		}
		var it zx.Item
		for it = range c.Get(gctx, path, 2, 3) {
			break
		}
		if w := want[min(2, len(want)):min(5, len(want))]; string(it.Data) != w {
			t.Errorf("get %s [2,5): %q, %v; want %q", path, it.Data, it.Err, w)
		}
	}

	write("/new", whole("hello"), "hello", 5)
	read("/new", "hello", true)
	if _, ok := wb.Entry("/new"); ok {
		t.Error("an entry before SetEntry")
	}
	wb.SetEntry("/new", zx.Dir{zx.AType: zx.TypeFile, zx.APath: "/new", zx.AName: "new", zx.AMode: "0644", zx.ASize: "0"})
	write("/new", []cache.Op{{Off: 5, Len: 3}}, " yo", 8)
	read("/new", "hello yo", true)
	if d, err := zx.Stat(gctx, c, "/new"); err != nil || d.Size() != 8 {
		t.Errorf("stat /new: %v, %v; want size 8", d, err)
	}
	write("/new", []cache.Op{{Off: 2, Trunc: true}, {Off: 4, Trunc: true}, {Off: 4, Len: 1}}, "!", 5)
	read("/new", "he\x00\x00!", true)

	write("/cached", []cache.Op{{Off: 3, Len: 3}}, "abc", 10)
	read("/cached", "012abc6789", true)
	write("/uncached", []cache.Op{{Off: 1, Len: 1}}, "B", 6)
	read("/uncached", "", false) // over data the cache does not hold
	write("/big", whole("more than MaxFileCache, 64 bytes, so it is not kept in memory.."), "more than MaxFileCache, 64 bytes, so it is not kept in memory..", 65)
	read("/big", "", false)
	write("/cached", []cache.Op{{Off: 100, Len: 1}}, "x", 101) // grows past it
	read("/cached", "", false)

	// A move takes the contents away while in flight; failing, gives them back.
	mctx, mcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	ec := c.Move(mctx, "/new", "/nodir/new") // fails on the server too, if it gets there
	read("/new", "", false)
	if err := <-ec; err == nil {
		t.Fatal("a move over a stalled link succeeded")
	}
	mcancel()
	read("/new", "he\x00\x00!", true)
	// A wstat (chmod, truncate(2)) changes what the queue answers with
	// at once; not answered for want of the link, it may still be
	// applied: the change stays.
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	wc := c.Wstat(wctx, "/new", zx.Dir{zx.AMode: "0600", zx.ASize: "2"})
	read("/new", "he", true)
	if d, ok := wb.Entry("/new"); !ok || d[zx.AMode] != "0600" || d.Size() != 2 {
		t.Errorf("entry of /new after a wstat: %v, %v", d, ok)
	}
	if r := <-wc; r.Err == nil {
		t.Fatal("a wstat over a stalled link succeeded")
	}
	wcancel()
	read("/new", "he", true)
	if n := conn.Stats().Streams - before; n != 9+2 {
		// The records' requests (a stream per op: seven records, one
		// of three ops), the move and the wstat: no read, no stat.
		t.Errorf("%d streams with the link stalled, want 11 (the records', the move, the wstat)", n)
	}

	p.Resume()
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	if err := wb.Sync(sctx); err != nil {
		t.Fatal(err)
	}
	read("/new", "", false)
	// The wstat, timed out in the stalled link, may have reached the
	// server when it resumed, or not.
	if b, err := zx.ReadFile(sctx, c, "/new"); err != nil || string(b) != "he\x00\x00!" && string(b) != "he" {
		t.Errorf("read /new from the server: %q, %v", b, err)
	}
	if b, err := zx.ReadFile(sctx, fs, "/cached"); err != nil || string(b) != "012abc6789"+string(make([]byte, 90))+"x" {
		t.Errorf("the server has /cached = %q, %v", b, err)
	}
}
