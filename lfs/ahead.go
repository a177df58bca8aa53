package lfs

import (
	"container/heap"
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
)

// reader reads directories ahead of a find's walk, so that the system
// calls of several directories (statx and listxattrat per entry) run on
// every CPU while the walk, which only hands entries over, waits little.
//
// Its workers (one per CPU) read the directories the walk will want in the
// order it will want them: depth first, names sorted, which is the order
// of the paths with '/' taken as less than any other byte. Each worker
// takes the first directory in that order that is known and not read yet,
// reads it, and makes its subdirectories known, except those the
// predicate prunes, which the walk does not read either. So the readers
// run ahead of the walk through the whole tree, not only one level below
// it, bounded by maxAhead directories and maxAheadEntries entries read and
// not yet taken by the walk. A directory the walk wants before any worker
// started on it, the walk reads itself.
type reader struct {
	f       *FS
	ctx     context.Context     // the find's: its zx.Memory counts what is read ahead
	descend func(d zx.Dir) bool // whether the walk reads below d

	mu      sync.Mutex // guards all below
	cond    *sync.Cond
	known   map[string]*prefetch // queued, being read, or read and not taken
	queue   dirQueue             // not started, first in walk order first
	held    int                  // directories being read or read, not taken
	heldEnt int                  // entries of those
	workers int
	waiting int  // workers waiting for work or room
	full    bool // since the last wake-up, workers waited for room
	starved bool // a worker found no memory: none reads until the walk's next step
	stopped bool
	wg      sync.WaitGroup
}

// maxAhead and maxAheadEntries bound the directories and entries read
// ahead and not yet taken by the walk, which is the memory a find holds
// beyond its walk. That memory is live for the garbage collector, which
// marks it on every cycle: with 4096 entries ahead, collection took about
// a fifth more CPU than with 2048, and the workers stay far enough ahead.
// (Tests lower maxAheadEntries.)
const maxAhead = 256

var maxAheadEntries = 2 << 10

// maxKnown bounds the directories queued for reading: beyond it
// subdirectories are left to the walk (whose reads make their own
// subdirectories known).
const maxKnown = 8 << 10

// aheadHook, when set by tests, is called before a worker reads a
// directory ahead.
var aheadHook func(p string)

type prefetch struct {
	path    string
	index   int  // in reader.queue; -1 when not queued
	started bool // guarded by reader.mu
	done    chan struct{}
	ents    []zx.Dir
	mem     int // bytes of ents counted in the find's zx.Memory
	err     error
}

// entryMem is what an entry is counted as holding in a request's
// zx.Memory: a map of some ten attributes and its strings (measured:
// about 850 bytes for a file's).
const entryMem = 1 << 10

// errNoRoom marks a directory not read ahead: the find's memory had no
// room for its entries, or its reader has not taken what it was sent.
// The walk reads it itself.
var errNoRoom = errors.New("no room to read ahead")

func newReader(ctx context.Context, f *FS, descend func(zx.Dir) bool) *reader {
	r := &reader{ctx: ctx, f: f, descend: descend, known: make(map[string]*prefetch)}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// subdirs returns the paths of the subdirectories among ents that the
// walk will read.
func (r *reader) subdirs(ents []zx.Dir) []string {
	var ps []string
	for _, d := range ents {
		if d[zx.AType] == zx.TypeDir && r.descend(d) {
			ps = append(ps, d[zx.APath])
		}
	}
	return ps
}

// add makes the directories at ps known, to be read ahead. r.mu is held.
func (r *reader) add(ps []string) {
	for _, p := range ps {
		if len(r.known) >= maxKnown {
			break
		}
		if r.known[p] != nil {
			continue
		}
		pf := &prefetch{path: p, done: make(chan struct{})}
		r.known[p] = pf
		heap.Push(&r.queue, pf)
	}
	for r.workers < runtime.GOMAXPROCS(0) && r.queue.Len() > 0 {
		r.workers++
		r.wg.Go(r.work)
	}
	if r.waiting > 0 && !r.full {
		r.cond.Broadcast()
	}
}

// read is called by the walk with the entries of a directory it read
// itself: their subdirectories are the next to read ahead.
func (r *reader) read(ents []zx.Dir) {
	ps := r.subdirs(ents)
	if len(ps) == 0 {
		return
	}
	r.mu.Lock()
	r.add(ps)
	r.mu.Unlock()
}

func (r *reader) work() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		for !r.stopped && (r.starved || r.queue.Len() == 0 || r.held >= maxAhead || r.heldEnt >= maxAheadEntries) {
			if r.queue.Len() > 0 && !r.starved {
				r.full = true
			}
			r.waiting++
			r.cond.Wait()
			r.waiting--
		}
		if r.stopped {
			return
		}
		pf := heap.Pop(&r.queue).(*prefetch)
		pf.started = true
		r.held++
		r.mu.Unlock()
		if aheadHook != nil {
			aheadHook(pf.path)
		}
		fd, err := openBeneath(r.f.rootfd, pf.path[1:], unix.O_RDONLY|unix.O_DIRECTORY)
		var ps []string
		if err == nil {
			// Reading ahead is left undone, not waited for, when the
			// find's memory has no room or its reader has not taken
			// what it was sent (zx.Memory).
			pf.ents, err = r.f.readDir(fd, pf.path, func(n int) error {
				if !zx.TryTakeMemory(r.ctx, n*entryMem) {
					return errNoRoom
				}
				pf.mem = n * entryMem
				return nil
			})
			unix.Close(fd)
			// Before the walk may have them: it changes them.
			ps = r.subdirs(pf.ents)
		}
		pf.err = err
		r.mu.Lock()
		if err == errNoRoom {
			// Until the walk takes its next step.
			r.starved = true
		}
		r.heldEnt += len(pf.ents)
		r.add(ps)
		close(pf.done)
	}
}

