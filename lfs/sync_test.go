package lfs

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/zxfs/zx"
)

// TestSyncOrder: a Sync issued right after a put whose data is still
// coming waits for it, and then syncs that file: OnSync sees the file
// whole under its name. A Sync of a directory, of the root and of the
// control file succeed; of a missing file, it fails.
func TestSyncOrder(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	var dir string
	f, dir := newFS(t, Options{OnSync: func(p string, err error) {
		b, _ := os.ReadFile(filepath.Join(dir, p))
		mu.Lock()
		defer mu.Unlock()
		s := p + " " + string(b)
		if err != nil {
			s = p + " " + err.Error()
		}
		seen = append(seen, s)
	}})
	ctx := context.Background()
	pr, pw := io.Pipe()
	pc := f.Put(ctx, "/a", zx.Dir{zx.AType: zx.TypeFile}, 0, pr)
	sc := f.Sync(ctx, "/a")
	pw.Write([]byte("hello"))
	pw.Close()
	if r := <-pc; r.Err != nil {
		t.Fatal(r.Err)
	}
	if err := <-sc; err != nil {
		t.Fatal(err)
	}
	if _, err := zx.Mkdir(ctx, f, "/d", 0755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/d", "/", "/Ctl"} {
		if err := <-f.Sync(ctx, p); err != nil {
			t.Errorf("Sync(%s): %v", p, err)
		}
	}
	if err := <-f.Sync(ctx, "/none"); !errors.Is(err, zx.ErrNotExist) {
		t.Errorf("Sync(/none) = %v, want ErrNotExist", err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"/a hello", "/d ", "/ "}
	if len(seen) != 4 || strings.Join(seen[:3], "|") != strings.Join(want, "|") || !strings.HasPrefix(seen[3], "/none ") {
		t.Errorf("synced %q, want %q and /none failing", seen, want)
	}
	var st strings.Builder
	for _, l := range f.Status(ctx).Lines {
		st.WriteString(l + "\n")
	}
	if !strings.Contains(st.String(), "synced 4 failed 1\n") {
		t.Errorf("status lacks synced 4 failed 1:\n%s", st.String())
	}
}
