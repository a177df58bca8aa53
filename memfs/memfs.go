// Package memfs is an in-memory zx.Tree (and Finder, Watcher, Linker,
// Syncer and Allocator), for tests, examples and synthetic trees (the control-file layer
// builds on it).
// It honours the whole zx contract, as checked by package zxtest.
//
// # Ordering
//
// Every request registers with an order.Queue before the call returns, and
// does its work in a goroutine once the earlier conflicting requests are
// done: requests on overlapping paths take effect in the order they were
// issued, others run at once. A read (Stat, Get, Find, FindGet, Watch) takes
// a snapshot when its turn comes and then releases the queue, so a caller
// that reads a stream slowly, or waits for a Remove while reading a Find,
// never holds up (or deadlocks with) later writers. File data is stored in
// immutable blocks, so a snapshot of a file is cheap.
//
// # Put
//
// A Put that creates a file or carries a "size" attribute builds the new
// contents privately and installs them, with the new attributes, only when
// all data has arrived: if the data reader fails or the request is
// cancelled, the path keeps its old contents, or does not exist. A Put
// into an existing file without "size" writes in place, as it reads data.
// Put sets "mtime" to the given value or, when it created the entry, wrote
// data or resized the file, to the current time; a Put that only changes
// attributes of an existing entry leaves mtime alone.
//
// # Entries
//
// Every entry has name, path, type, size, mode, mtime, atime, ctime, uid,
// gid, ino (stable for the life of the entry, kept across Move) and nlink;
// symbolic links have target, devices rdev. Links are stored and never
// followed: a path that goes through a link fails with ErrNotDir. A
// directory's size is its number of entries. uid and gid default to the
// process's; any value given is stored. Reads do not change atime.
//
// # Watch
//
// A watch concerns a path, not an object: it reports changes to the path
// and to everything below it, and stays in place when the path goes away.
// Each change produces one event: Created, Changed (data or attributes) or
// Removed for the entry itself, never Changed for its parent directory;
// Removing or moving a directory produces one event for the directory, not
// one per entry below it (but a watcher of a path below it is told its path
// was Removed). A Move within the watched subtree is Moved, a Move into it
// Created, out of it Removed. Each watcher has a bounded buffer: when it is
// full, later changes are dropped and one Overflow event is queued, after
// which the watcher must revalidate what it knows.
package memfs

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/order"
)

// FS is an in-memory file tree. It is safe for concurrent use.
type FS struct {
	q order.Queue

	// Lock order: mu, then wmu, then a watcher's mu.
	mu   sync.RWMutex // guards root, every node below it, and ino
	root *node
	ino  uint64

	wmu      sync.Mutex // guards watchers
	watchers map[*watcher]struct{}

	// Tunables, set by New (tests change them before any request).
	watchBuffer int           // events a watcher may have pending
	cancelGrace time.Duration // see stream.end
}

var (
	_ zx.Tree    = (*FS)(nil)
	_ zx.Finder  = (*FS)(nil)
	_ zx.Watcher = (*FS)(nil)
)

// node is one entry. Its name and path are not stored: they are where the
// node hangs in the tree.
type node struct {
	typ          string
	mode         uint32
	uid, gid     string
	mtime, atime int64
	ctime        int64
	ino          uint64
	nlink        int               // names of a non-directory, less one
	target       string            // links
	rdev         string            // devices
	user         map[string]string // user attributes
	data         *data             // regular files
	children     map[string]*node  // directories
}

// New returns an empty tree: a root directory with mode 0755.
func New() *FS {
	fs := &FS{
		watchers:    make(map[*watcher]struct{}),
		watchBuffer: 1024,
		cancelGrace: time.Second,
	}
	fs.root = fs.newNode(zx.TypeDir, now())
	return fs
}

func now() int64 { return time.Now().UnixNano() }

// newNode returns a node of type typ with default attributes. fs.mu must be
// held (or fs not yet shared).
func (fs *FS) newNode(typ string, t int64) *node {
	fs.ino++
	n := &node{
		typ: typ, mode: 0644, mtime: t, atime: t, ctime: t, ino: fs.ino,
		uid: strconv.Itoa(os.Getuid()), gid: strconv.Itoa(os.Getgid()),
	}
	switch typ {
	case zx.TypeDir:
		n.mode = 0755
		n.children = make(map[string]*node)
	case zx.TypeFile:
		n.data = newData()
	case zx.TypeLink:
		n.mode = 0777
	}
	return n
}

