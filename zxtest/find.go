package zxtest

import (
	"context"
	"slices"
	"strings"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/pred"
)

// find issues a Find or FindGet on tr, through its Finder or, if it has
// none, through pred.Find (and a Get per file for FindGet).
func find(tr zx.Tree, ctx context.Context, p string, o zx.FindOpts, get bool) <-chan zx.Item {
	if f, ok := tr.(zx.Finder); ok {
		if get {
			return f.FindGet(ctx, p, o)
		}
		return f.Find(ctx, p, o)
	}
	c := pred.Find(ctx, tr, p, o)
	if !get {
		return c
	}
	out := make(chan zx.Item)
	go func() {
		defer close(out)
		send := func(it zx.Item) bool {
			select {
			case out <- it:
				return true
			case <-ctx.Done():
				return false
			}
		}
		for it := range c {
			if !send(it) {
				break
			}
			if it.Err != nil || it.Dir.Type() != zx.TypeFile {
				continue
			}
			src := zx.Reprefix(it.Dir.Path(), o.Dpref, o.Spref)
			for dit := range tr.Get(ctx, src, 0, -1) {
				if !send(dit) {
					break
				}
			}
		}
		for range c {
		}
	}()
	return out
}

// findTree is the tree the find checks walk.
var findTree = []string{
	"/a/b.go:package b",
	"/a/c.txt:ccc",
	"/a/big:" + strings.Repeat("0123456789", 200),
	"/a/d/e.go:package e",
	"/a/.git/config:cfg",
	"/a/.git/x.go:x",
	"/z.go:z",
}

// findPaths runs a find and returns the paths it sends, failing on errors.
func (e *env) findPaths(p string, o zx.FindOpts) []string {
	e.t.Helper()
	what := "find " + p + " " + o.Pred
	var paths []string
	for _, it := range collect(e, find(e.tr, e.ctx, p, o, false), what, true) {
		if it.Err != nil {
			e.t.Fatalf("%s: %v", what, it.Err)
		}
		if it.Data != nil {
			e.t.Fatalf("%s: find sent data", what)
		}
		e.checkEntry(it.Dir, what)
		paths = append(paths, it.Dir.Path())
	}
	return paths
}

