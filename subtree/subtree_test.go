package subtree

import (
	"context"
	"testing"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/zxtest"
)

func TestConformance(t *testing.T) {
	zxtest.TestTree(t, func(t *testing.T) zx.Tree {
		fs := memfs.New()
		if _, err := zx.Mkdir(context.Background(), fs, "/some", 0755); err != nil {
			t.Fatal(err)
		}
		if _, err := zx.Mkdir(context.Background(), fs, "/some/dir", 0755); err != nil {
			t.Fatal(err)
		}
		return New(fs, "/some/dir")
	}, zxtest.Options{})
}

func TestConfined(t *testing.T) {
	ctx := context.Background()
	fs := memfs.New()
	// The secret must be there, or the checks below pass for nothing.
	if _, err := zx.Mkdir(ctx, fs, "/in", 0755); err != nil {
		t.Fatal(err)
	}
	if _, err := zx.WriteFile(ctx, fs, "/secret", nil, []byte("x")); err != nil {
		t.Fatal(err)
	}
	sub := New(fs, "/in")
	for _, p := range []string{"/../secret", "../secret", "/a/../../secret"} {
		if _, err := zx.Stat(ctx, sub, p); err == nil {
			t.Errorf("stat %q reached outside the subtree", p)
		}
	}
	d, err := zx.Stat(ctx, sub, "/")
	if err != nil {
		t.Fatal(err)
	}
	if d.Path() != "/" || d.Name() != "/" {
		t.Fatalf("root of subtree = %v", d)
	}
}
