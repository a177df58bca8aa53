package mount_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx/mount"
)

// side is one of the two trees a differential test works on.
type side struct {
	root string
	fds  map[int]int // slot → descriptor
}

// result is what an operation returned: an errno and any data.
type result struct {
	errno syscall.Errno
	data  string
}

func (r result) String() string {
	d := r.data
	if len(d) > 40 {
		d = fmt.Sprintf("%q…(%d bytes)", d[:40], len(d))
	} else {
		d = strconv.Quote(d)
	}
	if r.errno != 0 {
		return fmt.Sprintf("%v %s", r.errno, d)
	}
	return "ok " + d
}

func res(err error) result { return result{errno: errnoOf(err)} }

// TestDifferential applies one long random sequence of operations to a
// mounted tree and to a local directory, compares every result (errno and
// data) and, at the end, the two trees. ZX_SEED=n replays a sequence.
func TestDifferential(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("ZX_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		must(t, err)
		seed = v
	}
	t.Logf("seed %d (replay with ZX_SEED=%d)", seed, seed)
	// No hard links here: writes through a descriptor opened by a name
	// that is then unlinked, while the file keeps another name, do not
	// reach the file (zx addresses files by path; see docs/cache.md).
	// Links are tested in TestPOSIXOps and TestErrno.
	// Both modes: changes pipelined (mkdir, create, chmod, unlink, rename
	// not waiting for the server when the cache knows the outcome: the
	// default) and every change waiting for its reply.
	for _, mode := range []struct {
		name string
		opts mount.Options
	}{{"pipelined", mount.Options{}}, {"waiting", mount.Options{NoPipeline: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			forBackendsOpts(t, mode.opts, func(t *testing.T, e *env, disk string) {
				mdir, ldir := e.p("t"), filepath.Join(t.TempDir(), "t")
				must(t, os.Mkdir(mdir, 0755))
				must(t, os.Mkdir(ldir, 0755))
				sides := [2]*side{{root: mdir, fds: map[int]int{}}, {root: ldir, fds: map[int]int{}}}
				defer func() {
					for _, s := range sides {
						for _, fd := range s.fds {
							unix.Close(fd)
						}
					}
				}()
				rng := rand.New(rand.NewPCG(seed, 1))
				var log []string
				const nops = 1500
				for i := range nops {
					name, op := randomOp(rng)
					var rs [2]result
					for k, s := range sides {
						rs[k] = op(s)
					}
					log = append(log, fmt.Sprintf("%d %s: %v", i, name, rs[1]))
					if rs[0] != rs[1] {
						start := max(0, len(log)-30)
						if os.Getenv("ZX_SEED") != "" {
							start = 0
						}
						t.Fatalf("seed %d, op %d %s:\n mount: %v\n local: %v\nlast operations:\n%s", seed, i, name, rs[0], rs[1], strings.Join(log[start:], "\n"))
					}
				}
				for _, s := range sides {
					for slot, fd := range s.fds {
						must(t, unix.Close(fd))
						delete(s.fds, slot)
					}
				}
				mt, lt := treeOf(t, mdir), treeOf(t, ldir)
				if mt != lt {
					if os.Getenv("ZX_SEED") != "" {
						t.Log(strings.Join(log, "\n"))
					}
					t.Fatalf("seed %d: trees differ after %d operations:\nmount:\n%s\nlocal:\n%s", seed, nops, mt, lt)
				}
				t.Logf("%d operations, trees equal:\n%s", nops, mt)
			})
		})
	}
}

var (
	diffDirs  = []string{"", "a", "b", "a/c"}
	diffNames = []string{"f", "g", "a", "b", "c"}
)

func randomPath(rng *rand.Rand) string {
	d := diffDirs[rng.IntN(len(diffDirs))]
	return filepath.Join(d, diffNames[rng.IntN(len(diffNames))])
}

// randomData is data of a random size with a recognizable pattern.
func randomData(rng *rand.Rand) []byte {
	sizes := []int{1, 7, 100, 4096, 5000, 70000}
	b := make([]byte, sizes[rng.IntN(len(sizes))])
	c := byte('a' + rng.IntN(26))
	for i := range b {
		b[i] = c + byte(i%7)
	}
	return b
}

func randomOff(rng *rand.Rand) int64 {
	offs := []int64{0, 1, 100, 4095, 4096, 10000, 1 << 20}
	return offs[rng.IntN(len(offs))]
}

