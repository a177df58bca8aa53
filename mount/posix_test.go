package mount_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/mount"
)

// backend is a server tree to run mount tests against.
type backend struct {
	name  string
	serve func(t *testing.T) (addr, disk string) // disk: the lfs directory, or ""
}

var backends = []backend{
	{"memfs", func(t *testing.T) (string, string) { return serve(t, memfs.New()), "" }},
	{"lfs", serveLFS},
}

// serveLFS serves a new local directory through lfs.
func serveLFS(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	fs, err := lfs.New(dir, lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return serve(t, fs), dir
}

// forBackends runs f as a subtest with a fresh mount of each backend.
func forBackends(t *testing.T, f func(t *testing.T, e *env, disk string)) {
	forBackendsOpts(t, mount.Options{}, f)
}

func forBackendsOpts(t *testing.T, opts mount.Options, f func(t *testing.T, e *env, disk string)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			canMount(t)
			addr, disk := b.serve(t)
			f(t, mnt(t, setup{addr: addr, opts: opts}), disk)
		})
	}
}

// fixture makes, under dir: f (file "hello"), d/x (file), e (empty
// directory), l -> f (symbolic link).
func fixture(t *testing.T, dir string) {
	t.Helper()
	must(t, os.Mkdir(dir, 0755))
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("hello"), 0644))
	must(t, os.Mkdir(filepath.Join(dir, "d"), 0755))
	must(t, os.WriteFile(filepath.Join(dir, "d/x"), []byte("x"), 0644))
	must(t, os.Mkdir(filepath.Join(dir, "e"), 0755))
	must(t, os.Symlink("f", filepath.Join(dir, "l")))
}

func errnoOf(err error) syscall.Errno {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	if err != nil {
		return syscall.Errno(^uintptr(0))
	}
	return 0
}

func openErr(p string, flags int, mode os.FileMode) error {
	f, err := os.OpenFile(p, flags, mode)
	if err == nil {
		f.Close()
	}
	return err
}

func renameat2(from, to string, flags uint) error {
	return unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, flags)
}

