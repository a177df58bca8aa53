package memfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/pred"
	"github.com/zxfs/zx/zxtest"
)

func TestTree(t *testing.T) {
	zxtest.TestTree(t, func(t *testing.T) zx.Tree { return New() }, zxtest.Options{})
}

func TestWatchOverflow(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	fs := New()
	fs.watchBuffer = 4
	c := fs.Watch(ctx, "/")
	if ev := <-c; ev.Kind != zx.Ready {
		t.Fatalf("first event %v", ev.Kind)
	}
	// The tree must not block on a watcher that does not read.
	for i := range 10 {
		if _, err := zx.WriteFile(ctx, fs, fmt.Sprintf("/f%d", i), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The watcher's goroutine may hold one event besides the buffer.
	var kinds []string
	for ev := range c {
		kinds = append(kinds, ev.Kind.String()+" "+ev.Dir.Path())
		if ev.Kind == zx.Overflow {
			break
		}
	}
	want := "created /f0,created /f1,created /f2,created /f3,"
	got := strings.Join(kinds, ",")
	if got != want+"overflow /" && got != want+"created /f4,overflow /" {
		t.Fatalf("events %s, want %s[created /f4,]overflow /", got, want)
	}
	// After the overflow, events flow again.
	zx.WriteFile(ctx, fs, "/again", nil, nil)
	if ev := <-c; ev.Kind != zx.Created || ev.Dir.Path() != "/again" {
		t.Fatalf("event after overflow: %v %v", ev.Kind, ev.Dir)
	}
}

// TestFindWhileWaiting checks that a caller may wait for requests on
// entries a find is still streaming without deadlocking.
func TestFindWhileWaiting(t *testing.T) {
	ctx := t.Context()
	fs := New()
	zxtest.MkTree(t, fs, "/x/a.o", "/x/b.o", "/x/y/c.o", "/x/y/d.c")
	n := 0
	for it := range fs.Find(ctx, "/x", zx.FindOpts{Pred: "~*.o"}) {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
		if err := <-fs.Remove(ctx, it.Dir.Path()); err != nil {
			t.Fatal(err)
		}
		if _, err := zx.ReadFile(ctx, fs, "/x/y/d.c"); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("removed %d files, want 3", n)
	}
	zxtest.CheckTree(t, fs, "/", "/x/y/d.c")
}

func TestInoStable(t *testing.T) {
	ctx := t.Context()
	fs := New()
	zxtest.MkTree(t, fs, "/a:x", "/b:y")
	a, _ := zx.Stat(ctx, fs, "/a")
	b, _ := zx.Stat(ctx, fs, "/b")
	if a[zx.AIno] == b[zx.AIno] {
		t.Fatal("two files with the same ino")
	}
	if err := <-fs.Move(ctx, "/a", "/c"); err != nil {
		t.Fatal(err)
	}
	c, err := zx.WriteFile(ctx, fs, "/c", nil, []byte("new"))
	if err != nil {
		t.Fatal(err)
	}
	if c[zx.AIno] != a[zx.AIno] || c[zx.ANlink] != "1" {
		t.Fatalf("ino %s after move and rewrite, want %s", c[zx.AIno], a[zx.AIno])
	}
	if d, _ := zx.Stat(ctx, fs, "/"); d[zx.ANlink] != "2" {
		t.Fatalf("root nlink %s, want 2", d[zx.ANlink])
	}
}

func TestNotFile(t *testing.T) {
	ctx := t.Context()
	fs := New()
	zxtest.MkTree(t, fs, "/l->x", "/p#p")
	for _, p := range []string{"/l", "/p"} {
		r := <-fs.Put(ctx, p, nil, 0, strings.NewReader("data"))
		if !errors.Is(r.Err, zx.ErrInvalid) {
			t.Fatalf("put data to %s: %v", p, r.Err)
		}
		if _, err := zx.ReadFile(ctx, fs, p); !errors.Is(err, zx.ErrInvalid) {
			t.Fatalf("get %s: %v", p, err)
		}
	}
	if _, err := zx.Stat(ctx, fs, "/l/x"); !errors.Is(err, zx.ErrNotDir) {
		t.Fatalf("stat through a link: %v", err)
	}
}

// TestNoLeaks checks that cancelled requests leave no goroutines behind,
// also when the caller stops reading.
func TestNoLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	fs := New()
	fs.cancelGrace = 10 * time.Millisecond
	zxtest.MkTree(t, fs, "/big:"+strings.Repeat("x", 1<<20), "/d/a", "/d/b", "/d/c")
	ctx, cancel := context.WithCancel(t.Context())
	g := fs.Get(ctx, "/big", 0, -1)
	<-g
	fs.Get(ctx, "/big", 0, -1)
	fs.Get(ctx, "/nx", 0, -1)
	fs.Find(ctx, "/", zx.FindOpts{})
	fs.FindGet(ctx, "/", zx.FindOpts{})
	fs.Watch(ctx, "/d")
	fs.Watch(ctx, "/nx")
	pr, pw := io.Pipe()
	pc := fs.Put(ctx, "/new", zx.Dir{zx.AType: zx.TypeFile}, 0, pr)
	pw.Write([]byte("some"))
	cancel()
	if r := <-pc; !errors.Is(r.Err, zx.ErrCanceled) {
		t.Fatalf("cancelled put: %v", r.Err)
	}
	pw.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left, want %d:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := fs.q.Pending(); n != 0 {
		t.Fatalf("%d requests pending", n)
	}
}

// TestTreePlain runs the suite on memfs seen as a bare zx.Tree, which
// checks the suite's fallbacks (pred.Find) too.
func TestTreePlain(t *testing.T) {
	// pred.Walk must give the entry at spref the name of dpref.
	var name string
	pred.Walk(t.Context(), zx.Dir{zx.AName: "a", zx.APath: "/a", zx.AType: zx.TypeFile}, nil, "/a", "/x", 0,
		nil, func(it zx.Item) bool { name = it.Dir.Name(); return true })
	if name != "x" {
		t.Fatalf("pred.Walk names the entry at spref %q, want %q", name, "x")
	}
	zxtest.TestTree(t, func(t *testing.T) zx.Tree { return struct{ zx.Tree }{New()} }, zxtest.Options{})
}
