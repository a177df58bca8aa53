package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/zxfs/zx"
)

func putCommand() command {
	return command{
		name:    "put",
		args:    "[-r] [--mode MODE] [--json] [--stats] [--timeout D] [SRC|-] zx://HOST/PATH",
		summary: "copy files or trees to a server",
		help: "Put writes stdin (or SRC; \"-\" is stdin) to the remote file PATH with one request that " +
			"creates or truncates the file, sets its mode and modification time (those of SRC, or --mode) " +
			"and carries the data; the server replaces the file atomically when all data has arrived. A " +
			"PATH ending in \"/\" names a directory to put SRC into. With -r, SRC is a local directory copied " +
			"to PATH: every directory, file and symbolic link is sent at once, without waiting for any reply, " +
			"so the whole tree costs about one round trip; errors are reported per file. A progress bar shows " +
			"on stderr when it is a terminal. With --json it prints the resulting entries. A PATH that is a " +
			"symbolic link on the server is not written through (requests never follow links): the put fails, " +
			"saying so; put to the target's path, or remove the link first.",
		example: "echo hello | zx put zx://127.0.0.1/hello.txt\nzx put -r ./site zx://127.0.0.1/www",
		run:     runPut,
	}
}

func runPut(args []string) int {
	c := putCommand()
	var opts commonFlags
	fset := newFlagSet(c)
	recursive := fset.Bool("r", false, "copy the local directory SRC and everything below it")
	modeStr := fset.String("mode", "", "permissions of the files written, in octal, e.g. 0644 (default: those of SRC)")
	opts.register(fset)
	rest, code := parseFlags(fset, c, args)
	if code >= 0 {
		return code
	}
	var mode string
	if *modeStr != "" {
		m, err := strconv.ParseUint(*modeStr, 8, 32)
		if err != nil || m > 07777 {
			return usageError(c, fmt.Sprintf("bad --mode %q: want octal permissions, e.g. 0644", *modeStr))
		}
		mode = zx.FormatMode(uint32(m))
	}
	var src, dst string
	switch len(rest) {
	case 1:
		src, dst = "-", rest[0]
	case 2:
		src, dst = rest[0], rest[1]
	default:
		return usageError(c, "want [SRC] and one zx:// location")
	}
	if *recursive && src == "-" {
		return usageError(c, "-r needs a local directory SRC")
	}
	s := newSession(c.name, opts)
	loc, err := s.parse(dst)
	if err != nil {
		s.errorf("%v", err)
		return s.close(exitUsage)
	}
	if strings.HasSuffix(dst, "/") && src != "-" && !*recursive {
		loc.Path = path.Join(loc.Path, filepath.Base(src))
	}
	var fi os.FileInfo
	if src != "-" {
		if fi, err = os.Lstat(src); err != nil {
			return s.close(s.fail(err))
		}
		if fi.IsDir() && !*recursive {
			s.errorf("%s is a directory; use put -r to copy a tree", src)
			return s.close(exitUsage)
		}
		if !fi.IsDir() && *recursive {
			s.errorf("%s is not a directory; drop -r to copy a file", src)
			return s.close(exitUsage)
		}
	}
	t, err := s.tree(loc)
	if err != nil {
		return s.close(s.fail(err))
	}
	if *recursive {
		return s.close(s.putTree(t, src, loc.Path, mode))
	}
	return s.close(s.putFile(t, src, fi, loc.Path, mode))
}

// fileDir returns the attributes a Put of a local file sends: create or
// truncate, mode and mtime.
func fileDir(fi os.FileInfo, mode string) zx.Dir {
	d := zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}
	if fi != nil {
		d.SetMode(zx.PermOf(fi.Mode()))
		d.SetTime(zx.AMtime, fi.ModTime())
	}
	if mode != "" {
		d[zx.AMode] = mode
	}
	return d
}

// putFile sends one file (or stdin) with one Put.
func (s *session) putFile(t zx.Tree, src string, fi os.FileInfo, rpath, mode string) int {
	var r io.Reader = os.Stdin
	var total int64
	if src != "-" {
		if fi.Mode()&fs.ModeSymlink != 0 {
			r = nil
		} else {
			f, err := os.Open(src)
			if err != nil {
				return s.fail(err)
			}
			defer f.Close()
			r, total = f, fi.Size()
		}
	}
	d := fileDir(fi, mode)
	if fi != nil && fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return s.fail(err)
		}
		d = zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: target}
	}
	prog := newProgress(total)
	defer prog.finish()
	if r != nil {
		r = &countingReader{r: r, prog: prog}
	}
	rep := <-t.Put(s.ctx, rpath, d, 0, r)
	if rep.Err != nil {
		return s.fail(rep.Err)
	}
	if s.opts.json {
		s.emit(rep.Dir)
	}
	return exitOK
}

