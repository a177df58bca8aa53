package zxtest

import (
	"context"
	"fmt"
	"time"

	"github.com/zxfs/zx"
)

// watch is a watch under test: every event it reads must concern the
// watched subtree.
type watch struct {
	e      *env
	root   string
	c      <-chan zx.Event
	cancel context.CancelFunc
	seen   []string // events read, for failure messages
}

func evString(ev zx.Event) string {
	s := ev.Kind.String() + " " + ev.Dir.Path()
	if ev.From != "" {
		s += " from " + ev.From
	}
	if ev.Err != nil {
		s += fmt.Sprintf(" err %v", ev.Err)
	}
	return s
}

// startWatch watches root and waits for Ready.
func (e *env) startWatch(root string) *watch {
	e.t.Helper()
	w, ok := e.tr.(zx.Watcher)
	if !ok || e.opts.NoWatch {
		e.t.Skip("the tree does not watch")
	}
	ctx, cancel := context.WithCancel(e.ctx)
	e.t.Cleanup(cancel)
	wt := &watch{e: e, root: root, c: w.Watch(ctx, root), cancel: cancel}
	t := time.NewTimer(e.opts.WatchDelay)
	defer t.Stop()
	select {
	case ev, ok := <-wt.c:
		if !ok || ev.Kind != zx.Ready || ev.Err != nil {
			e.t.Fatalf("watch %s: first event %s (open %v), want ready", root, evString(ev), ok)
		}
	case <-t.C:
		e.t.Fatalf("watch %s: not ready within %v", root, e.opts.WatchDelay)
	}
	return wt
}

// expect reads events until one satisfies match, within WatchDelay.
// Events that do not match are skipped, but each must concern the watched
// subtree, carry no error and not be an Overflow.
func (w *watch) expect(what string, match func(zx.Event) bool) zx.Event {
	w.e.t.Helper()
	t := time.NewTimer(w.e.opts.WatchDelay)
	defer t.Stop()
	for {
		select {
		case ev, ok := <-w.c:
			if !ok {
				w.e.t.Fatalf("watch %s: closed while waiting for %s; events: %q", w.root, what, w.seen)
			}
			w.seen = append(w.seen, evString(ev))
			switch {
			case ev.Err != nil:
				w.e.t.Fatalf("watch %s: %v", w.root, ev.Err)
			case ev.Kind == zx.Overflow:
				w.e.t.Fatalf("watch %s: overflow with only a few changes", w.root)
			case ev.Dir == nil || !zx.HasPrefix(ev.Dir.Path(), w.root):
				w.e.t.Fatalf("watch %s: event outside the watched path: %s", w.root, evString(ev))
			case ev.Kind == zx.Moved && !zx.HasPrefix(ev.From, w.root):
				w.e.t.Fatalf("watch %s: move from outside the watched path: %s", w.root, evString(ev))
			}
			if match(ev) {
				return ev
			}
		case <-t.C:
			w.e.t.Fatalf("watch %s: no %s within %v; events: %q", w.root, what, w.e.opts.WatchDelay, w.seen)
		}
	}
}

func (w *watch) expectKind(k zx.EventKind, p string) zx.Event {
	w.e.t.Helper()
	return w.expect(k.String()+" "+p, func(ev zx.Event) bool {
		return ev.Kind == k && ev.Dir.Path() == p
	})
}

// stop cancels the watch and checks that the channel closes.
func (w *watch) stop() {
	w.e.t.Helper()
	w.cancel()
	t := time.NewTimer(w.e.opts.Timeout)
	defer t.Stop()
	for {
		select {
		case _, ok := <-w.c:
			if !ok {
				return
			}
		case <-t.C:
			w.e.t.Fatalf("watch %s: not closed within %v of cancelling it", w.root, w.e.opts.Timeout)
		}
	}
}