func (e *env) wantFind(p string, o zx.FindOpts, want ...string) {
	e.t.Helper()
	got := e.findPaths(p, o)
	if !slices.Equal(got, want) {
		e.t.Fatalf("find %s %+v:\n\t%s\nwant:\n\t%s", p, o,
			strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

var findTests = []subtest{
	{"Find", func(e *env) {
		e.mk(findTree...)
		e.wantFind("/a", zx.FindOpts{Pred: "type=d"}, "/a", "/a/.git", "/a/d")
		e.wantFind("/", zx.FindOpts{Pred: "~*.go"}, "/a/.git/x.go", "/a/b.go", "/a/d/e.go", "/z.go")
		e.wantFind("/", zx.FindOpts{Pred: "type=- & size>1k"}, "/a/big")
		e.wantFind("/a/d/e.go", zx.FindOpts{Pred: "type=-"}, "/a/d/e.go")
		// Entries are full and equal to what Stat says.
		for _, it := range collect(e, find(e.tr, e.ctx, "/", zx.FindOpts{}, false), "find /", true) {
			if it.Err != nil {
				e.t.Fatalf("find /: %v", it.Err)
			}
			e.same("find entry and stat", e.stat(it.Dir.Path()), it.Dir, zx.AAtime)
		}
	}},
	{"FindDepth", func(e *env) {
		e.mk(findTree...)
		e.wantFind("/a", zx.FindOpts{Pred: "depth<=1"}, "/a", "/a/.git", "/a/b.go", "/a/big", "/a/c.txt", "/a/d")
		e.wantFind("/a", zx.FindOpts{Pred: "depth<=1", Depth0: 1}, "/a")
		e.wantFind("/a", zx.FindOpts{Pred: "depth=2 & type=-", Depth0: 1}, "/a/b.go", "/a/big", "/a/c.txt")
	}},
	{"FindPrune", func(e *env) {
		e.mk(findTree...)
		got := e.findPaths("/a", zx.FindOpts{Pred: "name=.git & prune | type=-"})
		var files []string
		for _, p := range got {
			if strings.HasPrefix(p, "/a/.git/") {
				e.t.Fatalf("find pruned at .git sent %s", p)
			}
			if p != "/a/.git" {
				files = append(files, p)
			}
		}
		if want := []string{"/a/b.go", "/a/big", "/a/c.txt", "/a/d/e.go"}; !slices.Equal(files, want) {
			e.t.Fatalf("find with prune: %q, want %q", got, want)
		}
	}},
	{"FindPrefix", func(e *env) {
		e.mk(findTree...)
		e.wantFind("/a", zx.FindOpts{Pred: "type=-", Spref: "/a", Dpref: "/x"},
			"/x/.git/config", "/x/.git/x.go", "/x/b.go", "/x/big", "/x/c.txt", "/x/d/e.go")
		// The predicate sees the rewritten paths.
		e.wantFind("/a", zx.FindOpts{Pred: "path=/x/d/e.go", Spref: "/a", Dpref: "/x"}, "/x/d/e.go")
		e.wantFind("/a/d", zx.FindOpts{Pred: "type=-", Spref: "/", Dpref: "/mnt/t", Depth0: 2}, "/mnt/t/a/d/e.go")
		// The entry at spref is renamed too: a name is the last element of its path.
		e.wantFind("/a", zx.FindOpts{Pred: "depth=0", Spref: "/a", Dpref: "/x"}, "/x")
		e.wantFind("/a/d", zx.FindOpts{Pred: "type=d", Spref: "/a/d", Dpref: "/", Depth0: 3}, "/")
		for _, it := range collect(e, find(e.tr, e.ctx, "/a/d", zx.FindOpts{Spref: "/a", Dpref: "/x", Depth0: 1}, false), "find with prefixes", true) {
			if it.Err != nil {
				e.t.Fatal(it.Err)
			}
			if want := strings.TrimPrefix(it.Dir.Path(), "/x/"); it.Dir.Name() != want[strings.LastIndexByte(want, '/')+1:] {
				e.t.Fatalf("find with prefixes: name %q for path %q", it.Dir.Name(), it.Dir.Path())
			}
		}
	}},
	{"FindErrors", func(e *env) {
		e.mk(findTree...)
		for _, c := range []struct {
			p, pr string
			kind  zx.Kind
		}{
			{"/a", "type=d &", zx.ErrInvalid},
			{"/a", "((", zx.ErrInvalid},
			{"/nx", "type=d", zx.ErrNotExist},
		} {
			for _, get := range []bool{false, true} {
				its := collect(e, find(e.tr, e.ctx, c.p, zx.FindOpts{Pred: c.pr}, get), "find "+c.pr, true)
				if len(its) != 1 || its[0].Err == nil {
					e.t.Fatalf("find %s %q: %v, want one error", c.p, c.pr, its)
				}
				e.wantErr(its[0].Err, "find "+c.p+" "+c.pr, c.kind)
			}
		}
	}},
	{"FindGet", func(e *env) {
		e.mk(append(findTree, "/a/empty")...)
		e.mk("/a/large:" + string(pseudoRandom(300<<10, 3)))
		its := collect(e, find(e.tr, e.ctx, "/a", zx.FindOpts{Pred: "name!=.git | prune", Spref: "/a", Dpref: "/x"}, true), "findget /a", true)
		type ent struct {
			d    zx.Dir
			data []byte
		}
		var ents []*ent
		for _, it := range its {
			switch {
			case it.Err != nil:
				e.t.Fatalf("findget: %v", it.Err)
			case it.Dir != nil && it.Data != nil:
				e.t.Fatal("findget: an Item has both Dir and Data")
			case it.Dir != nil:
				e.checkEntry(it.Dir, "findget")
				ents = append(ents, &ent{d: it.Dir})
			case len(ents) == 0:
				e.t.Fatal("findget: data before any entry")
			default:
				ents[len(ents)-1].data = append(ents[len(ents)-1].data, it.Data...)
			}
		}
		var paths []string
		for _, en := range ents {
			paths = append(paths, en.d.Path())
			src := "/a" + strings.TrimPrefix(en.d.Path(), "/x")
			switch en.d.Type() {
			case zx.TypeFile:
				if want := e.read(src); string(en.data) != want {
					e.t.Fatalf("findget %s: %d bytes, want %d: contents differ", en.d.Path(), len(en.data), len(want))
				}
			default:
				if en.data != nil {
					e.t.Fatalf("findget %s: data for a %s entry", en.d.Path(), en.d.Type())
				}
			}
		}
		want := []string{"/x", "/x/b.go", "/x/big", "/x/c.txt", "/x/d", "/x/d/e.go", "/x/empty", "/x/large"}
		if !slices.Equal(paths, want) {
			e.t.Fatalf("findget: %q, want %q", paths, want)
		}
	}},
}