// dir returns the entry for node n at path p.
func (n *node) dir(p string) zx.Dir {
	d := make(zx.Dir, 12+len(n.user))
	for k, v := range n.user {
		d[k] = v
	}
	d[zx.APath] = p
	d[zx.AName] = zx.Base(p)
	d[zx.AType] = n.typ
	d[zx.AMode] = zx.FormatMode(n.mode)
	d.SetInt(zx.AMtime, n.mtime)
	d.SetInt(zx.AAtime, n.atime)
	d.SetInt(zx.ACtime, n.ctime)
	d[zx.AUid] = n.uid
	d[zx.AGid] = n.gid
	d[zx.AIno] = strconv.FormatUint(n.ino, 10)
	d.SetInt(zx.ASize, n.size())
	nlink := 1 + n.nlink
	switch n.typ {
	case zx.TypeDir:
		nlink = 2
		for _, c := range n.children {
			if c.typ == zx.TypeDir {
				nlink++
			}
		}
	case zx.TypeLink:
		d[zx.ATarget] = n.target
	case zx.TypeCharDev, zx.TypeBlkDev:
		d[zx.ARdev] = n.rdev
	}
	d[zx.ANlink] = strconv.Itoa(nlink)
	return d
}

func (n *node) size() int64 {
	switch n.typ {
	case zx.TypeFile:
		return n.data.size
	case zx.TypeDir:
		return int64(len(n.children))
	case zx.TypeLink:
		return int64(len(n.target))
	}
	return 0
}

// sortedNames returns the names in directory n, sorted.
func (n *node) sortedNames() []string {
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// walk returns the node at clean path p and its parent directory (nil for
// "/"). When only the last element is missing, n is nil and err is nil. It
// fails with ErrNotExist when an element above is missing and ErrNotDir
// when one is not a directory. fs.mu must be held.
func (fs *FS) walk(p string) (parent, n *node, err error) {
	n = fs.root
	for _, el := range zx.Elems(p) {
		if n == nil {
			return nil, nil, zx.ErrNotExist
		}
		if n.typ != zx.TypeDir {
			return nil, nil, zx.ErrNotDir
		}
		parent, n = n, n.children[el]
	}
	return parent, n, nil
}

// lookup returns the node at p, failing with ErrNotExist if there is none.
// fs.mu must be held.
func (fs *FS) lookup(p string) (*node, error) {
	_, n, err := fs.walk(p)
	if err == nil && n == nil {
		err = zx.ErrNotExist
	}
	return n, err
}

// fail returns the error for a failed request.
func fail(op, p string, err error) error {
	if k, ok := err.(zx.Kind); ok {
		return zx.E(k, op, p, "")
	}
	return zx.Errorf(op, p, err)
}

func canceled(op, p string) error { return zx.E(zx.ErrCanceled, op, p, "") }

// stream sends the Items of a Get, Find or FindGet.
type stream struct {
	ctx    context.Context
	grace  time.Duration // how long a cut-off stream waits for its reader to take the ErrCanceled Item
	c      chan zx.Item
	op, p  string
	cutOff bool // a send was abandoned because ctx was done
}

func (fs *FS) newStream(ctx context.Context, op, p string) *stream {
	return &stream{ctx: ctx, grace: fs.cancelGrace, c: make(chan zx.Item), op: op, p: p}
}

// send sends it, unless ctx is done first.
func (s *stream) send(it zx.Item) bool {
	if s.cutOff {
		return false
	}
	select {
	case s.c <- it:
		return true
	case <-s.ctx.Done():
		s.cutOff = true
		return false
	}
}

// end ends the stream: with err as its last Item if err is not nil, with
// an ErrCanceled Item if it was cut off, and closes the channel.
func (s *stream) end(err error) {
	defer close(s.c)
	if s.cutOff || (err != nil && s.ctx.Err() != nil) {
		t := time.NewTimer(s.grace)
		defer t.Stop()
		select {
		case s.c <- zx.Item{Err: canceled(s.op, s.p)}:
		case <-t.C:
		}
		return
	}
	if err != nil {
		select {
		case s.c <- zx.Item{Err: err}:
		case <-s.ctx.Done():
		}
	}
}

// errStream returns a stream holding only err.
func (fs *FS) errStream(ctx context.Context, op, p string, err error) <-chan zx.Item {
	s := fs.newStream(ctx, op, p)
	go s.end(err)
	return s.c
}

func reply(r zx.Reply) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	c <- r
	close(c)
	return c
}

func errc(err error) <-chan error {
	c := make(chan error, 1)
	c <- err
	close(c)
	return c
}
