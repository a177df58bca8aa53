package mount_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/mount"
	"github.com/zxfs/zx/server"
	"github.com/zxfs/zx/wan"
)

func canMount(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("!!! SKIPPING FUSE TESTS: /dev/fuse is missing: " + err.Error() + " !!!")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil && os.Getuid() != 0 {
		t.Skip("!!! SKIPPING FUSE TESTS: fusermount3 is missing and we are not root !!!")
	}
}

func serve(t testing.TB, tr zx.Tree) string {
	t.Helper()
	srv, err := server.New(map[string]zx.Tree{"main": tr}, "main", server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return l.Addr().String()
}

type env struct {
	dir   string
	conn  *client.Conn
	c     *cache.Cache
	m     *mount.FS
	proxy *wan.Proxy // the link, when setup.rtt > 0
}

type setup struct {
	rtt   time.Duration
	addr  string // server to use; default a new one over memfs
	opts  mount.Options
	copts cache.Options
	dial  client.Options // how to dial addr (TLS, for a server that wants keys)
}

func mnt(t *testing.T, s setup) *env {
	t.Helper()
	canMount(t)
	addr := s.addr
	if addr == "" {
		addr = serve(t, memfs.New())
	}
	var proxy *wan.Proxy
	if s.rtt > 0 {
		p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{RTT: s.rtt})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		addr = p.Addr()
		proxy = p
	}
	conn, err := client.Dial(context.Background(), addr, s.dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := cache.New(conn.Tree(""), s.copts)
	t.Cleanup(func() { c.Close() })
	dir := t.TempDir()
	if s.opts.Timeout == 0 {
		// The product's default: on a 2-core machine running the other
		// test binaries, a request for a file of several GiB once took
		// over 10 s (TestHugeSparse, 1 run in 6 of the whole suite).
		// Tests of the timeout itself set their own.
		s.opts.Timeout = 30 * time.Second
	}
	m, err := mount.Mount(dir, c, s.opts)
	if err != nil {
		t.Fatal(err)
	}
	abort := abortFile(t, dir)
	// Registered last, so run first: unmount before closing the rest.
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		abortConn(abort)
	})
	return &env{dir: dir, conn: conn, c: c, m: m, proxy: proxy}
}

// abortFile opens the abort file of the FUSE connection of the mount at
// dir, or returns nil if it cannot. Held open, it stays that connection's:
// once the connection is gone, writing it does nothing. Writing
// /sys/fs/fuse/connections/N/abort by number after the unmount could abort
// another mount that was given the freed number meanwhile (go test ./...
// runs test binaries in parallel: a bench mount failed its init with
// ENODEV that way).
func abortFile(t *testing.T, dir string) *os.File {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	const ctl = "/sys/fs/fuse/connections"
	if b, _ := os.ReadFile("/proc/self/mounts"); !strings.Contains(string(b), " "+ctl+" ") {
		if unix.Mount("fusectl", ctl, "fusectl", 0, "") != nil {
			return nil
		}
	}
	f, err := os.OpenFile(ctl+"/"+strconv.Itoa(int(unix.Minor(st.Dev)))+"/abort", os.O_WRONLY, 0)
	if err != nil {
		return nil
	}
	return f
}

// abortConn aborts, through its abort file, a FUSE connection that
// outlived its unmount (it was detached lazily, being busy): otherwise a
// descriptor still open on it makes this process hang at exit, flushing to
// a server that is gone.
func abortConn(f *os.File) {
	if f != nil {
		f.Write([]byte("1"))
		f.Close()
	}
}

