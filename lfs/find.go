package lfs

import (
	"context"
	"path"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
	"github.com/zxfs/zx/pred"
)

// Find walks the tree at path and sends the entries for which pred is
// true, as zx.Finder says. It waits for earlier writes under path and then
// lets later requests run while it walks.
func (f *FS) Find(ctx context.Context, path string, o zx.FindOpts) <-chan zx.Item {
	return f.find(ctx, "find", path, o, false)
}

// FindGet is Find that also sends the data of each matching regular file
// after its entry.
func (f *FS) FindGet(ctx context.Context, path string, o zx.FindOpts) <-chan zx.Item {
	return f.find(ctx, "findget", path, o, true)
}

func (f *FS) find(ctx context.Context, opn, fpath string, o zx.FindOpts, get bool) <-chan zx.Item {
	if ctl.Is(fpath) {
		return f.ctl.Find(ctx, o)
	}
	p, err := f.check(opn, fpath, false)
	if err != nil {
		return items(err)
	}
	pp, err := pred.Parse(o.Pred)
	if err != nil {
		return items(zx.Errorf(opn, p, err))
	}
	op := f.q.Enter(false, p)
	// A little buffering lets the walk run ahead of its reader, instead
	// of handing over each entry.
	c := make(chan zx.Item, findBuffer)
	go func() {
		defer close(c)
		err := op.Wait(ctx)
		op.Done()
		if err != nil {
			send(ctx, c, zx.Item{Err: errf(opn, p, err)})
			return
		}
		root, err := f.stat(p)
		if err != nil {
			send(ctx, c, zx.Item{Err: errf(opn, p, err)})
			return
		}
		w := &walker{f: f, ctx: ctx}
		if !get && readDirHook == nil {
			// The readers skip what the walk prunes: see pred.Walk.
			w.ahead = newReader(ctx, f, func(d zx.Dir) bool {
				real := d[zx.APath]
				_, prune := pp.MatchPath(d, zx.Reprefix(real, o.Spref, o.Dpref), o.Depth0+depthBelow(p, real))
				return !prune
			})
		}
		defer w.close()
		// Entries come with their paths rewritten; realPath maps them
		// back for FindGet: a file's real directory is open in w.
		realPath := func(q string) string {
			for _, r := range []string{zx.Reprefix(q, o.Dpref, o.Spref), q} {
				if zx.Reprefix(r, o.Spref, o.Dpref) == q && zx.HasPrefix(r, p) && (r == p || w.has(path.Dir(r))) {
					return r
				}
			}
			return ""
		}
		emit := func(it zx.Item) bool {
			// The reader owns it.Dir once it is sent.
			file := get && it.Err == nil && it.Dir != nil && it.Dir.Type() == zx.TypeFile
			var fpath, fname string
			if file {
				fpath, fname = it.Dir.Path(), it.Dir.Name()
			}
			if !send(ctx, c, it) {
				return false
			}
			if !file {
				return true
			}
			err := zx.E(zx.ErrIO, "", "", "lost the file's path")
			if rp := realPath(fpath); rp != "" {
				err = w.sendFile(ctx, c, rp)
			}
			if ctx.Err() != nil {
				return false
			}
			if err != nil {
				d := zx.Dir{zx.APath: fpath, zx.AName: fname}
				return send(ctx, c, zx.Item{Dir: d, Err: errf(opn, fpath, err)})
			}
			return true
		}
		// Every entry is a fresh map from readDir: no need to copy them.
		err = pred.WalkOwned(ctx, root, pp, o.Spref, o.Dpref, o.Depth0, w.readDir, emit)
		if err != nil && ctx.Err() == nil {
			send(ctx, c, zx.Item{Err: errf(opn, p, err)})
		}
	}()
	return c
}

// findBuffer is how many entries a find may send ahead of its reader.
const findBuffer = 64

// walker reads directories for a walk, keeping open the descriptors of
// the directories on the way down, so that each directory is opened once,
// relative to its parent. For Find, a reader reads ahead of it.
type walker struct {
	f     *FS
	ctx   context.Context // the find's: its zx.Memory counts the entries held
	stack []openDir       // each an ancestor of the next
	ahead *reader         // nil when not reading ahead
	held  []heldDir       // the directories being walked, each an ancestor of the next
}

