package dump

import (
	"context"
	"io"
	"os"
	"path"
	"slices"

	"github.com/zxfs/zx"
)

// RestoreStats count what a Restore wrote.
type RestoreStats struct {
	Files, Dirs, Links int
	Bytes              int64
}

// Restore writes the version of p held by snapshot name of tree (see
// Pick) to dst at dstPath, through the tree's ordinary requests: a file
// is one Put carrying its data, mode and mtime (zx trees replace files
// atomically), a symbolic link one Put (target and mtime), and a directory the same for
// everything below it, every Put issued before any reply is awaited
// (directories first, in snapshot order), then the directories' mtimes
// set deepest first (writing into a directory changes its mtime).
// Entries at dstPath that are not in the version are left alone;
// ownership and user attributes are not restored, nor devices, fifos and
// sockets.
func (s *Store) Restore(ctx context.Context, tree, name, p string, dst zx.Tree, dstPath string) (*RestoreStats, error) {
	p, err := zx.CleanPath(p)
	if err != nil {
		return nil, err
	}
	if dstPath, err = zx.CleanPath(dstPath); err != nil {
		return nil, err
	}
	sn, err := s.ReadSnapshot(tree, name)
	if err != nil {
		return nil, err
	}
	top := sn.Lookup(p)
	if top == nil {
		return nil, zx.E(zx.ErrNotExist, "restore", p, "absent from snapshot "+tree+"/"+name)
	}
	st := &RestoreStats{}
	var (
		replies []<-chan zx.Reply
		files   []*blobReader
		dirs    []zx.Dir // restored directories, parents first
	)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var walk func(d zx.Dir, to string) error
	walk = func(d zx.Dir, to string) error {
		attrs := zx.Dir{zx.AType: d.Type()}
		switch d.Type() {
		case zx.TypeDir:
			attrs[zx.AMode] = d[zx.AMode]
			replies = append(replies, dst.Put(ctx, to, attrs, 0, nil))
			st.Dirs++
			dirs = append(dirs, zx.Dir{zx.APath: to, zx.AMtime: d[zx.AMtime]})
			for _, k := range sn.Children(d.Path()) {
				if err := walk(k, path.Join(to, path.Base(k.Path()))); err != nil {
					return err
				}
			}
		case zx.TypeLink:
			attrs[zx.ATarget] = d[zx.ATarget]
			attrs[zx.AMtime] = d[zx.AMtime]
			replies = append(replies, dst.Put(ctx, to, attrs, 0, nil))
			st.Links++
		case zx.TypeFile:
			if !s.HasBlob(d[AHash]) {
				return zx.E(zx.ErrNotExist, "restore", d.Path(), "blob "+d[AHash]+" missing from the store")
			}
			f := &blobReader{s: s, sum: d[AHash]}
			files = append(files, f)
			attrs[zx.ASize] = "0"
			attrs[zx.AMode] = d[zx.AMode]
			attrs[zx.AMtime] = d[zx.AMtime]
			replies = append(replies, dst.Put(ctx, to, attrs, 0, f))
			st.Files++
			st.Bytes += d.Size()
		}
		return nil
	}
	if err := walk(top, dstPath); err != nil {
		return st, err
	}
	var first error
	for _, rc := range replies {
		if r := <-rc; r.Err != nil && first == nil {
			first = r.Err
			cancel()
		}
	}
	if first != nil {
		return st, first
	}
	slices.Reverse(dirs)
	var ws []<-chan zx.Reply
	for _, d := range dirs {
		if d[zx.AMtime] != "" {
			ws = append(ws, dst.Wstat(ctx, d.Path(), zx.Dir{zx.AMtime: d[zx.AMtime]}))
		}
	}
	for _, rc := range ws {
		if r := <-rc; r.Err != nil && first == nil {
			first = r.Err
		}
	}
	return st, first
}

// blobReader reads a blob, opening it on the first Read, so that a
// restore of many files does not hold a descriptor per file queued.
type blobReader struct {
	s    *Store
	sum  string
	f    *os.File
	done bool
}

func (b *blobReader) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if b.f == nil {
		f, err := b.s.OpenBlob(b.sum)
		if err != nil {
			return 0, err
		}
		b.f = f
	}
	n, err := b.f.Read(p)
	if err != nil {
		b.done = true
		b.Close()
	}
	return n, err
}

func (b *blobReader) Close() error {
	if b.f == nil {
		return nil
	}
	err := b.f.Close()
	b.f = nil
	return err
}