func (e *env) p(name string) string { return filepath.Join(e.dir, name) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func wantErrno(t *testing.T, err error, want syscall.Errno, what string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPOSIX(t *testing.T) {
	e := mnt(t, setup{})
	f := e.p("f")

	// create, O_EXCL, read, write
	must(t, os.WriteFile(f, []byte("hello"), 0640))
	if got := readFile(t, f); got != "hello" {
		t.Fatalf("read %q", got)
	}
	fi, err := os.Stat(f)
	must(t, err)
	if fi.Mode().Perm() != 0640 || fi.Size() != 5 {
		t.Fatalf("stat: %v %d", fi.Mode(), fi.Size())
	}
	_, err = os.OpenFile(f, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0644)
	wantErrno(t, err, syscall.EEXIST, "O_EXCL on an existing file")

	// O_TRUNC, O_APPEND
	must(t, os.WriteFile(f, []byte("abc"), 0640))
	if got := readFile(t, f); got != "abc" {
		t.Fatalf("after O_TRUNC: %q", got)
	}
	af, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	_, err = af.WriteString("def")
	must(t, err)
	must(t, af.Close())
	if got := readFile(t, f); got != "abcdef" {
		t.Fatalf("after O_APPEND: %q", got)
	}

	// random writes, sparse file, truncate, ftruncate
	rf, err := os.OpenFile(f, os.O_RDWR, 0)
	must(t, err)
	_, err = rf.WriteAt([]byte("XY"), 1)
	must(t, err)
	_, err = rf.WriteAt([]byte("Z"), 10)
	must(t, err)
	b := make([]byte, 20)
	n, _ := rf.ReadAt(b, 0)
	if got := string(b[:n]); got != "aXYdef\x00\x00\x00\x00Z" {
		t.Fatalf("read through the writing handle: %q", got)
	}
	must(t, rf.Truncate(4))
	_, err = rf.WriteAt([]byte("!"), 6)
	must(t, err)
	must(t, rf.Close())
	if got := readFile(t, f); got != "aXYd\x00\x00!" {
		t.Fatalf("after writes and ftruncate: %q", got)
	}
	must(t, os.Truncate(f, 2))
	if got := readFile(t, f); got != "aX" {
		t.Fatalf("after truncate: %q", got)
	}
	// A big sparse file
	sf, err := os.Create(e.p("sparse"))
	must(t, err)
	_, err = sf.WriteAt([]byte("end"), 3<<20)
	must(t, err)
	must(t, sf.Close())
	fi, err = os.Stat(e.p("sparse"))
	must(t, err)
	if fi.Size() != 3<<20+3 {
		t.Fatalf("sparse size %d", fi.Size())
	}

	// mkdir, rmdir, ENOTEMPTY, unlink, EISDIR, ENOTDIR
	must(t, os.Mkdir(e.p("d"), 0750))
	wantErrno(t, os.Mkdir(e.p("d"), 0750), syscall.EEXIST, "mkdir existing")
	must(t, os.WriteFile(e.p("d/x"), []byte("x"), 0644))
	wantErrno(t, syscall.Rmdir(e.p("d")), syscall.ENOTEMPTY, "rmdir non-empty")
	wantErrno(t, syscall.Unlink(e.p("d")), syscall.EISDIR, "unlink a directory")
	wantErrno(t, syscall.Rmdir(f), syscall.ENOTDIR, "rmdir a file")
	_, err = os.Stat(e.p("f/x"))
	wantErrno(t, err, syscall.ENOTDIR, "stat through a file")
	_, err = os.Stat(e.p("missing"))
	wantErrno(t, err, syscall.ENOENT, "stat missing")
	must(t, os.Remove(e.p("d/x")))
	must(t, os.Remove(e.p("d")))
	_, err = os.Stat(e.p("d"))
	wantErrno(t, err, syscall.ENOENT, "stat removed dir")

	// rename: overwrite, directories, across directories, NOREPLACE
	must(t, os.WriteFile(e.p("a"), []byte("A"), 0644))
	must(t, os.WriteFile(e.p("b"), []byte("B"), 0644))
	must(t, os.Rename(e.p("a"), e.p("b")))
	if got := readFile(t, e.p("b")); got != "A" {
		t.Fatalf("after rename over: %q", got)
	}
	_, err = os.Stat(e.p("a"))
	wantErrno(t, err, syscall.ENOENT, "stat renamed-away")
	must(t, os.MkdirAll(e.p("d1/sub"), 0755))
	must(t, os.WriteFile(e.p("d1/sub/f"), []byte("deep"), 0644))
	must(t, os.Mkdir(e.p("d2"), 0755))
	must(t, os.Rename(e.p("d1/sub"), e.p("d2/moved")))
	if got := readFile(t, e.p("d2/moved/f")); got != "deep" {
		t.Fatalf("after dir rename: %q", got)
	}
	must(t, os.Rename(e.p("b"), e.p("d2/b")))
	must(t, os.WriteFile(e.p("c"), []byte("C"), 0644))
	wantErrno(t, unix.Renameat2(unix.AT_FDCWD, e.p("c"), unix.AT_FDCWD, e.p("d2/b"), unix.RENAME_NOREPLACE), syscall.EEXIST, "RENAME_NOREPLACE")
	must(t, unix.Renameat2(unix.AT_FDCWD, e.p("c"), unix.AT_FDCWD, e.p("d2/c"), unix.RENAME_NOREPLACE))
	wantErrno(t, os.Rename(e.p("d2"), e.p("d2/moved/x")), syscall.EINVAL, "rename into itself")

	// symlink, readlink, lchown-free times on links
	must(t, os.Symlink("d2/c", e.p("l")))
	if tg, err := os.Readlink(e.p("l")); err != nil || tg != "d2/c" {
		t.Fatalf("readlink: %q %v", tg, err)
	}
	if got := readFile(t, e.p("l")); got != "C" {
		t.Fatalf("read through link: %q", got)
	}

	// chmod, utimens with nanoseconds, UTIME_OMIT and UTIME_NOW
	must(t, os.Chmod(e.p("d2/c"), 0600))
	fi, err = os.Stat(e.p("d2/c"))
	must(t, err)
	if fi.Mode().Perm() != 0600 {
		t.Fatalf("chmod: %v", fi.Mode())
	}
	mt := time.Unix(1600000000, 123456789)
	must(t, unix.UtimesNanoAt(unix.AT_FDCWD, e.p("d2/c"), []unix.Timespec{{Sec: 0, Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mt.UnixNano())}, 0))
	fi, err = os.Stat(e.p("d2/c"))
	must(t, err)
	if !fi.ModTime().Equal(mt) {
		t.Fatalf("utimens: mtime %v, want %v", fi.ModTime(), mt)
	}
	before := time.Now().Add(-2 * time.Second)
	must(t, unix.UtimesNanoAt(unix.AT_FDCWD, e.p("d2/c"), []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_NOW}}, 0))
	fi, err = os.Stat(e.p("d2/c"))
	must(t, err)
	if fi.ModTime().Before(before) {
		t.Fatalf("UTIME_NOW: mtime %v", fi.ModTime())
	}

	// xattrs
	xf := e.p("d2/c")
	must(t, unix.Setxattr(xf, "user.color", []byte("blue"), 0))
	buf := make([]byte, 64)
	n, err = unix.Getxattr(xf, "user.color", buf)
	if err != nil || string(buf[:n]) != "blue" {
		t.Fatalf("getxattr: %q %v", buf[:n], err)
	}
	n, err = unix.Listxattr(xf, buf)
	if err != nil || !strings.Contains(string(buf[:n]), "user.color\x00") {
		t.Fatalf("listxattr: %q %v", buf[:n], err)
	}
	wantErrno(t, unix.Setxattr(xf, "user.color", []byte("red"), unix.XATTR_CREATE), syscall.EEXIST, "XATTR_CREATE existing")
	must(t, unix.Removexattr(xf, "user.color"))
	_, err = unix.Getxattr(xf, "user.color", buf)
	wantErrno(t, err, syscall.ENODATA, "getxattr removed")
	wantErrno(t, unix.Removexattr(xf, "user.color"), syscall.ENODATA, "removexattr missing")

	// ENAMETOOLONG
	_, err = os.Create(e.p(strings.Repeat("n", 256)))
	wantErrno(t, err, syscall.ENAMETOOLONG, "create with a long name")
	must(t, os.WriteFile(e.p(strings.Repeat("n", 255)), nil, 0644))

	// fifos
	must(t, syscall.Mkfifo(e.p("fifo"), 0644))
	fi, err = os.Lstat(e.p("fifo"))
	must(t, err)
	if fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("fifo mode %v", fi.Mode())
	}

	// statfs
	var st unix.Statfs_t
	must(t, unix.Statfs(e.dir, &st))
	if st.Bsize <= 0 || st.Blocks == 0 || st.Namelen != 255 {
		t.Fatalf("statfs: %+v", st)
	}
}

