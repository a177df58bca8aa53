package zxtest

import (
	"strconv"
	"time"

	"github.com/zxfs/zx"
)

var wstatTests = []subtest{
	{"WstatMode", func(e *env) {
		e.mk("/f:x", "/d/")
		d := e.wstat("/f", zx.Dir{zx.AMode: "0600"})
		if d.Mode() != 0600 {
			e.t.Fatalf("wstat /f mode: %v", d)
		}
		e.same("wstat reply and stat", d, e.stat("/f"))
		d = e.wstat("/d", zx.Dir{zx.AMode: "01777"})
		if d.Mode() != 01777 || !d.IsDir() {
			e.t.Fatalf("wstat /d mode: %v", d)
		}
		e.same("wstat reply and stat", d, e.stat("/d"))
		e.wstat("/d", zx.Dir{zx.AMode: "0700"})
		if m := e.stat("/d").Mode(); m != 0700 {
			e.t.Fatalf("mode %o, want 0700", m)
		}
		e.check("/f:x", "/d/")
	}},
	{"WstatTimes", func(e *env) {
		e.mk("/f:x", "/d/")
		mt, at := int64(1500000000987654321), int64(1500000100123456789)
		for _, p := range []string{"/f", "/d"} {
			d := e.wstat(p, zx.Dir{zx.AMtime: strconv.FormatInt(mt, 10), zx.AAtime: strconv.FormatInt(at, 10)})
			e.wantTime(d, zx.AMtime, mt)
			e.wantTime(d, zx.AAtime, at)
			e.same("wstat reply and stat", d, e.stat(p))
		}
	}},
	{"WstatSize", func(e *env) {
		e.mk("/f:hello", "/d/")
		d := e.wstat("/f", zx.Dir{zx.ASize: "2"})
		if d.Size() != 2 {
			e.t.Fatalf("truncate: %v", d)
		}
		e.check("/f:he", "/d/")
		since := time.Now()
		d = e.wstat("/f", zx.Dir{zx.ASize: "4"})
		e.recent(d, zx.AMtime, since)
		e.check("/f:he\x00\x00", "/d/")
		// Resize and set the time in one request: the time given wins.
		d = e.wstat("/f", zx.Dir{zx.ASize: "1", zx.AMtime: "1000000000000000001"})
		e.wantTime(d, zx.AMtime, 1000000000000000001)
		e.check("/f:h", "/d/")
		_, err := e.wstatErr("/d", zx.Dir{zx.ASize: strconv.FormatInt(e.stat("/d").Size()+10, 10)})
		e.wantErr(err, "resize a directory", zx.ErrIsDir)
	}},
	{"WstatUserAttrs", func(e *env) {
		e.mk("/f:x", "/d/")
		for _, p := range []string{"/f", "/d"} {
			d := e.wstat(p, zx.Dir{"Foo": "transient"})
			if _, ok := d["Foo"]; ok {
				e.t.Fatalf("wstat stored an upper-case attribute: %v", d)
			}
			if _, ok := e.stat(p)["Foo"]; ok {
				e.t.Fatalf("wstat stored an upper-case attribute")
			}
			if e.opts.NoUserAttrs {
				continue
			}
			d = e.wstat(p, zx.Dir{"a": "1", "b": "two words"})
			if d["a"] != "1" || d["b"] != "two words" {
				e.t.Fatalf("set user attributes: %v", d)
			}
			e.same("wstat reply and stat", d, e.stat(p))
			d = e.wstat(p, zx.Dir{"a": "", "nosuch": ""})
			if _, ok := d["a"]; ok || d["b"] != "two words" {
				e.t.Fatalf("delete user attribute a: %v", d)
			}
			if _, ok := d["nosuch"]; ok {
				e.t.Fatalf("deleting a missing attribute created it: %v", d)
			}
			e.same("wstat reply and stat", d, e.stat(p))
			_, err := e.wstatErr(p, zx.Dir{"bad=name": "x"})
			e.wantErr(err, "wstat of an attribute named bad=name", zx.ErrInvalid)
		}
	}},
	{"WstatImmutable", func(e *env) {
		e.mk("/f:x", "/d/", "/l->f")
		for _, d := range []zx.Dir{
			{zx.AName: "g"},
			{zx.APath: "/g"},
			{zx.AType: zx.TypeDir},
			{zx.AType: zx.TypeLink},
			{zx.ATarget: "x"},
			{zx.AMode: "rw"},
			{zx.AMode: "0999"},
			{zx.ASize: "-1"},
			{zx.AMtime: "now"},
			{zx.AAtime: "1.5"},
		} {
			_, err := e.wstatErr("/f", d)
			e.wantErr(err, "wstat /f "+d.String(), zx.ErrInvalid)
		}
		_, err := e.wstatErr("/l", zx.Dir{zx.ATarget: "other"})
		e.wantErr(err, "wstat of a link's target", zx.ErrInvalid)
		_, err = e.wstatErr("/d", zx.Dir{zx.AType: zx.TypeFile})
		e.wantErr(err, "wstat of a directory's type", zx.ErrInvalid)
		e.check("/f:x", "/d/", "/l->f")
		// An entry written back as it is changes nothing.
		for _, p := range []string{"/f", "/d"} {
			old := e.stat(p)
			d := e.wstat(p, old)
			e.same("wstat with the entry itself", old, d, zx.ACtime, zx.AAtime)
		}
	}},
	{"WstatOwnership", func(e *env) {
		if e.opts.NoOwnership {
			e.t.Skip("NoOwnership")
		}
		e.mk("/f:x")
		d := e.wstat("/f", zx.Dir{zx.AUid: "4242", zx.AGid: "4343"})
		if d[zx.AUid] != "4242" || d[zx.AGid] != "4343" {
			e.t.Fatalf("chown: %v", d)
		}
		e.same("wstat reply and stat", d, e.stat("/f"))
		d = e.put("/g", zx.Dir{zx.AType: zx.TypeFile, zx.AUid: "4244", zx.AGid: "4345"}, 0, []byte("y"))
		if d[zx.AUid] != "4244" || d[zx.AGid] != "4345" {
			e.t.Fatalf("put with uid and gid: %v", d)
		}
	}},
	{"WstatMissing", func(e *env) {
		e.mk("/f:x")
		_, err := e.wstatErr("/nx", zx.Dir{zx.AMode: "0600"})
		e.wantErr(err, "wstat of a missing file", zx.ErrNotExist)
		_, err = e.wstatErr("/f/x", zx.Dir{zx.AMode: "0600"})
		e.wantErr(err, "wstat below a file", zx.ErrNotDir)
		e.notExist("/nx")
	}},
}

