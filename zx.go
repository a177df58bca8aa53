// Package zx defines the data model and the interfaces of the zx file system:
// directory entries as attribute sets, the Tree interface that every layer
// implements (local disk, memory, network client, cache, control files) and
// the optional abilities a layer may add (Finder, Watcher, AckWatcher,
// Linker, StatFSer, Syncer, Allocator), and the error kinds that cross the
// wire.
//
// # Calls return channels
//
// Every request returns at once; its results arrive on a channel, in the CSP
// style of the ZX paper. A caller may issue many requests before reading any
// reply, which is how zx hides network latency: a program that removes every
// *.o file under a tree issues one Find and, while entries stream in, one
// Remove per entry, and only then collects the errors.
//
// Single-valued replies (Stat, Put, Wstat, Move, Remove, RemoveAll) come on
// channels buffered for one value: a caller that does not care about the result
// may ignore the channel. Streams (Get, Find, FindGet, Watch) come on
// channels closed at the end (an implementation may buffer a few items to
// run ahead of its reader); an error travels in-band as an Item whose Err is
// set. Cancelling the context of a call cancels the request, also on the wire;
// the reply channel is then closed promptly (after at most one Item with an
// error of kind ErrCanceled). A caller that stops reading a stream must cancel
// its context, or the producer stays blocked.
//
// # Paths
//
// Paths are absolute, slash-separated and clean ("/", "/a/b"). A path with "..",
// a NUL byte, an empty element or more than MaxPath bytes is invalid. Helpers in
// this package check and clean them.
package zx

import (
	"context"
	"io"
)

// Tree is a file tree: the requests of the ZX protocol that operate on files.
// Implementations must be safe for concurrent use.
//
// Requests issued by one goroutine on one Tree that touch the same path (or a
// path above or below it) take effect in the order they were issued; requests on
// unrelated paths may run concurrently. This lets a caller pipeline
// create → write → rename → remove without waiting for each reply.
type Tree interface {
	// Stat returns the entry for path.
	Stat(ctx context.Context, path string) <-chan Reply

	// Get streams the contents of path. For a file, it sends Items with Data
	// holding at most count bytes from offset off (count < 0 means to the end).
	// For a directory, it sends one Item per entry, with Dir set and all
	// attributes present, skipping the first off entries and sending at most
	// count of them (count < 0 means all); a listing is one request.
	Get(ctx context.Context, path string, off, count int64) <-chan Item

	// Put creates or updates path and writes data to it, in one request.
	//
	// If d has a "type" attribute and path does not exist, Put creates it with
	// that type (files, directories, symbolic links with "target", and, where
	// the tree allows it, fifos, sockets and devices). If d has a "size"
	// attribute, the file is resized to it before data is written, so
	// Dir{"type": "-", "size": "0"} creates or truncates race-free (Op's
	// OCREATE). If d has the control attribute Excl set to "y", Put fails
	// with ErrExist when path exists. Other attributes in d ("mode", "uid",
	// "gid", user attributes) are set before data is written, and "mtime"
	// (or the current time) after it.
	//
	// Data is read from data (which may be nil) until io.EOF and written
	// from offset off; off < 0 appends. Put reads data in the background and
	// returns at once. A Put that creates or truncates a file replaces it
	// atomically: the new contents appear under path only when all data has
	// been written; if the request fails or is cancelled midway, path keeps
	// its old contents (or does not exist). A Put into an existing file at an
	// offset writes in place, as write(2) does.
	//
	// The reply holds the final entry.
	Put(ctx context.Context, path string, d Dir, off int64, data io.Reader) <-chan Reply

	// Move renames from to to, replacing to if it is a file or an empty
	// directory.
	Move(ctx context.Context, from, to string) <-chan error

	// Remove removes path, which must be a file or an empty directory.
	Remove(ctx context.Context, path string) <-chan error

	// RemoveAll removes path and everything below it.
	RemoveAll(ctx context.Context, path string) <-chan error

	// Wstat updates the attributes of path given in d and returns the
	// resulting entry. An attribute with an empty value is deleted (user
	// attributes only). "size" resizes a file, "mode" changes permissions,
	// "mtime" and "atime" set times, "uid" and "gid" change ownership.
	// Attributes that cannot be changed ("name", "path", "type") must
	// match the entry or be absent.
	Wstat(ctx context.Context, path string, d Dir) <-chan Reply
}

// Finder is implemented by trees that walk themselves: one request replaces
// a lookup per entry.
type Finder interface {
	// Find walks the tree at path and sends one Item per entry for which
	// the predicate o.Pred (see package pred) is true. Entries are sent in
	// depth-first order, a directory before its contents, names sorted.
	// Paths in the replies have the prefix o.Spref replaced by o.Dpref,
	// and o.Depth0 is the depth of path as the caller sees it; the
	// predicate is evaluated on the rewritten paths and depths. An entry
	// that cannot be read (permission denied, say) is sent as an Item with
	// Err set and Dir holding at least its "path": the stream goes on.
	Find(ctx context.Context, path string, o FindOpts) <-chan Item

	// FindGet is Find that also sends, after each matching regular file's
	// entry, its contents as Items with Data set.
	FindGet(ctx context.Context, path string, o FindOpts) <-chan Item
}

