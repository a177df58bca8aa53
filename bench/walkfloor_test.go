package bench

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The walk floor counts every entry of the tree once, the root included,
// does not follow symbolic links, and says which directory it could not
// read.
func TestWalkFloor(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	for i := range 5 {
		os.WriteFile(filepath.Join(outside, "f"+string(rune('a'+i))), nil, 0o644)
	}
	want := int64(1) // the root
	mk := func(p string, dir bool) {
		t.Helper()
		var err error
		if dir {
			err = os.Mkdir(filepath.Join(root, p), 0o755)
		} else {
			err = os.WriteFile(filepath.Join(root, p), []byte("x"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		want++
	}
	for _, d := range []string{"a", "a/b", "a/b/c", "d", "e"} {
		mk(d, true)
		for _, f := range []string{"1", "2", "3"} {
			mk(d+"/"+f, false)
		}
	}
	// A link to a directory outside is one entry, not a way out.
	if err := os.Symlink(outside, filepath.Join(root, "a", "out")); err != nil {
		t.Fatal(err)
	}
	want++

	var viaGo int64
	filepath.WalkDir(root, func(string, fs.DirEntry, error) error { viaGo++; return nil })
	if viaGo != want {
		t.Fatalf("the test's tree has %d entries by filepath.WalkDir, %d made", viaGo, want)
	}
	for range 3 { // workers race for the directories: the count must not
		n, took, err := walkFloor(context.Background(), root)
		if err != nil {
			t.Fatal(err)
		}
		if n != want || took <= 0 {
			t.Fatalf("walkFloor = %d entries in %v, want %d", n, took, want)
		}
	}

	_, _, err := walkFloor(context.Background(), filepath.Join(root, "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("walkFloor of a missing directory: %v, want not exist", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := walkFloor(ctx, root); !errors.Is(err, context.Canceled) {
		t.Errorf("walkFloor with a cancelled context: %v", err)
	}
}

func TestProcCPU(t *testing.T) {
	d, err := procCPU(os.Getpid())
	if err != nil || d < 0 {
		t.Fatalf("procCPU(self) = %v, %v", d, err)
	}
	if _, err := procCPU(-1); err == nil {
		t.Error("procCPU of no process: no error")
	}
}
