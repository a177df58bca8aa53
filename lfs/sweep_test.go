package lfs

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zxfs/zx"
)

func TestSweepStaleTemps(t *testing.T) {
	// Temporaries a killed server left behind go when their directory is
	// next listed; recent ones (a put under way) stay.
	dir := t.TempDir()
	sub := filepath.Join(dir, "d")
	if err := os.Mkdir(sub, 0755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(sub, TempPrefix+"r0123456789abcdef")
	fresh := filepath.Join(sub, TempPrefix+"cfedcba9876543210")
	for _, p := range []string{stale, fresh, filepath.Join(sub, "f")} {
		if err := os.WriteFile(p, []byte("x"), 0600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	f, err := New(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	for it := range f.Get(context.Background(), "/d", 0, -1) {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
		names = append(names, it.Dir[zx.AName])
	}
	if len(names) != 1 || names[0] != "f" {
		t.Errorf("listing %v, want [f]", names)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary still there: %v", err)
	}
	if _, err := os.Lstat(fresh); err != nil {
		t.Errorf("recent temporary removed: %v", err)
	}
}
