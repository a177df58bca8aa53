package lfs

import (
	"context"
	"encoding/binary"
	"os"
	"path"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
)

const (
	watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE |
		unix.IN_ATTRIB | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_DELETE_SELF |
		unix.IN_MOVE_SELF | unix.IN_EXCL_UNLINK | unix.IN_ONLYDIR

	watchBuf = 1024                  // notices buffered per watcher
	coalesce = 50 * time.Millisecond // at most one Changed per path in this time
	moveWait = 20 * time.Millisecond // wait for the IN_MOVED_TO of an IN_MOVED_FROM
)

// Watch streams change notices for path and everything below it, made
// through this tree or directly on the disk, as zx.Watcher says. Bursts of
// changes to one file are coalesced (at most one Changed per path in 50 ms;
// the last state is always reported). A watch of a file watches its
// directory and filters. The stream ends, with an Event with Err set, when
// path itself is removed or moved away, or the tree is closed.
func (f *FS) Watch(ctx context.Context, path string) <-chan zx.Event {
	out := make(chan zx.Event)
	p, err := f.check("watch", path, false)
	if err == nil && f.proc == "" {
		err = zx.E(zx.ErrNotSupp, "watch", p, "no /proc")
	}
	if err != nil {
		c := make(chan zx.Event, 1)
		c <- zx.Event{Err: err}
		close(c)
		return c
	}
	go func() {
		defer close(out)
		fail := func(err error) {
			select {
			case out <- zx.Event{Err: errf("watch", p, err)}:
			case <-ctx.Done():
			}
		}
		h, err := f.acquireHub()
		if err != nil {
			fail(err)
			return
		}
		defer f.releaseHub(h)
		w := &watcher{path: p, buf: make(chan zx.Event, watchBuf+2)}
		errc := make(chan error, 1)
		if !h.do(func() { errc <- h.add(w) }) {
			fail(zx.E(zx.ErrIO, "", "", "tree closed"))
			return
		}
		if err := <-errc; err != nil {
			fail(err)
			return
		}
		defer h.do(func() { delete(h.watchers, w) })
		select {
		case out <- zx.Event{Kind: zx.Ready, Dir: zx.Dir{zx.APath: p}}:
		case <-ctx.Done():
			return
		}
		for {
			if len(w.buf) == 0 && w.lost.CompareAndSwap(true, false) {
				// Notices were dropped after those sent: say so.
				select {
				case out <- zx.Event{Kind: zx.Overflow, Dir: zx.Dir{zx.APath: p}}:
				case <-ctx.Done():
					return
				}
			}
			select {
			case ev, ok := <-w.buf:
				if !ok {
					return
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// acquireHub returns the tree's inotify hub, starting it if needed.
func (f *FS) acquireHub() (*hub, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed.Load() {
		return nil, zx.E(zx.ErrIO, "", "", "tree closed")
	}
	if f.hub == nil {
		h, err := newHub(f)
		if err != nil {
			return nil, err
		}
		f.hub = h
	}
	f.hub.refs++
	return f.hub, nil
}

// releaseHub stops h when its last watcher leaves.
func (f *FS) releaseHub(h *hub) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h.refs--
	if h.refs == 0 && f.hub == h {
		f.hub = nil
		h.stop()
	}
}

// A hub is an inotify instance shared by the watchers of a tree. One
// goroutine, run, owns its tables; others ask it to act through cmds.
type hub struct {
	f    *FS
	ino  *os.File
	fd   int
	cmds chan func()
	raw  chan []byte
	done chan struct{}
	refs int // guarded by f.mu

	// owned by run
	wds      map[int]string // watch descriptor → directory path
	dirs     map[string]int // directory path → watch descriptor
	watchers map[*watcher]struct{}
	moves    map[uint32]*pendingMove
	dirty    map[string]*dirtyPath
	timer    *time.Timer
}

type watcher struct {
	path  string
	dir   bool // path is a directory: watch recursively
	buf   chan zx.Event
	lost  atomic.Bool // notices were dropped: Overflow when buf drains
	ended bool
}

type pendingMove struct {
	path  string
	isDir bool
	at    time.Time
}

type dirtyPath struct {
	last    time.Time
	pending bool
}

func newHub(f *FS) (*hub, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, err
	}
	h := &hub{
		f:        f,
		ino:      os.NewFile(uintptr(fd), "inotify"),
		fd:       fd,
		cmds:     make(chan func()),
		raw:      make(chan []byte),
		done:     make(chan struct{}),
		wds:      make(map[int]string),
		dirs:     make(map[string]int),
		watchers: make(map[*watcher]struct{}),
		moves:    make(map[uint32]*pendingMove),
		dirty:    make(map[string]*dirtyPath),
		timer:    time.NewTimer(time.Hour),
	}
	h.timer.Stop()
	go h.read()
	go h.run()
	return h, nil
}

// stop ends the hub. Called once, with f.mu held.
func (h *hub) stop() {
	close(h.done)
	h.ino.Close()
}

// do runs fn in the hub's goroutine; false if the hub has stopped.
func (h *hub) do(fn func()) bool {
	select {
	case h.cmds <- fn:
		return true
	case <-h.done:
		return false
	}
}

func (h *hub) read() {
	defer close(h.raw)
	for {
		b := make([]byte, 64<<10)
		n, err := h.ino.Read(b)
		if err != nil {
			return
		}
		select {
		case h.raw <- b[:n]:
		case <-h.done:
			return
		}
	}
}

func (h *hub) run() {
	defer func() {
		for w := range h.watchers {
			h.end(w, zx.E(zx.ErrIO, "watch", w.path, "watch closed"))
		}
	}()
	for {
		select {
		case fn := <-h.cmds:
			fn()
		case b, ok := <-h.raw:
			if !ok {
				return
			}
			h.parse(b)
		case <-h.timer.C:
			h.tick()
		case <-h.done:
			return
		}
		h.arm()
	}
}

// arm sets the timer for the next pending move or coalesced change.
func (h *hub) arm() {
	var next time.Time
	for _, m := range h.moves {
		if t := m.at.Add(moveWait); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, d := range h.dirty {
		if t := d.last.Add(coalesce); next.IsZero() || t.Before(next) {
			next = t
		}
	}
	h.timer.Stop()
	if !next.IsZero() {
		h.timer.Reset(max(time.Until(next), time.Millisecond))
	}
}

func (h *hub) tick() {
	now := time.Now()
	for c, m := range h.moves {
		if now.Sub(m.at) >= moveWait {
			delete(h.moves, c)
			if !isTemp(path.Base(m.path)) {
				h.movedOut(m.path, m.isDir)
			}
		}
	}
	for p, d := range h.dirty {
		if now.Sub(d.last) < coalesce {
			continue
		}
		if !d.pending {
			delete(h.dirty, p)
			continue
		}
		d.pending, d.last = false, now
		if nd, err := h.f.stat(p); err == nil {
			h.emit(zx.Event{Kind: zx.Changed, Dir: nd})
		}
	}
}

// add registers w and watches what it needs.
func (h *hub) add(w *watcher) error {
	d, err := h.f.stat(w.path)
	if err != nil {
		return err
	}
	w.dir = d.IsDir()
	dir := w.path
	if !w.dir {
		dir = path.Dir(w.path)
	}
	df, err := h.f.openDir(dir)
	if err != nil {
		return err
	}
	defer df.close()
	if w.dir {
		err = h.watchTree(df.fd, dir, false)
	} else {
		err = h.addWatch(df.fd, dir)
	}
	if err != nil {
		return err
	}
	h.watchers[w] = struct{}{}
	return nil
}

// addWatch watches the directory fd, whose path is p.
func (h *hub) addWatch(fd int, p string) error {
	wd, err := unix.InotifyAddWatch(h.fd, h.f.proc+strconv.Itoa(fd), watchMask)
	if err != nil {
		return err
	}
	if old, ok := h.wds[wd]; ok && old != p && h.dirs[old] == wd {
		delete(h.dirs, old)
	}
	h.wds[wd] = p
	h.dirs[p] = wd
	return nil
}

// watchTree watches directory fd at p and every directory below it. With
// report set, it sends Created for every entry it finds below p.
func (h *hub) watchTree(fd int, p string, report bool) error {
	if err := h.addWatch(fd, p); err != nil {
		return err
	}
	db := &dirbuf{ents: make([]byte, 8<<10)}
	names, err := readNames(fd, db)
	if err != nil {
		return err
	}
	var st unix.Stat_t
	for _, name := range names {
		cp := zx.Join(p, name)
		if lstat(fd, name, &st) != nil {
			continue
		}
		if report {
			if d, err := h.f.entry(fd, name, cp, &st, nil); err == nil {
				h.emit(zx.Event{Kind: zx.Created, Dir: d})
			}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			continue
		}
		cfd, err := openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		err = h.watchTree(cfd, cp, report)
		unix.Close(cfd)
		if err == unix.ENOSPC {
			return err // out of watches
		}
	}
	return nil
}

// watchNew watches a directory that appeared at p, if some watcher wants
// it, and reports what it holds already.
func (h *hub) watchNew(p string) {
	if !h.recursive(p) {
		return
	}
	df, err := h.f.openDir(p)
	if err != nil {
		return
	}
	h.watchTree(df.fd, p, true)
	df.close()
}

// recursive reports whether a watcher wants the directories at p.
func (h *hub) recursive(p string) bool {
	for w := range h.watchers {
		if w.dir && zx.HasPrefix(p, w.path) {
			return true
		}
	}
	return false
}

// unwatch forgets the watches at p and below.
func (h *hub) unwatch(p string, rm bool) {
	for dp, wd := range h.dirs {
		if zx.HasPrefix(dp, p) {
			if rm {
				unix.InotifyRmWatch(h.fd, uint32(wd))
			}
			delete(h.dirs, dp)
			delete(h.wds, wd)
		}
	}
}

// rename moves the watches at from and below to to.
func (h *hub) rename(from, to string) {
	for dp, wd := range h.dirs {
		if zx.HasPrefix(dp, from) {
			np := zx.Reprefix(dp, from, to)
			delete(h.dirs, dp)
			h.dirs[np] = wd
			h.wds[wd] = np
		}
	}
}

// parse handles a buffer of inotify events.
func (h *hub) parse(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int(int32(binary.NativeEndian.Uint32(b[0:])))
		mask := binary.NativeEndian.Uint32(b[4:])
		cookie := binary.NativeEndian.Uint32(b[8:])
		n := int(binary.NativeEndian.Uint32(b[12:]))
		end := unix.SizeofInotifyEvent + n
		if end > len(b) {
			return
		}
		name := b[unix.SizeofInotifyEvent:end]
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		h.event(wd, mask, cookie, string(name))
		b = b[end:]
	}
}

func (h *hub) event(wd int, mask, cookie uint32, name string) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		h.overflow()
		return
	}
	dir, ok := h.wds[wd]
	if mask&unix.IN_IGNORED != 0 {
		if ok {
			delete(h.wds, wd)
			if h.dirs[dir] == wd {
				delete(h.dirs, dir)
			}
		}
		return
	}
	if !ok {
		return
	}
	if name == "" {
		h.self(dir, mask)
		return
	}
	p := zx.Join(dir, name)
	isDir := mask&unix.IN_ISDIR != 0
	switch {
	case isTemp(name):
		// Temporaries are invisible, but for their rename into place,
		// a Created or Changed of the target.
		if mask&unix.IN_MOVED_FROM != 0 {
			h.moves[cookie] = &pendingMove{path: p, at: time.Now()}
		}
		if mask&unix.IN_MOVED_TO != 0 {
			if m, ok := h.moves[cookie]; ok {
				delete(h.moves, cookie)
				if !isTemp(path.Base(m.path)) {
					h.movedOut(m.path, m.isDir)
				}
			}
		}
	case mask&unix.IN_CREATE != 0:
		h.created(p, isDir)
	case mask&unix.IN_DELETE != 0:
		delete(h.dirty, p)
		if isDir {
			h.unwatch(p, false)
		}
		h.emitGone(p)
	case mask&unix.IN_MOVED_FROM != 0:
		h.moves[cookie] = &pendingMove{path: p, isDir: isDir, at: time.Now()}
	case mask&unix.IN_MOVED_TO != 0:
		m, ok := h.moves[cookie]
		if !ok {
			h.created(p, isDir)
			return
		}
		delete(h.moves, cookie)
		if isTemp(path.Base(m.path)) {
			kind := zx.Changed
			if path.Base(m.path)[len(TempPrefix)] == 'c' {
				kind = zx.Created
			}
			h.touch(p)
			h.emitStat(kind, p)
			return
		}
		h.moved(m.path, p, isDir)
	case mask&(unix.IN_MODIFY|unix.IN_ATTRIB|unix.IN_CLOSE_WRITE) != 0:
		h.changed(p)
	}
}

// self handles an event about a watched directory itself.
func (h *hub) self(dir string, mask uint32) {
	switch {
	case mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
		for w := range h.watchers {
			if w.path == dir {
				h.deliver(w, zx.Event{Kind: zx.Removed, Dir: gone(dir)})
				h.end(w, zx.E(zx.ErrNotExist, "watch", w.path, "watched path went away"))
			}
		}
	case mask&unix.IN_ATTRIB != 0:
		// The parent's watch reports it, if there is one.
		if _, ok := h.dirs[path.Dir(dir)]; !ok || dir == "/" {
			h.changed(dir)
		}
	}
}

func gone(p string) zx.Dir {
	name := path.Base(p)
	return zx.Dir{zx.APath: p, zx.AName: name}
}

func (h *hub) created(p string, isDir bool) {
	h.touch(p)
	h.emitStat(zx.Created, p)
	if isDir {
		h.watchNew(p)
	}
}

// touch starts a coalescing period for p: changes in it are reported at
// its end.
func (h *hub) touch(p string) {
	h.dirty[p] = &dirtyPath{last: time.Now()}
}

func (h *hub) changed(p string) {
	if d, ok := h.dirty[p]; ok {
		d.pending = true
		return
	}
	h.touch(p)
	h.emitStat(zx.Changed, p)
}

func (h *hub) moved(from, to string, isDir bool) {
	delete(h.dirty, from)
	if isDir {
		wasRec := h.recursive(from)
		h.rename(from, to)
		if !wasRec {
			defer h.watchNew(to)
		}
	}
	h.touch(to)
	d, err := h.f.stat(to)
	if err != nil {
		d = gone(to)
	}
	h.emit(zx.Event{Kind: zx.Moved, Dir: d, From: from})
}

// movedOut reports an entry moved to where no watch sees it.
func (h *hub) movedOut(p string, isDir bool) {
	delete(h.dirty, p)
	if isDir {
		h.unwatch(p, true)
	}
	h.emitGone(p)
}

func (h *hub) emitGone(p string) {
	h.emit(zx.Event{Kind: zx.Removed, Dir: gone(p)})
}

// emitStat sends a notice of kind for p with its entry as it is now.
func (h *hub) emitStat(kind zx.EventKind, p string) {
	d, err := h.f.stat(p)
	if err != nil {
		if kind == zx.Changed {
			return // a Removed follows
		}
		d = gone(p)
	}
	h.emit(zx.Event{Kind: kind, Dir: d})
}

// emit fans ev out to the watchers it concerns.
func (h *hub) emit(ev zx.Event) {
	p := ev.Dir.Path()
	for w := range h.watchers {
		in := zx.HasPrefix(p, w.path)
		if ev.Kind != zx.Moved {
			if in {
				h.deliver(w, ev)
				if ev.Kind == zx.Removed && p == w.path {
					h.end(w, zx.E(zx.ErrNotExist, "watch", w.path, "watched path went away"))
				}
			}
			continue
		}
		fromIn := zx.HasPrefix(ev.From, w.path)
		switch {
		case in && fromIn:
			h.deliver(w, ev)
		case in:
			h.deliver(w, zx.Event{Kind: zx.Created, Dir: ev.Dir})
		case fromIn:
			h.deliver(w, zx.Event{Kind: zx.Removed, Dir: gone(ev.From)})
		}
		if fromIn && ev.From == w.path {
			h.end(w, zx.E(zx.ErrNotExist, "watch", w.path, "watched path went away"))
		}
	}
}

// deliver queues ev for w, or notes an overflow if w is behind: then
// notices are dropped until w's goroutine has sent what it holds and an
// Overflow.
func (h *hub) deliver(w *watcher, ev zx.Event) {
	if w.ended || w.lost.Load() {
		return
	}
	if len(w.buf) >= watchBuf {
		w.lost.Store(true)
		return
	}
	w.buf <- ev
}

// end sends w its last notice, with err, and drops it.
func (h *hub) end(w *watcher, err error) {
	if w.ended {
		return
	}
	w.ended = true
	w.buf <- zx.Event{Err: err} // a slot is kept for it
	close(w.buf)
	delete(h.watchers, w)
}

// overflow tells every watcher that notices were lost, and watches the
// directories that may have appeared meanwhile.
func (h *hub) overflow() {
	for w := range h.watchers {
		h.deliver(w, zx.Event{Kind: zx.Overflow, Dir: zx.Dir{zx.APath: w.path}})
	}
	for w := range h.watchers {
		if w.dir {
			if df, err := h.f.openDir(w.path); err == nil {
				h.watchTree(df.fd, w.path, false)
				df.close()
			}
		}
	}
}
