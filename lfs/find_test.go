package lfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
)

func TestFindGet(t *testing.T) {
	f, dir := newFS(t, Options{})
	ctx := t.Context()
	os.MkdirAll(filepath.Join(dir, "src/a/b"), 0755)
	os.WriteFile(filepath.Join(dir, "src/a/x.go"), []byte("package x"), 0644)
	os.WriteFile(filepath.Join(dir, "src/a/b/y.go"), []byte("package y"), 0644)
	os.WriteFile(filepath.Join(dir, "src/a/b/z.txt"), []byte("z"), 0644)
	os.WriteFile(filepath.Join(dir, "src/w.go"), []byte("package w"), 0644)
	os.Symlink("/etc/passwd", filepath.Join(dir, "src/a/pw.go"))
	var got []string
	for it := range f.FindGet(ctx, "/src", zx.FindOpts{Pred: "~*.go", Spref: "/src", Dpref: "/mnt/s", Depth0: 3}) {
		switch {
		case it.Err != nil:
			t.Fatal(it.Err)
		case it.Dir != nil:
			got = append(got, it.Dir.Path()+":"+it.Dir.Type())
		default:
			got = append(got, string(it.Data))
		}
	}
	want := "/mnt/s/a/pw.go:l /mnt/s/a/x.go:- package x /mnt/s/a/b/y.go:- package y /mnt/s/w.go:- package w"
	// Directories come before their contents, names sorted: b < pw.go < x.go.
	want = "/mnt/s/a/b/y.go:- package y /mnt/s/a/pw.go:l /mnt/s/a/x.go:- package x /mnt/s/w.go:- package w"
	if s := strings.Join(got, " "); s != want {
		t.Fatalf("findget:\n got %s\nwant %s", s, want)
	}
	// Find of a file, with the root rewritten.
	got = nil
	for it := range f.FindGet(ctx, "/src/w.go", zx.FindOpts{Spref: "/", Dpref: "/r", Depth0: 1}) {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
		if it.Dir != nil {
			got = append(got, it.Dir.Path())
		} else {
			got = append(got, string(it.Data))
		}
	}
	if s := strings.Join(got, " "); s != "/r/src/w.go package w" {
		t.Fatalf("findget of a file: %s", s)
	}
	// Bad predicate.
	for it := range f.Find(ctx, "/", zx.FindOpts{Pred: "size >"}) {
		if !errors.Is(it.Err, zx.ErrInvalid) {
			t.Fatalf("bad predicate: %v", it.Err)
		}
	}
}

// TestFindErrors checks that a directory that cannot be read is reported
// in-band and the walk goes on.
func TestFindErrors(t *testing.T) {
	f, dir := newFS(t, Options{})
	for _, d := range []string{"a", "b", "c"} {
		os.MkdirAll(filepath.Join(dir, d), 0755)
		os.WriteFile(filepath.Join(dir, d, "f"), nil, 0644)
	}
	readDirHook = func(p string) error {
		if p == "/b" {
			os.RemoveAll(filepath.Join(dir, "b")) // vanished after listing
		}
		return nil
	}
	defer func() { readDirHook = nil }()
	var got []string
	for it := range f.Find(t.Context(), "/", zx.FindOpts{}) {
		s := it.Dir.Path()
		if it.Err != nil {
			if !errors.Is(it.Err, zx.ErrNotExist) {
				t.Fatalf("error %v", it.Err)
			}
			s = "ERR " + s
		}
		got = append(got, s)
	}
	if s := strings.Join(got, " "); s != "/ /a /a/f /b ERR /b /c /c/f" {
		t.Fatalf("find: %s", s)
	}
}

