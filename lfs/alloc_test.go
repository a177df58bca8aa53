package lfs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
)

// TestAllocateDisk: each mode does on the disk what fallocate(2) does
// there: the zero mode and keep-size reserve blocks (keep-size past the
// end without changing the size), a punched hole frees them, a zeroed
// range reads as zeros; data elsewhere stays. A user other than root loses
// the set-user-id bit, as by a write. The control file has no storage.
func TestAllocateDisk(t *testing.T) {
	f, dir := newFS(t, Options{})
	ctx := context.Background()
	alloc := func(ctx context.Context, p string, mode zx.AllocMode, off, n int64) zx.Dir {
		t.Helper()
		r := <-f.Allocate(ctx, p, mode, off, n)
		if r.Err != nil {
			t.Fatalf("allocate %s %v %d %d: %v", p, mode, off, n, r.Err)
		}
		return r.Dir
	}
	disk := func(p string) (unix.Stat_t, []byte) {
		t.Helper()
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, p), &st); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		return st, b
	}
	const mb = 1 << 20

	// Keep-size on an empty file: 4 MiB reserved, size 0.
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0644); err != nil {
		t.Fatal(err)
	}
	if d := alloc(ctx, "/empty", zx.AllocKeepSize, 0, 4*mb); d.Size() != 0 {
		t.Errorf("keep-size reply: size %d, want 0", d.Size())
	}
	if st, _ := disk("/empty"); st.Size != 0 || st.Blocks*512 < 4*mb {
		t.Errorf("keep-size on the disk: size %d, %d bytes allocated; want 0 and 4 MiB", st.Size, st.Blocks*512)
	}

	// The zero mode grows the file, allocated.
	if d := alloc(ctx, "/empty", 0, 0, 2*mb); d.Size() != 2*mb {
		t.Errorf("allocate reply: size %d, want 2 MiB", d.Size())
	}

	// A hole in 2 MiB of data.
	data := bytes.Repeat([]byte("0123456789abcdef"), 2*mb/16)
	if err := os.WriteFile(filepath.Join(dir, "data"), data, 0644); err != nil {
		t.Fatal(err)
	}
	if err := <-f.Sync(ctx, "/data"); err != nil { // blocks allocated on the disk, not delayed
		t.Fatal(err)
	}
	before, _ := disk("/data")
	alloc(ctx, "/data", zx.AllocPunchHole|zx.AllocKeepSize, mb/2, mb)
	after, b := disk("/data")
	want := bytes.Clone(data)
	clear(want[mb/2 : mb/2+mb])
	if !bytes.Equal(b, want) || after.Size != 2*mb {
		t.Errorf("after punching a hole: size %d, contents differ at %d", after.Size, firstByteDiff(b, want))
	}
	if freed := (before.Blocks - after.Blocks) * 512; freed < mb {
		t.Errorf("punching a hole of 1 MiB freed %d bytes on the disk", freed)
	}

	// Zeroing past the end grows the file; the data before stays.
	alloc(ctx, "/data", zx.AllocZeroRange, 2*mb-10, 20)
	st, b := disk("/data")
	want = append(want[:2*mb-10], make([]byte, 20)...)
	if st.Size != 2*mb+10 || !bytes.Equal(b, want) {
		t.Errorf("after zeroing past the end: size %d, contents differ at %d", st.Size, firstByteDiff(b, want))
	}

	// A user other than root loses the set-user-id bit.
	if err := os.Chmod(filepath.Join(dir, "data"), 04755); err != nil {
		t.Fatal(err)
	}
	d := alloc(zx.WithCaller(ctx, zx.Caller{Uid: 1000, Gid: 1000}), "/data", zx.AllocKeepSize, 0, 1)
	if st, _ := disk("/data"); st.Mode&07777 != 0755 || d.Mode() != 0755 {
		t.Errorf("allocate as uid 1000 left mode %o (reply %o), want 0755", st.Mode&07777, d.Mode())
	}

	if r := <-f.Allocate(ctx, "/Ctl", 0, 0, 1); !errors.Is(r.Err, zx.ErrNotSupp) {
		t.Errorf("allocate /Ctl = %v, want ErrNotSupp", r.Err)
	}
	ro, _ := newFS(t, Options{ReadOnly: true})
	if r := <-ro.Allocate(ctx, "/x", 0, 0, 1); !errors.Is(r.Err, zx.ErrReadOnly) {
		t.Errorf("allocate on a read-only tree = %v, want ErrReadOnly", r.Err)
	}
}

func firstByteDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