// countingReader counts the bytes read into a progress bar.
type countingReader struct {
	r    io.Reader
	prog *progress
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.prog.add(int64(n))
	return n, err
}

// A putOp is one request of put -r.
type putOp struct {
	path string
	d    zx.Dir
	src  string // local file to send, or ""
	size int64
}

// putTree copies the local tree src to rpath: every Put is issued before
// any reply is read (directories first: the server applies requests on
// overlapping paths in order), then directory times are set, then every
// reply is checked.
func (s *session) putTree(t zx.Tree, src, rpath, mode string) int {
	var dirs, files []putOp
	code := exitOK
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			code = s.fail(err)
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		rp := path.Join(rpath, filepath.ToSlash(rel))
		fi, err := e.Info()
		if err != nil {
			code = s.fail(err)
			return nil
		}
		switch {
		case e.IsDir():
			d := zx.Dir{zx.AType: zx.TypeDir}
			d.SetMode(zx.PermOf(fi.Mode()))
			d.SetTime(zx.AMtime, fi.ModTime())
			dirs = append(dirs, putOp{path: rp, d: d})
		case fi.Mode().IsRegular():
			files = append(files, putOp{path: rp, d: fileDir(fi, mode), src: p, size: fi.Size()})
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				code = s.fail(err)
				return nil
			}
			files = append(files, putOp{path: rp, d: zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: target}})
		default:
			s.errorf("%s: skipped: not a file, directory or symbolic link", p)
		}
		return nil
	})
	if err != nil {
		return s.fail(err)
	}
	var total int64
	for _, op := range files {
		total += op.size
	}
	prog := newProgress(total)
	defer prog.finish()
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()

	type result struct {
		path string
		d    zx.Dir
		err  error
	}
	ops := append(dirs, files...)
	results := make([]result, len(ops)+len(dirs))
	var wg sync.WaitGroup
	wait := func(i int, p string, rc <-chan zx.Reply, lr *lazyReader) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := <-rc
			lr.Close() // the server may have failed before reading all data
			results[i] = result{p, r.Dir, r.Err}
		}()
	}
	sem := make(chan struct{}, 64) // files open at once
	for i, op := range ops {
		d := op.d.Clone()
		if d.IsDir() {
			delete(d, zx.AMtime) // set after the files in it are written
		}
		var lr *lazyReader
		var data io.Reader
		if op.src != "" {
			lr = &lazyReader{name: op.src, sem: sem, prog: prog}
			data = lr
		}
		wait(i, op.path, t.Put(ctx, op.path, d, 0, data), lr)
	}
	// Directory times, deepest first, queued behind the writes below them.
	for i := len(dirs) - 1; i >= 0; i-- {
		op := dirs[i]
		rc := t.Wstat(ctx, op.path, zx.Dir{zx.AMtime: op.d[zx.AMtime]})
		wait(len(ops)+len(dirs)-1-i, op.path, rc, nil)
	}
	wg.Wait()
	for i, r := range results {
		if r.err != nil {
			code = s.fail(r.err)
		} else if s.opts.json && i < len(ops) {
			s.emit(r.d)
		}
	}
	return code
}

// A lazyReader opens its file on the first Read and closes it at the end
// of the data, so that a tree of many files does not hold a descriptor per
// file; sem bounds the files open at once.
type lazyReader struct {
	name string
	sem  chan struct{}
	prog *progress

	mu     sync.Mutex
	f      *os.File
	done   bool
	holder bool
}

func (r *lazyReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		return 0, io.EOF
	}
	if r.f == nil {
		r.mu.Unlock()
		r.sem <- struct{}{}
		r.mu.Lock()
		r.holder = true
		if r.done { // closed while waiting
			r.release()
			r.mu.Unlock()
			return 0, io.EOF
		}
		f, err := os.Open(r.name)
		if err != nil {
			r.release()
			r.done = true
			r.mu.Unlock()
			return 0, err
		}
		r.f = f
	}
	f := r.f
	r.mu.Unlock()
	n, err := f.Read(p)
	r.prog.add(int64(n))
	if err != nil {
		r.Close()
	}
	return n, err
}

// Close closes the file and frees its slot. It may be called more than
// once, and concurrently with Read.
func (r *lazyReader) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done = true
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
	r.release()
	return nil
}

// release frees the slot, if held. r.mu is held.
func (r *lazyReader) release() {
	if r.holder {
		r.holder = false
		<-r.sem
	}
}
