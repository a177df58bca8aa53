package mount_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/mount"
	"github.com/zxfs/zx/server"
)

const (
	keepSize  = unix.FALLOC_FL_KEEP_SIZE
	punchHole = unix.FALLOC_FL_PUNCH_HOLE
	zeroRange = unix.FALLOC_FL_ZERO_RANGE
)

// pattern returns n bytes of data without zeros.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%251 + 1)
	}
	return b
}

// TestFallocate: fallocate(2) through a mount, in each mode, in the
// default mode, with write-back and under a delegation: the size the
// mount reports (st_size stays with keep-size, grows with the zero mode
// and zero-range past the end), the contents read through the
// descriptor, another one and after close (zeros where punched or
// zeroed, the data elsewhere), and the server's disk, right after each
// call: the hole is a hole there, space is reserved. Writes made before
// (not yet sent) are applied first; a write after a punched hole leaves
// the hole. fallocate(1), where installed, does the same.
func TestFallocate(t *testing.T) {
	for _, c := range []struct {
		name  string
		copts func(t *testing.T) cache.Options
		opts  mount.Options
		deleg bool
	}{
		{"default", func(*testing.T) cache.Options { return cache.Options{} }, mount.Options{}, false},
		{"writeback", func(t *testing.T) cache.Options { return cache.Options{Journal: t.TempDir()} }, mount.Options{WriteBack: true}, false},
		{"delegated", func(t *testing.T) cache.Options { return cache.Options{Journal: t.TempDir(), Delegate: true} }, mount.Options{}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := wbMount(t, wbSetup{noProxy: true, copts: c.copts(t), opts: c.opts})
			dir, disk := e.dir, e.srvDir
			if c.deleg {
				// Files in a directory the mount made are written
				// under its delegation: journaled.
				waitFor(t, "the recalls stream", func() bool { return e.c.Delegations() != nil })
				must(t, os.Mkdir(e.p("d"), 0o755))
				waitFor(t, "the delegation of /d", func() bool {
					ds := e.c.Delegations()
					return ds != nil && len(ds.Held) == 1 && ds.Held[0] == "/d"
				})
				dir, disk = e.p("d"), filepath.Join(e.srvDir, "d")
			}
			checkFallocate(t, dir, disk)
		})
	}
}

