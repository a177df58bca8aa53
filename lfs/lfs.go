// Package lfs implements zx.Tree (and Finder, Watcher, Linker, StatFSer,
// Syncer and Allocator) over a directory of the local disk: the tree a zx server
// exports. It runs on Linux.
//
// # Confinement
//
// The export is airtight: no request can read, write or learn anything outside
// the root directory. New opens the root with os.Root and keeps a descriptor
// for it; every request then starts from that descriptor and never from a
// host path. Paths are cleaned with zx.CleanPath, which refuses "..", NUL
// bytes and overlong names, and the parent directory of the entry a request
// names is opened with openat2(2) and RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
// RESOLVE_NO_MAGICLINKS (or, on kernels without openat2, one O_NOFOLLOW
// openat per element). The entry itself is then handled with *at system
// calls on that parent descriptor and a single-element name, with
// AT_SYMLINK_NOFOLLOW or O_NOFOLLOW: fstatat, statx, mknodat, utimensat,
// fchownat, fchmodat2, renameat2, unlinkat. Extended attributes are read and
// written through "/proc/self/fd/N/name" with the l*xattr calls, which do
// not follow the last element.
//
// This is stricter than os.Root, which follows symbolic links that stay
// inside the root: lfs never follows a symbolic link at all. Links are
// stored and listed (type "l", "target"), and a request that names a link
// acts on the link itself: Stat, Wstat (times, ownership), Remove, Move and a
// Put of type "l" work on it, while Get of a link, or a Put that writes data
// to one, fails with zx.ErrInvalid ("is a symbolic link"). A path that goes
// through a link ("/link/file") fails with zx.ErrNotDir, wherever the link
// points. Clients that mount the tree resolve links themselves, as the
// kernel does for any remote file system. lfs does not stop at mount points
// inside the export: whoever mounts something there exports it.
//
// # Atomic writes
//
// A Put that creates a file, or truncates one to size 0, writes to a
// temporary file in the same directory, named ".zx-tmp-" plus a random
// suffix, that takes the mode, ownership and user attributes of the file it
// replaces (or those in the request). When all data has been written it is
// fsynced (if it replaces a file: see Durability), given its mtime and
// renamed over the target (renameat2 with
// RENAME_NOREPLACE when the request is exclusive, so that of two racing
// exclusive creates exactly one wins); if the request fails or is cancelled
// the temporary is removed and the old file stays. A server killed in the
// middle leaves its temporary behind, never a half-written file; the next
// listing of that directory removes temporaries older than the FS (and a
// minute old). Other Puts write in place, and so do those that empty a
// file with no data (a truncation in place is as atomic) or that write to
// a file with other names (hard links): the file keeps its inode. Names that start with ".zx-tmp-" are reserved: they never appear in
// Get, Find or Watch replies, and a request that names one fails with
// zx.ErrInvalid.
//
// # Durability
//
// A request is applied when its reply goes, but not necessarily on the
// disk: a power loss may lose what the kernel had not written back. Sync
// (zx.Syncer) makes an entry durable: fsync of the file or directory and
// of the directory holding it, or syncfs for the root. A Put that
// replaces an existing file fsyncs its temporary before the rename, so
// that a power loss leaves the old contents or the new, never an empty
// file; a Put that creates a new file does not (a disk flush per file
// would slow every tar -x and cp -r): the client asks with Sync when it
// needs it, as fsync(2) on a local disk.
//
// # Ordering
//
// Each request is registered with an order.Queue before its method returns,
// so requests that touch the same paths apply in issue order. Find and
// FindGet wait for earlier writes under their path and then release it at
// once: a walk reports what is on disk as it goes and does not hold up
// writes issued after it.
//
// # Watching
//
// Watch uses one inotify instance per FS, shared by all watchers, with
// watches added for every directory below the watched paths (and for new
// directories as they appear, whose contents are scanned and reported, so
// that nothing created before the watch was in place is missed). Notices
// are fanned out to watchers through bounded buffers: a watcher that does
// not keep up gets an Overflow notice instead of slowing the others. Changes
// made by other programs on the host are reported as well.
package lfs

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
	"github.com/zxfs/zx/order"
)

// TempPrefix starts the names of the temporary files lfs writes while it
// replaces a file. Such names are hidden and reserved.
const TempPrefix = ".zx-tmp-"

// Options configure an FS.
type Options struct {
	// ReadOnly makes every request that would write fail with
	// zx.ErrReadOnly.
	ReadOnly bool

	// NoXattrs disables user attributes: they are not listed, and setting
	// one fails with zx.ErrNotSupp. Useful on file systems without user
	// extended attributes.
	NoXattrs bool

	// OnSync, if set, is called after each Sync request (and each
	// "sync" control command, as a Sync of "/") is carried out, with its
	// clean path and its error: instrumentation, for tests that check
	// that a client's fsync reaches this disk.
	OnSync func(path string, err error)
}

// FS is a zx tree over a local directory. It is safe for concurrent use.
type FS struct {
	opts   Options
	root   *os.Root
	rootf  *os.File // keeps rootfd open
	rootfd int
	proc   string // "/proc/self/fd/", or "" when /proc cannot be used
	q      order.Queue
	closed atomic.Bool

	mu  sync.Mutex // guards hub and nwatch
	hub *hub

	xattrs xattrMemo // inodes known to have no extended attributes
	links  linkMemo  // targets of symbolic links

	// The control file (see ctl.go).
	ctl    ctl.File
	reqs   ctl.Counts
	synced syncStats
	flags  *ctl.Flags
	name   string
	since  time.Time
}

