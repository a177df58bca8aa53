package lfs

import (
	"os"
	"testing"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/zxtest"
)

func TestTree(t *testing.T) {
	root := os.Getuid() == 0
	zxtest.TestTree(t, func(t *testing.T) zx.Tree {
		f, err := New(t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}, zxtest.Options{NoOwnership: !root, NoDevices: !root})
}
