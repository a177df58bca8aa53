package bench

import (
	"context"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The loopback find rate depends on the machine as much as on zx: most of
// a find's CPU is the kernel's getdents(2) and statx(2), whose cost per
// entry differs between machines by 2× and more. So the report gives, beside
// the rate, what this machine can do at best: the rate of a bare walk of
// the same tree that only lists each directory and stats each entry, on as
// many goroutines as there are CPUs, with nothing encoded, sent or
// decoded. A find can never beat it; the ratio of the two is zx's own
// share of the cost, comparable across machines.

// walkFloor walks dir as a find over lfs would (getdents of each directory,
// statx of each entry without following links), with one worker per CPU,
// and returns the entries it stat'ed, the root included, and how long the
// walk took.
func walkFloor(ctx context.Context, dir string) (entries int64, took time.Duration, err error) {
	var st unix.Statx_t
	if err := unix.Statx(unix.AT_FDCWD, dir, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
		return 0, 0, &walkError{dir, err}
	}
	w := &floorWalk{ctx: ctx, work: []string{dir}, entries: 1}
	w.cond = sync.NewCond(&w.mu)
	t0 := time.Now()
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(w.worker)
	}
	wg.Wait()
	took = time.Since(t0)
	if w.err == nil {
		w.err = ctx.Err()
	}
	return w.entries, took, w.err
}

type walkError struct {
	path string
	err  error
}

func (e *walkError) Error() string { return "walk floor: " + e.path + ": " + e.err.Error() }
func (e *walkError) Unwrap() error { return e.err }

// floorWalk is the shared state of walkFloor's workers: a stack of
// directories to read, and how many are being read.
type floorWalk struct {
	ctx     context.Context
	mu      sync.Mutex
	cond    *sync.Cond
	work    []string
	busy    int
	entries int64
	err     error
}

func (w *floorWalk) worker() {
	buf := make([]byte, 32<<10)
	var names []string
	for {
		w.mu.Lock()
		for len(w.work) == 0 && w.busy > 0 && w.err == nil {
			w.cond.Wait()
		}
		if len(w.work) == 0 || w.err != nil {
			w.mu.Unlock()
			w.cond.Broadcast()
			return
		}
		p := w.work[len(w.work)-1]
		w.work = w.work[:len(w.work)-1]
		w.busy++
		w.mu.Unlock()

		var subdirs []string
		var n int64
		var err error
		subdirs, names, n, err = floorDir(p, buf, names[:0])
		if err == nil {
			err = w.ctx.Err()
		}

		w.mu.Lock()
		w.busy--
		w.entries += n
		w.work = append(w.work, subdirs...)
		if err != nil && w.err == nil {
			w.err = err
		}
		w.mu.Unlock()
		w.cond.Broadcast()
	}
}

// floorDir lists directory p and stats each entry in it, returning the
// paths of its subdirectories, the names slice (appended to, for the
// caller to reuse) and the number of entries stat'ed.
func floorDir(p string, buf []byte, names []string) (subdirs, kept []string, n int64, err error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, names, 0, &walkError{p, err}
	}
	defer unix.Close(fd)
	for {
		m, err := unix.Getdents(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, names, 0, &walkError{p, err}
		}
		if m <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:m], -1, names)
	}
	var st unix.Statx_t
	for _, name := range names {
		if err := unix.Statx(fd, name, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, &st); err != nil {
			continue // it vanished, as a find would skip it
		}
		n++
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			subdirs = append(subdirs, p+"/"+name)
		}
	}
	return subdirs, names, n, nil
}

// us is d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