// BenchmarkFindGoSrc measures how fast Find streams the entries of Go's
// source tree.
func BenchmarkFindGoSrc(b *testing.B) {
	src := filepath.Join(runtime.GOROOT(), "src")
	f, err := New(src, Options{ReadOnly: true})
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	n := 0
	start := time.Now()
	cpu0 := cpuTime()
	for b.Loop() {
		for it := range f.Find(b.Context(), "/", zx.FindOpts{}) {
			if it.Err != nil {
				b.Fatal(it.Err)
			}
			n++
		}
	}
	el := time.Since(start)
	b.ReportMetric(float64(n)/el.Seconds(), "entries/s")
	b.ReportMetric(float64(n)/float64(b.N), "entries/op")
	// On a shared machine the wall-clock rate depends on the load; the
	// CPU time spent per entry much less.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/entry")
}

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestFindReadAhead checks that reading ahead changes nothing a find
// sends, and that the readers read only directories the walk reads (none
// that the predicate prunes), in the order of the walk.
func TestFindReadAhead(t *testing.T) {
	f, dir := newFS(t, Options{})
	// Names that sort around '/', so that walk order is not byte order
	// of the paths.
	names := []string{"a", "a b", "a-b", "a.b", "a0", "ab", ".git", "z1", "z2", "z3", "z4", "z5", "z6"}
	for _, n := range names {
		for _, sub := range []string{"s1/deep", "s2", "s1.x"} {
			os.MkdirAll(filepath.Join(dir, "t", n, sub), 0755)
			for _, fn := range []string{"f1", "f2"} {
				os.WriteFile(filepath.Join(dir, "t", n, sub, fn), nil, 0644)
			}
		}
		os.WriteFile(filepath.Join(dir, "t", n, "file"), nil, 0644)
	}
	os.MkdirAll(filepath.Join(dir, "t", "d1/d2/d3/d4"), 0755)
	os.WriteFile(filepath.Join(dir, "t", "d1/d2/d3/d4/f"), nil, 0644)

	// Little room ahead, so that the readers wait for it, again and
	// again, while the walk waits for the stream's reader.
	defer func(n int) { maxAheadEntries = n }(maxAheadEntries)
	maxAheadEntries = 20

	type find struct {
		path, pred, spref, dpref string
		depth0                   int
	}
	for _, fd := range []find{
		{"/", "", "", "", 0},
		{"/t", "name=.git & prune | type=-", "", "", 0},
		{"/t", "depth>=3 & prune | true", "/t", "/x", 1},
		{"/t", "path=/x/a.b & prune | path=/x/z3/s1 & prune | d", "/t", "/x", 0},
		{"/t/a", "", "/t", "/", 5},
	} {
		t.Run(fd.pred, func(t *testing.T) {
			run := func(first <-chan struct{}) []string {
				c := f.Find(t.Context(), fd.path, zx.FindOpts{Pred: fd.pred, Spref: fd.spref, Dpref: fd.dpref, Depth0: fd.depth0})
				if first != nil {
					// The walk stops when the stream's buffer is
					// full, well before the end of the tree: the
					// readers must get ahead of it.
					select {
					case <-first:
					case <-time.After(10 * time.Second):
						t.Fatal("nothing read ahead while the walk waits")
					}
				}
				var got []string
				for it := range c {
					s := it.Dir.Path()
					if it.Err != nil {
						s = "ERR " + s + " " + it.Err.Error()
					}
					got = append(got, s)
				}
				return got
			}
			// The walk alone (readDirHook turns reading ahead off).
			var walked []string
			readDirHook = func(p string) error {
				walked = append(walked, p)
				return nil
			}
			want := run(nil)
			readDirHook = nil
			if !slices.IsSortedFunc(walked, walkCompare) {
				t.Errorf("walk order is not walkCompare's: %q", walked)
			}

			var mu sync.Mutex
			var ahead []string
			var first chan struct{}
			if fd.path == "/" {
				first = make(chan struct{})
			}
			aheadHook = func(p string) {
				mu.Lock()
				if len(ahead) == 0 && first != nil {
					close(first)
				}
				ahead = append(ahead, p)
				mu.Unlock()
			}
			defer func() { aheadHook = nil }()
			got := run(first) // the readers are done when the stream ends
			if !slices.Equal(got, want) {
				t.Errorf("find with reading ahead:\n got %q\nwant %q", got, want)
			}
			for _, p := range ahead {
				if !slices.Contains(walked, p) {
					t.Errorf("read ahead %s, which the walk does not read", p)
				}
			}
		})
	}
}

// TestFindReadAheadError checks that a directory a reader fails to read
// ahead is reported in-band by the walk, as when the walk reads it.
func TestFindReadAheadError(t *testing.T) {
	f, dir := newFS(t, Options{})
	// Enough entries before /z that the walk stops on the stream's
	// buffer before it, and the readers get to /z first.
	for _, d := range []string{"a", "b", "c", "d", "e"} {
		os.MkdirAll(filepath.Join(dir, d), 0755)
		for i := range 20 {
			os.WriteFile(filepath.Join(dir, d, fmt.Sprint(i)), nil, 0644)
		}
	}
	os.MkdirAll(filepath.Join(dir, "z"), 0755)
	os.WriteFile(filepath.Join(dir, "z", "f"), nil, 0644)
	read := make(chan struct{})
	aheadHook = func(p string) {
		if p == "/z" {
			os.RemoveAll(filepath.Join(dir, "z")) // vanished after listing
			close(read)
		}
	}
	defer func() { aheadHook = nil }()
	c := f.Find(t.Context(), "/", zx.FindOpts{})
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("/z not read ahead while the walk waits")
	}
	var got []string
	for it := range c {
		s := it.Dir.Path()
		if it.Err != nil {
			if !errors.Is(it.Err, zx.ErrNotExist) {
				t.Fatalf("error %v", it.Err)
			}
			s = "ERR " + s
		}
		got = append(got, s)
	}
	if n := len(got); n < 2 || got[n-2] != "/z" || got[n-1] != "ERR /z" {
		t.Fatalf("find ends with %q, want /z and its error", got[max(0, len(got)-3):])
	}
	if len(got) != 1+5*21+2 {
		t.Fatalf("find sent %d items, want %d", len(got), 1+5*21+2)
	}
}