// randomOp returns a description and an operation to apply to each side.
func randomOp(rng *rand.Rand) (string, func(s *side) result) {
	slot := rng.IntN(3)
	p, q := randomPath(rng), randomPath(rng)
	switch n := rng.IntN(100); {
	case n < 14:
		flags := []int{
			os.O_RDONLY, os.O_RDWR, os.O_WRONLY,
			os.O_RDWR | os.O_CREATE, os.O_WRONLY | os.O_CREATE | os.O_TRUNC,
			os.O_RDWR | os.O_CREATE | os.O_EXCL, os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_APPEND | os.O_CREATE,
			os.O_RDWR | os.O_TRUNC,
		}[rng.IntN(9)]
		mode := uint32([]int{0644, 0600, 0755}[rng.IntN(3)])
		return fmt.Sprintf("open %s flags %#o slot %d", p, flags, slot), func(s *side) result {
			if fd, ok := s.fds[slot]; ok {
				unix.Close(fd)
				delete(s.fds, slot)
			}
			fd, err := unix.Open(filepath.Join(s.root, p), flags|unix.O_CLOEXEC, mode)
			if err == nil {
				s.fds[slot] = fd
			}
			return res(err)
		}
	case n < 20:
		return fmt.Sprintf("close slot %d", slot), func(s *side) result {
			fd, ok := s.fds[slot]
			if !ok {
				return result{errno: syscall.EBADF}
			}
			delete(s.fds, slot)
			return res(unix.Close(fd))
		}
	case n < 34:
		data, off := randomData(rng), randomOff(rng)
		return fmt.Sprintf("pwrite slot %d %d bytes at %d", slot, len(data), off), func(s *side) result {
			fd, ok := s.fds[slot]
			if !ok {
				return result{errno: syscall.EBADF}
			}
			n, err := unix.Pwrite(fd, data, off)
			return result{errno: errnoOf(err), data: strconv.Itoa(n)}
		}
	case n < 40:
		data := randomData(rng)
		return fmt.Sprintf("write slot %d %d bytes", slot, len(data)), func(s *side) result {
			fd, ok := s.fds[slot]
			if !ok {
				return result{errno: syscall.EBADF}
			}
			n, err := unix.Write(fd, data)
			return result{errno: errnoOf(err), data: strconv.Itoa(n)}
		}
	case n < 52:
		off, size := randomOff(rng), []int{10, 4096, 100000}[rng.IntN(3)]
		return fmt.Sprintf("pread slot %d %d at %d", slot, size, off), func(s *side) result {
			fd, ok := s.fds[slot]
			if !ok {
				return result{errno: syscall.EBADF}
			}
			b := make([]byte, size)
			n, err := unix.Pread(fd, b, off)
			if n < 0 {
				n = 0
			}
			return result{errno: errnoOf(err), data: string(b[:n])}
		}
	case n < 56:
		size := randomOff(rng)
		return fmt.Sprintf("ftruncate slot %d to %d", slot, size), func(s *side) result {
			fd, ok := s.fds[slot]
			if !ok {
				return result{errno: syscall.EBADF}
			}
			return res(unix.Ftruncate(fd, size))
		}
	case n < 59:
		size := randomOff(rng)
		return fmt.Sprintf("truncate %s to %d", p, size), func(s *side) result {
			return res(unix.Truncate(filepath.Join(s.root, p), size))
		}
	case n < 62:
		return fmt.Sprintf("fstat slot %d", slot), func(s *side) result {
			fd, ok := s.fds[slot]
			if !ok {
				return result{errno: syscall.EBADF}
			}
			var st unix.Stat_t
			err := unix.Fstat(fd, &st)
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				st.Size = 0 // directory sizes differ between file systems
			}
			return result{errno: errnoOf(err), data: fmt.Sprintf("size %d mode %o", st.Size, st.Mode)}
		}
	case n < 68:
		return "stat " + p, func(s *side) result {
			var st unix.Stat_t
			err := unix.Lstat(filepath.Join(s.root, p), &st)
			if err != nil {
				return res(err)
			}
			size := st.Size
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				size = 0 // directory sizes differ between file systems
			}
			return result{data: fmt.Sprintf("size %d mode %o nlink %d", size, st.Mode, st.Nlink)}
		}
	case n < 72:
		return "read " + p, func(s *side) result {
			b, err := os.ReadFile(filepath.Join(s.root, p))
			return result{errno: errnoOf(err), data: string(b)}
		}
	case n < 76:
		return "rename " + p + " " + q, func(s *side) result {
			return res(syscall.Rename(filepath.Join(s.root, p), filepath.Join(s.root, q)))
		}
	case n < 80:
		return "unlink " + p, func(s *side) result {
			return res(syscall.Unlink(filepath.Join(s.root, p)))
		}
	case n < 85:
		return "mkdir " + p, func(s *side) result {
			return res(syscall.Mkdir(filepath.Join(s.root, p), 0755))
		}
	case n < 88:
		return "rmdir " + p, func(s *side) result {
			return res(syscall.Rmdir(filepath.Join(s.root, p)))
		}
	case n < 91:
		d := diffDirs[rng.IntN(len(diffDirs))]
		return "readdir " + d, func(s *side) result {
			ents, err := os.ReadDir(filepath.Join(s.root, d))
			var names []string
			for _, e := range ents {
				names = append(names, e.Name()+":"+e.Type().String())
			}
			return result{errno: errnoOf(err), data: strings.Join(names, " ")}
		}
	case n < 93:
		mode := uint32([]int{0644, 0600, 0755, 0700}[rng.IntN(4)])
		return fmt.Sprintf("chmod %s %o", p, mode), func(s *side) result {
			return res(syscall.Chmod(filepath.Join(s.root, p), mode))
		}
	case n < 95:
		mode := []uint32{0, keepSize, punchHole | keepSize, zeroRange, zeroRange | keepSize}[rng.IntN(5)]
		off, length := randomOff(rng), []int64{1, 100, 4096, 100000}[rng.IntN(4)]
		return fmt.Sprintf("fallocate slot %d mode %#x %d at %d", slot, mode, length, off), func(s *side) result {
			fd, ok := s.fds[slot]
			if !ok {
				return result{errno: syscall.EBADF}
			}
			return res(unix.Fallocate(fd, mode, off, length))
		}
	case n < 97:
		return "fsync slot " + strconv.Itoa(slot), func(s *side) result {
			fd, ok := s.fds[slot]
			if !ok {
				return result{errno: syscall.EBADF}
			}
			return res(unix.Fsync(fd))
		}
	default:
		// mmap: write through a shared mapping of an open descriptor,
		// or read through a private one.
		off, data, shared := int64(rng.IntN(3))*4096, []byte{byte('A' + rng.IntN(26)), 'm', 'a', 'p'}, rng.IntN(2) == 0
		return fmt.Sprintf("mmap slot %d at %d shared %v", slot, off, shared), func(s *side) result {
			fd, ok := s.fds[slot]
			if !ok {
				return result{errno: syscall.EBADF}
			}
			return mmapChild(fd, off, shared, data)
		}
	}
}

