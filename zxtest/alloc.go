package zxtest

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/zxfs/zx"
)

// allocTests check Allocate, for trees that are zx.Allocators.
var allocTests = []subtest{
	{"allocate", func(e *env) {
		a := allocator(e)
		e.put("/f", zx.Dir{zx.AType: zx.TypeFile}, 0, []byte("0123456789"))
		z := func(n int) string { return strings.Repeat("\x00", n) }
		for _, c := range []struct {
			mode   zx.AllocMode
			off, n int64
			want   string
		}{
			// Past the end: the file grows, reading zeros.
			{0, 5, 10, "0123456789" + z(5)},
			// Within: nothing changes.
			{0, 0, 3, "0123456789" + z(5)},
			// Keeping the size, even past the end.
			{zx.AllocKeepSize, 0, 100, "0123456789" + z(5)},
			{zx.AllocPunchHole | zx.AllocKeepSize, 2, 3, "01" + z(3) + "56789" + z(5)},
			// A hole past the end changes nothing.
			{zx.AllocPunchHole | zx.AllocKeepSize, 100, 3, "01" + z(3) + "56789" + z(5)},
			{zx.AllocZeroRange | zx.AllocKeepSize, 7, 100, "01" + z(3) + "56" + z(8)},
			{zx.AllocZeroRange, 0, 1, z(1) + "1" + z(3) + "56" + z(8)},
			// Zeroing past the end grows the file.
			{zx.AllocZeroRange, 14, 6, z(1) + "1" + z(3) + "56" + z(13)},
		} {
			what := fmt.Sprintf("allocate /f %v %d %d", c.mode, c.off, c.n)
			r := recv(e, a.Allocate(e.ctx, "/f", c.mode, c.off, c.n), what)
			if r.Err != nil {
				e.t.Fatalf("%s: %v", what, r.Err)
			}
			e.checkEntry(r.Dir, what)
			if r.Dir.Path() != "/f" || r.Dir.Size() != int64(len(c.want)) {
				e.t.Fatalf("%s: reply %v, want /f of size %d", what, r.Dir, len(c.want))
			}
			if got := e.read("/f"); got != c.want {
				e.t.Fatalf("%s: /f holds %q, want %q", what, got, c.want)
			}
			if d := e.stat("/f"); d.Size() != int64(len(c.want)) {
				e.t.Fatalf("%s: stat says size %d, want %d", what, d.Size(), len(c.want))
			}
		}
	}},
	{"allocate large", func(e *env) {
		// Ranges across the blocks a tree stores data in (a disk's 4
		// KiB, memfs's 64 KiB): wholly freed blocks and partial ones.
		a := allocator(e)
		data := make([]byte, 300<<10)
		for i := range data {
			data[i] = byte(i%251 + 1)
		}
		e.put("/big", zx.Dir{zx.AType: zx.TypeFile}, 0, data)
		want := bytes.Clone(data)
		for _, c := range []struct {
			mode   zx.AllocMode
			off, n int64
		}{
			{zx.AllocPunchHole | zx.AllocKeepSize, 1000, 200 << 10},
			{zx.AllocZeroRange | zx.AllocKeepSize, 250 << 10, 4096},
			{zx.AllocPunchHole | zx.AllocKeepSize, 64 << 10, 64 << 10},
		} {
			what := fmt.Sprintf("allocate /big %v %d %d", c.mode, c.off, c.n)
			if r := recv(e, a.Allocate(e.ctx, "/big", c.mode, c.off, c.n), what); r.Err != nil {
				e.t.Fatalf("%s: %v", what, r.Err)
			}
			clear(want[c.off : c.off+c.n])
			if got := e.read("/big"); got != string(want) {
				e.t.Fatalf("%s: contents differ at %d", what, firstDiff([]byte(got), want))
			}
		}
		// A range far past the end, keeping the size, costs nothing.
		if r := recv(e, a.Allocate(e.ctx, "/big", zx.AllocPunchHole|zx.AllocKeepSize, 1<<40, 1<<40), "punch far"); r.Err != nil || r.Dir.Size() != int64(len(data)) {
			e.t.Fatalf("punch a hole far past the end: %v, %v", r.Dir, r.Err)
		}
	}},
	{"allocate errors", func(e *env) {
		a := allocator(e)
		e.mk("/d/", "/f:data", "/l->f")
		for _, c := range []struct {
			p      string
			mode   zx.AllocMode
			off, n int64
			kinds  []zx.Kind
		}{
			{"/nothing", 0, 0, 1, []zx.Kind{zx.ErrNotExist}},
			{"/f/x", 0, 0, 1, []zx.Kind{zx.ErrNotDir}},
			{"/d", 0, 0, 1, []zx.Kind{zx.ErrIsDir}},
			{"/l", 0, 0, 1, []zx.Kind{zx.ErrInvalid}},
			{"/f", zx.AllocPunchHole, 0, 1, []zx.Kind{zx.ErrNotSupp}},
			{"/f", 0x08, 0, 1, []zx.Kind{zx.ErrNotSupp}},
			{"/f", zx.AllocPunchHole | zx.AllocZeroRange | zx.AllocKeepSize, 0, 1, []zx.Kind{zx.ErrInvalid}},
			{"/f", 0, -1, 1, []zx.Kind{zx.ErrInvalid}},
			{"/f", 0, 0, 0, []zx.Kind{zx.ErrInvalid}},
			{"/f", 0, 0, -5, []zx.Kind{zx.ErrInvalid}},
			{"/f", 0, math.MaxInt64, 2, []zx.Kind{zx.ErrTooBig}},
		} {
			what := fmt.Sprintf("allocate %s %v %d %d", c.p, c.mode, c.off, c.n)
			r := recv(e, a.Allocate(e.ctx, c.p, c.mode, c.off, c.n), what)
			e.wantErr(r.Err, what, c.kinds...)
		}
		// Nothing changed.
		e.check("/d/", "/f:data", "/l->f")
	}},
	{"allocate ordered", func(e *env) {
		// Issued without waiting, a put, an allocate and a read of
		// the file apply in that order.
		a := allocator(e)
		pc := e.tr.Put(e.ctx, "/g", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, strings.NewReader("abcdef"))
		ac := a.Allocate(e.ctx, "/g", zx.AllocPunchHole|zx.AllocKeepSize, 1, 3)
		zc := a.Allocate(e.ctx, "/g", zx.AllocZeroRange, 8, 2)
		gc := e.tr.Get(e.ctx, "/g", 0, -1)
		if r := recv(e, pc, "put /g"); r.Err != nil {
			e.t.Fatalf("put /g: %v", r.Err)
		}
		if r := recv(e, ac, "punch /g"); r.Err != nil {
			e.t.Fatalf("punch /g: %v", r.Err)
		}
		if r := recv(e, zc, "zero /g"); r.Err != nil || r.Dir.Size() != 10 {
			e.t.Fatalf("zero /g: %v, %v; want size 10", r.Dir, r.Err)
		}
		got, _, err := streamErr(collect(e, gc, "get /g", false))
		if err != nil || string(got) != "a\x00\x00\x00ef\x00\x00\x00\x00" {
			e.t.Fatalf("get /g after put, punch and zero = %q, %v", got, err)
		}
	}},
}

func allocator(e *env) zx.Allocator {
	e.t.Helper()
	a, ok := e.tr.(zx.Allocator)
	if !ok {
		e.t.Skip("not a zx.Allocator")
	}
	return a
}

// firstDiff returns the first offset where a and b differ.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
