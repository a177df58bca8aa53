package zx

import (
	"bytes"
	"context"
	"io"
)

// The functions in this file wait for the reply of one request: they are
// the blocking forms of the Tree methods, for callers with nothing to
// overlap.

// Stat returns the entry for path.
func Stat(ctx context.Context, t Tree, path string) (Dir, error) {
	r := <-t.Stat(ctx, path)
	return r.Dir, r.Err
}

// ReadFile returns the whole contents of a file.
func ReadFile(ctx context.Context, t Tree, path string) ([]byte, error) {
	var buf bytes.Buffer
	for it := range t.Get(ctx, path, 0, -1) {
		if it.Err != nil {
			return buf.Bytes(), it.Err
		}
		buf.Write(it.Data)
	}
	if err := ctx.Err(); err != nil {
		return buf.Bytes(), Errorf("get", path, err)
	}
	return buf.Bytes(), nil
}

// ReadDir returns the entries of a directory.
func ReadDir(ctx context.Context, t Tree, path string) ([]Dir, error) {
	var ds []Dir
	for it := range t.Get(ctx, path, 0, -1) {
		if it.Err != nil {
			return ds, it.Err
		}
		if it.Dir != nil {
			ds = append(ds, it.Dir)
		}
	}
	if err := ctx.Err(); err != nil {
		return ds, Errorf("get", path, err)
	}
	return ds, nil
}

// WriteFile creates or truncates a file and writes data to it, in one
// request, and returns the final entry. Attributes in d (mode, mtime ...)
// are set as Put does; d may be nil.
func WriteFile(ctx context.Context, t Tree, path string, d Dir, data []byte) (Dir, error) {
	nd := Dir{AType: TypeFile, ASize: "0"}
	for k, v := range d {
		nd[k] = v
	}
	r := <-t.Put(ctx, path, nd, 0, bytes.NewReader(data))
	return r.Dir, r.Err
}

// Mkdir creates a directory with the given mode.
func Mkdir(ctx context.Context, t Tree, path string, mode uint32) (Dir, error) {
	r := <-t.Put(ctx, path, Dir{AType: TypeDir, AMode: FormatMode(mode), AExcl: "y"}, 0, nil)
	return r.Dir, r.Err
}

// Wstat changes attributes of path and returns the resulting entry.
func Wstat(ctx context.Context, t Tree, path string, d Dir) (Dir, error) {
	r := <-t.Wstat(ctx, path, d)
	return r.Dir, r.Err
}

// Copy writes the contents of a stream of Items to w and returns the first
// error in it.
func Copy(w io.Writer, c <-chan Item) (int64, error) {
	var n int64
	var err error
	for it := range c {
		if it.Err != nil && err == nil {
			err = it.Err
		}
		if len(it.Data) > 0 && err == nil {
			m, werr := w.Write(it.Data)
			n += int64(m)
			if werr != nil {
				err = werr
			}
		}
	}
	return n, err
}
