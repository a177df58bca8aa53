package dump

import (
	"context"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/pred"
)

// FS is a store seen as a read-only zx tree: /TREE/YYYY/MMDD[.N]/... holds
// each snapshot's entries, with their attributes as dumped (and AHash);
// the directories /, /TREE and /TREE/YYYY are synthesized from the store.
// New snapshots show as they are written. Every request that would write
// fails with zx.ErrReadOnly.
type FS struct {
	s *Store

	mu    sync.Mutex
	cache []*Snapshot // most recently used last
	keys  []string
}

var (
	_ zx.Tree   = (*FS)(nil)
	_ zx.Finder = (*FS)(nil)
)

// cacheSize is the number of parsed snapshots kept in memory.
const cacheSize = 4

// Open returns the store at dir as a read-only tree. The store must exist.
func Open(dir string) (*FS, error) {
	fi, err := os.Stat(filepath.Join(dir, "snap"))
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, zx.E(zx.ErrNotDir, "", dir, "not a dump store")
	}
	return &FS{s: &Store{dir: dir}}, nil
}

// Store returns the store of fs.
func (fs *FS) Store() *Store { return fs.s }

func (fs *FS) String() string { return "dump" }

// snapshot returns a parsed snapshot, from the cache if it is there.
func (fs *FS) snapshot(tree, name string) (*Snapshot, error) {
	key := tree + "/" + name
	fs.mu.Lock()
	for i, k := range fs.keys {
		if k == key {
			sn := fs.cache[i]
			fs.keys = append(append(fs.keys[:i:i], fs.keys[i+1:]...), k)
			fs.cache = append(append(fs.cache[:i:i], fs.cache[i+1:]...), sn)
			fs.mu.Unlock()
			return sn, nil
		}
	}
	fs.mu.Unlock()
	sn, err := fs.s.ReadSnapshot(tree, name)
	if err != nil {
		return nil, err
	}
	sn.index()
	fs.mu.Lock()
	fs.keys = append(fs.keys, key)
	fs.cache = append(fs.cache, sn)
	if len(fs.keys) > cacheSize {
		fs.keys = fs.keys[1:]
		fs.cache = fs.cache[1:]
	}
	fs.mu.Unlock()
	return sn, nil
}

// synth returns the entry of a synthesized directory backed by dir.
func synth(p, dir string, nents int) (zx.Dir, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, zx.ErrNotExist
	}
	d := zx.Dir{zx.APath: p, zx.AName: path.Base(p), zx.AType: zx.TypeDir, zx.AMode: "0555"}
	d.SetInt(zx.ASize, int64(nents))
	d.SetTime(zx.AMtime, fi.ModTime())
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		d[zx.AUid] = strconv.FormatUint(uint64(st.Uid), 10)
		d[zx.AGid] = strconv.FormatUint(uint64(st.Gid), 10)
	}
	return d, nil
}

// resolved is a path of the tree, looked up.
type resolved struct {
	d    zx.Dir    // its entry
	sn   *Snapshot // the snapshot it is in, if any
	in   string    // its path in the snapshot
	pref string    // /TREE/YYYY/MMDD[.N]
	kids func() ([]zx.Dir, error)
}