// TestInodes: inode numbers are stable for the life of the mount, across
// renames and rewrites (lfs gives a rewritten file a new inode on its
// disk), and a number the server reuses for a new file does not make it
// the old one.
func TestInodes(t *testing.T) {
	forBackends(t, func(t *testing.T, e *env, disk string) {
		must(t, os.WriteFile(e.p("f"), []byte("x"), 0644))
		ino := func(p string) uint64 {
			t.Helper()
			var st syscall.Stat_t
			must(t, syscall.Stat(p, &st))
			return st.Ino
		}
		i1 := ino(e.p("f"))
		must(t, os.Mkdir(e.p("d"), 0755))
		must(t, os.Rename(e.p("f"), e.p("d/g")))
		if i2 := ino(e.p("d/g")); i2 != i1 {
			t.Fatalf("inode changed across rename: %d, then %d", i1, i2)
		}
		must(t, os.WriteFile(e.p("d/g"), []byte("changed"), 0644))
		if i3 := ino(e.p("d/g")); i3 != i1 {
			t.Fatalf("inode changed across rewrite: %d, then %d", i1, i3)
		}
		if ino(e.p("d")) == i1 || ino(e.dir) != 1 {
			t.Fatal("inode numbers not distinct")
		}
		// Files made and removed while others stay open: each new one
		// is new to the kernel, whatever inode number the server reuses.
		held, err := os.Open(e.p("d/g"))
		must(t, err)
		defer held.Close()
		seen := map[uint64]string{i1: "d/g"}
		for i := range 20 {
			p := e.p(fmt.Sprintf("t%d", i))
			must(t, os.WriteFile(p, []byte(p), 0644))
			n := ino(p)
			if o, dup := seen[n]; dup {
				t.Fatalf("%s got inode %d of %s", p, n, o)
			}
			seen[n] = p
			if got := readFile(t, p); got != p {
				t.Fatalf("%s reads %q", p, got)
			}
			if i%2 == 0 {
				must(t, os.Remove(p))
			}
		}
		if got := readFile(t, e.p("d/g")); got != "changed" {
			t.Fatalf("d/g reads %q", got)
		}
	})
}

