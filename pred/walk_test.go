package pred

import (
	"context"
	"errors"
	"io"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/zxfs/zx"
)

// memTree is a minimal map-backed zx.Tree for tests: Stat and directory
// Get work, the rest fails with ErrNotSupp.
type memTree struct {
	ents   map[string]zx.Dir // by path
	bad    map[string]error  // directories whose Get fails
	gets   []string          // paths given to Get, in order
	finder bool
}

// newMemTree builds a tree from paths; those ending in / are directories.
func newMemTree(paths ...string) *memTree {
	t := &memTree{ents: map[string]zx.Dir{}, bad: map[string]error{}}
	t.ents["/"] = zx.Dir{"path": "/", "name": "/", "type": "d"}
	for _, p := range paths {
		typ := "-"
		if strings.HasSuffix(p, "/") {
			typ = "d"
			p = strings.TrimSuffix(p, "/")
		}
		if strings.HasSuffix(p, "@") {
			typ = "l"
			p = strings.TrimSuffix(p, "@")
		}
		t.ents[p] = zx.Dir{"path": p, "name": path.Base(p), "type": typ, "size": "1"}
	}
	return t
}

func (t *memTree) Stat(ctx context.Context, p string) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	if d, ok := t.ents[p]; ok {
		c <- zx.Reply{Dir: d.Clone()}
	} else {
		c <- zx.Reply{Err: zx.E(zx.ErrNotExist, "stat", p, "")}
	}
	return c
}