// heldDir is a directory whose entries the walk holds, and the bytes they
// are counted as.
type heldDir struct {
	path string
	mem  int
}

type openDir struct {
	path string
	fd   dirfd
}

// dir returns a descriptor for the directory at clean path p, owned by w.
func (w *walker) dir(p string) (int, error) {
	for len(w.stack) > 0 {
		top := w.stack[len(w.stack)-1]
		if zx.HasPrefix(p, top.path) {
			if top.path == p {
				return top.fd.fd, nil
			}
			break
		}
		top.fd.close()
		w.stack = w.stack[:len(w.stack)-1]
	}
	var d dirfd
	if len(w.stack) == 0 {
		var err error
		if d, err = w.f.openDir(p); err != nil {
			return -1, err
		}
	} else {
		top := w.stack[len(w.stack)-1]
		rel := p[len(top.path)+1:]
		if top.path == "/" {
			rel = p[1:]
		}
		fd, err := openBeneath(top.fd.fd, rel, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			if err == unix.ELOOP {
				err = unix.ENOTDIR
			}
			return -1, err
		}
		d = dirfd{fd: fd, own: true}
	}
	w.stack = append(w.stack, openDir{path: p, fd: d})
	return d.fd, nil
}

// readDirHook, when set by tests, is called before a walk reads a
// directory, and may make the read fail. It turns reading ahead off.
var readDirHook func(p string) error

// readDir returns the entries of the directory at p.
func (w *walker) readDir(p string) ([]zx.Dir, error) {
	if readDirHook != nil {
		if err := readDirHook(p); err != nil {
			return nil, err
		}
	}
	w.doneWith(p)
	if w.ahead != nil {
		if ds, mem, ok := w.ahead.take(p); ok {
			w.held = append(w.held, heldDir{p, mem})
			return ds, nil
		}
	}
	fd, err := w.dir(p)
	if err != nil {
		return nil, errf("find", p, err)
	}
	var mem int
	ds, err := w.f.readDir(fd, p, func(n int) error {
		mem = n * entryMem
		if zx.TryTakeMemory(w.ctx, mem) {
			return nil
		}
		// What was read ahead may be what fills the memory, and only
		// the walk frees it, by taking it: let it go first.
		if w.ahead != nil {
			w.ahead.drop()
		}
		if err := zx.TakeMemory(w.ctx, mem); err != nil {
			mem = 0
			return err
		}
		return nil
	})
	if err != nil {
		return nil, errf("find", p, err)
	}
	w.held = append(w.held, heldDir{p, mem})
	if w.ahead != nil {
		w.ahead.read(ds)
	}
	return ds, nil
}

// doneWith gives back the memory of the directories the walk is done
// with, before it reads the one at p: it walks depth first, so those are
// the ones it read that are not p's ancestors.
func (w *walker) doneWith(p string) {
	for len(w.held) > 0 {
		top := w.held[len(w.held)-1]
		if zx.HasPrefix(p, top.path) {
			return
		}
		zx.GiveMemory(w.ctx, top.mem)
		w.held = w.held[:len(w.held)-1]
	}
}

// sendFile sends the contents of the regular file at p.
func (w *walker) sendFile(ctx context.Context, c chan<- zx.Item, p string) error {
	fd, err := w.dir(path.Dir(p))
	if err != nil {
		return err
	}
	return w.f.sendFile(ctx, c, fd, path.Base(p), 0, -1)
}

// has reports whether the directory at p is open in w.
func (w *walker) has(p string) bool {
	for _, d := range w.stack {
		if d.path == p {
			return true
		}
	}
	return false
}

// close releases w's descriptors, after its workers are done (they use
// the root's descriptor, which must stay open while they run).
func (w *walker) close() {
	if w.ahead != nil {
		w.ahead.stop()
	}
	for _, d := range w.stack {
		d.fd.close()
	}
	w.stack = nil
	for _, h := range w.held {
		zx.GiveMemory(w.ctx, h.mem)
	}
	w.held = nil
}
