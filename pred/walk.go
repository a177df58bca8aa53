package pred

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"

	"github.com/zxfs/zx"
)

// errStop stops a walk when emit returns false.
var errStop = errors.New("stop")

// Walk walks a tree in depth-first order, a directory before its contents,
// names sorted (byte order), calling emit for each entry that matches p.
//
// root is the entry (stat) of the starting path; readDir returns the
// entries of a directory given its real (un-rewritten) path, each with at
// least name, path and type (a missing path is taken as the directory's
// path joined with the name). Paths given to the predicate and to emit are
// rewritten with zx.Reprefix(path, spref, dpref), and depth is depth0 plus
// the number of elements below root. The root itself is evaluated too, at
// depth0.
//
// Only directories (type d) that are not pruned are read; symbolic links are
// not followed. If readDir fails, emit gets an Item with Err set and Dir
// holding the rewritten path and the name of the directory, and the walk
// goes on with its siblings. The Dir given to emit is a copy of the entry
// with its path rewritten.
//
// Walk returns nil when the walk is complete or emit returns false, and
// ctx.Err() when ctx is done (checked before each entry).
func Walk(ctx context.Context, root zx.Dir, p *Pred, spref, dpref string, depth0 int,
	readDir func(path string) ([]zx.Dir, error), emit func(it zx.Item) bool) error {
	return walk(ctx, root, p, spref, dpref, depth0, readDir, emit, false)
}

// WalkOwned is Walk for a root and a readDir whose entries are fresh maps
// that nobody else holds: emit gets the entries themselves, not copies
// (with path and name rewritten in place), and owns them from then on.
// This saves copying every entry of a long walk.
func WalkOwned(ctx context.Context, root zx.Dir, p *Pred, spref, dpref string, depth0 int,
	readDir func(path string) ([]zx.Dir, error), emit func(it zx.Item) bool) error {
	return walk(ctx, root, p, spref, dpref, depth0, readDir, emit, true)
}

func walk(ctx context.Context, root zx.Dir, p *Pred, spref, dpref string, depth0 int,
	readDir func(path string) ([]zx.Dir, error), emit func(it zx.Item) bool, owned bool) error {
	if root == nil {
		return nil
	}
	w := &walker{
		ctx:     ctx,
		done:    ctx.Done(),
		p:       p,
		spref:   spref,
		dpref:   dpref,
		readDir: readDir,
		emit:    emit,
		owned:   owned,
	}
	err := w.walk(root, depth0)
	if err == errStop {
		return nil
	}
	return err
}

type walker struct {
	ctx          context.Context
	done         <-chan struct{}
	p            *Pred
	spref, dpref string
	readDir      func(path string) ([]zx.Dir, error)
	emit         func(it zx.Item) bool
	owned        bool // entries are ours to hand over: see WalkOwned
}

func (w *walker) walk(d zx.Dir, depth int) error {
	select {
	case <-w.done:
		return w.ctx.Err()
	default:
	}
	real := d[zx.APath]
	vpath := zx.Reprefix(real, w.spref, w.dpref)
	match, prune := w.p.match(d, vpath, depth)
	// d is not to be touched once emitted: it may be the reader's now.
	isDir := d[zx.AType] == zx.TypeDir
	if match {
		nd := d
		if !w.owned {
			nd = d.Clone()
		}
		if vpath != real {
			nd[zx.APath] = vpath
			// The name is always the last element of the path: it
			// changes when the root of the walk is rewritten.
			nd[zx.AName] = path.Base(vpath)
		}
		if !w.emit(zx.Item{Dir: nd}) {
			return errStop
		}
	}
	if prune || !isDir {
		return nil
	}
	ents, err := w.readDir(real)
	if err != nil {
		select {
		case <-w.done:
			return w.ctx.Err() // the error is likely the cancellation
		default:
		}
		ed := zx.Dir{zx.APath: vpath, zx.AName: path.Base(vpath)}
		if !w.emit(zx.Item{Dir: ed, Err: err}) {
			return errStop
		}
		return nil
	}
	byName := func(a, b zx.Dir) int { return strings.Compare(a[zx.AName], b[zx.AName]) }
	if !slices.IsSortedFunc(ents, byName) {
		slices.SortStableFunc(ents, byName)
	}
	for _, e := range ents {
		if e == nil {
			continue
		}
		name := e[zx.AName]
		if name == "." || name == ".." {
			continue
		}
		if e[zx.APath] == "" {
			if !w.owned {
				e = e.Clone()
			}
			e[zx.APath] = path.Join(real, name)
		}
		if err := w.walk(e, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// Find is the generic fallback for find requests: if t implements
// zx.Finder, it returns t.Find(ctx, path, o);
// otherwise it walks t with Stat and directory Get (see Walk), in a
// goroutine, streaming the matching entries on the returned unbuffered
// channel, which is closed at the end.
//
// A bad predicate or path, or a failed Stat of path, comes as one Item with
// Err set (of kind zx.ErrInvalid for a predicate; errors.As finds the
// *SyntaxError). Errors reading directories come as Items with Err set and
// the stream goes on. When ctx is done the stream ends, and an Item with an
// error of kind zx.ErrCanceled (or zx.ErrTimeout) is sent if the reader is
// still waiting for one.
func Find(ctx context.Context, t zx.Tree, path string, o zx.FindOpts) <-chan zx.Item {
	if f, ok := t.(zx.Finder); ok {
		return f.Find(ctx, path, o)
	}
	c := make(chan zx.Item)
	go func() {
		defer close(c)
		send := func(it zx.Item) bool {
			select {
			case c <- it:
				return true
			case <-ctx.Done():
				return false
			}
		}
		p, err := Parse(o.Pred)
		if err != nil {
			send(zx.Item{Err: &zx.Error{Kind: zx.ErrInvalid, Op: "find", Path: path, Msg: err.Error(), Err: err}})
			return
		}
		cpath, err := zx.CleanPath(path)
		if err != nil {
			send(zx.Item{Err: zx.Errorf("find", path, err)})
			return
		}
		root, err := zx.Stat(ctx, t, cpath)
		if err == nil && root == nil {
			err = zx.E(zx.ErrIO, "find", cpath, "no entry")
		}
		if err != nil {
			send(zx.Item{Dir: zx.Dir{zx.APath: zx.Reprefix(cpath, o.Spref, o.Dpref)}, Err: zx.Errorf("find", cpath, err)})
			return
		}
		if root[zx.APath] == "" {
			root = root.Clone()
			root[zx.APath] = cpath
		}
		readDir := func(p string) ([]zx.Dir, error) { return zx.ReadDir(ctx, t, p) }
		err = Walk(ctx, root, p, o.Spref, o.Dpref, o.Depth0, readDir, send)
		if err == nil {
			err = ctx.Err() // send gave up
		}
		if err != nil {
			// Best effort: the reader may be gone.
			select {
			case c <- zx.Item{Err: zx.Errorf("find", cpath, err)}:
			default:
			}
		}
	}()
	return c
}