// TestMmap writes through a shared mapping and through a private one: the
// first reaches the file and the server, the second neither. The mappings
// are made in a child (mmapChild): a fault on a mapping of this process's
// own mount can deadlock it with the garbage collector.
func TestMmap(t *testing.T) {
	e := mnt(t, setup{})
	f := e.p("m")
	must(t, os.WriteFile(f, bytes.Repeat([]byte("a"), 8192), 0644))
	fd, err := os.OpenFile(f, os.O_RDWR, 0)
	must(t, err)
	r := mmapChild(int(fd.Fd()), 4096, true, []byte("shared"))
	must(t, fd.Close())
	if r.errno != 0 || r.data != strings.Repeat("a", 64) {
		t.Fatalf("shared map: %v", r)
	}

	fd, err = os.Open(f)
	must(t, err)
	r = mmapChild(int(fd.Fd()), 4096, false, []byte("private"))
	must(t, fd.Close())
	if r.errno != 0 || len(r.data) != 64 || r.data[10:16] != "shared" {
		t.Fatalf("private map: %v", r)
	}
	want := strings.Repeat("a", 4096+10) + "shared" + strings.Repeat("a", 4096-16)
	if got := readFile(t, f); got != want {
		t.Fatalf("the file after a shared and a private write holds %q at 4096+10", got[4096+10:4096+17])
	}

	// Through the tree (and so the server) too.
	data, err := zx.ReadFile(t.Context(), e.c.Remote(), "/m")
	must(t, err)
	if string(data) != want {
		t.Fatalf("server has %q at 4096+10", data[4096+10:4096+17])
	}
}