// TestErrno: each operation with each of its error cases, on every
// backend, gives the errno a local disk gives.
func TestErrno(t *testing.T) {
	long := strings.Repeat("n", 256)
	tmp := t.TempDir()
	cases := []struct {
		name string
		op   func(p func(string) string) error
		want syscall.Errno
		alt  syscall.Errno // also acceptable (when Linux itself varies)
	}{
		{"open missing", func(p func(string) string) error { return openErr(p("nope"), os.O_RDONLY, 0) }, syscall.ENOENT, 0},
		{"open in missing dir", func(p func(string) string) error { return openErr(p("nope/x"), os.O_RDONLY, 0) }, syscall.ENOENT, 0},
		{"open through a file", func(p func(string) string) error { return openErr(p("f/x"), os.O_RDONLY, 0) }, syscall.ENOTDIR, 0},
		{"create O_EXCL existing", func(p func(string) string) error {
			return openErr(p("f"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0644)
		}, syscall.EEXIST, 0},
		{"create O_EXCL on a link", func(p func(string) string) error {
			return openErr(p("l"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0644)
		}, syscall.EEXIST, 0},
		{"create O_EXCL new", func(p func(string) string) error {
			return openErr(p("new"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0644)
		}, 0, 0},
		{"open a directory for writing", func(p func(string) string) error { return openErr(p("d"), os.O_WRONLY, 0) }, syscall.EISDIR, 0},
		{"open O_DIRECTORY on a file", func(p func(string) string) error {
			return openErr(p("f"), os.O_RDONLY|syscall.O_DIRECTORY, 0)
		}, syscall.ENOTDIR, 0},
		{"open O_NOFOLLOW on a link", func(p func(string) string) error {
			return openErr(p("l"), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		}, syscall.ELOOP, 0},
		{"create a long name", func(p func(string) string) error { return openErr(p(long), os.O_CREATE|os.O_WRONLY, 0644) }, syscall.ENAMETOOLONG, 0},
		{"stat a long name", func(p func(string) string) error { _, err := os.Stat(p(long)); return err }, syscall.ENAMETOOLONG, 0},
		{"mkdir a long name", func(p func(string) string) error { return os.Mkdir(p(long), 0755) }, syscall.ENAMETOOLONG, 0},
		{"symlink a long name", func(p func(string) string) error { return os.Symlink("f", p(long)) }, syscall.ENAMETOOLONG, 0},
		{"rename to a long name", func(p func(string) string) error { return os.Rename(p("f"), p(long)) }, syscall.ENAMETOOLONG, 0},
		{"a path over PATH_MAX", func(p func(string) string) error {
			_, err := os.Stat(p(strings.Repeat("a/", 2100)))
			return err
		}, syscall.ENAMETOOLONG, 0},
		{"mkdir existing", func(p func(string) string) error { return os.Mkdir(p("d"), 0755) }, syscall.EEXIST, 0},
		{"mkdir over a file", func(p func(string) string) error { return os.Mkdir(p("f"), 0755) }, syscall.EEXIST, 0},
		{"mkdir in a missing dir", func(p func(string) string) error { return os.Mkdir(p("nope/x"), 0755) }, syscall.ENOENT, 0},
		{"rmdir non-empty", func(p func(string) string) error { return syscall.Rmdir(p("d")) }, syscall.ENOTEMPTY, syscall.EEXIST},
		{"rmdir a file", func(p func(string) string) error { return syscall.Rmdir(p("f")) }, syscall.ENOTDIR, 0},
		{"rmdir a link", func(p func(string) string) error { return syscall.Rmdir(p("l")) }, syscall.ENOTDIR, 0},
		{"rmdir missing", func(p func(string) string) error { return syscall.Rmdir(p("nope")) }, syscall.ENOENT, 0},
		{"rmdir empty", func(p func(string) string) error { return syscall.Rmdir(p("e")) }, 0, 0},
		{"unlink a directory", func(p func(string) string) error { return syscall.Unlink(p("d")) }, syscall.EISDIR, 0},
		{"unlink missing", func(p func(string) string) error { return syscall.Unlink(p("nope")) }, syscall.ENOENT, 0},
		{"unlink a link", func(p func(string) string) error { return syscall.Unlink(p("l")) }, 0, 0},
		{"rename missing", func(p func(string) string) error { return os.Rename(p("nope"), p("x")) }, syscall.ENOENT, 0},
		{"rename into a missing dir", func(p func(string) string) error { return os.Rename(p("f"), p("nope/f")) }, syscall.ENOENT, 0},
		// syscall.Rename: os.Rename refuses a directory as target itself.
		{"rename a dir over a file", func(p func(string) string) error { return syscall.Rename(p("e"), p("f")) }, syscall.ENOTDIR, 0},
		{"rename a file over a dir", func(p func(string) string) error { return syscall.Rename(p("f"), p("e")) }, syscall.EISDIR, 0},
		{"rename a dir over a non-empty dir", func(p func(string) string) error { return syscall.Rename(p("e"), p("d")) }, syscall.ENOTEMPTY, syscall.EEXIST},
		{"rename a dir over an empty dir", func(p func(string) string) error { return syscall.Rename(p("d"), p("e")) }, 0, 0},
		{"rename a file over its other name", func(p func(string) string) error {
			must(t, os.Link(p("f"), p("g")))
			return syscall.Rename(p("f"), p("g"))
		}, 0, 0},
		{"rename a dir into itself", func(p func(string) string) error { return os.Rename(p("d"), p("d/x2")) }, syscall.EINVAL, 0},
		{"rename NOREPLACE over a file", func(p func(string) string) error {
			return renameat2(p("d/x"), p("f"), unix.RENAME_NOREPLACE)
		}, syscall.EEXIST, 0},
		{"rename NOREPLACE to a free name", func(p func(string) string) error {
			return renameat2(p("f"), p("g"), unix.RENAME_NOREPLACE)
		}, 0, 0},
		// zx cannot exchange atomically: EINVAL, as rename(2) says for
		// a flag the file system does not support.
		{"rename EXCHANGE", func(p func(string) string) error {
			return renameat2(p("f"), p("d/x"), unix.RENAME_EXCHANGE)
		}, syscall.EINVAL, 0},
		{"rename WHITEOUT", func(p func(string) string) error {
			return renameat2(p("f"), p("g"), unix.RENAME_WHITEOUT)
		}, syscall.EINVAL, syscall.EPERM},
		{"rename out of the mount", func(p func(string) string) error {
			return os.Rename(p("f"), filepath.Join(tmp, "f"))
		}, syscall.EXDEV, 0},
		{"link out of the mount", func(p func(string) string) error {
			return os.Link(p("f"), filepath.Join(tmp, "f"))
		}, syscall.EXDEV, 0},
		{"symlink over an existing name", func(p func(string) string) error { return os.Symlink("x", p("f")) }, syscall.EEXIST, 0},
		{"readlink a file", func(p func(string) string) error { _, err := os.Readlink(p("f")); return err }, syscall.EINVAL, 0},
		{"readlink missing", func(p func(string) string) error { _, err := os.Readlink(p("nope")); return err }, syscall.ENOENT, 0},
		{"link a file", func(p func(string) string) error { return os.Link(p("f"), p("h")) }, 0, 0},
		{"link over an existing name", func(p func(string) string) error { return os.Link(p("f"), p("d/x")) }, syscall.EEXIST, 0},
		{"link a directory", func(p func(string) string) error { return os.Link(p("d"), p("h")) }, syscall.EPERM, 0},
		{"link missing", func(p func(string) string) error { return os.Link(p("nope"), p("h")) }, syscall.ENOENT, 0},
		{"truncate a directory", func(p func(string) string) error { return os.Truncate(p("d"), 0) }, syscall.EISDIR, 0},
		{"truncate negative", func(p func(string) string) error { return syscall.Truncate(p("f"), -1) }, syscall.EINVAL, 0},
		{"truncate missing", func(p func(string) string) error { return os.Truncate(p("nope"), 0) }, syscall.ENOENT, 0},
		{"chmod missing", func(p func(string) string) error { return os.Chmod(p("nope"), 0644) }, syscall.ENOENT, 0},
		{"chown", func(p func(string) string) error { return os.Lchown(p("f"), 65534, 65534) }, 0, 0},
		{"write to a read-only descriptor", func(p func(string) string) error {
			f, err := os.Open(p("f"))
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Write([]byte("x"))
			return err
		}, syscall.EBADF, 0},
		{"read a directory", func(p func(string) string) error {
			f, err := os.Open(p("d"))
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.Read(make([]byte, 10))
			return err
		}, syscall.EISDIR, 0},
		{"getxattr missing", func(p func(string) string) error {
			_, err := unix.Getxattr(p("f"), "user.nope", make([]byte, 10))
			return err
		}, syscall.ENODATA, 0},
		{"getxattr too small a buffer", func(p func(string) string) error {
			must(t, unix.Setxattr(p("f"), "user.k", []byte("value"), 0))
			_, err := unix.Getxattr(p("f"), "user.k", make([]byte, 2))
			return err
		}, syscall.ERANGE, 0},
		{"setxattr XATTR_REPLACE missing", func(p func(string) string) error {
			return unix.Setxattr(p("f"), "user.nope", []byte("v"), unix.XATTR_REPLACE)
		}, syscall.ENODATA, 0},
		{"setxattr outside user.", func(p func(string) string) error {
			return unix.Setxattr(p("f"), "trusted.k", []byte("v"), 0)
		}, syscall.ENOTSUP, syscall.EPERM},
		{"removexattr missing", func(p func(string) string) error { return unix.Removexattr(p("f"), "user.nope") }, syscall.ENODATA, 0},
		{"mknod a fifo over a file", func(p func(string) string) error { return syscall.Mkfifo(p("f"), 0644) }, syscall.EEXIST, 0},
		{"utimens missing", func(p func(string) string) error {
			return unix.UtimesNanoAt(unix.AT_FDCWD, p("nope"), []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}, 0)
		}, syscall.ENOENT, 0},
	}
	forBackends(t, func(t *testing.T, e *env, disk string) {
		for i, c := range cases {
			dir := e.p(strings.ReplaceAll(c.name, " ", "_"))
			fixture(t, dir)
			err := c.op(func(s string) string { return filepath.Join(dir, s) })
			got := errnoOf(err)
			if got != c.want && (c.alt == 0 || got != c.alt) {
				t.Errorf("%d %s: %v (errno %d), want %v", i, c.name, err, got, c.want)
			}
		}
	})
}

// TestPOSIXOps: the behaviour of each operation that succeeds, checked
// afterwards through the mount and, for lfs, on the server's disk.
func TestPOSIXOps(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env, disk string) {
		t.Run("readdir", func(t *testing.T) {
			dir := e.p("rd")
			fixture(t, dir)
			ents, err := os.ReadDir(dir)
			must(t, err)
			var names []string
			for _, de := range ents {
				names = append(names, de.Name()+":"+de.Type().String())
			}
			if got := strings.Join(names, " "); got != "d:d--------- e:d--------- f:---------- l:L---------" {
				t.Fatalf("readdir: %s", got)
			}
		})
		t.Run("nlink", func(t *testing.T) {
			dir := e.p("nl")
			must(t, os.MkdirAll(filepath.Join(dir, "a/b"), 0755))
			must(t, os.Mkdir(filepath.Join(dir, "c"), 0755))
			must(t, os.WriteFile(filepath.Join(dir, "f"), nil, 0644))
			nlink := func(p string) uint64 {
				var st syscall.Stat_t
				must(t, syscall.Lstat(p, &st))
				return st.Nlink
			}
			if n := nlink(dir); n != 4 {
				t.Errorf("nlink of a dir with 2 subdirs: %d, want 4", n)
			}
			if n := nlink(filepath.Join(dir, "a/b")); n != 2 {
				t.Errorf("nlink of an empty dir: %d, want 2", n)
			}
			must(t, os.Mkdir(filepath.Join(dir, "g"), 0755))
			if n := nlink(dir); n != 5 {
				t.Errorf("nlink after mkdir: %d, want 5", n)
			}
			must(t, os.Remove(filepath.Join(dir, "c")))
			if n := nlink(dir); n != 4 {
				t.Errorf("nlink after rmdir: %d, want 4", n)
			}
			if n := nlink(filepath.Join(dir, "f")); n != 1 {
				t.Errorf("nlink of a file: %d", n)
			}
		})
		t.Run("hardlinks", func(t *testing.T) {
			dir := e.p("hl")
			must(t, os.Mkdir(dir, 0755))
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			must(t, os.WriteFile(a, []byte("shared"), 0644))
			must(t, os.Link(a, b))
			var sa, sb syscall.Stat_t
			must(t, syscall.Stat(a, &sa))
			must(t, syscall.Stat(b, &sb))
			if sa.Ino != sb.Ino || sa.Nlink != 2 || sb.Nlink != 2 {
				t.Fatalf("after link: ino %d/%d nlink %d/%d", sa.Ino, sb.Ino, sa.Nlink, sb.Nlink)
			}
			if got := readFile(t, b); got != "shared" {
				t.Fatalf("read through the link: %q", got)
			}
			// A write through one name is seen through the other.
			f, err := os.OpenFile(b, os.O_WRONLY, 0)
			must(t, err)
			_, err = f.WriteAt([]byte("SH"), 0)
			must(t, err)
			must(t, f.Close())
			if got := readFile(t, a); got != "SHared" {
				t.Fatalf("write through one link, read through the other: %q", got)
			}
			if disk != "" {
				var da, db syscall.Stat_t
				must(t, syscall.Stat(filepath.Join(disk, "hl/a"), &da))
				must(t, syscall.Stat(filepath.Join(disk, "hl/b"), &db))
				if da.Ino != db.Ino {
					t.Fatal("not a hard link on the server's disk")
				}
			}
			must(t, os.Remove(a))
			must(t, syscall.Stat(b, &sb))
			if sb.Nlink != 1 {
				t.Fatalf("nlink after removing one name: %d", sb.Nlink)
			}
			if got := readFile(t, b); got != "SHared" {
				t.Fatalf("after removing the other name: %q", got)
			}
		})
		t.Run("rename", func(t *testing.T) {
			dir := e.p("rn")
			fixture(t, dir)
			p := func(s string) string { return filepath.Join(dir, s) }
			must(t, os.Rename(p("f"), p("d/x")))
			if got := readFile(t, p("d/x")); got != "hello" {
				t.Fatalf("rename over: %q", got)
			}
			must(t, syscall.Rename(p("d"), p("e")))
			if got := readFile(t, p("e/x")); got != "hello" {
				t.Fatalf("rename a dir over an empty one: %q", got)
			}
			if _, err := os.Stat(p("d")); !errors.Is(err, syscall.ENOENT) {
				t.Fatalf("old name of a renamed dir: %v", err)
			}
			// Across directories, a directory with contents, whose
			// entries stay reachable under the new name.
			must(t, os.MkdirAll(p("s/t/u"), 0755))
			must(t, os.WriteFile(p("s/t/u/v"), []byte("deep"), 0644))
			must(t, os.Rename(p("s/t"), p("e/t")))
			if got := readFile(t, p("e/t/u/v")); got != "deep" {
				t.Fatalf("after moving a tree: %q", got)
			}
			ents, err := os.ReadDir(p("s"))
			must(t, err)
			if len(ents) != 0 {
				t.Fatalf("source dir not empty after move: %v", ents)
			}
		})
		t.Run("symlink", func(t *testing.T) {
			dir := e.p("sl")
			fixture(t, dir)
			p := func(s string) string { return filepath.Join(dir, s) }
			tg := strings.Repeat("t/", 1000) + "end" // a long target
			must(t, os.Symlink(tg, p("long")))
			if got, err := os.Readlink(p("long")); err != nil || got != tg {
				t.Fatalf("readlink of a long target: %v", err)
			}
			if got := readFile(t, p("l")); got != "hello" {
				t.Fatalf("read through a link: %q", got)
			}
			fi, err := os.Lstat(p("l"))
			must(t, err)
			if fi.Mode()&os.ModeSymlink == 0 || fi.Size() != 1 {
				t.Fatalf("lstat of a link: %v %d", fi.Mode(), fi.Size())
			}
			// Times on the link itself, not its target.
			ft, _ := os.Stat(p("f"))
			lt := time.Unix(1500000000, 987654321)
			must(t, unix.UtimesNanoAt(unix.AT_FDCWD, p("l"), []unix.Timespec{unix.NsecToTimespec(lt.UnixNano()), unix.NsecToTimespec(lt.UnixNano())}, unix.AT_SYMLINK_NOFOLLOW))
			fi, err = os.Lstat(p("l"))
			must(t, err)
			if !fi.ModTime().Equal(lt) {
				t.Fatalf("lutimes: %v, want %v", fi.ModTime(), lt)
			}
			if f2, _ := os.Stat(p("f")); !f2.ModTime().Equal(ft.ModTime()) {
				t.Fatal("lutimes changed the target")
			}
		})
		t.Run("times", func(t *testing.T) {
			dir := e.p("tm")
			fixture(t, dir)
			f := filepath.Join(dir, "f")
			at, mt := time.Unix(1400000000, 111111111), time.Unix(1600000000, 123456789)
			must(t, unix.UtimesNanoAt(unix.AT_FDCWD, f, []unix.Timespec{unix.NsecToTimespec(at.UnixNano()), unix.NsecToTimespec(mt.UnixNano())}, 0))
			var st unix.Stat_t
			must(t, unix.Stat(f, &st))
			if time.Unix(st.Mtim.Unix()) != mt || time.Unix(st.Atim.Unix()) != at {
				t.Fatalf("utimens: atime %v mtime %v", time.Unix(st.Atim.Unix()), time.Unix(st.Mtim.Unix()))
			}
			// UTIME_OMIT keeps, UTIME_NOW sets now.
			before := time.Now().Add(-time.Second)
			must(t, unix.UtimesNanoAt(unix.AT_FDCWD, f, []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_NOW}}, 0))
			must(t, unix.Stat(f, &st))
			if time.Unix(st.Atim.Unix()) != at || time.Unix(st.Mtim.Unix()).Before(before) {
				t.Fatalf("OMIT/NOW: atime %v mtime %v", time.Unix(st.Atim.Unix()), time.Unix(st.Mtim.Unix()))
			}
			// A write moves mtime forward.
			must(t, unix.UtimesNanoAt(unix.AT_FDCWD, f, []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mt.UnixNano())}, 0))
			must(t, os.WriteFile(f, []byte("new"), 0644))
			must(t, unix.Stat(f, &st))
			if time.Unix(st.Mtim.Unix()).Before(before) {
				t.Fatalf("mtime after a write: %v", time.Unix(st.Mtim.Unix()))
			}
		})
		t.Run("chmod-chown", func(t *testing.T) {
			dir := e.p("cc")
			fixture(t, dir)
			f := filepath.Join(dir, "f")
			for _, mode := range []os.FileMode{0600, 0755, 0644 | os.ModeSticky, 0755 | os.ModeSetuid | os.ModeSetgid} {
				must(t, os.Chmod(f, mode))
				fi, err := os.Stat(f)
				must(t, err)
				if fi.Mode() != mode {
					t.Fatalf("chmod %v: %v", mode, fi.Mode())
				}
			}
			must(t, os.Lchown(f, 65534, 65533))
			var st syscall.Stat_t
			must(t, syscall.Stat(f, &st))
			if st.Uid != 65534 || st.Gid != 65533 {
				t.Fatalf("chown: %d:%d", st.Uid, st.Gid)
			}
			if disk != "" {
				must(t, syscall.Stat(filepath.Join(disk, "cc/f"), &st))
				if st.Uid != 65534 || st.Gid != 65533 {
					t.Fatalf("chown on the disk: %d:%d", st.Uid, st.Gid)
				}
			}
		})
		t.Run("xattr", func(t *testing.T) {
			dir := e.p("xa")
			fixture(t, dir)
			f := filepath.Join(dir, "f")
			val := bytes.Repeat([]byte{0, 1, 2, 0xff}, 100) // binary
			must(t, unix.Setxattr(f, "user.bin", val, 0))
			must(t, unix.Setxattr(f, "user.color", []byte("blue"), unix.XATTR_CREATE))
			must(t, unix.Setxattr(f, "user.color", []byte("red"), unix.XATTR_REPLACE))
			buf := make([]byte, 1000)
			n, err := unix.Getxattr(f, "user.bin", buf)
			must(t, err)
			if !bytes.Equal(buf[:n], val) {
				t.Fatalf("binary xattr: %q", buf[:n])
			}
			n, err = unix.Getxattr(f, "user.color", nil) // size query
			if err != nil || n != 3 {
				t.Fatalf("size query: %d %v", n, err)
			}
			n, err = unix.Listxattr(f, buf)
			must(t, err)
			if got := string(buf[:n]); got != "user.bin\x00user.color\x00" {
				t.Fatalf("listxattr: %q", got)
			}
			if disk != "" {
				n, err = unix.Getxattr(filepath.Join(disk, "xa/f"), "user.color", buf)
				if err != nil || string(buf[:n]) != "red" {
					t.Fatalf("xattr on the disk: %q %v", buf[:n], err)
				}
			}
			must(t, unix.Removexattr(f, "user.bin"))
			n, err = unix.Listxattr(f, buf)
			must(t, err)
			if got := string(buf[:n]); got != "user.color\x00" {
				t.Fatalf("listxattr after remove: %q", got)
			}
			// On a directory too.
			must(t, unix.Setxattr(filepath.Join(dir, "d"), "user.k", []byte("v"), 0))
		})
		t.Run("special", func(t *testing.T) {
			dir := e.p("sp")
			must(t, os.Mkdir(dir, 0755))
			p := func(s string) string { return filepath.Join(dir, s) }
			must(t, syscall.Mkfifo(p("fifo"), 0640))
			must(t, syscall.Mknod(p("sock"), syscall.S_IFSOCK|0600, 0))
			must(t, syscall.Mknod(p("null"), syscall.S_IFCHR|0666, int(unix.Mkdev(1, 3))))
			must(t, syscall.Mknod(p("blk"), syscall.S_IFBLK|0600, int(unix.Mkdev(7, 200))))
			must(t, syscall.Mknod(p("reg"), syscall.S_IFREG|0600, 0))
			for _, c := range []struct {
				name string
				typ  uint32
				rdev uint64
			}{{"fifo", syscall.S_IFIFO, 0}, {"sock", syscall.S_IFSOCK, 0}, {"null", syscall.S_IFCHR, unix.Mkdev(1, 3)}, {"blk", syscall.S_IFBLK, unix.Mkdev(7, 200)}, {"reg", syscall.S_IFREG, 0}} {
				var st syscall.Stat_t
				must(t, syscall.Lstat(p(c.name), &st))
				if st.Mode&syscall.S_IFMT != c.typ || st.Rdev != c.rdev {
					t.Errorf("%s: mode %o rdev %x", c.name, st.Mode, st.Rdev)
				}
			}
			// The fifo works: the kernel serves it locally.
			done := make(chan string, 1)
			go func() {
				b, _ := os.ReadFile(p("fifo"))
				done <- string(b)
			}()
			must(t, os.WriteFile(p("fifo"), []byte("through the pipe"), 0))
			select {
			case got := <-done:
				if got != "through the pipe" {
					t.Fatalf("fifo: %q", got)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("fifo: no data")
			}
			// Device nodes are not opened: FUSE mounts are nodev.
			_, err := os.OpenFile(p("null"), os.O_WRONLY, 0)
			wantErrno(t, err, syscall.EACCES, "open a device on a nodev mount")
		})
		t.Run("long-names", func(t *testing.T) {
			dir := e.p("ln")
			must(t, os.Mkdir(dir, 0755))
			name := strings.Repeat("n", 255)
			must(t, os.WriteFile(filepath.Join(dir, name), []byte("max"), 0644))
			if got := readFile(t, filepath.Join(dir, name)); got != "max" {
				t.Fatal(got)
			}
			// Paths in a zx tree are at most 4096 bytes (PATH_MAX);
			// make one of exactly that many, by steps relative to
			// descriptors, and one byte more.
			elem := strings.Repeat("p", 200)
			fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			must(t, err)
			defer func() { unix.Close(fd) }()
			inTree := len("/ln")
			for range 20 {
				must(t, unix.Mkdirat(fd, elem, 0755))
				nfd, err := unix.Openat(fd, elem, unix.O_RDONLY|unix.O_DIRECTORY, 0)
				must(t, err)
				unix.Close(fd)
				fd = nfd
				inTree += 1 + len(elem)
			}
			last := strings.Repeat("z", 4096-inTree-1)
			nfd, err := unix.Openat(fd, last, unix.O_CREAT|unix.O_WRONLY, 0644)
			must(t, err)
			_, err = unix.Write(nfd, []byte("deep"))
			must(t, err)
			must(t, unix.Close(nfd))
			var st unix.Stat_t
			must(t, unix.Fstatat(fd, last, &st, 0))
			if st.Size != 4 {
				t.Fatalf("the file at PATH_MAX: size %d", st.Size)
			}
			_, err = unix.Openat(fd, last+"z", unix.O_CREAT|unix.O_WRONLY, 0644)
			wantErrno(t, err, syscall.ENAMETOOLONG, "create a path over PATH_MAX")
			wantErrno(t, unix.Mkdirat(fd, elem, 0755), syscall.ENAMETOOLONG, "mkdir a path over PATH_MAX")
		})
		t.Run("statfs", func(t *testing.T) {
			var st unix.Statfs_t
			must(t, unix.Statfs(e.dir, &st))
			if st.Bsize <= 0 || st.Blocks == 0 || st.Bfree > st.Blocks || st.Bavail > st.Bfree || st.Namelen != 255 {
				t.Fatalf("statfs: %+v", st)
			}
			if disk != "" {
				var ds unix.Statfs_t
				must(t, unix.Statfs(disk, &ds))
				total := func(s unix.Statfs_t) uint64 { return s.Blocks * uint64(s.Bsize) }
				if total(st) != total(ds) {
					t.Errorf("statfs: %d bytes in all, the server's disk has %d", total(st), total(ds))
				}
			}
		})
	})
}

