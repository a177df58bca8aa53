package mount_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/mount"
)

// modes are the two ways the mount sends changes: pipelined (the
// default) and each change waiting for its reply.
var modes = []struct {
	name string
	opts mount.Options
}{{"pipelined", mount.Options{}}, {"waiting", mount.Options{NoPipeline: true}}}

// TestRewriteKeepsInode: a file truncated to nothing through one
// descriptor and then written through another stays one file. lfs used
// to write a Put that empties a file aside and rename it into place (a
// new server inode); a chmod sends the truncation ahead of close; the
// lookup a failed mkdir makes then met the server's new inode number,
// which the mount had not learnt, and gave the name a new inode: the
// other descriptor's writes went to a file without a name, and were lost
// (TestDifferential, ZX_SEED=1795573239234192891).
func TestRewriteKeepsInode(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			forBackendsOpts(t, mode.opts, func(t *testing.T, e *env, disk string) {
				p := e.p("g")
				a, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
				must(t, err)
				b, err := unix.Open(p, unix.O_RDWR|unix.O_TRUNC|unix.O_CLOEXEC, 0)
				if err != nil {
					unix.Close(a)
					t.Fatal(err)
				}
				defer func() {
					if a >= 0 {
						unix.Close(a)
						unix.Close(b)
					}
				}()
				var st0 unix.Stat_t
				must(t, unix.Fstat(a, &st0))
				must(t, os.Chmod(p, 0o640))
				wantErrno(t, os.Mkdir(p, 0o755), syscall.EEXIST, "mkdir over a file")
				if _, err := unix.Pwrite(a, []byte("1234567"), 4096); err != nil {
					t.Fatal(err)
				}
				want := strings.Repeat("\x00", 4096) + "1234567"
				if got := readFile(t, p); got != want {
					t.Errorf("read %d bytes before close, want %d", len(got), len(want))
				}
				var st unix.Stat_t
				must(t, unix.Stat(p, &st))
				if st.Ino != st0.Ino {
					t.Errorf("inode %d after the rewrite, was %d", st.Ino, st0.Ino)
				}
				must(t, unix.Close(a))
				must(t, unix.Close(b))
				a, b = -1, -1
				if got := readFile(t, p); got != want {
					t.Errorf("read %d bytes after close, want %d", len(got), len(want))
				}
				if disk != "" {
					got, err := os.ReadFile(filepath.Join(disk, "g"))
					if err != nil || string(got) != want {
						t.Errorf("on the server: %d bytes %v, want %d", len(got), err, len(want))
					}
				}
				fi, err := os.Stat(p)
				must(t, err)
				if fi.Mode().Perm() != 0o640 {
					t.Errorf("mode %v, want 0640", fi.Mode().Perm())
				}
			})
		})
	}
}

// TestRewriteHardLink: a file with two names, rewritten whole through
// one of them (opened with O_TRUNC, with a chmod before the data that
// sends the truncation ahead of close, or not), stays one file with both
// names, as on a local disk: lfs truncates a linked file in place, and
// the mount gives both names one inode throughout.
func TestRewriteHardLink(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			for _, chmod := range []bool{false, true} {
				t.Run(map[bool]string{false: "close", true: "chmod"}[chmod], func(t *testing.T) {
					forBackendsOpts(t, mode.opts, func(t *testing.T, e *env, disk string) {
						f, h := e.p("f"), e.p("h")
						must(t, os.WriteFile(f, []byte("hello, world"), 0o644))
						must(t, os.Link(f, h))
						var st0, dst0 unix.Stat_t
						must(t, unix.Stat(f, &st0))
						if disk != "" {
							must(t, unix.Stat(filepath.Join(disk, "f"), &dst0))
						}
						fd, err := os.OpenFile(f, os.O_RDWR|os.O_TRUNC, 0)
						must(t, err)
						if chmod {
							if err := os.Chmod(f, 0o640); err != nil {
								fd.Close()
								t.Fatal(err)
							}
							wantErrno(t, os.Mkdir(f, 0o755), syscall.EEXIST, "mkdir over a file")
						}
						if _, err := fd.WriteAt([]byte("new"), 2); err != nil {
							fd.Close()
							t.Fatal(err)
						}
						must(t, fd.Close())
						const want = "\x00\x00new"
						for _, p := range []string{f, h} {
							if got := readFile(t, p); got != want {
								t.Errorf("%s: %q, want %q", filepath.Base(p), got, want)
							}
							var st unix.Stat_t
							must(t, unix.Stat(p, &st))
							if st.Ino != st0.Ino || st.Nlink != 2 {
								t.Errorf("%s: inode %d, %d links; want inode %d, 2 links", filepath.Base(p), st.Ino, st.Nlink, st0.Ino)
							}
						}
						if disk == "" {
							return
						}
						for _, name := range []string{"f", "h"} {
							p := filepath.Join(disk, name)
							if got, err := os.ReadFile(p); err != nil || string(got) != want {
								t.Errorf("%s on the server: %q %v, want %q", name, got, err, want)
							}
							var st unix.Stat_t
							must(t, unix.Stat(p, &st))
							if st.Ino != dst0.Ino || st.Nlink != 2 {
								t.Errorf("%s on the server: inode %d, %d links; want inode %d, 2 links", name, st.Ino, st.Nlink, dst0.Ino)
							}
						}
					})
				})
			}
		})
	}
}

// TestRewriteKeepsInodeWriteBack is TestRewriteKeepsInode with
// write-back, whose writes the mount never hears the replies of: with
// the truncation on the server (Sync) before the lookup, lfs must not
// have given the file a new inode (it truncates a file emptied with no
// data in place), or the name would get a new inode, without the data
// written to the other descriptor.
func TestRewriteKeepsInodeWriteBack(t *testing.T) {
	e := wbMount(t, wbSetup{copts: cache.Options{Journal: t.TempDir()}, opts: mount.Options{WriteBack: true}})
	p := e.p("g")
	a, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	must(t, err)
	b, err := unix.Open(p, unix.O_RDWR|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(a)
		t.Fatal(err)
	}
	defer func() {
		if a >= 0 {
			unix.Close(a)
			unix.Close(b)
		}
	}()
	must(t, os.Chmod(p, 0o640))
	must(t, e.m.Sync(context.Background()))
	wantErrno(t, os.Mkdir(p, 0o755), syscall.EEXIST, "mkdir over a file")
	if _, err := unix.Pwrite(a, []byte("1234567"), 4096); err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat("\x00", 4096) + "1234567"
	if got := readFile(t, p); got != want {
		t.Errorf("read %d bytes before close, want %d", len(got), len(want))
	}
	must(t, unix.Close(a))
	must(t, unix.Close(b))
	a, b = -1, -1
	must(t, e.m.Sync(context.Background()))
	if got := readFile(t, p); got != want {
		t.Errorf("read %d bytes after close, want %d", len(got), len(want))
	}
	if got := e.server(t, "g"); got != want {
		t.Errorf("on the server: %d bytes, want %d", len(got), len(want))
	}
}
