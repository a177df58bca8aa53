package mount_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/mount"
)

// TestUnlinkOpenLinked: a program writes to a file through a name, which
// is then unlinked while the file keeps another name (that the mount may
// never have looked up), and keeps writing and reading through its
// descriptor: as on a local disk, all it wrote ends up in the other name,
// and it reads back what it wrote.
func TestUnlinkOpenLinked(t *testing.T) {
	canMount(t)
	for _, c := range []struct {
		name  string
		other string // the other name, made on the server's disk
		known bool   // looked up through the mount before
		wb    bool   // --writeback
		mv    bool   // the name is replaced by a rename, not unlinked
	}{
		{"same-dir", "a/g", false, false, false},
		{"other-dir", "b/c/g", false, false, false},
		{"known", "b/g", true, false, false},
		{"writeback", "b/c/g", false, true, false},
		{"rename-over", "b/c/g", false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			disk := t.TempDir()
			for _, d := range []string{"a", "b/c"} {
				must(t, os.MkdirAll(filepath.Join(disk, d), 0o755))
			}
			must(t, os.WriteFile(filepath.Join(disk, "a/f"), []byte("0123456789"), 0o644))
			must(t, os.Link(filepath.Join(disk, "a/f"), filepath.Join(disk, c.other)))
			s := wbSetup{srvDir: disk, noProxy: true}
			if c.wb {
				s.copts, s.opts = cache.Options{Journal: t.TempDir()}, mount.Options{WriteBack: true}
			}
			e := wbMount(t, s)
			if c.known {
				if _, err := os.Stat(e.p(c.other)); err != nil {
					t.Fatal(err)
				}
			}
			f, err := os.OpenFile(e.p("a/f"), os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			const want = "AB23CD6789XYZ"
			writeAcross(t, f, want, func() {
				if c.mv {
					must(t, os.WriteFile(e.p("a/new"), []byte("new"), 0o644))
					must(t, os.Rename(e.p("a/new"), e.p("a/f")))
				} else {
					must(t, os.Remove(e.p("a/f")))
				}
			})
			must(t, f.Close())
			if c.wb {
				must(t, e.m.Sync(context.Background()))
			}
			got, err := os.ReadFile(filepath.Join(disk, c.other))
			if err != nil || string(got) != want {
				t.Errorf("%s on the server after close: %q %v, want %q", c.other, got, err, want)
			}
			if got, err := os.ReadFile(e.p(c.other)); err != nil || string(got) != want {
				t.Errorf("%s through the mount after close: %q %v, want %q", c.other, got, err, want)
			}
			wantF := "<missing>"
			if c.mv {
				wantF = "new"
			}
			if got, err := os.ReadFile(filepath.Join(disk, "a/f")); err == nil && string(got) != wantF || err != nil && !os.IsNotExist(err) || err != nil && wantF != "<missing>" {
				t.Errorf("a/f on the server after close: %q %v, want %s", got, err, wantF)
			}
		})
	}
}

// TestUnlinkOpenLast: a file unlinked while open, with no other name,
// keeps its data for the descriptors open on it, which go on writing and
// reading it; nothing of it reaches the server.
func TestUnlinkOpenLast(t *testing.T) {
	addr, disk := serveLFS(t)
	e := mnt(t, setup{addr: addr})
	must(t, os.WriteFile(e.p("f"), []byte("0123456789"), 0o644))
	f, err := os.OpenFile(e.p("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const want = "AB23CD6789XYZ"
	writeAcross(t, f, want, func() { must(t, os.Remove(e.p("f"))) })
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(want)) {
		t.Errorf("fstat after the unlink: %v %v, want size %d", fi, err, len(want))
	} else if nl := fi.Sys().(*syscall.Stat_t).Nlink; nl != 0 {
		t.Errorf("fstat after the unlink: st_nlink %d, want 0", nl)
	}
	// Another file under the old name is not this one.
	must(t, os.WriteFile(e.p("f"), []byte("another"), 0o644))
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(want)) || fi.Sys().(*syscall.Stat_t).Nlink != 0 {
		t.Errorf("fstat after another f was made: %v %v, want size %d and no link", fi, err, len(want))
	}
	must(t, f.Close())
	must(t, e.m.Sync(context.Background()))
	ents, err := os.ReadDir(disk)
	must(t, err)
	for _, d := range ents {
		if d.Name() != "f" {
			t.Errorf("the server has %s after the last name of an open file was unlinked", d.Name())
		}
	}
	for _, p := range []string{e.p("f"), filepath.Join(disk, "f")} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "another" {
			t.Errorf("%s after the unlinked file's close: %q %v, want the other file's contents", p, b, err)
		}
	}
}