// FindOpts are the options of a Find or FindGet. The zero value finds
// every entry, with paths as the tree has them.
type FindOpts struct {
	// Pred is the predicate (see package pred); "" matches every entry.
	Pred string
	// Spref and Dpref rewrite the paths of the replies: the prefix Spref
	// is replaced by Dpref. Both empty (or equal) leave them alone.
	Spref, Dpref string
	// Depth0 is the depth of the walk's path as the caller sees it: the
	// predicate's depth of the first entry.
	Depth0 int
}

// Watcher is implemented by trees that push change notices.
type Watcher interface {
	// Watch streams a notice for each change under path until ctx is
	// cancelled. The first Event has Kind Ready, once the watch is in place:
	// any change made after it is reported.
	Watch(ctx context.Context, path string) <-chan Event
}

// AckWatcher is implemented by watchers (the client) whose notices can
// hold back the writer: AFS's callback breaks. A change made by another
// user of the tree is not answered until every acknowledged watch that
// covers it has applied its notice, or a bound has passed (see
// docs/cache.md, "Change notices").
type AckWatcher interface {
	// WatchAcked is Watch, but a notice may carry Ack: the caller must
	// call it once it has applied the notice (dropped what it cached,
	// and had the layers above it drop theirs). Notices are applied in
	// any order; each Ack is called once.
	WatchAcked(ctx context.Context, path string) <-chan Event
}

// Linker is implemented by trees that can give a file more than one name
// (hard links).
type Linker interface {
	// Link makes newpath another name for the entry at oldpath, which must
	// not be a directory (ErrNotPermit). newpath must not exist
	// (ErrExist); its parent must be a directory. Both names then share
	// one "ino", and "nlink" counts them. The reply holds the entry at
	// newpath.
	Link(ctx context.Context, oldpath, newpath string) <-chan Reply
}

// Link calls t's Link, or fails with ErrNotSupp when t cannot link.
func Link(ctx context.Context, t Tree, oldpath, newpath string) <-chan Reply {
	if l, ok := t.(Linker); ok {
		return l.Link(ctx, oldpath, newpath)
	}
	c := make(chan Reply, 1)
	c <- Reply{Err: E(ErrNotSupp, "link", oldpath, "the tree cannot make hard links")}
	close(c)
	return c
}

// StatFSer is implemented by trees that can say how much room they have.
type StatFSer interface {
	// StatFS describes the file system holding path, as attributes
	// (decimal): "bsize" (bytes per block), "blocks", "bfree", "bavail"
	// (free for unprivileged users), "files", "ffree".
	StatFS(ctx context.Context, path string) <-chan Reply
}

// StatFS calls t's StatFS, or fails with ErrNotSupp when t has none.
func StatFS(ctx context.Context, t Tree, path string) <-chan Reply {
	if s, ok := t.(StatFSer); ok {
		return s.StatFS(ctx, path)
	}
	c := make(chan Reply, 1)
	c <- Reply{Err: E(ErrNotSupp, "statfs", path, "the tree cannot tell its size")}
	close(c)
	return c
}

// Syncer is implemented by trees that can make what they hold durable on
// request (what fsync(2) asks of a local disk, or COMMIT of an NFS
// server).
type Syncer interface {
	// Sync returns once everything written to path before it (requests
	// issued earlier that touch path, as ordered by Tree) survives a power
	// loss of the machine holding the tree: for a file, its data and
	// attributes and its name in its directory; for a directory, its
	// entries; for the root "/", the whole tree. A tree that keeps nothing
	// in volatile memory returns nil at once. An error says the data may
	// not be durable (an I/O error or lack of space from the disk).
	Sync(ctx context.Context, path string) <-chan error
}

// Sync calls t's Sync, or fails with ErrNotSupp when t cannot sync.
func Sync(ctx context.Context, t Tree, path string) <-chan error {
	if s, ok := t.(Syncer); ok {
		return s.Sync(ctx, path)
	}
	c := make(chan error, 1)
	c <- E(ErrNotSupp, "sync", path, "the tree cannot make data durable on request")
	close(c)
	return c
}

// Reply is the single value of a Stat, Put or Wstat.
type Reply struct {
	Dir Dir
	Err error
}

// Item is one value of a stream.
type Item struct {
	// Dir is an entry (directory Get, Find, FindGet), or nil.
	Dir Dir
	// Data is file data (Get, FindGet), or nil.
	Data []byte
	// Err is an error. In Find and FindGet it may concern one entry only
	// (then Dir holds its path) and the stream goes on; otherwise it is the
	// last Item.
	Err error
}

// EventKind says what a change notice is about.
type EventKind uint8

// Change notice kinds.
const (
	Ready    EventKind = iota // the watch is in place
	Created                   // Dir is the new entry
	Changed                   // Dir is the entry after the change (data or attributes)
	Removed                   // Dir holds the "path" that went away
	Moved                     // Dir is the entry at its new path; From is the old path
	Overflow                  // notices were lost: the watcher must revalidate everything
)

func (k EventKind) String() string {
	switch k {
	case Ready:
		return "ready"
	case Created:
		return "created"
	case Changed:
		return "changed"
	case Removed:
		return "removed"
	case Moved:
		return "moved"
	case Overflow:
		return "overflow"
	}
	return "unknown"
}

// Event is a change notice.
type Event struct {
	Kind EventKind
	Dir  Dir
	From string // old path, for Moved
	Err  error  // set on the last Event when the watch fails
	// Ack, if set (a notice from AckWatcher.WatchAcked), must be called
	// once the notice has been applied: the change's writer waits for it.
	Ack func()
}