func TestExec(t *testing.T) {
	e := mnt(t, setup{})
	src, err := exec.LookPath("true")
	if err != nil {
		t.Skip("!!! SKIPPING TestExec: no true(1) on PATH to copy onto the mount (coreutils; CI has it) !!!")
	}
	b, err := os.ReadFile(src)
	must(t, err)
	must(t, os.WriteFile(e.p("true"), b, 0755))
	// A shell runs it, not this process: until a child of this process
	// execs, the forking thread, which serves the mount, is stopped
	// holding its P, and a garbage collection starting meanwhile waits
	// for it while the child's execve waits for the mount: this test
	// once hung so. A user's shell is never the process serving the
	// mount.
	if out, err := exec.Command("/bin/sh", "-c", `exec "$0"`, e.p("true")).CombinedOutput(); err != nil {
		t.Fatalf("running a binary from the mount: %v: %s", err, out)
	}
}

func TestLargeFile(t *testing.T) {
	e := mnt(t, setup{opts: mount.Options{WholeFile: 1 << 20}})
	data := make([]byte, 5<<20+123)
	for i := range data {
		data[i] = byte(i * 7 / 3)
	}
	must(t, os.WriteFile(e.p("big"), data, 0644))
	got, err := os.ReadFile(e.p("big"))
	must(t, err)
	if !bytes.Equal(got, data) {
		t.Fatal("large file differs")
	}
	// Stream it cold through a second mount of the same server.
	f, err := os.OpenFile(e.p("big"), os.O_RDWR, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("patch"), 3<<20)
	must(t, err)
	b := make([]byte, 10)
	_, err = f.ReadAt(b, 3<<20-5)
	must(t, err)
	if string(b[5:]) != "patch" {
		t.Fatalf("read of unsent write: %q", b)
	}
	must(t, f.Close())
	copy(data[3<<20:], "patch")
	rd, err := zx.ReadFile(t.Context(), e.c.Remote(), "/big")
	must(t, err)
	if !bytes.Equal(rd, data) {
		t.Fatal("server copy differs")
	}
}

func mounted(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	must(t, err)
	if !strings.Contains(string(b), " "+dir+" ") || !strings.Contains(string(b), "fuse") {
		t.Fatalf("%s is not a FUSE mount", dir)
	}
}