func checkFallocate(t *testing.T, dir, disk string) {
	p, dp := filepath.Join(dir, "f"), filepath.Join(disk, "f")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	must(t, err)
	defer f.Close()
	want := pattern(64 << 10)
	// Written, not yet sent: the allocate is applied after it.
	_, err = f.WriteAt(want, 0)
	must(t, err)
	fd := int(f.Fd())
	check := func(what string) {
		t.Helper()
		var st unix.Stat_t
		must(t, unix.Fstat(fd, &st))
		if st.Size != int64(len(want)) {
			t.Fatalf("%s: st_size %d, want %d", what, st.Size, len(want))
		}
		got := make([]byte, len(want)+100)
		n, err := f.ReadAt(got, 0)
		if err != nil && n != len(want) || !bytes.Equal(got[:n], want) {
			t.Fatalf("%s: read %d bytes (%v), differing from what is expected at %d", what, n, err, diffAt(got[:n], want))
		}
		b, err := os.ReadFile(dp)
		if err != nil || !bytes.Equal(b, want) {
			t.Fatalf("%s: on the server's disk: %d bytes (%v), differing at %d", what, len(b), err, diffAt(b, want))
		}
	}
	step := func(what string, mode uint32, off, n int64) {
		t.Helper()
		if err := unix.Fallocate(fd, mode, off, n); err != nil {
			t.Fatalf("%s: fallocate: %v", what, err)
		}
		if mode&(punchHole|zeroRange) != 0 && off < int64(len(want)) {
			clear(want[off:min(off+n, int64(len(want)))])
		}
		if mode&keepSize == 0 && off+n > int64(len(want)) {
			want = append(want, make([]byte, off+n-int64(len(want)))...)
		}
		check(what)
	}
	step("punch a hole in unsent writes", punchHole|keepSize, 4096, 8192)
	if h := holeAt(t, dp, 0); h != 4096 {
		t.Errorf("the first hole on the server's disk is at %d, want 4096", h)
	}
	step("allocate past the end", 0, 60<<10, 40<<10)
	var st unix.Stat_t
	must(t, unix.Stat(dp, &st))
	before := st.Blocks * 512
	step("reserve past the end, keeping the size", keepSize, 100<<10, 1<<20)
	must(t, unix.Stat(dp, &st))
	if got := st.Blocks*512 - before; got < 1<<20 {
		t.Errorf("keep-size reserved %d bytes on the server's disk, want 1 MiB", got)
	}
	step("zero a range", zeroRange|keepSize, 20000, 100)
	step("zero past the end", zeroRange, 100<<10-10, 50)

	// A write after them: in place, the hole stays.
	_, err = f.WriteAt([]byte("XY"), 30000)
	must(t, err)
	copy(want[30000:], "XY")
	must(t, f.Sync())
	check("a write after them, fsync")
	if h := holeAt(t, dp, 0); h != 4096 {
		t.Errorf("after a write elsewhere, the first hole on the server's disk is at %d, want 4096", h)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read through another descriptor: %v, differing at %d", err, diffAt(got, want))
	}
	must(t, f.Close())

	// An open of the file as it is (contents read whole, and in the
	// kernel's cache), then a hole through another descriptor.
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read after close: %v, differing at %d", err, diffAt(got, want))
	}
	f, err = os.OpenFile(p, os.O_RDWR, 0)
	must(t, err)
	fd = int(f.Fd())
	got := make([]byte, len(want))
	_, err = f.ReadAt(got, 0)
	must(t, err)
	step("punch a hole in a file read", punchHole|keepSize, 50000, 1000)
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read through another descriptor: %v, differing at %d", err, diffAt(got, want))
	}
	must(t, f.Close())

	// fallocate(1): as databases and download tools call it.
	if _, err := exec.LookPath("fallocate"); err == nil {
		run := func(args ...string) {
			t.Helper()
			if out, err := exec.Command("fallocate", append(args, p)...).CombinedOutput(); err != nil {
				t.Fatalf("fallocate %q: %v: %s", args, err, out)
			}
		}
		run("-p", "-o", "1000", "-l", "2000")
		clear(want[1000:3000])
		run("-z", "-o", "70000", "-l", "5000")
		clear(want[70000:75000])
		run("-l", "200000")
		want = append(want, make([]byte, 200000-len(want))...)
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("after fallocate(1): %d bytes (%v), differing at %d", len(got), err, diffAt(got, want))
		}
		if b, err := os.ReadFile(dp); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("after fallocate(1), on the server's disk: %d bytes (%v), differing at %d", len(b), err, diffAt(b, want))
		}
	} else {
		t.Log("fallocate(1) is not installed: checked through the system call only")
	}
}

// holeAt returns where the first hole at or after off is in the file p
// (its size if none).
func holeAt(t *testing.T, p string, off int64) int64 {
	t.Helper()
	f, err := os.Open(p)
	must(t, err)
	defer f.Close()
	h, err := unix.Seek(int(f.Fd()), off, unix.SEEK_HOLE)
	must(t, err)
	return h
}

func diffAt(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestFallocateStreaming: a file larger than the mount reads whole is
// read as a stream, which runs ahead of the reader; a hole punched in
// what it has read ahead reads as zeros afterwards.
func TestFallocateStreaming(t *testing.T) {
	srv := t.TempDir()
	want := pattern(4 << 20)
	must(t, os.WriteFile(filepath.Join(srv, "big"), want, 0o644))
	e := wbMount(t, wbSetup{srvDir: srv, noProxy: true, opts: mount.Options{WholeFile: 64 << 10}})
	f, err := os.Open(e.p("big"))
	must(t, err)
	defer f.Close()
	buf := make([]byte, 64<<10)
	_, err = f.ReadAt(buf, 0)
	must(t, err)
	w, err := os.OpenFile(e.p("big"), os.O_WRONLY, 0)
	must(t, err)
	defer w.Close()
	must(t, unix.Fallocate(int(w.Fd()), punchHole|keepSize, 64<<10, int64(len(want))-64<<10))
	clear(want[64<<10:])
	got := make([]byte, len(want))
	n, err := f.ReadAt(got, 0)
	if n != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (%v) after the hole, differing at %d", n, err, diffAt(got[:n], want))
	}
}

