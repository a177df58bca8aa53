package memfs

import (
	"context"
	"sync"

	"github.com/zxfs/zx"
)

// watcher is one Watch: the tree queues events for it without blocking, and
// a goroutine forwards them to the caller.
type watcher struct {
	path string
	max  int           // events it may have pending before an Overflow
	wake chan struct{} // buffered for 1: events were queued

	mu       sync.Mutex // guards q and overflow
	q        []zx.Event
	overflow bool // an Overflow is queued: drop events until it is sent
}

// queue queues ev without blocking. fs.wmu must be held.
func (w *watcher) queue(ev zx.Event) {
	w.mu.Lock()
	switch {
	case w.overflow:
	case len(w.q) >= w.max:
		w.overflow = true
		w.q = append(w.q, zx.Event{Kind: zx.Overflow, Dir: zx.Dir{zx.APath: w.path}})
	default:
		w.q = append(w.q, ev)
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) next() (zx.Event, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.q) == 0 {
		return zx.Event{}, false
	}
	ev := w.q[0]
	w.q[0] = zx.Event{}
	w.q = w.q[1:]
	if ev.Kind == zx.Overflow {
		w.overflow = false
	}
	return ev, true
}

// Watch implements zx.Watcher. The watch is placed when earlier
// conflicting requests are done, so every change made by a request issued
// after Watch returns is reported. Watching a missing path fails with
// ErrNotExist.
func (fs *FS) Watch(ctx context.Context, p string) <-chan zx.Event {
	c := make(chan zx.Event)
	p, err := zx.CleanPath(p)
	if err != nil {
		go fs.watchFail(ctx, c, zx.Errorf("watch", p, err))
		return c
	}
	o, wait := fs.enter(ctx, false, p)
	go func() {
		if !wait() {
			o.Done()
			close(c)
			return
		}
		fs.mu.RLock()
		_, err := fs.lookup(p)
		var w *watcher
		if err == nil {
			w = &watcher{path: p, max: fs.watchBuffer, wake: make(chan struct{}, 1)}
			fs.wmu.Lock()
			fs.watchers[w] = struct{}{}
			fs.wmu.Unlock()
		}
		fs.mu.RUnlock()
		o.Done()
		if err != nil {
			fs.watchFail(ctx, c, fail("watch", p, err))
			return
		}
		defer func() {
			fs.wmu.Lock()
			delete(fs.watchers, w)
			fs.wmu.Unlock()
			close(c)
		}()
		ev := zx.Event{Kind: zx.Ready, Dir: zx.Dir{zx.APath: p}}
		for {
			select {
			case c <- ev:
			case <-ctx.Done():
				return
			}
			var ok bool
			for ev, ok = w.next(); !ok; ev, ok = w.next() {
				select {
				case <-w.wake:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return c
}

func (fs *FS) watchFail(ctx context.Context, c chan zx.Event, err error) {
	defer close(c)
	select {
	case c <- zx.Event{Err: err}:
	case <-ctx.Done():
	}
}

// notify reports ev, about an entry that was created or changed, or
// removed without a subtree. fs.mu must be held.
func (fs *FS) notify(ev zx.Event) {
	fs.wmu.Lock()
	defer fs.wmu.Unlock()
	p := ev.Dir.Path()
	for w := range fs.watchers {
		if zx.HasPrefix(p, w.path) {
			w.queue(ev)
		}
	}
}

// notifyRemove reports that p, holding n, was removed. fs.mu must be held.
func (fs *FS) notifyRemove(p string, n *node) {
	fs.wmu.Lock()
	defer fs.wmu.Unlock()
	for w := range fs.watchers {
		switch {
		case zx.HasPrefix(p, w.path):
			w.queue(zx.Event{Kind: zx.Removed, Dir: zx.Dir{zx.APath: p}})
		case zx.HasPrefix(w.path, p) && below(n, p, w.path) != nil:
			w.queue(zx.Event{Kind: zx.Removed, Dir: zx.Dir{zx.APath: w.path}})
		}
	}
}

// notifyMove reports that n moved from from to to. fs.mu must be held.
func (fs *FS) notifyMove(from, to string, n *node) {
	fs.wmu.Lock()
	defer fs.wmu.Unlock()
	for w := range fs.watchers {
		inFrom, inTo := zx.HasPrefix(from, w.path), zx.HasPrefix(to, w.path)
		switch {
		case inFrom && inTo:
			w.queue(zx.Event{Kind: zx.Moved, Dir: n.dir(to), From: from})
		case inTo:
			w.queue(zx.Event{Kind: zx.Created, Dir: n.dir(to)})
		case inFrom:
			w.queue(zx.Event{Kind: zx.Removed, Dir: zx.Dir{zx.APath: from}})
		default:
			if zx.HasPrefix(w.path, from) && below(n, from, w.path) != nil {
				w.queue(zx.Event{Kind: zx.Removed, Dir: zx.Dir{zx.APath: w.path}})
			}
			if m := below(n, to, w.path); zx.HasPrefix(w.path, to) && m != nil {
				w.queue(zx.Event{Kind: zx.Created, Dir: m.dir(w.path)})
			}
		}
	}
}

// below returns the node at path p in the subtree n hanging at path top,
// or nil.
func below(n *node, top, p string) *node {
	if !zx.HasPrefix(p, top) {
		return nil
	}
	for _, el := range zx.Elems(p)[zx.Depth(top):] {
		if n.typ != zx.TypeDir {
			return nil
		}
		if n = n.children[el]; n == nil {
			return nil
		}
	}
	return n
}