func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTwoMounts: a change through one mount is visible through the other
// after close, and a file cached by the other is invalidated on change.
// TestTwoMounts: once a change made through one mount has reached the
// server (close() of a written file returned; for the metadata changes
// the mount pipelines, an fsync of the directory returned), a program on
// another mount sees it at once, with no polling, although the other
// mount is further from the server (50 ms against loopback): the server
// held the writer's reply until the other mount's cache and kernel had
// dropped what the change made stale (acknowledged notices, docs/cache.md
// "Change notices").
func TestTwoMounts(t *testing.T) {
	// syncDir waits for the changes a pipelined (mkdir, unlink, rename:
	// answered before the server's reply).
	syncDir := func(e *env) {
		t.Helper()
		d, err := os.Open(e.dir)
		must(t, err)
		defer d.Close()
		must(t, d.Sync())
	}
	addr := serve(t, memfs.New())
	a := mnt(t, setup{addr: addr})
	b := mnt(t, setup{addr: addr, rtt: 50 * time.Millisecond})
	mounted(t, a.dir)
	mounted(t, b.dir)
	if !a.c.Watching() || !b.c.Watching() {
		t.Fatal("caches have no watch")
	}
	must(t, os.WriteFile(a.p("f"), []byte("one"), 0644))
	// b has the root's listing cached, without f.
	if got := readFile(t, b.p("f")); got != "one" {
		t.Fatalf("b reads %q after a created f, want %q", got, "one")
	}
	// b has f cached (kernel and cache); change it through a.
	if got := readFile(t, b.p("f")); got != "one" {
		t.Fatal(got)
	}
	must(t, os.WriteFile(a.p("f"), []byte("two, longer"), 0644))
	if got := readFile(t, b.p("f")); got != "two, longer" {
		t.Fatalf("b reads %q after a rewrote f, want %q", got, "two, longer")
	}
	// Same size, different contents.
	must(t, os.WriteFile(a.p("f"), []byte("TWO, LONGER"), 0644))
	if got := readFile(t, b.p("f")); got != "TWO, LONGER" {
		t.Fatalf("b reads %q after a same-size rewrite, want %q", got, "TWO, LONGER")
	}
	// b looked up a missing name; a creates it.
	_, err := os.Stat(b.p("new"))
	wantErrno(t, err, syscall.ENOENT, "stat new")
	must(t, os.Mkdir(a.p("new"), 0755))
	syncDir(a)
	if _, err := os.Stat(b.p("new")); err != nil {
		t.Fatalf("b after a made new: %v", err)
	}
	must(t, os.Remove(a.p("f")))
	syncDir(a)
	_, err = os.Stat(b.p("f"))
	wantErrno(t, err, syscall.ENOENT, "b's stat of f after a removed it")
	must(t, os.Rename(a.p("new"), a.p("renamed")))
	syncDir(a)
	if _, err := os.Stat(b.p("renamed")); err != nil {
		t.Fatalf("b after a renamed new: %v", err)
	}
	_, err = os.Stat(b.p("new"))
	wantErrno(t, err, syscall.ENOENT, "b's stat of the old name after the rename")
	// The writes waited for b's acknowledgements, which always came in
	// time (the server counts a watch that misses its bound as lagged).
	ctlText := readFile(t, a.p("Ctl"))
	var waits, lagged int
	for _, l := range strings.Split(ctlText, "\n") {
		if strings.HasPrefix(l, "callbacks ") {
			var watches, lagging, breaks int
			if _, err := fmt.Sscanf(l, "callbacks watches %d lagging %d breaks %d waits %d lagged %d", &watches, &lagging, &breaks, &waits, &lagged); err != nil {
				t.Fatalf("server status %q: %v", l, err)
			}
		}
	}
	if waits == 0 || lagged != 0 {
		t.Fatalf("server: %d writes waited for b, %d times b lagged; want some, and none:\n%s", waits, lagged, ctlText)
	}
}