// TestHugeSparse: files over 4 GiB, written sparsely (so the test is
// cheap), through a new file, an existing one, ftruncate and O_APPEND.
func TestHugeSparse(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env, disk string) {
		const big = 5<<30 + 12345 // over 4 GiB, not aligned
		f := e.p("huge")
		w, err := os.Create(f)
		must(t, err)
		_, err = w.WriteAt([]byte("head"), 0)
		must(t, err)
		_, err = w.WriteAt([]byte("tail"), big)
		must(t, err)
		b := make([]byte, 4)
		_, err = w.ReadAt(b, big)
		must(t, err)
		if string(b) != "tail" {
			t.Fatalf("read back the unsent write: %q", b)
		}
		must(t, w.Close())
		fi, err := os.Stat(f)
		must(t, err)
		if fi.Size() != big+4 {
			t.Fatalf("size %d, want %d", fi.Size(), big+4)
		}
		r, err := os.Open(f)
		must(t, err)
		for _, c := range []struct {
			off  int64
			want string
		}{{0, "head"}, {big, "tail"}, {4 << 30, "\x00\x00\x00\x00"}, {big - 2, "\x00\x00ta"}} {
			n, err := r.ReadAt(b, c.off)
			if n != 4 || string(b) != c.want {
				t.Fatalf("read at %d: %q %v, want %q", c.off, b[:n], err, c.want)
			}
		}
		must(t, r.Close())
		// Append and ftruncate beyond 4 GiB on an existing file.
		a, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND, 0)
		must(t, err)
		_, err = a.Write([]byte("more"))
		must(t, err)
		must(t, a.Truncate(6<<30))
		must(t, a.Close())
		fi, err = os.Stat(f)
		must(t, err)
		if fi.Size() != 6<<30 {
			t.Fatalf("size after ftruncate %d", fi.Size())
		}
		r, err = os.Open(f)
		must(t, err)
		n, _ := r.ReadAt(b, big+4)
		must(t, r.Close())
		if string(b[:n]) != "more" {
			t.Fatalf("appended: %q", b[:n])
		}
		if disk != "" {
			var st syscall.Stat_t
			must(t, syscall.Stat(filepath.Join(disk, "huge"), &st))
			if st.Size != 6<<30 || st.Blocks*512 > 64<<20 {
				t.Fatalf("on the disk: size %d, %d bytes allocated", st.Size, st.Blocks*512)
			}
		}
		// O_TRUNC of the huge file, then a small rewrite.
		must(t, os.WriteFile(f, []byte("small"), 0644))
		if got := readFile(t, f); got != "small" {
			t.Fatalf("after O_TRUNC: %q", got)
		}
	})
}
