package lfs

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReadDirFast checks that readDir, which lists a directory with statx
// and names read in place, returns exactly what readDirStat (lstat and
// entry per name) returns, for every kind of entry and for a directory
// larger than one getdents buffer.
func TestReadDirFast(t *testing.T) {
	for _, opts := range []Options{{}, {NoXattrs: true}} {
		t.Run(fmt.Sprintf("NoXattrs=%v", opts.NoXattrs), func(t *testing.T) {
			f, dir := newFS(t, opts)
			sub := filepath.Join(dir, "sub")
			os.Mkdir(sub, 0750)
			for _, d := range []string{dir, sub} {
				for _, name := range []string{"a", "B", "a.b", "ab", "é", "x y", ".hidden", TempPrefix + "tmp"} {
					if err := os.WriteFile(filepath.Join(d, name), []byte(name), 0640); err != nil {
						t.Fatal(err)
					}
				}
				// Distinct numbers, so that none can stand in for another.
				os.Lchown(filepath.Join(d, "a"), 1234, 5678)
				os.Chtimes(filepath.Join(d, "a"), time.Unix(1e9, 1), time.Unix(2e9, 2))
				os.Mkdir(filepath.Join(d, "dir"), 0700)
				os.Symlink("a", filepath.Join(d, "link"))
				os.Symlink("/nowhere/at/all", filepath.Join(d, "dangling"))
				unix.Mkfifo(filepath.Join(d, "fifo"), 0600)
				if err := unix.Mknod(filepath.Join(d, "null"), unix.S_IFCHR|0666, int(unix.Mkdev(1, 3))); err != nil {
					t.Logf("!!! no device node (%v): devices NOT compared (mknod needs root; CI runs as root) !!!", err)
				}
				for _, name := range []string{"a", "dir", "x y"} {
					p := filepath.Join(d, name)
					if err := unix.Lsetxattr(p, "user.color", []byte("red"), 0); err != nil {
						t.Fatalf("no user xattrs on the test file system: %v", err)
					}
					unix.Lsetxattr(p, "user.Upper", []byte("not a user attribute"), 0)
				}
				unix.Lsetxattr(filepath.Join(d, "ab"), "trusted.zx", []byte("not a user attribute"), 0)
				// Larger than readXattrs' first buffer.
				if err := unix.Lsetxattr(filepath.Join(d, "ab"), "user.big", []byte(strings.Repeat("v", 3000)), 0); err != nil {
					t.Fatal(err)
				}
			}
			// More than one getdents buffer of names.
			for i := range 600 {
				os.WriteFile(filepath.Join(sub, fmt.Sprintf("%s%04d", strings.Repeat("n", 100), i)), nil, 0644)
			}
			for _, p := range []string{"/", "/sub"} {
				d, err := f.openDir(p)
				if err != nil {
					t.Fatal(err)
				}
				fd := d.fd
				got, err := f.readDir(fd, p, nil)
				if err != nil {
					t.Fatal(err)
				}
				unix.Seek(fd, 0, 0)
				want, err := f.readDirStat(fd, p, nil)
				unix.Close(fd)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) || len(got) < 12 {
					t.Fatalf("%s: %d entries, want %d", p, len(got), len(want))
				}
				for i := range want {
					if !reflect.DeepEqual(got[i], want[i]) {
						t.Fatalf("%s: entry %d:\n got %v\nwant %v", p, i, got[i], want[i])
					}
				}
				var color int
				for _, d := range got {
					if strings.HasPrefix(d.Name(), TempPrefix) {
						t.Fatalf("%s: temporary listed: %v", p, d)
					}
					if d["color"] == "red" {
						color++
					}
					if d.Name() == "ab" && !opts.NoXattrs && len(d["big"]) != 3000 {
						t.Fatalf("%s: big attribute of %d bytes", p, len(d["big"]))
					}
				}
				if wantColor := map[bool]int{false: 3, true: 0}[opts.NoXattrs]; color != wantColor {
					t.Fatalf("%s: %d entries with color, want %d", p, color, wantColor)
				}
			}
		})
	}
}

// TestReadDirVanished checks that an entry removed between getdents and
// statx is skipped.
func TestReadDirVanished(t *testing.T) {
	f, dir := newFS(t, Options{})
	for _, n := range []string{"a", "b", "c"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0644)
	}
	d, err := f.openDir("/")
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	scannedHook = func() { os.Remove(filepath.Join(dir, "b")) }
	defer func() { scannedHook = nil }()
	ds, err := f.readDir(d.fd, "/", nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range ds {
		names = append(names, d.Name())
	}
	if s := strings.Join(names, " "); s != "a c" {
		t.Fatalf("entries %q, want %q", s, "a c")
	}
}
