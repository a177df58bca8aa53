package zxtest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/zxfs/zx"
)

var rootTests = []subtest{
	{"Root", func(e *env) {
		d := e.stat("/")
		if d.Name() != "/" || d.Path() != "/" || d.Type() != zx.TypeDir {
			e.t.Fatalf("stat /: %v, want name /, path /, type d", d)
		}
		if ds := e.readDir("/"); len(ds) != 0 {
			e.t.Fatalf("new tree is not empty: %v", ds)
		}
	}},
	{"Entries", func(e *env) {
		since := time.Now()
		e.mk("/d/f:hello", "/d/l->f")
		f := e.stat("/d/f")
		if f.Type() != zx.TypeFile || f.Size() != 5 || f.Name() != "f" || f.Path() != "/d/f" {
			e.t.Fatalf("stat /d/f: %v", f)
		}
		e.recent(f, zx.AMtime, since)
		if d := e.stat("/d"); !d.IsDir() || d.Name() != "d" {
			e.t.Fatalf("stat /d: %v", d)
		}
		// Paths are cleaned.
		e.same("stat //d/./f/", f, e.stat("//d/./f/"))
	}},
	{"InvalidPaths", func(e *env) {
		e.mk("/a/b:x")
		bad := []string{"/a/../b", "/a/b/..", "../a", "/a\x00b"}
		for _, p := range bad {
			_, err := e.statErr(p)
			e.wantErr(err, "stat "+strconv.Quote(p), zx.ErrInvalid)
			_, _, err = e.getErr(p, 0, -1)
			e.wantErr(err, "get "+strconv.Quote(p), zx.ErrInvalid)
			_, err = e.putErr(p, zx.Dir{zx.AType: zx.TypeFile}, 0, []byte("x"))
			e.wantErr(err, "put "+strconv.Quote(p), zx.ErrInvalid)
			_, err = e.wstatErr(p, zx.Dir{zx.AMode: "0600"})
			e.wantErr(err, "wstat "+strconv.Quote(p), zx.ErrInvalid)
			e.wantErr(e.move(p, "/c"), "move "+strconv.Quote(p), zx.ErrInvalid)
			e.wantErr(e.move("/a/b", p), "move to "+strconv.Quote(p), zx.ErrInvalid)
			e.wantErr(e.remove(p), "remove "+strconv.Quote(p), zx.ErrInvalid)
			e.wantErr(e.removeAll(p), "removeall "+strconv.Quote(p), zx.ErrInvalid)
		}
		long := "/" + strings.Repeat("n", 256)
		_, err := e.putErr(long, zx.Dir{zx.AType: zx.TypeFile}, 0, nil)
		e.wantErr(err, "put of a 256-byte name", zx.ErrNameTooLong)
		_, err = e.statErr(long)
		e.wantErr(err, "stat of a 256-byte name", zx.ErrNameTooLong)
		ok := "/" + strings.Repeat("n", 255)
		e.put(ok, zx.Dir{zx.AType: zx.TypeFile}, 0, []byte("x"))
		e.check("/a/b:x", ok+":x")
	}},
}

