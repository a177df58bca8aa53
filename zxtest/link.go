package zxtest

import (
	"github.com/zxfs/zx"
)

// linkTests check hard links, for trees that are zx.Linkers.
var linkTests = []subtest{
	{"link", func(e *env) {
		l, ok := e.tr.(zx.Linker)
		if !ok {
			e.t.Skip("not a zx.Linker")
		}
		link := func(from, to string) (zx.Dir, error) {
			e.t.Helper()
			r := recv(e, l.Link(e.ctx, from, to), "link "+from+" "+to)
			if r.Err == nil {
				e.checkEntry(r.Dir, "link "+to)
			}
			return r.Dir, r.Err
		}
		e.put("/a", zx.Dir{zx.AType: zx.TypeFile}, 0, []byte("shared"))
		e.put("/d", zx.Dir{zx.AType: zx.TypeDir}, 0, nil)
		d, err := link("/a", "/d/b")
		if err != nil {
			e.t.Fatalf("link: %v", err)
		}
		a := e.stat("/a")
		if d.Path() != "/d/b" || d[zx.AIno] != a[zx.AIno] || d[zx.ANlink] != "2" || a[zx.ANlink] != "2" {
			e.t.Fatalf("after link: new %v, old %v", d, a)
		}
		if got := e.read("/d/b"); got != "shared" {
			e.t.Fatalf("read through the new name: %q", got)
		}
		// Writes through one name, in place or truncating, show through
		// the other.
		e.put("/d/b", zx.Dir{}, 0, []byte("SH"))
		if got := e.read("/a"); got != "SHared" {
			e.t.Fatalf("write in place through one name: the other reads %q", got)
		}
		e.put("/a", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, []byte("new"))
		if got := e.read("/d/b"); got != "new" {
			e.t.Fatalf("truncate through one name: the other reads %q", got)
		}
		_, err = link("/a", "/d/b")
		e.wantErr(err, "link over an existing name", zx.ErrExist)
		_, err = link("/d", "/d2")
		e.wantErr(err, "link a directory", zx.ErrNotPermit)
		_, err = link("/nope", "/x")
		e.wantErr(err, "link a missing file", zx.ErrNotExist)
		_, err = link("/a", "/nope/x")
		e.wantErr(err, "link into a missing directory", zx.ErrNotExist)
		e.notExist("/x")
		if err := recv(e, e.tr.Remove(e.ctx, "/a"), "remove /a"); err != nil {
			e.t.Fatal(err)
		}
		if d := e.stat("/d/b"); d[zx.ANlink] != "1" {
			e.t.Fatalf("nlink after removing the other name: %s", d[zx.ANlink])
		}
		if got := e.read("/d/b"); got != "new" {
			e.t.Fatalf("after removing the other name: %q", got)
		}
	}},
}