var watchTests = []subtest{
	{"Watch", func(e *env) {
		e.mk("/w/", "/o/")
		w := e.startWatch("/w")

		e.put("/w/f", zx.Dir{zx.AType: zx.TypeFile}, 0, []byte("hello"))
		ev := w.expectKind(zx.Created, "/w/f")
		if ev.Dir.Type() != zx.TypeFile {
			e.t.Fatalf("created event: %v", ev.Dir)
		}
		e.put("/w/f", zx.Dir{}, 5, []byte(" world"))
		w.expectKind(zx.Changed, "/w/f")
		e.wstat("/w/f", zx.Dir{zx.AMode: "0600"})
		ev = w.expectKind(zx.Changed, "/w/f")
		if ev.Dir.Mode() != 0600 {
			// Later events may be coalesced; the next must show the mode.
			w.expect("changed /w/f with mode 0600", func(ev zx.Event) bool {
				return ev.Kind == zx.Changed && ev.Dir.Path() == "/w/f" && ev.Dir.Mode() == 0600
			})
		}

		if err := e.move("/w/f", "/w/g"); err != nil {
			e.t.Fatal(err)
		}
		ev = w.expect("moved /w/f to /w/g", func(ev zx.Event) bool {
			return ev.Kind == zx.Moved && ev.Dir.Path() == "/w/g" || ev.Kind == zx.Created && ev.Dir.Path() == "/w/g"
		})
		if ev.Kind == zx.Moved && ev.From != "/w/f" {
			e.t.Fatalf("moved event: from %q, want /w/f", ev.From)
		}

		if err := e.remove("/w/g"); err != nil {
			e.t.Fatal(err)
		}
		w.expectKind(zx.Removed, "/w/g")

		// Below a new subdirectory.
		e.put("/w/sub", zx.Dir{zx.AType: zx.TypeDir}, 0, nil)
		w.expectKind(zx.Created, "/w/sub")
		e.put("/w/sub/x", zx.Dir{zx.AType: zx.TypeFile}, 0, []byte("x"))
		w.expectKind(zx.Created, "/w/sub/x")

		// Nothing from outside: expect fails on events outside /w.
		e.put("/o/x", zx.Dir{zx.AType: zx.TypeFile}, 0, []byte("x"))
		e.put("/wx", zx.Dir{zx.AType: zx.TypeFile}, 0, []byte("x"))
		e.wstat("/o", zx.Dir{zx.AMode: "0700"})
		e.put("/w/marker", zx.Dir{zx.AType: zx.TypeFile}, 0, nil)
		w.expectKind(zx.Created, "/w/marker")
		w.stop()
	}},
	{"WatchMoveOut", func(e *env) {
		e.mk("/w/a:a", "/o/", "/o/in:in")
		w := e.startWatch("/w")
		if err := e.move("/w/a", "/o/a"); err != nil {
			e.t.Fatal(err)
		}
		w.expectKind(zx.Removed, "/w/a")
		if err := e.move("/o/in", "/w/in"); err != nil {
			e.t.Fatal(err)
		}
		w.expect("created /w/in", func(ev zx.Event) bool {
			return (ev.Kind == zx.Created || ev.Kind == zx.Moved) && ev.Dir.Path() == "/w/in"
		})
		w.stop()
	}},
	{"WatchMissing", func(e *env) {
		wr, ok := e.tr.(zx.Watcher)
		if !ok || e.opts.NoWatch {
			e.t.Skip("the tree does not watch")
		}
		c := wr.Watch(e.ctx, "/nx")
		ev := recv(e, c, "watch /nx")
		e.wantErr(ev.Err, "watch of a missing path", zx.ErrNotExist)
		t := time.NewTimer(e.opts.Timeout)
		defer t.Stop()
		select {
		case ev, ok := <-c:
			if ok {
				e.t.Fatalf("watch /nx: %s after the error", evString(ev))
			}
		case <-t.C:
			e.t.Fatal("watch /nx: not closed after the error")
		}
	}},
}
