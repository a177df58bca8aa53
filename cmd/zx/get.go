package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/zxfs/zx"
)

func getCommand() command {
	return command{
		name:    "get",
		args:    "[-r] [-o FILE|DIR] [--json] [--stats] [--timeout D] zx://HOST/PATH...",
		summary: "copy files or trees from a server",
		help: "Get copies remote files to stdout or, with -o, to a local file, which is written to a " +
			"temporary file and renamed into place with the remote mode and modification time (-o naming " +
			"an existing directory puts the file in it). The stat and the read of a file travel together: " +
			"one round trip. With -r it copies a whole tree into the local directory DIR (default: the last " +
			"element of PATH) using one FindGet request, which streams every entry and the contents of every " +
			"file: directories, files (mode and mtime kept) and symbolic links; ownership is not copied. " +
			"A progress bar shows on stderr when it is a terminal. With --json, -r prints one object per " +
			"entry copied.",
		example: "zx get zx://127.0.0.1/notes.txt > notes.txt\nzx get -r -o src zx://127.0.0.1/@code/src",
		run:     runGet,
	}
}

func runGet(args []string) int {
	c := getCommand()
	var opts commonFlags
	fset := newFlagSet(c)
	recursive := fset.Bool("r", false, "copy a whole tree, in one request")
	out := fset.String("o", "", "write to `FILE` (or into DIR) instead of stdout; with -r, the directory to copy into")
	opts.register(fset)
	rest, code := parseFlags(fset, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) == 0 {
		return usageError(c, "want at least one zx:// location")
	}
	if (*recursive || *out != "") && len(rest) > 1 {
		return usageError(c, "-r and -o take one location")
	}
	s := newSession(c.name, opts)
	locs := make([]string, len(rest))
	for i, arg := range rest {
		loc, err := s.parse(arg)
		if err != nil {
			s.errorf("%v", err)
			return s.close(exitUsage)
		}
		locs[i] = arg
		_ = loc
	}
	if *recursive {
		loc, _ := s.parse(rest[0])
		dst := *out
		if dst == "" {
			if loc.Path == "/" {
				s.errorf("give the directory to copy the whole tree into with -o DIR")
				return s.close(exitUsage)
			}
			dst = path.Base(loc.Path)
		}
		t, err := s.tree(loc)
		if err != nil {
			return s.close(s.fail(err))
		}
		return s.close(s.getTree(t, loc.Path, dst))
	}
	// Issue every Stat and Get before reading any reply.
	reqs := make([]*getReq, len(rest))
	for i, arg := range rest {
		loc, _ := s.parse(arg)
		t, err := s.tree(loc)
		if err != nil {
			return s.close(s.fail(err))
		}
		ctx, cancel := context.WithCancel(s.ctx)
		reqs[i] = &getReq{path: loc.Path, cancel: cancel, stat: t.Stat(ctx, loc.Path), data: t.Get(ctx, loc.Path, 0, -1)}
	}
	code = exitOK
	for _, r := range reqs {
		if err := s.getFile(r, *out); err != nil {
			code = s.fail(err)
		}
	}
	return s.close(code)
}

// A getReq is the Stat and Get of one file, in flight together.
type getReq struct {
	path   string
	cancel context.CancelFunc
	stat   <-chan zx.Reply
	data   <-chan zx.Item
}

// getFile copies one file to stdout or to out.
func (s *session) getFile(r *getReq, out string) error {
	defer r.cancel()
	st := <-r.stat
	if st.Err != nil {
		return st.Err
	}
	if st.Dir.IsDir() {
		return fmt.Errorf("%s is a directory; use get -r to copy a tree", r.path)
	}
	if st.Dir.Type() != zx.TypeFile {
		return fmt.Errorf("%s is not a regular file (type %s)", r.path, st.Dir.Type())
	}
	prog := newProgress(st.Dir.Size())
	defer prog.finish()
	if out == "" {
		s.out.Flush()
		_, err := copyItems(s.ctx, os.Stdout, r.data, prog)
		return err
	}
	if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		out = filepath.Join(out, path.Base(r.path))
	}
	if err := writeFileAtomic(s.ctx, out, st.Dir, r.data, prog); err != nil {
		return err
	}
	if s.opts.json {
		s.emit(st.Dir)
	}
	return nil
}

// copyItems writes the data of a Get stream to w. A stream cut short by
// the end of ctx is an error, although it carries none.
func copyItems(ctx context.Context, w io.Writer, c <-chan zx.Item, prog *progress) (int64, error) {
	var n int64
	var err error
	for it := range c {
		if err != nil {
			continue // drain
		}
		if it.Err != nil {
			err = it.Err
			continue
		}
		m, werr := w.Write(it.Data)
		n += int64(m)
		prog.add(int64(m))
		if werr != nil {
			err = werr
		}
	}
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	return n, err
}

