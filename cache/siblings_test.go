package cache_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/wan"
)

// content is the contents of the i-th test file of n bytes.
func content(name string, n int) []byte {
	return bytes.Repeat([]byte(name+"."), n/(len(name)+1)+1)[:n]
}

// sibTree makes /d with n small files f00..f(n-1) of size bytes each, a
// big file, a subdirectory with a file and an empty file.
func sibTree(t *testing.T, n, size int) *memfs.FS {
	t.Helper()
	ctx := t.Context()
	fs := memfs.New()
	for _, p := range []string{"/d", "/d/sub"} {
		if _, err := zx.Mkdir(ctx, fs, p, 0755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, b []byte) {
		if _, err := zx.WriteFile(ctx, fs, p, nil, b); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		name := fmt.Sprintf("f%02d", i)
		write("/d/"+name, content(name, size))
	}
	write("/d/big", content("big", 300<<10))
	write("/d/sub/x", content("x", 100))
	write("/d/empty", nil)
	return fs
}

// sibEnv is a cache over a lagged connection to a server of fs.
type sibEnv struct {
	conn *client.Conn
	c    *cache.Cache
}

func newSibEnv(t *testing.T, fs zx.Tree, cfg wan.Config, opts cache.Options) *sibEnv {
	t.Helper()
	p, err := wan.Listen("127.0.0.1:0", serve(t, fs), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	conn := dial(t, p.Addr())
	c := newCache(t, conn.Tree(""), opts)
	if !c.Watching() {
		t.Fatal("no watch")
	}
	return &sibEnv{conn: conn, c: c}
}

// holdStream makes the cache's sibling streams stop before installing p
// until release is called (at the latest when the test ends, before the
// cache closes, even on failure).
func (e *sibEnv) holdStream(t *testing.T, p string) (release func()) {
	held := make(chan struct{})
	release = sync.OnceFunc(func() { close(held) })
	t.Cleanup(release)
	cache.SetSiblingHook(e.c, func(q string) {
		if q == p {
			<-held
		}
	})
	return release
}

// count returns the round trips f costs.
func (e *sibEnv) count(f func()) int64 {
	before := rounds(e.conn)
	f()
	return rounds(e.conn) - before
}

func (e *sibEnv) read(t *testing.T, p string, want []byte) {
	t.Helper()
	b, err := zx.ReadFile(t.Context(), e.c, p)
	if err != nil || !bytes.Equal(b, want) {
		t.Fatalf("read %s: %d bytes (want %d), %v", p, len(b), len(want), err)
	}
}

// idle waits until no sibling stream is in flight.
func (e *sibEnv) idle(t *testing.T) {
	t.Helper()
	waitFor(t, func() bool { return e.c.Stats().SiblingLive == 0 })
}

func (e *sibEnv) list(t *testing.T, dir string) {
	t.Helper()
	if _, err := zx.ReadDir(t.Context(), e.c, dir); err != nil {
		t.Fatal(err)
	}
}

// TestSiblingsRoundTrips reads every file of a cold directory: the small
// files cost one round trip in all; the big file is not streamed (its own
// round trip), nor the file below, nor the empty file.
func TestSiblingsRoundTrips(t *testing.T) {
	const n, size = 40, 3000
	e := newSibEnv(t, sibTree(t, n, size), wan.Config{RTT: 20 * time.Millisecond}, cache.Options{})
	if got := e.count(func() { e.list(t, "/d") }); got != 1 {
		t.Errorf("listing /d: %d round trips, want 1", got)
	}
	got := e.count(func() {
		for i := range n {
			name := fmt.Sprintf("f%02d", i)
			e.read(t, "/d/"+name, content(name, size))
		}
	})
	if got != 1 {
		t.Errorf("reading %d small files of a cold directory: %d round trips, want 1", n, got)
	}
	e.idle(t)
	st := e.c.Stats()
	if st.SiblingStreams != 1 || st.SiblingFiles != n-1 || st.SiblingBytes != (n-1)*size {
		t.Errorf("streams %d files %d bytes %d; want 1, %d, %d", st.SiblingStreams, st.SiblingFiles, st.SiblingBytes, n-1, (n-1)*size)
	}
	if got := e.count(func() { e.read(t, "/d/big", content("big", 300<<10)) }); got != 1 {
		t.Errorf("reading the big file: %d round trips, want 1", got)
	}
	e.idle(t)
	if st2 := e.c.Stats(); st2.SiblingFiles != st.SiblingFiles {
		t.Errorf("reading the big file streamed %d more files", st2.SiblingFiles-st.SiblingFiles)
	}
	// A big file read first in a directory streams nothing.
	e2 := newSibEnv(t, sibTree(t, n, size), wan.Config{RTT: 20 * time.Millisecond}, cache.Options{})
	e2.list(t, "/d")
	e2.read(t, "/d/big", content("big", 300<<10))
	if st := e2.c.Stats(); st.SiblingStreams != 0 {
		t.Errorf("reading a big file started %d sibling streams, want 0", st.SiblingStreams)
	}
	if got := e.count(func() { e.read(t, "/d/sub/x", content("x", 100)) }); got != 1 {
		t.Errorf("reading /d/sub/x: %d round trips, want 1 (not streamed with /d)", got)
	}
}

// TestSiblingsByteBound: a stream brings at most Options.SiblingBytes,
// whether it chose its files from a cached listing (the server sends no
// more) or not (the cache cancels it).
func TestSiblingsByteBound(t *testing.T) {
	const n, size, bound = 40, 4096, 5 * 4096
	t.Run("listed", func(t *testing.T) {
		e := newSibEnv(t, sibTree(t, n, size), wan.Config{RTT: 20 * time.Millisecond}, cache.Options{SiblingBytes: bound})
		e.list(t, "/d")
		before := e.conn.Stats().BytesIn
		got := e.count(func() {
			for i := range n {
				name := fmt.Sprintf("f%02d", i)
				e.read(t, "/d/"+name, content(name, size))
			}
		})
		// Each miss brings the file and the 5 after it.
		if want := int64((n + 5) / 6); got != want {
			t.Errorf("reading %d files with a bound of 5 files: %d round trips, want %d", n, got, want)
		}
		e.idle(t)
		st := e.c.Stats()
		if st.SiblingFiles != n-(n+5)/6 {
			t.Errorf("%d files streamed, want %d", st.SiblingFiles, n-(n+5)/6)
		}
		if in := e.conn.Stats().BytesIn - before; in > n*size*3/2 {
			t.Errorf("%d bytes received for %d bytes of files", in, n*size)
		}
	})
	t.Run("growing", func(t *testing.T) {
		// A directory's first stream brings an eighth of the bound;
		// each next one, while its files are read, twice the last.
		e := newSibEnv(t, sibTree(t, n, size), wan.Config{RTT: 20 * time.Millisecond}, cache.Options{SiblingBytes: 16 * size, SiblingFile: size})
		e.list(t, "/d")
		got := e.count(func() {
			for i := range n {
				name := fmt.Sprintf("f%02d", i)
				e.read(t, "/d/"+name, content(name, size))
			}
		})
		// Misses: f00 (streams 2 files), f03 (4), f08 (8), f17 (16), f34 (the last 5).
		if got != 5 {
			t.Errorf("reading %d files, streams of 2, 4, 8, 16, 16 files: %d round trips, want 5", n, got)
		}
	})
	t.Run("unlisted", func(t *testing.T) {
		e := newSibEnv(t, sibTree(t, n, size), wan.Config{RTT: 20 * time.Millisecond}, cache.Options{SiblingBytes: bound, NoPrefetch: true})
		if _, err := zx.Stat(t.Context(), e.c, "/d/f00"); err != nil {
			t.Fatal(err)
		}
		e.read(t, "/d/f00", content("f00", size))
		e.idle(t)
		st := e.c.Stats()
		if st.SiblingStreams != 1 || st.SiblingBytes > bound || st.SiblingFiles == 0 {
			t.Errorf("streams %d files %d bytes %d; want 1 stream of at most %d bytes", st.SiblingStreams, st.SiblingFiles, st.SiblingBytes, bound)
		}
	})
}

// TestSiblingsCoherence changes a sibling on the server after its stream
// was issued (the server took its snapshot): the stale copy the stream
// brings must not be served.
func TestSiblingsCoherence(t *testing.T) {
	const n, size = 40, 16 << 10
	fs := sibTree(t, n, size)
	// A slow link: the stream takes about 0.6 s.
	e := newSibEnv(t, fs, wan.Config{RTT: 40 * time.Millisecond, Rate: 1 << 20}, cache.Options{})
	ctx := t.Context()
	last := fmt.Sprintf("/d/f%02d", n-1)
	// The stale copy of the last file is installed only once the notice
	// is in: the order that needs the cache's check (the other order the
	// notice itself corrects).
	release := e.holdStream(t, last)
	e.list(t, "/d")
	e.read(t, "/d/f00", content("f00", size))
	ev := e.c.Stats().Events
	fresh := []byte("changed after the stream started")
	// Directly on the server's tree: the cache learns of it by a notice.
	if _, err := zx.WriteFile(ctx, fs, last, nil, fresh); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.c.Stats().Events > ev })
	release()
	for i := 1; i < n-1; i++ {
		name := fmt.Sprintf("f%02d", i)
		e.read(t, "/d/"+name, content(name, size))
	}
	e.read(t, last, fresh)
	e.idle(t)
	e.read(t, last, fresh)
	if st := e.c.Stats(); st.SiblingFiles != n-2 {
		t.Errorf("%d files installed from the stream, want %d (not the changed one)", st.SiblingFiles, n-2)
	}
}

