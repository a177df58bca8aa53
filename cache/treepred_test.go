package cache

import (
	"fmt"
	"slices"
	"testing"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/pred"
)

// TestTreePred checks the predicate of tree streams against walkCmp on a
// tree whose names sort differently byte-wise and in walk order ("foo",
// "foo.c", "foo-x", "foo0", and paths through them): for every start and
// end, the find brings exactly the small files after the start, up to
// the end, in walk order.
func TestTreePred(t *testing.T) {
	ctx := t.Context()
	fs := memfs.New()
	dirs := []string{"/r", "/r/foo", "/r/foo/foo", "/r/foo-x", "/r/foo0", "/r/foo/foo.c", "/r/foo/b'q"}
	files := []string{"/r/a", "/r/foo.c", "/r/foo/a", "/r/foo/foo/z", "/r/foo/foo.c/x", "/r/foo/zz",
		"/r/foo-x/y", "/r/foo0/a", "/r/foo0/b", "/r/fop", "/r/foo/b'q/x", "/r/foo/foo/big"}
	for _, d := range dirs {
		if _, err := zx.Mkdir(ctx, fs, d, 0755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		data := []byte("x")
		if path := f; path == "/r/foo/foo/big" {
			data = make([]byte, 100)
		}
		if _, err := zx.WriteFile(ctx, fs, f, nil, data); err != nil {
			t.Fatal(err)
		}
	}
	var small []string
	for _, f := range files {
		if f != "/r/foo/foo/big" {
			small = append(small, f)
		}
	}
	slices.SortFunc(small, walkCmp)
	points := append(append([]string{}, dirs...), files...)
	for _, root := range []string{"/", "/r", "/r/foo"} {
		for _, from := range points {
			if from == root || !zx.HasPrefix(from, root) {
				continue
			}
			for _, upto := range append([]string{""}, small...) {
				if upto != "" && (walkCmp(upto, from) <= 0 || !zx.HasPrefix(upto, root)) {
					continue
				}
				var want []string
				for _, f := range small {
					if zx.HasPrefix(f, root) && walkCmp(f, from) > 0 && (upto == "" || walkCmp(f, upto) <= 0) {
						want = append(want, f)
					}
				}
				pr := treePred(10, root, from, upto)
				if _, err := pred.Parse(pr); err != nil {
					t.Fatalf("%s: %v", pr, err)
				}
				var got []string
				for it := range pred.Find(ctx, fs, root, zx.FindOpts{Pred: pr}) {
					if it.Err != nil {
						t.Fatalf("find %s %q: %v", root, pr, it.Err)
					}
					got = append(got, it.Dir.Path())
				}
				if !slices.Equal(got, want) {
					t.Errorf("root %s from %s upto %q: got %v, want %v\n(%s)", root, from, upto, got, want, fmt.Sprint(pr))
				}
			}
		}
	}
}
