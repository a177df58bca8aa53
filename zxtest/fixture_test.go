package zxtest_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/zxtest"
)

func TestFixtures(t *testing.T) {
	ctx := t.Context()
	a, b := memfs.New(), memfs.New()
	spec := []string{"/a/b.txt:hello", "/a/c/", "/a/l->b.txt", "/e", "/p#p"}
	zxtest.MkTree(t, a, spec...)
	zxtest.MkTree(t, b, spec...)
	got, err := zxtest.Dump(ctx, a, "/")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/a/", "/a/b.txt:hello", "/a/c/", "/a/l->b.txt", "/e:", "/p#p"}
	if !slices.Equal(got, want) {
		t.Fatalf("dump: %q, want %q", got, want)
	}
	zxtest.CheckTree(t, a, "/", spec...)
	zxtest.CheckTree(t, a, "/a", "/a/b.txt:hello", "/a/c/", "/a/l->b.txt")

	ignore := []string{zx.AMtime, zx.AAtime, zx.ACtime, zx.AIno}
	if diffs, err := zxtest.DiffTrees(ctx, a, b, "/", ignore...); err != nil || len(diffs) != 0 {
		t.Fatalf("equal trees: %q, %v", diffs, err)
	}
	zxtest.MkTree(t, b, "/a/b.txt:HELLO", "/a/c/new")
	diffs, err := zxtest.DiffTrees(ctx, a, b, "/", ignore...)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Join(diffs, "\n")
	for _, w := range []string{"/a/b.txt: contents differ", "/a/c/new: only in the second tree", "/a/c:\nsize"} {
		if !strings.Contains(s, w) {
			t.Fatalf("diffs %q lack %q", s, w)
		}
	}

	d1 := zx.Dir{"a": "1", "b": "2", "c": "3"}
	d2 := zx.Dir{"a": "1", "b": "x", "d": "4"}
	if got := zxtest.Diff(d1, d2); got != "b: \"x\", want \"2\"\nc: missing, want \"3\"\nd: \"4\", want none\n" {
		t.Fatalf("diff: %q", got)
	}
	if !zxtest.Equal(d1, d2, "b", "c", "d") || zxtest.Equal(d1, d2) {
		t.Fatal("equal")
	}
}