var (
	_ zx.Tree    = (*FS)(nil)
	_ zx.Finder  = (*FS)(nil)
	_ zx.Watcher = (*FS)(nil)
)

// New returns a tree over the directory dir.
func New(dir string, opts Options) (*FS, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	rf, err := root.OpenFile(".", os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		root.Close()
		return nil, err
	}
	f := &FS{opts: opts, root: root, rootf: rf, rootfd: int(rf.Fd()),
		flags: ctl.NewFlags("debug"), name: filepath.Base(dir), since: time.Now()}
	f.ctl.C = f
	var st unix.Stat_t
	if unix.Stat("/proc/self/fd/"+strconv.Itoa(f.rootfd)+"/.", &st) == nil {
		f.proc = "/proc/self/fd/"
	}
	if f.proc == "" {
		f.opts.NoXattrs = true
	}
	return f, nil
}

// Close releases the tree's descriptors and ends its watches. Requests
// issued after Close fail.
func (f *FS) Close() error {
	if f.closed.Swap(true) {
		return nil
	}
	f.mu.Lock()
	h := f.hub
	f.hub = nil
	f.mu.Unlock()
	if h != nil {
		h.stop()
	}
	f.rootf.Close()
	return f.root.Close()
}

// String returns a description of the tree that does not reveal the host
// path.
func (f *FS) String() string { return "lfs" }

// check cleans a request's path and refuses reserved names, writes to a
// read-only tree and requests to a closed one.
func (f *FS) check(op, p string, write bool) (string, error) {
	if f.closed.Load() {
		return "", zx.E(zx.ErrIO, op, p, "tree closed")
	}
	f.reqs.Add(op)
	if write && f.opts.ReadOnly {
		return "", zx.E(zx.ErrReadOnly, op, p, "")
	}
	cp, err := zx.CleanPath(p)
	if err != nil {
		return "", zx.Errorf(op, p, err)
	}
	if strings.Contains(cp, "/"+TempPrefix) {
		return "", zx.E(zx.ErrInvalid, op, cp, "reserved name")
	}
	return cp, nil
}

// isTemp reports whether a directory entry name is a temporary file.
func isTemp(name string) bool { return strings.HasPrefix(name, TempPrefix) }

// dirfd is a directory descriptor that may be borrowed (the root's).
type dirfd struct {
	fd  int
	own bool
}

func (d dirfd) close() {
	if d.own {
		unix.Close(d.fd)
	}
}

var noOpenat2 atomic.Bool

// openBeneath opens rel (relative, clean, no "..") below the directory dfd
// without following symbolic links anywhere.
func openBeneath(dfd int, rel string, flags int) (int, error) {
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	if !noOpenat2.Load() {
		how := unix.OpenHow{
			Flags:   uint64(flags),
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		for {
			fd, err := unix.Openat2(dfd, rel, &how)
			if err == unix.EINTR || err == unix.EAGAIN {
				continue
			}
			if err != unix.ENOSYS && err != unix.EPERM {
				return fd, err
			}
			break // seccomp filters may answer EPERM for unknown calls
		}
		noOpenat2.Store(true)
	}
	fd := dfd
	elems := strings.Split(rel, "/")
	for i, el := range elems {
		fl := unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC | unix.O_NOFOLLOW
		if i == len(elems)-1 {
			fl = flags
		}
		nfd, err := openat(fd, el, fl, 0)
		if fd != dfd {
			unix.Close(fd)
		}
		if err != nil {
			return -1, err
		}
		fd = nfd
	}
	return fd, nil
}

func openat(dfd int, name string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat(dfd, name, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// openDir opens the directory at clean path p, with a descriptor of its
// own (never the root's, whose offset must not move).
func (f *FS) openDir(p string) (dirfd, error) {
	rel := p[1:]
	if p == "/" {
		rel = "."
	}
	fd, err := openBeneath(f.rootfd, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if err == unix.ELOOP {
			err = errors.New("path crosses a symbolic link")
			return dirfd{}, &zx.Error{Kind: zx.ErrNotDir, Msg: err.Error()}
		}
		return dirfd{}, err
	}
	return dirfd{fd: fd, own: true}, nil
}

// openParent opens the directory holding the entry at clean path p and
// returns it with the entry's name ("." for the root).
func (f *FS) openParent(p string) (dirfd, string, error) {
	if p == "/" {
		return dirfd{fd: f.rootfd}, ".", nil
	}
	dir := path.Dir(p)
	if dir == "/" {
		return dirfd{fd: f.rootfd}, path.Base(p), nil // borrowed: only for *at calls
	}
	d, err := f.openDir(dir)
	return d, path.Base(p), err
}

// lstat stats name in d without following it.
func lstat(d int, name string, st *unix.Stat_t) error {
	for {
		err := unix.Fstatat(d, name, st, unix.AT_SYMLINK_NOFOLLOW)
		if err != unix.EINTR {
			return err
		}
	}
}

// procPath returns a path that names the entry name in directory d
// without following it: "/proc/self/fd/N/name".
func (f *FS) procPath(d int, name string) string {
	return f.proc + strconv.Itoa(d) + "/" + name
}

// E builds an error with a kind and a message.
func e(kind zx.Kind, op, p, msg string) error { return zx.E(kind, op, p, msg) }

func errf(op, p string, err error) error {
	if err == nil {
		return nil
	}
	return zx.Errorf(op, p, err)
}

// parse helpers for request attributes

func parseMode(s string) (uint32, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 07777 {
		return 0, fmt.Errorf("bad mode %q", s)
	}
	return uint32(m), nil
}

func parseID(s string) (int, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, fmt.Errorf("bad id %q", s)
	}
	return int(n), nil
}

func parseInt(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return n, nil
}