// writeFileAtomic writes a remote file's data to dst through a temporary
// file renamed into place, with d's mode and modification time.
func writeFileAtomic(ctx context.Context, dst string, d zx.Dir, data <-chan zx.Item, prog *progress) error {
	f, err := os.CreateTemp(filepath.Dir(dst), ".zx-get-*")
	if err != nil {
		// Name the file asked for, not the temporary.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%s: %w", filepath.Dir(dst), pe.Err)
		}
		return fmt.Errorf("cannot write %s: %w", dst, err)
	}
	tmp := f.Name()
	_, err = copyItems(ctx, f, data, prog)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, d.FileMode().Perm()|fileModeSpecial(d))
	}
	if err == nil {
		if mt := d.Mtime(); !mt.IsZero() {
			err = os.Chtimes(tmp, mt, mt)
		}
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// fileModeSpecial returns d's setuid, setgid and sticky bits.
func fileModeSpecial(d zx.Dir) fs.FileMode {
	return d.FileMode() & (fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
}

// getTree copies the tree at rpath into the local directory dst with one
// FindGet. Writes are confined to dst with os.Root, whatever paths or links
// the server sends.
func (s *session) getTree(t zxFinderTree, rpath, dst string) int {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return s.fail(err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return s.fail(err)
	}
	defer root.Close()
	prog := newProgress(0)
	defer prog.finish()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()

	code := exitOK
	var dirs []zx.Dir // to get their modes and times at the end
	var cur *treeFile
	finish := func() {
		if cur == nil {
			return
		}
		if err := cur.finish(root); err != nil {
			code = s.fail(fmt.Errorf("%s: %v", cur.d.Path(), err))
		} else if s.opts.json {
			s.emit(cur.d)
		}
		cur = nil
	}
	for it := range findGet(ctx, t, rpath, "") {
		if it.Err != nil {
			if cur != nil && it.Dir != nil && it.Dir.Path() == cur.d.Path() {
				cur.abort(root)
				cur = nil
			}
			code = s.fail(it.Err)
			continue
		}
		if it.Dir == nil {
			if cur != nil && cur.err == nil {
				n, err := cur.f.Write(it.Data)
				prog.add(int64(n))
				cur.err = err
			}
			continue
		}
		finish()
		d := it.Dir
		rel, err := relPath(rpath, d.Path())
		if err != nil {
			code = s.fail(err)
			continue
		}
		switch d.Type() {
		case zx.TypeDir:
			if rel != "." {
				err = root.Mkdir(rel, 0o700)
				if errors.Is(err, fs.ErrExist) {
					err = nil
				}
			}
			dirs = append(dirs, d)
		case zx.TypeFile:
			if rel == "." {
				err = fmt.Errorf("%s is a file: drop -r to copy it", rpath)
				break
			}
			prog.grow(d.Size())
			cur, err = createTreeFile(root, rel, d)
		case zx.TypeLink:
			root.Remove(rel)
			err = root.Symlink(d[zx.ATarget], rel)
		default:
			err = fmt.Errorf("type %q not copied", d.Type())
		}
		if err != nil {
			code = s.fail(fmt.Errorf("%s: %v", d.Path(), err))
		} else if s.opts.json && d.Type() != zx.TypeFile {
			s.emit(d)
		}
	}
	if err := s.ctx.Err(); err != nil {
		if cur != nil {
			cur.abort(root) // cut short: keep no partial file
		}
		return s.fail(zx.Errorf("get", rpath, err))
	}
	finish()
	// Deepest first, so that setting a directory's time is not undone by
	// changes inside it.
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		rel, _ := relPath(rpath, d.Path())
		if err := root.Chmod(rel, d.FileMode().Perm()|fileModeSpecial(d)); err != nil {
			code = s.fail(err)
		}
		if mt := d.Mtime(); !mt.IsZero() {
			root.Chtimes(rel, mt, mt)
		}
	}
	return code
}

type zxFinderTree interface {
	zx.Tree
	zx.Finder
}

// relPath returns p relative to base, as a local path.
func relPath(base, p string) (string, error) {
	if !zx.HasPrefix(p, base) {
		return "", fmt.Errorf("server sent %s, which is not below %s", p, base)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, base), "/")
	if rel == "" {
		return ".", nil
	}
	if _, err := zx.CleanPath(rel); err != nil {
		return "", err
	}
	return filepath.FromSlash(rel), nil
}

// A treeFile is a file being copied by get -r: its data goes to a
// temporary file, renamed into place at the end.
type treeFile struct {
	d        zx.Dir
	rel, tmp string
	f        *os.File
	err      error
}

func createTreeFile(root *os.Root, rel string, d zx.Dir) (*treeFile, error) {
	for i := 0; ; i++ {
		tmp := filepath.Join(filepath.Dir(rel), fmt.Sprintf(".zx-get-%d-%d", os.Getpid(), i))
		f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) && i < 100 {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &treeFile{d: d, rel: rel, tmp: tmp, f: f}, nil
	}
}

func (tf *treeFile) finish(root *os.Root) error {
	err := tf.err
	if cerr := tf.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Chmod(tf.tmp, tf.d.FileMode().Perm()|fileModeSpecial(tf.d))
	}
	if mt := tf.d.Mtime(); err == nil && !mt.IsZero() {
		err = root.Chtimes(tf.tmp, mt, mt)
	}
	if err == nil {
		err = root.Rename(tf.tmp, tf.rel)
	}
	if err != nil {
		root.Remove(tf.tmp)
	}
	return err
}

func (tf *treeFile) abort(root *os.Root) {
	tf.f.Close()
	root.Remove(tf.tmp)
}