func TestRoundTrips(t *testing.T) {
	fs := memfs.New()
	ctx := t.Context()
	for _, p := range []string{"/dir", "/dir2"} {
		_, err := zx.Mkdir(ctx, fs, p, 0755)
		must(t, err)
	}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		_, err := zx.WriteFile(ctx, fs, "/dir/"+name, nil, []byte("data of "+name))
		must(t, err)
	}
	// Without the subtree prefetch (which the mount's own listing of the
	// root starts, so the cold listing below would cost 0; see
	// TestPrefetchWalk): the round trips of each request on its own.
	e := mnt(t, setup{addr: serve(t, fs), rtt: 20 * time.Millisecond, copts: cache.Options{PrefetchEntries: -1}})
	step := func(what string, want int64, f func()) {
		t.Helper()
		time.Sleep(50 * time.Millisecond)
		before := e.conn.Stats().RoundTrips
		f()
		got := e.conn.Stats().RoundTrips - before
		t.Logf("%s: %d round trips", what, got)
		if got != want {
			t.Errorf("%s: %d round trips, want %d", what, got, want)
		}
	}
	step("ls -l of a cold directory", 1, func() {
		out, err := exec.Command("ls", "-l", e.p("dir")).CombinedOutput()
		if err != nil {
			t.Fatalf("ls: %v: %s", err, out)
		}
		// Every file, with its size ("data of x": 9 bytes).
		sizes := make(map[string]string)
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) >= 9 {
				sizes[f[len(f)-1]] = f[4]
			}
		}
		for _, name := range []string{"a", "b", "c", "d", "e"} {
			if sizes[name] != "9" {
				t.Fatalf("ls -l shows %s with size %q, want 9:\n%s", name, sizes[name], out)
			}
		}
	})
	step("stat of a missing name twice", 1, func() {
		for range 2 {
			_, err := os.Stat(e.p("dir2/missing"))
			wantErrno(t, err, syscall.ENOENT, "stat missing")
		}
	})
	step("first open and read of a file", 1, func() {
		if got := readFile(t, e.p("dir/a")); got != "data of a" {
			t.Fatal(got)
		}
	})
	step("second open and read of the unchanged file", 0, func() {
		if got := readFile(t, e.p("dir/a")); got != "data of a" {
			t.Fatal(got)
		}
	})
	step("write a new file (create + close)", 2, func() {
		must(t, os.WriteFile(e.p("dir/new"), []byte("new"), 0644))
	})
	step("read back what we wrote", 0, func() {
		if got := readFile(t, e.p("dir/new")); got != "new" {
			t.Fatal(got)
		}
	})
	// The directory's own attributes (mtime, size) went stale with the
	// create, and came back beside the file's data at close; the listing
	// and the files' entries are kept.
	step("ls -l of the directory again, and stat of each file", 0, func() {
		out, err := exec.Command("ls", "-l", e.p("dir")).CombinedOutput()
		if err != nil || !strings.Contains(string(out), " new\n") {
			t.Fatalf("ls: %v: %s", err, out)
		}
		for _, name := range []string{"a", "b", "c", "d", "e", "new"} {
			_, err := os.Stat(e.p("dir/" + name))
			must(t, err)
		}
	})
	step("a hard link", 1, func() {
		must(t, os.Link(e.p("dir/b"), e.p("dir/b2")))
	})
	statfs := func() {
		var st syscall.Statfs_t
		err := syscall.Statfs(e.dir, &st)
		for err == syscall.EINTR { // a signal to this process (os retries too)
			err = syscall.Statfs(e.dir, &st)
		}
		must(t, err)
	}
	step("statfs", 1, statfs)
	step("statfs again (the mount keeps it a second)", 0, statfs)
}

// TestUnmountServerGone: the server goes away; requests fail within the
// timeout and unmounting works.
func TestUnmountServerGone(t *testing.T) {
	canMount(t)
	srv, err := server.New(map[string]zx.Tree{"main": memfs.New()}, "main", server.Config{})
	must(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go srv.Serve(l)
	conn, err := client.Dial(context.Background(), l.Addr().String(), client.Options{})
	must(t, err)
	defer conn.Close()
	c := cache.New(conn.Tree(""), cache.Options{})
	defer c.Close()
	dir := t.TempDir()
	m, err := mount.Mount(dir, c, mount.Options{Timeout: 2 * time.Second})
	must(t, err)
	done := false
	t.Cleanup(func() {
		if !done {
			m.Unmount()
		}
	})
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0644))
	srv.Close()
	start := time.Now()
	_, err = os.Stat(filepath.Join(dir, "never-seen"))
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("stat with the server gone: %v after %v", err, time.Since(start))
	}
	must(t, m.Unmount())
	done = true
	b, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(b), " "+dir+" ") {
		t.Fatal("still mounted")
	}
}