func (t *memTree) Get(ctx context.Context, p string, off, count int64) <-chan zx.Item {
	t.gets = append(t.gets, p)
	c := make(chan zx.Item)
	go func() {
		defer close(c)
		if err := t.bad[p]; err != nil {
			c <- zx.Item{Err: err}
			return
		}
		d, ok := t.ents[p]
		if !ok || !d.IsDir() {
			c <- zx.Item{Err: zx.E(zx.ErrNotDir, "get", p, "")}
			return
		}
		var ents []zx.Dir
		for q, e := range t.ents {
			if q != "/" && path.Dir(q) == p {
				ents = append(ents, e.Clone())
			}
		}
		// Reverse order, to check that Walk sorts.
		slices.SortFunc(ents, func(a, b zx.Dir) int { return strings.Compare(b["name"], a["name"]) })
		for _, e := range ents {
			select {
			case c <- zx.Item{Dir: e}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return c
}

func notSupp() error { return zx.E(zx.ErrNotSupp, "", "", "") }

func (t *memTree) Put(ctx context.Context, p string, d zx.Dir, off int64, data io.Reader) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	c <- zx.Reply{Err: notSupp()}
	return c
}

func (t *memTree) Wstat(ctx context.Context, p string, d zx.Dir) <-chan zx.Reply {
	return t.Put(ctx, p, d, 0, nil)
}

func (t *memTree) errc() <-chan error {
	c := make(chan error, 1)
	c <- notSupp()
	return c
}

func (t *memTree) Move(ctx context.Context, from, to string) <-chan error { return t.errc() }
func (t *memTree) Remove(ctx context.Context, p string) <-chan error      { return t.errc() }
func (t *memTree) RemoveAll(ctx context.Context, p string) <-chan error   { return t.errc() }

// finderTree is a memTree that implements zx.Finder.
type finderTree struct{ *memTree }

func (t finderTree) Find(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	c := make(chan zx.Item, 1)
	c <- zx.Item{Dir: zx.Dir{"path": "from-finder", "pred": o.Pred}}
	close(c)
	return c
}

func (t finderTree) FindGet(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	return t.Find(ctx, p, o)
}

var sample = []string{
	"/a/", "/a/b", "/a/c/", "/a/c/x.go", "/a/c/y.o", "/a/.git/", "/a/.git/HEAD",
	"/a/.git/objects/", "/a/.git/objects/1", "/a/Z", "/a/lnk@", "/z.go",
}

// walkTree runs Walk on t and returns "path depth" for each item (with
// " err" for errors).
func walkTree(t *testing.T, tr *memTree, root, pred, spref, dpref string, depth0 int) []string {
	t.Helper()
	p, err := Parse(pred)
	if err != nil {
		t.Fatalf("Parse(%q): %v", pred, err)
	}
	rd, ok := tr.ents[root]
	if !ok {
		t.Fatalf("no %s", root)
	}
	var out []string
	readDir := func(p string) ([]zx.Dir, error) { return zx.ReadDir(context.Background(), tr, p) }
	// The predicate sees rewritten paths and depths: record them with it.
	emit := func(it zx.Item) bool {
		s := it.Dir["path"]
		if it.Err != nil {
			s += " err"
		}
		out = append(out, s)
		return true
	}
	if err := Walk(context.Background(), rd, p, spref, dpref, depth0, readDir, emit); err != nil {
		t.Fatalf("Walk: %v", err)
	}
	return out
}

func TestWalk(t *testing.T) {
	tests := []struct {
		name         string
		root         string
		pred         string
		spref, dpref string
		depth0       int
		want         []string
		gets         []string // directories read, if not nil
	}{
		{
			name: "all", root: "/", pred: "",
			want: []string{"/", "/a", "/a/.git", "/a/.git/HEAD", "/a/.git/objects", "/a/.git/objects/1",
				"/a/Z", "/a/b", "/a/c", "/a/c/x.go", "/a/c/y.o", "/a/lnk", "/z.go"},
			gets: []string{"/", "/a", "/a/.git", "/a/.git/objects", "/a/c"},
		},
		{
			name: "files outside .git", root: "/", pred: "name=.git & prune | type=-",
			want: []string{"/a/Z", "/a/b", "/a/c/x.go", "/a/c/y.o", "/z.go"},
			gets: []string{"/", "/a", "/a/c"},
		},
		{
			name: "dirs", root: "/a", pred: "d",
			want: []string{"/a", "/a/.git", "/a/.git/objects", "/a/c"},
		},
		{
			name: "short glob", root: "/", pred: "~*.go",
			want: []string{"/a/c/x.go", "/z.go"},
		},
		{
			name: "links not followed", root: "/a", pred: "l",
			want: []string{"/a/lnk"},
		},
		{
			name: "depth", root: "/a", pred: "depth=1", depth0: 0,
			want: []string{"/a/.git", "/a/Z", "/a/b", "/a/c", "/a/lnk"},
		},
		{
			name: "depth0", root: "/a", pred: "depth=3", depth0: 2,
			want: []string{"/a/.git", "/a/Z", "/a/b", "/a/c", "/a/lnk"},
		},
		{
			name: "prune by depth", root: "/", pred: "depth>=1 & prune | true",
			want: []string{"/", "/a", "/z.go"}, // matched (by true) but not descended
			gets: []string{"/"},
		},
		{
			name: "prune at root", root: "/a", pred: "prune",
			want: nil, gets: []string{},
		},
		{
			name: "rewrite", root: "/a/c", pred: "", spref: "/a", dpref: "/x",
			want: []string{"/x/c", "/x/c/x.go", "/x/c/y.o"},
		},
		{
			name: "rewrite path predicate", root: "/a", pred: "path~/x/c/*", spref: "/a", dpref: "/x",
			want: []string{"/x/c/x.go", "/x/c/y.o"},
		},
		{
			name: "rewrite root to /mnt", root: "/", pred: "path~~^/mnt/a/c", spref: "/", dpref: "/mnt",
			want: []string{"/mnt/a/c", "/mnt/a/c/x.go", "/mnt/a/c/y.o"},
		},
		{
			name: "rewrite /mnt root", root: "/a", pred: "depth<=1", spref: "/a", dpref: "/", depth0: 0,
			want: []string{"/", "/.git", "/Z", "/b", "/c", "/lnk"},
		},
		{
			name: "file root", root: "/z.go", pred: "", want: []string{"/z.go"}, gets: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newMemTree(sample...)
			got := walkTree(t, tr, tt.root, tt.pred, tt.spref, tt.dpref, tt.depth0)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			if tt.gets != nil && !slices.Equal(tr.gets, tt.gets) {
				t.Errorf("read %q, want %q", tr.gets, tt.gets)
			}
		})
	}
}

func TestWalkDepthAndEmitCopy(t *testing.T) {
	tr := newMemTree(sample...)
	root := tr.ents["/a/c"]
	p, _ := Parse("")
	var items []zx.Item
	readDir := func(p string) ([]zx.Dir, error) { return zx.ReadDir(context.Background(), tr, p) }
	err := Walk(context.Background(), root, p, "/a", "/q", 5, readDir, func(it zx.Item) bool {
		items = append(items, it)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if root["path"] != "/a/c" {
		t.Errorf("Walk changed the root entry: %v", root)
	}
	if len(items) != 3 || items[0].Dir["path"] != "/q/c" || items[0].Dir["name"] != "c" || items[0].Dir["type"] != "d" {
		t.Fatalf("items %v", items)
	}
	// The predicate sees depth0 + elements below root.
	for _, tc := range []struct {
		pred string
		n    int
	}{{"depth=5", 1}, {"depth=6", 2}, {"depth>6", 0}} {
		p, _ := Parse(tc.pred)
		n := 0
		Walk(context.Background(), root, p, "", "", 5, readDir, func(zx.Item) bool { n++; return true })
		if n != tc.n {
			t.Errorf("%s: %d matches, want %d", tc.pred, n, tc.n)
		}
	}
}

func TestWalkReadDirError(t *testing.T) {
	tr := newMemTree(sample...)
	boom := zx.E(zx.ErrPermission, "get", "/a/.git", "")
	tr.bad["/a/.git"] = boom
	got := walkTree(t, tr, "/", "", "/a", "/x", 0)
	want := []string{"/", "/x", "/x/.git", "/x/.git err", "/x/Z", "/x/b", "/x/c", "/x/c/x.go", "/x/c/y.o", "/x/lnk", "/z.go"}
	if !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// The error item holds the path, the name and the error.
	p, _ := Parse("false")
	var errs []zx.Item
	readDir := func(p string) ([]zx.Dir, error) { return zx.ReadDir(context.Background(), tr, p) }
	Walk(context.Background(), tr.ents["/"], p, "", "", 0, readDir, func(it zx.Item) bool {
		errs = append(errs, it)
		return true
	})
	if len(errs) != 1 || !errors.Is(errs[0].Err, zx.ErrPermission) || errs[0].Dir["path"] != "/a/.git" || errs[0].Dir["name"] != ".git" {
		t.Errorf("error items %v", errs)
	}
}

func TestWalkStop(t *testing.T) {
	tr := newMemTree(sample...)
	p, _ := Parse("")
	readDir := func(p string) ([]zx.Dir, error) { return zx.ReadDir(context.Background(), tr, p) }
	var got []string
	err := Walk(context.Background(), tr.ents["/"], p, "", "", 0, readDir, func(it zx.Item) bool {
		got = append(got, it.Dir["path"])
		return len(got) < 3
	})
	if err != nil {
		t.Errorf("Walk = %v, want nil", err)
	}
	if want := []string{"/", "/a", "/a/.git"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if slices.Contains(tr.gets, "/a/.git") {
		t.Errorf("Walk read /a/.git after emit returned false")
	}
}

func TestWalkCancel(t *testing.T) {
	tr := newMemTree(sample...)
	p, _ := Parse("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readDir := func(p string) ([]zx.Dir, error) { return zx.ReadDir(context.Background(), tr, p) }
	n := 0
	err := Walk(ctx, tr.ents["/"], p, "", "", 0, readDir, func(it zx.Item) bool {
		n++
		if n == 2 {
			cancel()
		}
		return true
	})
	if !errors.Is(err, context.Canceled) || n != 2 {
		t.Errorf("Walk = %v after %d items, want context.Canceled after 2", err, n)
	}
}

func TestWalkMissingChildPath(t *testing.T) {
	root := zx.Dir{"path": "/r", "name": "r", "type": "d"}
	readDir := func(p string) ([]zx.Dir, error) {
		if p != "/r" {
			return nil, nil
		}
		return []zx.Dir{{"name": "b", "type": "-"}, {"name": "a", "type": "-"}, {"name": "..", "type": "d"}}, nil
	}
	var got []string
	Walk(context.Background(), root, nil, "", "", 0, readDir, func(it zx.Item) bool {
		got = append(got, it.Dir["path"])
		return true
	})
	if want := []string{"/r", "/r/a", "/r/b"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func collect(c <-chan zx.Item) (paths []string, errs []error) {
	for it := range c {
		if it.Err != nil {
			errs = append(errs, it.Err)
			continue
		}
		paths = append(paths, it.Dir["path"])
	}
	return paths, errs
}

func TestFind(t *testing.T) {
	ctx := context.Background()
	tr := newMemTree(sample...)
	tr.bad["/a/.git/objects"] = zx.E(zx.ErrPermission, "get", "/a/.git/objects", "")

	paths, errs := collect(Find(ctx, tr, "/a", zx.FindOpts{Pred: "~*.go | d", Spref: "/a", Dpref: "/src", Depth0: 1}))
	if want := []string{"/src", "/src/.git", "/src/.git/objects", "/src/c", "/src/c/x.go"}; !slices.Equal(paths, want) {
		t.Errorf("Find: %q, want %q", paths, want)
	}
	if len(errs) != 1 || !errors.Is(errs[0], zx.ErrPermission) {
		t.Errorf("Find: errors %v, want one permission error", errs)
	}

	paths, _ = collect(Find(ctx, tr, "/", zx.FindOpts{Pred: "depth=2 & d"}))
	if want := []string{"/a/.git", "/a/c"}; !slices.Equal(paths, want) {
		t.Errorf("Find depth: %q, want %q", paths, want)
	}

	// Bad predicate: one item with a syntax error.
	paths, errs = collect(Find(ctx, tr, "/", zx.FindOpts{Pred: "size <"}))
	var se *SyntaxError
	if len(paths) != 0 || len(errs) != 1 || !errors.As(errs[0], &se) || se.Col != 7 ||
		!errors.Is(errs[0], zx.ErrInvalid) || zx.KindOf(errs[0]) != zx.ErrInvalid {
		t.Errorf("Find bad pred: %q %v", paths, errs)
	}

	// Missing path.
	paths, errs = collect(Find(ctx, tr, "/nope", zx.FindOpts{}))
	if len(paths) != 0 || len(errs) != 1 || !errors.Is(errs[0], zx.ErrNotExist) {
		t.Errorf("Find missing: %q %v", paths, errs)
	}

	// Bad path.
	_, errs = collect(Find(ctx, tr, "/a/../..", zx.FindOpts{}))
	if len(errs) != 1 || !errors.Is(errs[0], zx.ErrInvalid) {
		t.Errorf("Find bad path: %v", errs)
	}

	// Finders find themselves.
	paths, _ = collect(Find(ctx, finderTree{tr}, "/", zx.FindOpts{Pred: "d"}))
	if want := []string{"from-finder"}; !slices.Equal(paths, want) {
		t.Errorf("Find on a Finder: %q", paths)
	}
}

func TestFindCancel(t *testing.T) {
	tr := newMemTree(sample...)
	ctx, cancel := context.WithCancel(context.Background())
	c := Find(ctx, tr, "/", zx.FindOpts{})
	it := <-c
	if it.Err != nil || it.Dir["path"] != "/" {
		t.Fatalf("first item %v", it)
	}
	cancel()
	n := 0
	for it := range c { // must end promptly
		n++
		if it.Err != nil && !errors.Is(it.Err, zx.ErrCanceled) {
			t.Errorf("error after cancel: %v", it.Err)
		}
	}
	if n > 2 {
		t.Errorf("%d items after cancel", n)
	}
}

// TestDocExamples checks the examples in docs/predicates.md.
func TestDocExamples(t *testing.T) {
	for _, s := range []string{
		"", "true", "d", "~*.go", "- & ~*.go & !~*_test.go", `~~'\.(c|h)$'`,
		"name=.git & prune | type=-", "size>10M & mtime>-1d", "mtime<2024-01-01",
		"mode>=04000 | uid=0", "path~/src/*/README*", "depth<=1", "depth>=2 & prune | true",
		"colour=", "not (d or l) and size>0", "x!= & x<10", "depth=0 | depth=1 & !prune",
	} {
		if _, err := Parse(s); err != nil {
			t.Errorf("Parse(%q): %v", s, err)
		}
	}
	for _, tc := range []struct{ pred, col string }{
		{"size <", `pred: col 7: expected value after "<"`},
		{"name", `pred: col 5: expected operator after attribute "name"`},
		{`name="abc`, `pred: col 6: unterminated quoted string`},
		{`name~~'('`, "pred: col 7: bad regular expression: missing closing ): `(`"},
		{`size>1X`, `pred: col 6: bad size value "1X" (want an integer with an optional unit k, K, M, G, T)`},
		{`(d | l`, `pred: col 1: unbalanced "(": missing ")"`},
		{`a=1)`, `pred: col 4: unbalanced ")"`},
		{`a=1 b=2`, `pred: col 5: unexpected "b"; missing "&" or "|"?`},
	} {
		if _, err := Parse(tc.pred); err == nil || err.Error() != tc.col {
			t.Errorf("Parse(%q): %v, want %s", tc.pred, err, tc.col)
		}
	}
	tr := newMemTree(sample...)
	want := []string{"/a", "/a/.git", "/a/Z", "/a/b", "/a/c", "/a/lnk"}
	if got := walkTree(t, tr, "/a", "depth=0 | depth=1 & !prune", "", "", 0); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if want := []string{"/a"}; !slices.Equal(tr.gets, want) {
		t.Errorf("read %q, want %q", tr.gets, want)
	}
}

// TestWalkOwned checks that WalkOwned hands over the entries readDir made,
// rewritten in place, while Walk hands over copies and leaves them alone.
func TestWalkOwned(t *testing.T) {
	tr := newMemTree("/a/", "/a/f", "/a/g", "/b")
	made := map[string]zx.Dir{} // by real path: what readDir returned
	readDir := func(p string) ([]zx.Dir, error) {
		var ds []zx.Dir
		for q, e := range tr.ents {
			if q != "/" && path.Dir(q) == p {
				d := e.Clone()
				made[q] = d
				ds = append(ds, d)
			}
		}
		slices.SortFunc(ds, func(a, b zx.Dir) int { return strings.Compare(a["name"], b["name"]) })
		return ds, nil
	}
	for _, owned := range []bool{false, true} {
		clear(made)
		root := tr.ents["/"].Clone()
		made["/"] = root
		var got []string
		emit := func(it zx.Item) bool {
			real := strings.TrimPrefix(it.Dir.Path(), "/x")
			if real == "" {
				real = "/"
			}
			same := made[real] != nil && isSameMap(made[real], it.Dir)
			if same != owned {
				t.Errorf("owned=%v: %s handed over as the same map: %v", owned, it.Dir.Path(), same)
			}
			got = append(got, it.Dir.Path()+":"+it.Dir.Name())
			it.Dir["Mark"] = "reader's" // the reader owns what it gets
			return true
		}
		walk := Walk
		if owned {
			walk = WalkOwned
		}
		if err := walk(t.Context(), root, nil, "/", "/x", 0, readDir, emit); err != nil {
			t.Fatal(err)
		}
		if s, want := strings.Join(got, " "), "/x:x /x/a:a /x/a/f:f /x/a/g:g /x/b:b"; s != want {
			t.Errorf("owned=%v: walk gave %q, want %q", owned, s, want)
		}
		for p, d := range made {
			if _, marked := d["Mark"]; marked != owned || (!owned && d["path"] != p) {
				t.Errorf("owned=%v: readDir's entry for %s is now %v", owned, p, d)
			}
		}
	}
}

// isSameMap reports whether a and b are the same map (not equal copies).
func isSameMap(a, b zx.Dir) bool {
	const k = "\x00probe"
	a[k] = "1"
	_, same := b[k]
	delete(a, k)
	return same
}