// lookup resolves a clean path.
func (fs *FS) lookup(p string) (*resolved, error) {
	els := zx.Elems(p)
	snap := filepath.Join(fs.s.dir, "snap")
	switch len(els) {
	case 0:
		trees, err := fs.s.Trees()
		if err != nil {
			return nil, err
		}
		d, err := synth("/", snap, len(trees))
		if err != nil {
			return nil, err
		}
		return &resolved{d: d, kids: func() ([]zx.Dir, error) {
			var ds []zx.Dir
			for _, t := range trees {
				if r, err := fs.lookup("/" + t); err == nil {
					ds = append(ds, r.d)
				}
			}
			return ds, nil
		}}, nil
	case 1:
		tree := els[0]
		if !ValidTreeName(tree) {
			return nil, zx.ErrNotExist
		}
		ys, err := fs.s.years(tree)
		if err != nil {
			return nil, err
		}
		d, err := synth(p, filepath.Join(snap, tree), len(ys))
		if err != nil {
			return nil, err
		}
		return &resolved{d: d, kids: func() ([]zx.Dir, error) {
			var ds []zx.Dir
			for _, y := range ys {
				if r, err := fs.lookup(path.Join(p, y)); err == nil {
					ds = append(ds, r.d)
				}
			}
			return ds, nil
		}}, nil
	case 2:
		tree, year := els[0], els[1]
		if !ValidTreeName(tree) || len(year) != 4 || !digits(year) {
			return nil, zx.ErrNotExist
		}
		ns, err := fs.s.snapFiles(tree, year)
		if err != nil {
			return nil, err
		}
		d, err := synth(p, filepath.Join(snap, tree, year), len(ns))
		if err != nil {
			return nil, err
		}
		return &resolved{d: d, kids: func() ([]zx.Dir, error) {
			var ds []zx.Dir
			for _, n := range ns {
				if r, err := fs.lookup(path.Join(p, n.file())); err == nil {
					ds = append(ds, r.d)
				}
			}
			return ds, nil
		}}, nil
	}
	tree := els[0]
	n, ok := parseSnapFile(els[1], els[2])
	if !ok || !ValidTreeName(tree) {
		return nil, zx.ErrNotExist
	}
	sn, err := fs.snapshot(tree, n.String())
	if err != nil {
		return nil, err
	}
	pref := "/" + path.Join(els[:3]...)
	in := zx.Reprefix(p, pref, "/")
	sd := sn.Lookup(in)
	if sd == nil {
		// A path through a file or a link is not a directory.
		for q := path.Dir(in); q != "/"; q = path.Dir(q) {
			if qd := sn.Lookup(q); qd != nil && !qd.IsDir() {
				return nil, zx.ErrNotDir
			}
		}
		return nil, zx.ErrNotExist
	}
	r := &resolved{d: view(sd, pref), sn: sn, in: in, pref: pref}
	if sd.IsDir() {
		r.kids = func() ([]zx.Dir, error) {
			kids := sn.Children(in)
			ds := make([]zx.Dir, len(kids))
			for i, k := range kids {
				ds[i] = view(k, pref)
			}
			return ds, nil
		}
	}
	return r, nil
}

// view returns a snapshot entry as fs shows it, under pref.
func view(d zx.Dir, pref string) zx.Dir {
	nd := d.Clone()
	p := zx.Reprefix(d[zx.APath], "/", pref)
	nd[zx.APath] = p
	nd[zx.AName] = path.Base(p)
	return nd
}

func fail(op, p string, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		err = zx.ErrNotExist
	}
	if k, ok := err.(zx.Kind); ok {
		return zx.E(k, op, p, "")
	}
	return zx.Errorf(op, p, err)
}

func (fs *FS) resolve(op, p string) (string, *resolved, error) {
	cp, err := zx.CleanPath(p)
	if err != nil {
		return p, nil, zx.Errorf(op, p, err)
	}
	r, err := fs.lookup(cp)
	if err != nil {
		return cp, nil, fail(op, cp, err)
	}
	return cp, r, nil
}

func reply(d zx.Dir, err error) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	c <- zx.Reply{Dir: d, Err: err}
	return c
}

func errc(err error) <-chan error {
	c := make(chan error, 1)
	c <- err
	return c
}

// stream runs fn in a goroutine with a send function for an unbuffered
// stream, and closes it at the end. When ctx is done, one Item with the
// cancellation is sent if the reader is still waiting.
func stream(ctx context.Context, op, p string, fn func(send func(zx.Item) bool) error) <-chan zx.Item {
	c := make(chan zx.Item)
	go func() {
		defer close(c)
		send := func(it zx.Item) bool {
			if ctx.Err() != nil {
				return false
			}
			select {
			case c <- it:
				return true
			case <-ctx.Done():
				return false
			}
		}
		err := fn(send)
		if err == nil {
			err = ctx.Err()
		}
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			select {
			case c <- zx.Item{Err: zx.Errorf(op, p, ctx.Err())}:
			default:
			}
			return
		}
		send(zx.Item{Err: err})
	}()
	return c
}

// Stat implements zx.Tree.
func (fs *FS) Stat(ctx context.Context, p string) <-chan zx.Reply {
	if err := ctx.Err(); err != nil {
		return reply(nil, zx.Errorf("stat", p, err))
	}
	_, r, err := fs.resolve("stat", p)
	if err != nil {
		return reply(nil, err)
	}
	return reply(r.d, nil)
}

// chunk is the size of the Data items of Get.
const chunk = 64 << 10

