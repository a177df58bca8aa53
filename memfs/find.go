package memfs

import (
	"context"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/pred"
)

// Find implements zx.Finder. The walk runs when earlier conflicting
// requests are done and collects its results before it streams them, so
// it does not hold up later requests while the caller reads.
func (fs *FS) Find(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	return fs.find(ctx, "find", p, o, false)
}

// FindGet implements zx.Finder. The data sent for each file is a snapshot
// taken while walking.
func (fs *FS) FindGet(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	return fs.find(ctx, "findget", p, o, true)
}

func (fs *FS) find(ctx context.Context, op, p string, o zx.FindOpts, get bool) <-chan zx.Item {
	p, err := zx.CleanPath(p)
	if err != nil {
		return fs.errStream(ctx, op, p, zx.Errorf(op, p, err))
	}
	pr, err := pred.Parse(o.Pred)
	if err != nil {
		return fs.errStream(ctx, op, p, zx.Errorf(op, p, err))
	}
	s := fs.newStream(ctx, op, p)
	entered, wait := fs.enter(ctx, false, p)
	go func() {
		if !wait() {
			entered.Done()
			s.cutOff = true
			s.end(nil)
			return
		}
		snaps := make(map[string]*data) // by ino, for FindGet
		entry := func(n *node, p string) zx.Dir {
			d := n.dir(p)
			if get && n.typ == zx.TypeFile {
				snaps[d[zx.AIno]] = n.data.clone()
			}
			return d
		}
		fs.mu.RLock()
		var root zx.Dir
		n, err := fs.lookup(p)
		if err == nil {
			root = entry(n, p)
		}
		fs.mu.RUnlock()
		if err != nil {
			entered.Done()
			s.end(fail(op, p, err))
			return
		}
		readDir := func(dp string) ([]zx.Dir, error) {
			fs.mu.RLock()
			defer fs.mu.RUnlock()
			n, err := fs.lookup(dp)
			if err == nil && n.typ != zx.TypeDir {
				err = zx.ErrNotDir
			}
			if err != nil {
				return nil, fail(op, dp, err)
			}
			var ds []zx.Dir
			for _, name := range n.sortedNames() {
				ds = append(ds, entry(n.children[name], zx.Join(dp, name)))
			}
			return ds, nil
		}
		var found []zx.Item
		err = pred.Walk(ctx, root, pr, o.Spref, o.Dpref, o.Depth0, readDir, func(it zx.Item) bool {
			// The entry at spref itself is renamed too: a name is always
			// the last element of its path.
			if p := it.Dir.Path(); p != "" && it.Dir.Name() != "" {
				if _, name := zx.Split(p); p != "/" && name != it.Dir.Name() {
					it.Dir[zx.AName] = name
				} else if p == "/" {
					it.Dir[zx.AName] = "/"
				}
			}
			found = append(found, it)
			return true
		})
		entered.Done()
		for _, it := range found {
			if !s.send(it) {
				break
			}
			if d := it.Dir; get && it.Err == nil && d.Type() == zx.TypeFile {
				if snap := snaps[d[zx.AIno]]; snap != nil && !sendData(s, snap, 0, -1) {
					break
				}
			}
		}
		if err != nil {
			err = zx.Errorf(op, p, err)
		}
		s.end(err)
	}()
	return s.c
}
