package zxtest

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/zxfs/zx"
)

// pseudoRandom returns n deterministic pseudo-random bytes.
func pseudoRandom(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

var getTests = []subtest{
	{"GetFile", func(e *env) {
		e.mk("/f:hello world")
		for _, c := range []struct {
			off, count int64
			want       string
		}{
			{0, -1, "hello world"},
			{0, 5, "hello"},
			{6, -1, "world"},
			{6, 100, "world"},
			{3, 0, ""},
			{10, 1, "d"},
			{11, -1, ""},
			{100, -1, ""},
			{100, 5, ""},
		} {
			b, ds, err := e.getErr("/f", c.off, c.count)
			if err != nil || ds != nil || string(b) != c.want {
				e.t.Fatalf("get /f %d %d: %q %v %v, want %q", c.off, c.count, b, ds, err, c.want)
			}
		}
		_, _, err := e.getErr("/f", -1, 1)
		e.wantErr(err, "get at a negative offset", zx.ErrInvalid)
		e.mk("/empty")
		if got := e.read("/empty"); got != "" {
			e.t.Fatalf("empty file: %q", got)
		}
	}},
	{"GetDir", func(e *env) {
		e.mk("/d/c:ccc", "/d/a/", "/d/b->a", "/d/B:upper", "/d/a/x:x")
		ds := e.readDir("/d")
		if names := names(ds); !slices.Equal(names, []string{"B", "a", "b", "c"}) {
			e.t.Fatalf("get /d: names %q, want B a b c in that order", names)
		}
		for _, d := range ds {
			e.same("get /d entry and stat", e.stat(d.Path()), d, zx.AAtime)
		}
		for _, c := range []struct {
			off, count int64
			want       string
		}{
			{1, -1, "a b c"},
			{0, 2, "B a"},
			{2, 1, "b"},
			{3, 10, "c"},
			{4, -1, ""},
			{10, 2, ""},
			{0, 0, ""},
		} {
			_, ds, err := e.getErr("/d", c.off, c.count)
			if err != nil {
				e.t.Fatalf("get /d %d %d: %v", c.off, c.count, err)
			}
			if got := strings.Join(names(ds), " "); got != c.want {
				e.t.Fatalf("get /d %d %d: %q, want %q", c.off, c.count, got, c.want)
			}
		}
		root := e.readDir("/")
		if len(root) != 1 || root[0].Path() != "/d" {
			e.t.Fatalf("get /: %v", root)
		}
	}},
	{"GetErrors", func(e *env) {
		e.mk("/f:x")
		for _, c := range []struct {
			p    string
			kind zx.Kind
		}{
			{"/nx", zx.ErrNotExist},
			{"/nx/y", zx.ErrNotExist},
			{"/f/y", zx.ErrNotDir},
		} {
			its := collect(e, e.tr.Get(e.ctx, c.p, 0, -1), "get "+c.p, false)
			if len(its) != 1 || its[0].Err == nil || its[0].Data != nil || its[0].Dir != nil {
				e.t.Fatalf("get %s: %v, want one Item with an error", c.p, its)
			}
			e.wantErr(its[0].Err, "get "+c.p, c.kind)
			_, err := e.statErr(c.p)
			e.wantErr(err, "stat "+c.p, c.kind)
		}
	}},
	{"GetLarge", func(e *env) {
		data := pseudoRandom(5<<20+123, 1)
		e.put("/big", zx.Dir{zx.AType: zx.TypeFile}, 0, data)
		its := collect(e, e.tr.Get(e.ctx, "/big", 0, -1), "get /big", false)
		if len(its) < 2 {
			e.t.Fatalf("get of 5 MiB: %d Items, want it in several", len(its))
		}
		got, _, err := streamErr(its)
		if err != nil || !bytes.Equal(got, data) {
			e.t.Fatalf("get of 5 MiB: %d bytes, %v: contents differ", len(got), err)
		}
		b, _, err := e.getErr("/big", 1<<20+7, 3<<20)
		if err != nil || !bytes.Equal(b, data[1<<20+7:4<<20+7]) {
			e.t.Fatalf("get of a range of 3 MiB: %d bytes, %v: contents differ", len(b), err)
		}
		if d := e.stat("/big"); d.Size() != int64(len(data)) {
			e.t.Fatalf("stat /big: size %d, want %d", d.Size(), len(data))
		}
	}},
}