var moveTests = []subtest{
	{"MoveFile", func(e *env) {
		mtime := int64(1400000000000000007)
		e.put("/a", zx.Dir{zx.AType: zx.TypeFile, zx.AMtime: strconv.FormatInt(mtime, 10)}, 0, []byte("A"))
		if err := e.move("/a", "/b"); err != nil {
			e.t.Fatalf("move /a /b: %v", err)
		}
		d := e.stat("/b")
		if d.Name() != "b" || d.Path() != "/b" {
			e.t.Fatalf("moved entry: %v", d)
		}
		e.wantTime(d, zx.AMtime, mtime)
		e.notExist("/a")
		e.check("/b:A")
		// Same path: nothing happens.
		if err := e.move("/b", "/b"); err != nil {
			e.t.Fatalf("move /b /b: %v", err)
		}
		e.check("/b:A")
	}},
	{"MoveDir", func(e *env) {
		e.mk("/d/x/y:data", "/d/z->x", "/e/")
		if err := e.move("/d", "/e/d2"); err != nil {
			e.t.Fatalf("move /d /e/d2: %v", err)
		}
		e.check("/e/d2/x/y:data", "/e/d2/z->x")
		if d := e.stat("/e/d2/x/y"); d.Path() != "/e/d2/x/y" {
			e.t.Fatalf("moved entry: %v", d)
		}
		// Onto an empty directory: replaces it.
		e.mk("/empty/")
		if err := e.move("/e/d2", "/empty"); err != nil {
			e.t.Fatalf("move a directory onto an empty one: %v", err)
		}
		e.check("/e/", "/empty/x/y:data", "/empty/z->x")
	}},
	{"MoveOverwrite", func(e *env) {
		e.mk("/a:A", "/b:B", "/l->a")
		if err := e.move("/a", "/b"); err != nil {
			e.t.Fatalf("move /a /b: %v", err)
		}
		e.check("/b:A", "/l->a")
		if err := e.move("/l", "/b"); err != nil {
			e.t.Fatalf("move a link onto a file: %v", err)
		}
		e.check("/b->a")
	}},
	{"MoveErrors", func(e *env) {
		e.mk("/f:f", "/g:g", "/d/x:x", "/e/", "/full/y:y")
		for _, c := range []struct {
			from, to string
			kinds    []zx.Kind
		}{
			{"/d", "/full", []zx.Kind{zx.ErrNotEmpty, zx.ErrExist}},
			{"/f", "/e", []zx.Kind{zx.ErrIsDir, zx.ErrExist}},
			{"/d", "/f", []zx.Kind{zx.ErrNotDir}},
			{"/d", "/d/sub", []zx.Kind{zx.ErrInvalid}},
			{"/d", "/d/x/sub", []zx.Kind{zx.ErrInvalid}},
			{"/nx", "/h", []zx.Kind{zx.ErrNotExist}},
			{"/f", "/nx/h", []zx.Kind{zx.ErrNotExist}},
			{"/f", "/g/h", []zx.Kind{zx.ErrNotDir}},
			{"/", "/h", []zx.Kind{zx.ErrInvalid, zx.ErrBusy}},
		} {
			e.wantErr(e.move(c.from, c.to), "move "+c.from+" "+c.to, c.kinds...)
		}
		e.check("/f:f", "/g:g", "/d/x:x", "/e/", "/full/y:y")
	}},
}