// TestFallocateUnlinked: a file unlinked while open has nothing on the
// server: an allocate changes what its descriptors hold.
func TestFallocateUnlinked(t *testing.T) {
	e := wbMount(t, wbSetup{noProxy: true})
	must(t, os.WriteFile(e.p("f"), []byte("0123456789"), 0o644))
	f, err := os.OpenFile(e.p("f"), os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	must(t, os.Remove(e.p("f")))
	must(t, unix.Fallocate(int(f.Fd()), punchHole|keepSize, 2, 3))
	must(t, unix.Fallocate(int(f.Fd()), zeroRange, 8, 4))
	got := make([]byte, 100)
	n, _ := f.ReadAt(got, 0)
	if want := "01\x00\x00\x00567\x00\x00\x00\x00"; string(got[:n]) != want {
		t.Fatalf("unlinked file after punch and zero: %q, want %q", got[:n], want)
	}
	var st unix.Stat_t
	must(t, unix.Fstat(int(f.Fd()), &st))
	if st.Size != 12 {
		t.Fatalf("unlinked file after zeroing past the end: size %d, want 12", st.Size)
	}
}

// TestFallocateOldServer: through a server older than the allocate
// request, fallocate fails with EOPNOTSUPP (never ENOSYS, after which
// the kernel would not ask again), each time, and changes nothing.
func TestFallocateOldServer(t *testing.T) {
	addr, log := serveSyncLogged(t, "", server.Config{NoAlloc: true})
	e := mnt(t, setup{addr: addr})
	must(t, os.WriteFile(e.p("f"), []byte("data"), 0o644))
	f, err := os.OpenFile(e.p("f"), os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	for _, mode := range []uint32{0, keepSize, punchHole | keepSize, zeroRange} {
		if err := unix.Fallocate(int(f.Fd()), mode, 0, 2); !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Errorf("fallocate mode %#x through an old server: %v, want EOPNOTSUPP", mode, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(log.disk, "f")); err != nil || string(b) != "data" {
		t.Errorf("on the server's disk: %q, %v", b, err)
	}
	if got := readFile(t, e.p("f")); got != "data" {
		t.Errorf("through the mount: %q", got)
	}
	must(t, e.m.Sync(context.Background()))
}

// TestFallocateWriteBackLinkDown: with write-back and the link down,
// fallocate cannot learn whether the server has the space: it fails
// within the timeout (ETIMEDOUT), after the writes made before it were
// journaled; they reach the server once the link is back, and the
// allocate that failed is not applied.
func TestFallocateWriteBackLinkDown(t *testing.T) {
	e := wbMount(t, wbSetup{reconnect: true, copts: cache.Options{Journal: t.TempDir()}, opts: mount.Options{WriteBack: true, Timeout: time.Second}})
	must(t, os.WriteFile(e.p("f"), []byte("0123456789"), 0o644))
	must(t, e.m.Sync(context.Background()))
	f, err := os.OpenFile(e.p("f"), os.O_RDWR, 0)
	must(t, err)
	defer f.Close()
	e.proxy.Stall(-1)
	e.proxy.Cut()
	_, err = f.WriteAt([]byte("abcdef"), 2)
	must(t, err)
	err = unix.Fallocate(int(f.Fd()), punchHole|keepSize, 0, 4)
	if !errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("fallocate with the link down: %v, want ETIMEDOUT", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("close after: %v (the writes are journaled)", err)
	}
	e.proxy.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	must(t, e.m.Sync(ctx))
	if got := e.server(t, "f"); got != "01abcdef89" {
		t.Errorf("the server has %q, want the writes and no hole", got)
	}
}