var putTests = []subtest{
	{"PutCreateFile", func(e *env) {
		d := e.put("/f", zx.Dir{zx.AType: zx.TypeFile}, 0, nil)
		if d.Type() != zx.TypeFile || d.Size() != 0 || d.Mode() != 0644 || d.Path() != "/f" {
			e.t.Fatalf("put /f: %v, want an empty file with mode 0644", d)
		}
		e.same("put reply and stat", d, e.stat("/f"))
		e.check("/f:")
	}},
	{"PutCreateWithData", func(e *env) {
		since := time.Now()
		d := e.put("/f", zx.Dir{zx.AType: zx.TypeFile}, 0, []byte("hello"))
		if d.Size() != 5 {
			e.t.Fatalf("put /f: size %d, want 5", d.Size())
		}
		e.recent(d, zx.AMtime, since)
		e.same("put reply and stat", d, e.stat("/f"))
		e.check("/f:hello")
		// Create with a resize and data past it, and appending.
		e.put("/g", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "3"}, -1, []byte("xy"))
		e.check("/f:hello", "/g:\x00\x00\x00xy")
	}},
	{"PutCreateDir", func(e *env) {
		d := e.put("/d", zx.Dir{zx.AType: zx.TypeDir}, 0, nil)
		if !d.IsDir() || d.Mode() != 0755 {
			e.t.Fatalf("put /d: %v, want a directory with mode 0755", d)
		}
		e.same("put reply and stat", d, e.stat("/d"))
		e.put("/d/e", zx.Dir{zx.AType: zx.TypeDir, zx.AMode: "0700"}, 0, nil)
		if m := e.stat("/d/e").Mode(); m != 0700 {
			e.t.Fatalf("/d/e: mode %o, want 0700", m)
		}
		if ds := e.readDir("/d/e"); len(ds) != 0 {
			e.t.Fatalf("new directory is not empty: %v", ds)
		}
		e.check("/d/", "/d/e/")
	}},
	{"PutCreateSymlink", func(e *env) {
		e.mk("/f:data")
		d := e.put("/l", zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: "f"}, 0, nil)
		if d.Type() != zx.TypeLink || d[zx.ATarget] != "f" {
			e.t.Fatalf("put /l: %v, want a link to f", d)
		}
		// Stat never follows links, dangling or not.
		e.same("put reply and stat", d, e.stat("/l"))
		e.put("/dangling", zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: "../no/such"}, 0, nil)
		if d := e.stat("/dangling"); d.Type() != zx.TypeLink || d[zx.ATarget] != "../no/such" {
			e.t.Fatalf("stat /dangling: %v", d)
		}
		e.put("/abs", zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: "/f"}, 0, nil)
		e.check("/f:data", "/l->f", "/dangling->../no/such", "/abs->/f")
		_, err := e.putErr("/nolink", zx.Dir{zx.AType: zx.TypeLink}, 0, nil)
		e.wantErr(err, "put of a link without target", zx.ErrInvalid)
		e.notExist("/nolink")
	}},
	{"PutSpecialFiles", func(e *env) {
		if e.opts.NoSpecialFiles {
			e.t.Skip("NoSpecialFiles")
		}
		for _, typ := range []string{zx.TypeFifo, zx.TypeSocket} {
			p := "/" + typ
			d := e.put(p, zx.Dir{zx.AType: typ, zx.AMode: "0600"}, 0, nil)
			if d.Type() != typ || d.Mode() != 0600 {
				e.t.Fatalf("put %s: %v", p, d)
			}
			e.same("put reply and stat", d, e.stat(p))
		}
		if !e.opts.NoDevices {
			d := e.put("/c", zx.Dir{zx.AType: zx.TypeCharDev, zx.ARdev: "259"}, 0, nil)
			if d.Type() != zx.TypeCharDev || d[zx.ARdev] != "259" {
				e.t.Fatalf("put /c: %v, want a char device with rdev 259", d)
			}
		}
		if ds := e.readDir("/"); len(ds) < 2 {
			e.t.Fatalf("get /: %v", ds)
		}
	}},
	{"PutAttrs", func(e *env) {
		mtime := int64(1600000000123456789)
		d := zx.Dir{zx.AType: zx.TypeFile, zx.AMode: "0600", zx.AMtime: strconv.FormatInt(mtime, 10), "Foo": "x"}
		if !e.opts.NoUserAttrs {
			d["color"] = "blue"
		}
		r := e.put("/f", d, 0, []byte("data"))
		e.same("put reply and stat", r, e.stat("/f"))
		if r.Mode() != 0600 {
			e.t.Fatalf("mode %s, want 0600", r[zx.AMode])
		}
		e.wantTime(r, zx.AMtime, mtime)
		if _, ok := r["Foo"]; ok {
			e.t.Fatalf("upper-case attribute stored: %v", r)
		}
		if _, ok := e.stat("/f")["Foo"]; ok {
			e.t.Fatalf("upper-case attribute stored")
		}
		if !e.opts.NoUserAttrs && r["color"] != "blue" {
			e.t.Fatalf("user attribute not stored: %v", r)
		}
		// Attributes of an existing file, with and without data.
		r = e.put("/f", zx.Dir{zx.AMode: "0640"}, 0, nil)
		if r.Mode() != 0640 || r.Size() != 4 {
			e.t.Fatalf("put mode: %v", r)
		}
		mtime += 1000001
		r = e.put("/f", zx.Dir{zx.AMode: "0604", zx.AMtime: strconv.FormatInt(mtime, 10)}, 4, []byte("!"))
		e.wantTime(r, zx.AMtime, mtime)
		if r.Mode() != 0604 {
			e.t.Fatalf("put mode: %v", r)
		}
		e.same("put reply and stat", r, e.stat("/f"))
		if !e.opts.NoUserAttrs {
			_, err := e.putErr("/f", zx.Dir{"bad=name": "x"}, 0, nil)
			e.wantErr(err, "put of an attribute named bad=name", zx.ErrInvalid)
		}
		e.check("/f:data!")
	}},
	{"PutBadAttrs", func(e *env) {
		for _, d := range []zx.Dir{
			{zx.AType: zx.TypeFile, zx.AMode: "0999"},
			{zx.AType: zx.TypeFile, zx.AMode: "rw"},
			{zx.AType: zx.TypeFile, zx.AMode: "010000"},
			{zx.AType: zx.TypeFile, zx.AMtime: "yesterday"},
			{zx.AType: zx.TypeFile, zx.ASize: "-1"},
			{zx.AType: zx.TypeFile, zx.ASize: "x"},
			{zx.AType: "?"},
		} {
			_, err := e.putErr("/f", d, 0, []byte("x"))
			e.wantErr(err, "put "+d.String(), zx.ErrInvalid)
			e.notExist("/f")
		}
	}},
	{"PutTruncate", func(e *env) {
		e.mk("/f:hello world")
		d := e.put("/f", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, []byte("hi"))
		if d.Size() != 2 {
			e.t.Fatalf("put: size %d, want 2", d.Size())
		}
		e.check("/f:hi")
		e.put("/f", zx.Dir{zx.ASize: "0"}, 0, nil)
		e.check("/f:")
		// Creates when missing.
		e.put("/g", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, []byte("new"))
		e.check("/f:", "/g:new")
	}},
	{"PutExcl", func(e *env) {
		e.mk("/f:old", "/d/")
		_, err := e.putErr("/f", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0", zx.AExcl: "y"}, 0, []byte("new"))
		e.wantErr(err, "exclusive put of an existing file", zx.ErrExist)
		_, err = e.putErr("/d", zx.Dir{zx.AType: zx.TypeDir, zx.AExcl: "y"}, 0, nil)
		e.wantErr(err, "exclusive put of an existing directory", zx.ErrExist)
		_, err = e.putErr("/d", zx.Dir{zx.AExcl: "y"}, 0, nil)
		e.wantErr(err, "exclusive put without type of an existing directory", zx.ErrExist)
		e.put("/g", zx.Dir{zx.AType: zx.TypeFile, zx.AExcl: "y"}, 0, []byte("new"))
		e.put("/e", zx.Dir{zx.AType: zx.TypeDir, zx.AExcl: "y"}, 0, nil)
		e.check("/f:old", "/d/", "/g:new", "/e/")
	}},
	{"PutErrors", func(e *env) {
		e.mk("/f:old", "/d/x:x")
		_, err := e.putErr("/new", zx.Dir{zx.AMode: "0644"}, 0, []byte("x"))
		e.wantErr(err, "put without type of a missing file", zx.ErrNotExist)
		_, err = e.putErr("/nx/f", zx.Dir{zx.AType: zx.TypeFile}, 0, []byte("x"))
		e.wantErr(err, "put with a missing parent", zx.ErrNotExist)
		_, err = e.putErr("/f/g", zx.Dir{zx.AType: zx.TypeFile}, 0, []byte("x"))
		e.wantErr(err, "put below a file", zx.ErrNotDir)
		_, err = e.putErr("/d", zx.Dir{}, 0, []byte("x"))
		e.wantErr(err, "put of data to a directory", zx.ErrIsDir)
		_, err = e.putErr("/d", zx.Dir{zx.AType: zx.TypeFile}, 0, nil)
		e.wantErr(err, "put of type - over a directory", zx.ErrIsDir)
		_, err = e.putErr("/d", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, []byte("x"))
		e.wantErr(err, "put truncating a directory", zx.ErrIsDir)
		_, err = e.putErr("/f", zx.Dir{zx.AType: zx.TypeDir}, 0, nil)
		e.wantErr(err, "put of type d over a file", zx.ErrExist)
		e.check("/f:old", "/d/x:x")
	}},
	{"PutDirOverDir", func(e *env) {
		e.mk("/d/x:x")
		d := e.put("/d", zx.Dir{zx.AType: zx.TypeDir, zx.AMode: "0700"}, 0, nil)
		if !d.IsDir() || d.Mode() != 0700 {
			e.t.Fatalf("put /d: %v, want mode 0700", d)
		}
		e.same("put reply and stat", d, e.stat("/d"))
		e.check("/d/x:x")
		e.put("/", zx.Dir{zx.AType: zx.TypeDir}, 0, nil)
	}},
	{"PutResize", func(e *env) {
		e.mk("/f:abc")
		d := e.put("/f", zx.Dir{zx.ASize: "6"}, 0, nil)
		if d.Size() != 6 {
			e.t.Fatalf("extend: size %d", d.Size())
		}
		e.check("/f:abc\x00\x00\x00")
		e.put("/f", zx.Dir{zx.ASize: "2"}, 0, nil)
		e.check("/f:ab")
		e.put("/f", zx.Dir{zx.ASize: "8"}, 3, []byte("XY"))
		e.check("/f:ab\x00XY\x00\x00\x00")
		e.put("/f", zx.Dir{zx.ASize: "1"}, -1, []byte("Z"))
		e.check("/f:aZ")
	}},
	{"PutInPlace", func(e *env) {
		e.mk("/f:hello world")
		e.put("/f", zx.Dir{}, 6, []byte("WORLD"))
		e.check("/f:hello WORLD")
		e.put("/f", zx.Dir{zx.AType: zx.TypeFile}, 0, []byte("J"))
		e.check("/f:Jello WORLD")
		d := e.put("/f", nil, 13, []byte("!"))
		if d.Size() != 14 {
			e.t.Fatalf("write past the end: size %d, want 14", d.Size())
		}
		e.check("/f:Jello WORLD\x00\x00!")
		since := time.Now()
		d = e.put("/f", zx.Dir{}, -1, []byte("??"))
		e.recent(d, zx.AMtime, since)
		e.check("/f:Jello WORLD\x00\x00!??")
		// Appending creates.
		e.put("/g", zx.Dir{zx.AType: zx.TypeFile}, -1, []byte("a"))
		e.put("/g", zx.Dir{zx.AType: zx.TypeFile}, -1, []byte("b"))
		e.check("/f:Jello WORLD\x00\x00!??", "/g:ab")
	}},
	{"PutSparse", func(e *env) {
		if e.opts.NoSparse {
			e.t.Skip("NoSparse")
		}
		const size = 1 << 30
		d := e.put("/f", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: strconv.Itoa(size)}, size-4, []byte("WXYZ"))
		if d.Size() != size {
			e.t.Fatalf("sparse file: size %d, want %d", d.Size(), size)
		}
		if got := e.readRange("/f", size-4, 4); got != "WXYZ" {
			e.t.Fatalf("end of sparse file: %q", got)
		}
		if got := e.readRange("/f", size-8, 100); got != "\x00\x00\x00\x00WXYZ" {
			e.t.Fatalf("end of sparse file: %q", got)
		}
		for _, off := range []int64{0, 1 << 20, size / 2, size - 8192} {
			if got := e.readRange("/f", off, 4096); got != strings.Repeat("\x00", 4096) {
				e.t.Fatalf("hole at %d is not zeros", off)
			}
		}
	}},
	{"PutAtomicReaderError", func(e *env) {
		e.mk("/f:old contents")
		bad := errors.New("reader failed")
		_, err := e.putErrReader("/f", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, &failReader{n: 100 << 10, err: bad})
		if err == nil {
			e.t.Fatal("put whose data failed: no error")
		}
		_, err = e.putErrReader("/g", zx.Dir{zx.AType: zx.TypeFile}, 0, &failReader{n: 100 << 10, err: bad})
		if err == nil {
			e.t.Fatal("put creating a file whose data failed: no error")
		}
		e.notExist("/g")
		e.check("/f:old contents")
		// In place: what was written may stay, but the reply fails.
		_, err = e.putErrReader("/f", zx.Dir{}, 0, &failReader{n: 3, err: bad})
		if err == nil {
			e.t.Fatal("put in place whose data failed: no error")
		}
	}},
	{"PutAtomicCancel", func(e *env) {
		e.mk("/f:old contents")
		for _, p := range []string{"/f", "/g"} {
			ctx, cancel := context.WithCancel(e.ctx)
			pr, pw := io.Pipe()
			c := e.tr.Put(ctx, p, zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, pr)
			if _, err := pw.Write(bytes.Repeat([]byte("n"), 64<<10)); err != nil {
				e.t.Fatalf("put %s: writing data: %v", p, err)
			}
			cancel()
			r := recv(e, c, "cancelled put "+p+" with its data still open")
			pw.Close()
			e.wantErr(r.Err, "cancelled put "+p, zx.ErrCanceled)
		}
		e.notExist("/g")
		e.check("/f:old contents")
	}},
}

func (e *env) putErrReader(p string, d zx.Dir, off int64, r io.Reader) (zx.Dir, error) {
	e.t.Helper()
	rep := recv(e, e.tr.Put(e.ctx, p, d, off, r), "put "+p)
	return rep.Dir, rep.Err
}

// failReader yields n bytes, then fails with err.
type failReader struct {
	n   int
	err error
}

func (r *failReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	n := min(len(p), r.n, 8<<10)
	for i := range n {
		p[i] = 'x'
	}
	r.n -= n
	return n, nil
}