// mmapChild maps 4096 bytes of fd at off in a child process, returns the
// first 64 and writes data at 10: if shared, through to the file (it
// msyncs); if not, into the child's private copy only. A child, because
// a Go process that faults on a mapping of its own FUSE mount can
// deadlock: the faulting thread cannot be stopped for the garbage
// collector while the server's goroutines wait for it.
func mmapChild(fd int, off int64, shared bool, data []byte) result {
	dfd, err := unix.Dup(fd)
	if err != nil {
		return res(err)
	}
	f := os.NewFile(uintptr(dfd), "slot")
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("ZX_MMAP_CHILD=%d,%v,%x", off, shared, data))
	cmd.ExtraFiles = []*os.File{f}
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output()
	if err != nil {
		return result{errno: syscall.EIO, data: err.Error()}
	}
	var r result
	var e int
	var d string
	if _, err := fmt.Sscanf(string(out), "%d %x", &e, &d); err != nil {
		fmt.Sscanf(string(out), "%d", &e)
	}
	r.errno, r.data = syscall.Errno(e), d
	return r
}

// mmapChildMain is the child's side of mmapChild (see TestMain).
func mmapChildMain(arg string) {
	var off int64
	var shared bool
	var data []byte
	fmt.Sscanf(strings.ReplaceAll(arg, ",", " "), "%d %t %x", &off, &shared, &data)
	r := func() result {
		fd := 3
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return res(err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			// What mmap of a directory gives, whatever its size: the
			// test does not compare directory sizes (a removed one is
			// empty on the local disk, not on the mount), so the size
			// must not decide between "short" and this.
			return res(syscall.ENODEV)
		}
		if st.Size < off+4096 {
			return result{data: "short"}
		}
		fl := unix.MAP_PRIVATE
		if shared {
			fl = unix.MAP_SHARED
		}
		m, err := unix.Mmap(fd, off, 4096, unix.PROT_READ|unix.PROT_WRITE, fl)
		if err != nil {
			return res(err)
		}
		defer unix.Munmap(m)
		before := string(m[:64])
		copy(m[10:], data)
		if shared {
			if err := unix.Msync(m, unix.MS_SYNC); err != nil {
				return res(err)
			}
		}
		return result{data: before}
	}()
	fmt.Printf("%d %x\n", int(r.errno), r.data)
}

func TestMain(m *testing.M) {
	if arg := os.Getenv("ZX_MMAP_CHILD"); arg != "" {
		mmapChildMain(arg)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// treeOf describes the tree at root: every entry with its type, mode,
// size, link count and, for files, a digest of the contents.
func treeOf(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		line := fmt.Sprintf("%s %o nlink %d", rel, st.Mode, st.Nlink)
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" size %d sum %x", len(b), digest(b))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func digest(b []byte) uint64 {
	var h uint64 = 14695981039346656037
	for _, c := range b {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h ^ uint64(len(bytes.TrimRight(b, "\x00")))
}