var removeTests = []subtest{
	{"Remove", func(e *env) {
		e.mk("/f:f", "/d/x:x", "/e/", "/l->f", "/m->d")
		for _, p := range []string{"/f", "/e", "/m"} {
			if err := e.remove(p); err != nil {
				e.t.Fatalf("remove %s: %v", p, err)
			}
			e.notExist(p)
		}
		e.check("/d/x:x", "/l->f")
		e.wantErr(e.remove("/d"), "remove of a non-empty directory", zx.ErrNotEmpty)
		e.wantErr(e.remove("/nx"), "remove of a missing file", zx.ErrNotExist)
		e.wantErr(e.remove("/nx/y"), "remove below a missing directory", zx.ErrNotExist)
		e.wantErr(e.remove("/"), "remove /", zx.ErrInvalid, zx.ErrBusy, zx.ErrNotPermit)
		e.check("/d/x:x", "/l->f")
	}},
	{"RemoveAll", func(e *env) {
		e.mk("/d/x/y/z:z", "/d/a:a", "/d/l->x", "/k:k")
		if err := e.removeAll("/d"); err != nil {
			e.t.Fatalf("removeall /d: %v", err)
		}
		e.notExist("/d")
		e.check("/k:k")
		if err := e.removeAll("/k"); err != nil {
			e.t.Fatalf("removeall of a file: %v", err)
		}
		e.wantErr(e.removeAll("/nx"), "removeall of a missing file", zx.ErrNotExist)
		e.mk("/keep:k")
		e.wantErr(e.removeAll("/"), "removeall /", zx.ErrInvalid, zx.ErrBusy, zx.ErrNotPermit)
		e.check("/keep:k")
	}},
}