// take returns the entries read ahead for the directory at p, if any, and
// the bytes they are counted as in the find's zx.Memory, which pass to
// the caller; it forgets p.
func (r *reader) take(p string) ([]zx.Dir, int, bool) {
	r.mu.Lock()
	pf := r.known[p]
	if pf == nil {
		r.wakeStarved()
		r.mu.Unlock()
		return nil, 0, false
	}
	delete(r.known, p)
	if !pf.started {
		// Not started yet: the walk reads it rather than wait.
		heap.Remove(&r.queue, pf.index)
		r.wakeStarved()
		r.mu.Unlock()
		return nil, 0, false
	}
	r.mu.Unlock()
	<-pf.done
	r.mu.Lock()
	r.held--
	r.heldEnt -= len(pf.ents)
	// Workers that wait for room wake up when half of it is free, not
	// for each directory taken: each wake-up costs system calls. (The
	// walk never waits for a directory no worker started, so how the
	// workers wait can slow it down but never stop it.)
	if r.full && r.held <= maxAhead/2 && r.heldEnt <= maxAheadEntries/2 {
		r.full = false
		r.cond.Broadcast()
	}
	r.wakeStarved()
	r.mu.Unlock()
	if pf.err != nil {
		zx.GiveMemory(r.ctx, pf.mem)
		return nil, 0, false
	}
	return pf.ents, pf.mem, true
}

// wakeStarved lets workers that found no memory try again: the walk has
// taken a step, so its reader may have room now. r.mu is held.
func (r *reader) wakeStarved() {
	if r.starved {
		r.starved = false
		r.cond.Broadcast()
	}
}

// drop gives back the memory of what was read ahead and not taken yet, for
// the walk, which needs memory and is the only one that can free it by
// taking those directories. It runs on the walk's goroutine.
func (r *reader) drop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pf := range r.known {
		if !pf.started {
			continue
		}
		select {
		case <-pf.done:
		default:
			continue // being read
		}
		zx.GiveMemory(r.ctx, pf.mem)
		r.heldEnt -= len(pf.ents)
		pf.ents, pf.mem, pf.err = nil, 0, errNoRoom
	}
	r.starved = true
}

// stop ends the workers and waits for them.
func (r *reader) stop() {
	r.mu.Lock()
	r.stopped = true
	r.cond.Broadcast()
	r.mu.Unlock()
	r.wg.Wait()
	for _, pf := range r.known {
		zx.GiveMemory(r.ctx, pf.mem)
	}
}

// walkCompare compares paths in the order of a walk: depth first, names
// sorted byte-wise. That is byte order with '/' below every other byte.
func walkCompare(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	switch {
	case i < n:
		x, y := a[i], b[i]
		if x == '/' {
			return -1
		}
		if y == '/' {
			return 1
		}
		if x < y {
			return -1
		}
		return 1
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

// dirQueue is a heap of directories, first in walk order first.
type dirQueue []*prefetch

func (q dirQueue) Len() int           { return len(q) }
func (q dirQueue) Less(i, j int) bool { return walkCompare(q[i].path, q[j].path) < 0 }
func (q dirQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index = i
	q[j].index = j
}
func (q *dirQueue) Push(x any) {
	pf := x.(*prefetch)
	pf.index = len(*q)
	*q = append(*q, pf)
}
func (q *dirQueue) Pop() any {
	old := *q
	pf := old[len(old)-1]
	old[len(old)-1] = nil
	pf.index = -1
	*q = old[:len(old)-1]
	return pf
}

// depthBelow returns the number of path elements of p below root, an
// ancestor of p (or p itself).
func depthBelow(root, p string) int {
	if p == root {
		return 0
	}
	if root == "/" {
		return strings.Count(p, "/")
	}
	return strings.Count(p[len(root):], "/")
}