// TestSiblingsFlush: a flush drops everything cached, and a sibling stream
// issued before it installs nothing after it.
func TestSiblingsFlush(t *testing.T) {
	const n, size = 10, 1 << 10
	fs := sibTree(t, n, size)
	e := newSibEnv(t, fs, wan.Config{RTT: 20 * time.Millisecond}, cache.Options{})
	release := e.holdStream(t, "/d/f05")
	e.list(t, "/d")
	e.read(t, "/d/f00", content("f00", size))
	e.c.Flush()
	release()
	e.idle(t)
	// Requests, not round trips: one that overlaps another (a stream
	// still ending) is no blocking round trip of its own.
	before := e.conn.Stats().Streams
	e.read(t, "/d/f07", content("f07", size))
	if n := e.conn.Stats().Streams - before; n < 1 {
		t.Fatalf("reading a file after the flush sent %d requests: a stream issued before the flush installed it", n)
	}
}

// TestSiblingsCancel: reading from more directories than may stream at
// once cancels the streams of those left behind; closing the cache ends
// the rest; nothing is left running.
func TestSiblingsCancel(t *testing.T) {
	ctx := t.Context()
	fs := memfs.New()
	const dirs, n, size = 5, 60, 64 << 10
	for i := range dirs {
		d := fmt.Sprintf("/d%d", i)
		if _, err := zx.Mkdir(ctx, fs, d, 0755); err != nil {
			t.Fatal(err)
		}
		for j := range n {
			if _, err := zx.WriteFile(ctx, fs, fmt.Sprintf("%s/f%02d", d, j), nil, content("x", size)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Slow enough that no stream can finish during the test: each
	// would bring ~4 MiB at 1 MiB/s.
	e := newSibEnv(t, fs, wan.Config{RTT: 20 * time.Millisecond, Rate: 1 << 20}, cache.Options{SiblingBytes: 64 << 20})
	for i := range dirs {
		d := fmt.Sprintf("/d%d", i)
		e.list(t, d)
		e.read(t, d+"/f00", content("x", size))
		if live := e.c.Stats().SiblingLive; live > 2 {
			t.Fatalf("%d sibling streams in flight, want at most 2", live)
		}
	}
	st := e.c.Stats()
	if st.SiblingStreams != dirs || st.SiblingLive != 2 {
		t.Fatalf("streams %d live %d, want %d and 2", st.SiblingStreams, st.SiblingLive, dirs)
	}
	// The cancelled streams' files were not all delivered: reading on
	// in the first directory works (a new stream from there).
	e.read(t, "/d0/f59", content("x", size))
	e.c.Close() // waits for the streams' goroutines
	if live := e.c.Stats().SiblingLive; live != 0 {
		t.Fatalf("%d sibling streams in flight after Close", live)
	}
	// And the connection is quiet: no stream keeps the link busy.
	waitFor(t, func() bool {
		in := e.conn.Stats().BytesIn
		time.Sleep(100 * time.Millisecond)
		return e.conn.Stats().BytesIn-in < 1024
	})
}

// TestSiblingsWithListing: once the files of a directory are being read,
// the listing of a subdirectory also streams its files, so reading them
// costs nothing more; moving into a subdirectory after reading files
// streams the enclosing subtree (a tree stream); listing with no file
// read streams nothing.
func TestSiblingsWithListing(t *testing.T) {
	ctx := t.Context()
	fs := memfs.New()
	for _, d := range []string{"/d", "/d/s", "/d/s/t", "/d/s/t/u", "/d/s/t/u/v", "/d/s/t/u/v/w"} {
		if _, err := zx.Mkdir(ctx, fs, d, 0755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"/d", "/d/s/t", "/d/s/t/u", "/d/s/t/u/v", "/d/s/t/u/v/w"} {
		for i := range 10 {
			if _, err := zx.WriteFile(ctx, fs, fmt.Sprintf("%s/f%d", d, i), nil, content(d, 1000)); err != nil {
				t.Fatal(err)
			}
		}
	}
	e := newSibEnv(t, fs, wan.Config{RTT: 20 * time.Millisecond}, cache.Options{})
	e.list(t, "/d")
	e.read(t, "/d/f0", content("/d", 1000))
	e.read(t, "/d/f1", content("/d", 1000))
	// /d/s has no files: the guess goes on to /d/s/t.
	if os.Getenv("SIBDEBUG") != "" {
		e.conn.Tree("").Command(ctx, "debug on")
	}
	got := e.count(func() {
		e.list(t, "/d/s")
		e.list(t, "/d/s/t")
		for i := range 10 {
			e.read(t, fmt.Sprintf("/d/s/t/f%d", i), content("/d/s/t", 1000))
		}
	})
	if got > 2 {
		t.Errorf("listing /d/s and /d/s/t and reading the 10 files of /d/s/t: %d round trips, want 1 (the tree stream of /d from /d/s on, started by the first listing of /d/s, which the prefetch of /d brought), 2 if the prefetch was late", got)
	}
	e.idle(t)
	st := e.c.Stats()
	if st.TreeStreams != 1 {
		t.Errorf("%d tree streams, want 1", st.TreeStreams)
	}
	// Listing on below starts no stream: the tree stream brought their
	// files (all within its first window).
	e.list(t, "/d/s/t/u")
	e.list(t, "/d/s/t/u/v")
	e.list(t, "/d/s/t/u/v/w")
	e.idle(t)
	if n := e.c.Stats().SiblingStreams - st.SiblingStreams; n != 0 {
		t.Errorf("listing three directories below one being read: %d streams, want 0", n)
	}
	if got := e.count(func() { e.read(t, "/d/s/t/u/v/w/f9", content("/d/s/t/u/v/w", 1000)) }); got != 0 {
		t.Errorf("reading a file the tree stream brought: %d round trips", got)
	}
	// Listing with no file read starts nothing.
	e2 := newSibEnv(t, fs, wan.Config{RTT: 20 * time.Millisecond}, cache.Options{})
	for _, d := range []string{"/d", "/d/s", "/d/s/t", "/d/s/t/u"} {
		e2.list(t, d)
	}
	if n := e2.c.Stats().SiblingStreams; n != 0 {
		t.Errorf("listing directories, no file read: %d streams, want 0", n)
	}
}

// TestSiblingsDiskCache: files a stream brings go to the disk cache too,
// so a later session reads them with no round trip.
func TestSiblingsDiskCache(t *testing.T) {
	const n, size = 20, 2000
	fs := sibTree(t, n, size)
	dir := t.TempDir()
	e := newSibEnv(t, fs, wan.Config{RTT: 10 * time.Millisecond}, cache.Options{Dir: dir})
	e.list(t, "/d")
	for i := range n {
		name := fmt.Sprintf("f%02d", i)
		e.read(t, "/d/"+name, content(name, size))
	}
	waitFor(t, func() bool { return e.c.Stats().DiskFiles == n })
	if st := e.c.Stats(); st.SiblingFiles != n-1 {
		t.Fatalf("%d files streamed, want %d", st.SiblingFiles, n-1)
	}
	e.c.Close()
	e2 := newSibEnv(t, fs, wan.Config{RTT: 10 * time.Millisecond}, cache.Options{Dir: dir})
	got := e2.count(func() {
		for i := range n {
			name := fmt.Sprintf("f%02d", i)
			e2.read(t, "/d/"+name, content(name, size))
		}
	})
	if got != 0 {
		t.Errorf("reading %d files from the disk cache: %d round trips, want 0", n, got)
	}
	if st := e2.c.Stats(); st.DiskHits != n {
		t.Errorf("%d disk hits, want %d", st.DiskHits, n)
	}
}

// TestSiblingsCoherenceDisk is TestSiblingsCoherence over a local-disk
// tree changed behind the server's back: written directly on its disk, the
// server learns of it from the kernel and notifies the cache.
func TestSiblingsCoherenceDisk(t *testing.T) {
	const n, size = 40, 16 << 10
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprintf("f%02d", i)
		if err := os.WriteFile(filepath.Join(dir, "d", name), content(name, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := lfs.New(dir, lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	e := newSibEnv(t, fs, wan.Config{RTT: 40 * time.Millisecond, Rate: 1 << 20}, cache.Options{})
	last := fmt.Sprintf("/d/f%02d", n-1)
	release := e.holdStream(t, last)
	e.list(t, "/d")
	e.read(t, "/d/f00", content("f00", size))
	ev := e.c.Stats().Events
	// The same size: only the mtime (and the data) tell.
	fresh := bytes.Repeat([]byte("new!"), size/4)
	if err := os.WriteFile(filepath.Join(dir, "d", fmt.Sprintf("f%02d", n-1)), fresh, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.c.Stats().Events > ev })
	release()
	for i := 1; i < n-1; i++ {
		name := fmt.Sprintf("f%02d", i)
		e.read(t, "/d/"+name, content(name, size))
	}
	e.read(t, last, fresh)
	e.idle(t)
	e.read(t, last, fresh)
	if st := e.c.Stats(); st.SiblingFiles != n-2 {
		t.Errorf("%d files installed from the stream, want %d (not the changed one)", st.SiblingFiles, n-2)
	}
}

// TestTreeStreamCoherence: a file changed on the server while a tree
// stream brings the subtree is read fresh (the notice wins over the
// stream's copy); the others come from the stream.
func TestTreeStreamCoherence(t *testing.T) {
	ctx := t.Context()
	fs := memfs.New()
	dirs := []string{"/t", "/t/a", "/t/a/b", "/t/a/c", "/t/a/c/d"}
	for _, d := range dirs {
		if _, err := zx.Mkdir(ctx, fs, d, 0755); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := zx.WriteFile(ctx, fs, fmt.Sprintf("%s/f%d", d, i), nil, content(d, 3000)); err != nil {
				t.Fatal(err)
			}
		}
	}
	e := newSibEnv(t, fs, wan.Config{RTT: 20 * time.Millisecond}, cache.Options{})
	const changed = "/t/a/c/f5"
	release := e.holdStream(t, changed)
	// A walk: two files of /t/a read, then into /t/a/b.
	e.list(t, "/t/a")
	e.read(t, "/t/a/f0", content("/t/a", 3000))
	e.read(t, "/t/a/f1", content("/t/a", 3000))
	ev := e.c.Stats().Events
	got := e.count(func() {
		e.list(t, "/t/a/b")
		for i := range 10 {
			e.read(t, fmt.Sprintf("/t/a/b/f%d", i), content("/t/a/b", 3000))
		}
	})
	if st := e.c.Stats(); st.TreeStreams != 1 {
		t.Fatalf("%d tree streams, want 1", st.TreeStreams)
	}
	if got > 2 {
		t.Errorf("listing /t/a/b and reading its files: %d round trips, want at most 2 (the tree stream, and the listing if the prefetch was late)", got)
	}
	fresh := []byte("changed while the tree stream was bringing it")
	if _, err := zx.WriteFile(ctx, fs, changed, nil, fresh); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.c.Stats().Events > ev })
	release()
	walk := []string{"/t/a/c", "/t/a/c/d"}
	for _, d := range walk {
		e.list(t, d)
		for i := range 10 {
			p := fmt.Sprintf("%s/f%d", d, i)
			if p == changed {
				e.read(t, p, fresh)
				continue
			}
			e.read(t, p, content(d, 3000))
		}
	}
	e.idle(t)
	e.read(t, changed, fresh)
	// /t/a's own files after f0 came with its sibling stream (or the
	// tree stream); all of b, c and d but the changed file with the tree.
	if st := e.c.Stats(); st.SiblingFiles != 9+30-1 {
		t.Errorf("%d files installed from the streams, want %d (not the changed one)", st.SiblingFiles, 9+30-1)
	}
}

// TestTreeStreamWaitBound: a Get of a file a slow tree stream would
// bring only much later (another program reads far ahead of the walk)
// waits for it no longer than PrefetchWait, then asks the server: one
// round trip, the right contents.
func TestTreeStreamWaitBound(t *testing.T) {
	ctx := t.Context()
	fs := memfs.New()
	const size = 32 << 10
	for _, d := range []string{"/t", "/t/a", "/t/a/b", "/t/a/c"} {
		if _, err := zx.Mkdir(ctx, fs, d, 0755); err != nil {
			t.Fatal(err)
		}
		for i := range 60 {
			if _, err := zx.WriteFile(ctx, fs, fmt.Sprintf("%s/f%02d", d, i), nil, content(d, size)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// 4 MiB of files in /t/a/b and /t/a/c at 1 MiB/s: the stream needs
	// seconds to reach the last.
	e := newSibEnv(t, fs, wan.Config{RTT: 20 * time.Millisecond, Rate: 1 << 20},
		cache.Options{PrefetchWait: 50 * time.Millisecond, SiblingBytes: 64 << 20})
	e.list(t, "/t/a")
	e.read(t, "/t/a/f00", content("/t/a", size))
	e.read(t, "/t/a/f01", content("/t/a", size))
	e.list(t, "/t/a/b")
	e.list(t, "/t/a/c")
	if st := e.c.Stats(); st.TreeStreams != 1 || st.SiblingLive == 0 {
		t.Fatalf("%d tree streams, %d streams live; want 1 tree stream, running", st.TreeStreams, st.SiblingLive)
	}
	got := e.count(func() { e.read(t, "/t/a/c/f59", content("/t/a/c", size)) })
	if got < 1 || got > 2 {
		t.Errorf("reading a file far ahead of a slow tree stream: %d round trips, want 1 (its own, after PrefetchWait; 0: it waited for the stream)", got)
	}
}

// TestTreeStreamTreeFile: a tree stream brings the files of its walk up
// to Options.TreeFile (bigger than a sibling stream's), and leaves a
// bigger one to its own read; TreeFile is never more than the cache may
// hold (MaxFileCache here).
func TestTreeStreamTreeFile(t *testing.T) {
	for _, opts := range []cache.Options{{TreeFile: 512 << 10}, {MaxFileCache: 512 << 10}} {
		t.Run(fmt.Sprintf("TreeFile=%d,MaxFileCache=%d", opts.TreeFile, opts.MaxFileCache), func(t *testing.T) {
			testTreeFile(t, opts)
		})
	}
}

func testTreeFile(t *testing.T, opts cache.Options) {
	ctx := t.Context()
	fs := memfs.New()
	for _, d := range []string{"/t", "/t/a", "/t/a/b"} {
		if _, err := zx.Mkdir(ctx, fs, d, 0755); err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := zx.WriteFile(ctx, fs, fmt.Sprintf("%s/f%d", d, i), nil, content(d, 3000)); err != nil {
				t.Fatal(err)
			}
		}
	}
	const in, out = "/t/a/b/f3x", "/t/a/b/f6x" // 400 KiB: streamed; 700 KiB: over TreeFile
	for p, size := range map[string]int{in: 400 << 10, out: 700 << 10} {
		if _, err := zx.WriteFile(ctx, fs, p, nil, content(p, size)); err != nil {
			t.Fatal(err)
		}
	}
	e := newSibEnv(t, fs, wan.Config{RTT: 20 * time.Millisecond}, opts)
	e.list(t, "/t/a")
	e.read(t, "/t/a/f0", content("/t/a", 3000))
	e.read(t, "/t/a/f1", content("/t/a", 3000))
	e.list(t, "/t/a/b") // a walk: the tree stream of /t/a starts
	for i := range 10 {
		p := fmt.Sprintf("/t/a/b/f%d", i)
		e.read(t, p, content("/t/a/b", 3000))
		switch i {
		case 3:
			if got := e.count(func() { e.read(t, in, content(in, 400<<10)) }); got != 0 {
				t.Errorf("reading %s (400 KiB, under TreeFile) in the walk: %d round trips, want 0 (the tree stream brought it)", in, got)
			}
		case 6:
			if got := e.count(func() { e.read(t, out, content(out, 700<<10)) }); got != 1 {
				t.Errorf("reading %s (700 KiB, over the bound) in the walk: %d round trips, want 1 (its own)", out, got)
			}
		}
	}
	if st := e.c.Stats(); st.TreeStreams != 1 {
		t.Errorf("%d tree streams, want 1", st.TreeStreams)
	}
}