// Get implements zx.Tree.
func (fs *FS) Get(ctx context.Context, p string, off, count int64) <-chan zx.Item {
	return stream(ctx, "get", p, func(send func(zx.Item) bool) error {
		cp, r, err := fs.resolve("get", p)
		if err != nil {
			return err
		}
		switch r.d.Type() {
		case zx.TypeDir:
			kids, err := r.kids()
			if err != nil {
				return fail("get", cp, err)
			}
			if off < 0 {
				off = 0
			}
			for i, k := range kids {
				if int64(i) < off {
					continue
				}
				if count >= 0 && int64(i)-off >= count {
					break
				}
				if !send(zx.Item{Dir: k}) {
					return nil
				}
			}
			return nil
		case zx.TypeFile:
			return fs.sendBlob(send, cp, r.d, off, count)
		case zx.TypeLink:
			return zx.E(zx.ErrInvalid, "get", cp, "is a symbolic link")
		}
		return nil
	})
}

// sendBlob sends the contents of a file entry.
func (fs *FS) sendBlob(send func(zx.Item) bool, p string, d zx.Dir, off, count int64) error {
	f, err := fs.s.OpenBlob(d[AHash])
	if err != nil {
		return zx.E(zx.ErrIO, "get", p, "contents missing from the store: "+err.Error())
	}
	defer f.Close()
	if off < 0 {
		off = 0
	}
	var r io.Reader = io.NewSectionReader(f, off, 1<<62)
	if count >= 0 {
		r = io.LimitReader(r, count)
	}
	for {
		buf := make([]byte, chunk)
		n, err := io.ReadFull(r, buf)
		if n > 0 && !send(zx.Item{Data: buf[:n]}) {
			return nil
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return nil
		}
		if err != nil {
			return zx.Errorf("get", p, err)
		}
	}
}

// Find implements zx.Finder.
func (fs *FS) Find(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	return fs.find(ctx, "find", p, o, false)
}

// FindGet implements zx.Finder.
func (fs *FS) FindGet(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	return fs.find(ctx, "findget", p, o, true)
}

func (fs *FS) find(ctx context.Context, op, p string, o zx.FindOpts, get bool) <-chan zx.Item {
	return stream(ctx, op, p, func(send func(zx.Item) bool) error {
		pp, err := pred.Parse(o.Pred)
		if err != nil {
			return &zx.Error{Kind: zx.ErrInvalid, Op: op, Path: p, Msg: err.Error(), Err: err}
		}
		cp, r, err := fs.resolve(op, p)
		if err != nil {
			return err
		}
		readDir := func(dp string) ([]zx.Dir, error) {
			r, err := fs.lookup(dp)
			if err != nil {
				return nil, fail(op, dp, err)
			}
			if r.kids == nil {
				return nil, zx.E(zx.ErrNotDir, op, dp, "")
			}
			return r.kids()
		}
		stop := false
		emit := func(it zx.Item) bool {
			if !send(it) {
				stop = true
				return false
			}
			if get && it.Err == nil && it.Dir.Type() == zx.TypeFile {
				if err := fs.sendBlob(send, it.Dir.Path(), it.Dir, 0, -1); err != nil {
					ed := zx.Dir{zx.APath: it.Dir.Path(), zx.AName: it.Dir.Name()}
					return send(zx.Item{Dir: ed, Err: err})
				}
				return ctx.Err() == nil
			}
			return true
		}
		err = pred.Walk(ctx, r.d, pp, o.Spref, o.Dpref, o.Depth0, readDir, emit)
		if stop {
			return nil
		}
		if err != nil {
			return zx.Errorf(op, cp, err)
		}
		return nil
	})
}

func (fs *FS) ro(op, p string) error {
	if cp, err := zx.CleanPath(p); err == nil {
		p = cp
	}
	return zx.E(zx.ErrReadOnly, op, p, "the dump is read-only")
}

// Put implements zx.Tree: it fails with zx.ErrReadOnly.
func (fs *FS) Put(ctx context.Context, p string, d zx.Dir, off int64, data io.Reader) <-chan zx.Reply {
	return reply(nil, fs.ro("put", p))
}

// Move implements zx.Tree: it fails with zx.ErrReadOnly.
func (fs *FS) Move(ctx context.Context, from, to string) <-chan error {
	return errc(fs.ro("move", from))
}

// Remove implements zx.Tree: it fails with zx.ErrReadOnly.
func (fs *FS) Remove(ctx context.Context, p string) <-chan error {
	return errc(fs.ro("remove", p))
}

// RemoveAll implements zx.Tree: it fails with zx.ErrReadOnly.
func (fs *FS) RemoveAll(ctx context.Context, p string) <-chan error {
	return errc(fs.ro("removeall", p))
}

// Wstat implements zx.Tree: it fails with zx.ErrReadOnly.
func (fs *FS) Wstat(ctx context.Context, p string, d zx.Dir) <-chan zx.Reply {
	return reply(nil, fs.ro("wstat", p))
}