// TestUnlinkOpenLastBig pins a documented limit (docs/cache.md, Known
// limits): a file bigger than Options.WholeFile is not held in memory
// when its last name is unlinked while it is open, so a read through the
// descriptor after that which neither the kernel's page cache nor the
// handle's running stream can answer fails with ENOENT.
func TestUnlinkOpenLastBig(t *testing.T) {
	addr, _ := serveLFS(t)
	e := mnt(t, setup{addr: addr, opts: mount.Options{WholeFile: 4096}})
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	must(t, os.WriteFile(e.p("f"), data, 0o644))
	f, err := os.Open(e.p("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 16)
	if _, err := f.ReadAt(b, 512<<10); err != nil || !bytes.Equal(b, data[:16]) {
		t.Fatalf("read before the unlink: %q %v", b, err)
	}
	must(t, os.Remove(e.p("f")))
	// Out of the page cache, and behind the stream: a new get.
	must(t, unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED))
	_, err = f.ReadAt(b, 0)
	if !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("read after the unlink: %q %v; want ENOENT, as docs/cache.md says (update it if this is fixed)", b, err)
	}
}

// TestUnlinkOpenScratch: the tmpfile(3) pattern, a file created and
// unlinked at once and used as scratch space, bigger than
// Options.WholeFile: what is written reads back through the descriptor.
func TestUnlinkOpenScratch(t *testing.T) {
	addr, disk := serveLFS(t)
	e := mnt(t, setup{addr: addr, opts: mount.Options{WholeFile: 4096}})
	f, err := os.OpenFile(e.p("scratch"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	must(t, os.Remove(e.p("scratch")))
	var want []byte
	for i := range 64 {
		b := bytes.Repeat([]byte{byte('a' + i%26)}, 1000)
		_, err := f.Write(b)
		must(t, err)
		want = append(want, b...)
	}
	_, err = f.WriteAt([]byte("HOLE"), 100000)
	must(t, err)
	want = append(want, make([]byte, 100000-len(want))...)
	want = append(want, "HOLE"...)
	_, err = f.WriteAt([]byte("mid"), 5000)
	must(t, err)
	copy(want[5000:], "mid")
	got := make([]byte, len(want)+10)
	n, err := f.ReadAt(got, 0)
	if n != len(want) || !bytes.Equal(got[:n], want) {
		t.Errorf("read back %d bytes (%v), want %d; equal prefix %d", n, err, len(want), commonPrefix(got[:n], want))
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != int64(len(want)) {
		t.Errorf("fstat: %v %v, want size %d", fi, err, len(want))
	}
	must(t, f.Close())
	// The create and the unlink may have been pipelined: wait for them.
	must(t, e.m.Sync(context.Background()))
	if ents, _ := os.ReadDir(disk); len(ents) != 0 {
		t.Errorf("the server has %d entries after the scratch file was closed", len(ents))
	}
}

func commonPrefix(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

// writeAcross writes to f, a file holding "0123456789", before and after
// lose (which unlinks or replaces its name), and checks that reading
// through f gives want ("AB23CD6789XYZ").
func writeAcross(t *testing.T, f *os.File, want string, lose func()) {
	t.Helper()
	_, err := f.WriteAt([]byte("AB"), 0)
	must(t, err)
	lose()
	_, err = f.WriteAt([]byte("CD"), 4)
	must(t, err)
	_, err = f.WriteAt([]byte("XYZ"), 10)
	must(t, err)
	b := make([]byte, 64)
	n, _ := f.ReadAt(b, 0)
	if string(b[:n]) != want {
		t.Errorf("read through the descriptor after the unlink: %q, want %q", b[:n], want)
	}
}