// TestServerGoneOneWait: with the server gone, one operation of a program
// (a stat, an open) fails with EIO or ETIMEDOUT after waiting at most one
// timeout: its requests wait for the lost connection once, not once each
// (a stat of an entry also lists its directory, and that listing waited
// for a second redial: 2.5 timeouts in all). The waits are counted by the
// client, not timed.
func TestServerGoneOneWait(t *testing.T) {
	canMount(t)
	srv, err := server.New(map[string]zx.Tree{"main": memfs.New()}, "main", server.Config{})
	must(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	go srv.Serve(l)
	defer srv.Close()
	const timeout = time.Second
	conn, err := client.Dial(context.Background(), l.Addr().String(), client.Options{Reconnect: true, ReconnectWait: timeout})
	must(t, err)
	defer conn.Close()
	// No watch: its own waits for the connection would be counted too.
	// Nothing cached stays valid, so every operation asks the server.
	c := cache.New(conn.Tree(""), cache.Options{NoWatch: true, Coherency: time.Millisecond})
	defer c.Close()
	dir := t.TempDir()
	m, err := mount.Mount(dir, c, mount.Options{Timeout: timeout, Coherency: time.Millisecond})
	must(t, err)
	defer m.Unmount()
	// A directory for each operation, each with a file, all looked up
	// (the kernel has their names, to revalidate).
	for _, d := range []string{"d1", "d2", "d3"} {
		must(t, os.Mkdir(filepath.Join(dir, d), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, d, "f"), []byte("x"), 0o644))
		_, err := os.Stat(filepath.Join(dir, d, "f"))
		must(t, err)
	}
	srv.Close()
	time.Sleep(10 * time.Millisecond) // what was cached expires
	for _, op := range []struct {
		name string
		do   func() error
	}{
		{"stat", func() error { _, err := os.Stat(filepath.Join(dir, "d1", "f")); return err }},
		{"stat of a name never seen", func() error { _, err := os.Stat(filepath.Join(dir, "d2", "new")); return err }},
		{"open", func() error {
			f, err := os.Open(filepath.Join(dir, "d3", "f"))
			if err == nil {
				f.Close()
			}
			return err
		}},
	} {
		before := conn.ReconnectWaits()
		start := time.Now()
		err := op.do()
		waits := conn.ReconnectWaits() - before
		t.Logf("%s: %v after %v, %d waits", op.name, err, time.Since(start), waits)
		if !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.ETIMEDOUT) {
			t.Errorf("%s with the server gone: %v, want EIO or ETIMEDOUT", op.name, err)
		}
		if waits != 1 {
			t.Errorf("%s with the server gone waited %d times for the connection, want once", op.name, waits)
		}
	}
}

// TestReadOutOfOrder: a streamed read of a large file that jumps ahead
// (as the kernel's parallel read-ahead does when its reads arrive out of
// order) keeps what it skipped, so that the read of the skipped range
// costs no round trip of its own.
func TestReadOutOfOrder(t *testing.T) {
	fs := memfs.New()
	data := make([]byte, 6<<20)
	for i := range data {
		data[i] = byte(i*7/3 + i>>12)
	}
	_, err := zx.WriteFile(t.Context(), fs, "/big", nil, data)
	must(t, err)
	e := mnt(t, setup{addr: serve(t, fs), rtt: 10 * time.Millisecond, opts: mount.Options{WholeFile: 1 << 20}})
	f, err := os.Open(e.p("big"))
	must(t, err)
	defer f.Close()
	read := func(off, n int64) {
		t.Helper()
		b := make([]byte, n)
		if _, err := f.ReadAt(b, off); err != nil {
			t.Fatalf("read %d at %d: %v", n, off, err)
		}
		if !bytes.Equal(b, data[off:off+n]) {
			t.Fatalf("read %d at %d: wrong data", n, off)
		}
	}
	read(0, 4096)
	read(4<<20, 4096) // ahead: the stream skips to it
	before := e.conn.Stats().RoundTrips
	read(2<<20, 4096) // behind the stream, in what it skipped
	if n := e.conn.Stats().RoundTrips - before; n != 0 {
		t.Errorf("read of a range the stream skipped: %d round trips, want 0", n)
	}
	read(5<<20, 1<<20) // and on to the end
}
