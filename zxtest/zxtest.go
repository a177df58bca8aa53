// Package zxtest is the conformance suite of zx trees, and fixtures for
// tests that use trees.
//
// TestTree checks that an implementation of zx.Tree (and of zx.Finder and
// zx.Watcher, when it has them) follows the contract written in package zx:
// every request, its errors (by kind, with errors.Is), ordering of
// pipelined requests, concurrency, cancellation, atomic replacement by Put,
// find predicates and change notices. Every tree of the project runs it:
//
//	func TestTree(t *testing.T) {
//		zxtest.TestTree(t, func(t *testing.T) zx.Tree { return memfs.New() }, zxtest.Options{})
//	}
//
// Each subtest gets a fresh, empty tree from mk. Where the contract leaves
// a choice, the suite accepts each allowed answer (for example ErrNotEmpty
// or ErrExist when a directory is moved onto a non-empty one); Options turn
// off checks of abilities a tree may legitimately lack.
//
// # Decisions
//
// Where package zx leaves a choice, the suite requires:
//
//   - Entries: name, path, type, size, mode, mtime, uid and gid are always
//     present (target for links); name is the last element of path ("/" for
//     the root), also in Find replies whose paths were rewritten; the size
//     of a directory is not checked. Reads may change atime, so entries are
//     compared ignoring atime where a read came between them.
//   - Put: a missing "mode" means 0644 for files, 0755 for directories.
//     A Put with a "size" or creating a file is atomic; one writing in place
//     is not (only its error is checked). Type "d" over a file fails with
//     ErrExist, type "-" or data over a directory with ErrIsDir, a link
//     without target with ErrInvalid. "name" and "path" in the Dir of a Put
//     are ignored (Dirs copied from another tree carry them).
//   - Malformed values of mode, size, mtime, atime, uid, gid or type, and
//     attribute names that are neither system, user nor upper-case (such
//     as "bad=name"), fail with ErrInvalid; upper-case attributes are
//     ignored.
//   - Wstat: name, path, type and target must be absent or equal to the
//     entry's (else ErrInvalid), so an entry written back as it is changes
//     nothing; "size" on a directory must equal its size (else ErrIsDir);
//     ctime, ino and nlink are ignored. Deleting a missing user attribute
//     is not an error.
//   - Allocate (zx.Allocator): each mode's effect on size and contents
//     as zx.Allocator says, bad arguments as zx.CheckAlloc says, a
//     directory ErrIsDir, a link or other entry ErrInvalid; ordered
//     with puts and gets issued around it.
//   - A path through a file fails with ErrNotDir; Get at a negative offset
//     with ErrInvalid; RemoveAll of a missing path with ErrNotExist.
//   - Cancelling a Put whose data reader blocks makes the reply arrive
//     (with ErrCanceled) without waiting for the reader.
//   - A cancelled stream closes within 2 seconds; any error in it is
//     ErrCanceled.
//   - Watch is recursive: changes anywhere below the path are reported;
//     watching a missing path sends one Event with ErrNotExist. A move out
//     of the watched path is reported as Removed, into it as Created or
//     Moved.
//
// The fixture helpers (MkTree, Dump, CheckTree, Diff, Equal, DiffTrees)
// describe trees as lists of lines:
//
//	"/a/"            a directory
//	"/a/b.txt:text"  a regular file holding "text" ("/a/b.txt" alone: empty)
//	"/a/l->target"   a symbolic link
//	"/a/p#p"         an entry of another type ("p" fifo, "s" socket, ...)
package zxtest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
)

// Options tell the suite what a tree cannot do and how long to wait.
type Options struct {
	// NoUserAttrs skips checks of user attributes (a local disk without
	// extended attributes).
	NoUserAttrs bool

	// NoOwnership skips changing uid and gid (a local tree not run as
	// root). Without it the suite sets uid 4242 and gid 4343.
	NoOwnership bool

	// NoSpecialFiles skips creating fifos, sockets and devices.
	NoSpecialFiles bool

	// NoDevices skips creating character and block devices only (a local
	// tree not run as root); fifos and sockets are still checked.
	NoDevices bool

	// NoWatch skips the watch checks even if the tree is a zx.Watcher.
	NoWatch bool

	// WatchDelay is the longest a change notice may take to arrive.
	// Default 5s.
	WatchDelay time.Duration

	// Timeout is the longest any reply may take: the suite fails instead
	// of hanging. Default 10s.
	Timeout time.Duration

	// TimeResolution is the resolution with which the tree stores times:
	// a time set through Put or Wstat must read back as the value given,
	// truncated to it. Default 0: exact nanoseconds.
	TimeResolution time.Duration

	// NoSparse skips the check that writes a 1 GiB sparse file (a tree
	// whose storage has no holes).
	NoSparse bool
}

func (o *Options) defaults() {
	if o.WatchDelay <= 0 {
		o.WatchDelay = 5 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
}

// env is what a subtest works with: its tree, options and helpers that
// fail the test instead of returning errors.
type env struct {
	t    *testing.T
	tr   zx.Tree
	opts Options
	ctx  context.Context
}

type subtest struct {
	name string
	run  func(e *env)
}

// TestTree runs the conformance suite on trees made by mk, one fresh empty
// tree per subtest. mk registers any cleanup the tree needs with t.
func TestTree(t *testing.T, mk func(t *testing.T) zx.Tree, opts Options) {
	opts.defaults()
	var all []subtest
	for _, g := range [][]subtest{
		rootTests, putTests, getTests, wstatTests, moveTests, removeTests,
		orderTests, cancelTests, findTests, watchTests, linkTests, syncTests,
		allocTests,
	} {
		all = append(all, g...)
	}
	for _, st := range all {
		t.Run(st.name, func(t *testing.T) {
			tr := mk(t)
			if tr == nil {
				t.Fatal("mk returned a nil tree")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 4*opts.Timeout)
			defer cancel()
			st.run(&env{t: t, tr: tr, opts: opts, ctx: ctx})
		})
	}
}

// recv returns the next value from c, failing the test if c is closed or
// nothing comes within the timeout.
func recv[T any](e *env, c <-chan T, what string) T {
	e.t.Helper()
	t := time.NewTimer(e.opts.Timeout)
	defer t.Stop()
	select {
	case v, ok := <-c:
		if !ok {
			e.t.Fatalf("%s: reply channel closed without a value", what)
		}
		return v
	case <-t.C:
		e.t.Fatalf("%s: no reply within %v", what, e.opts.Timeout)
	}
	panic("unreachable")
}

// collect reads a stream to its end. It fails the test if the stream does
// not end within the timeout, or if an Item follows one with Err set
// (unless stream is a find, where errors may concern one entry).
func collect(e *env, c <-chan zx.Item, what string, find bool) []zx.Item {
	e.t.Helper()
	var its []zx.Item
	t := time.NewTimer(e.opts.Timeout)
	defer t.Stop()
	for {
		select {
		case it, ok := <-c:
			if !ok {
				return its
			}
			if !find && len(its) > 0 && its[len(its)-1].Err != nil {
				e.t.Fatalf("%s: an Item follows the error %v", what, its[len(its)-1].Err)
			}
			its = append(its, it)
		case <-t.C:
			e.t.Fatalf("%s: stream did not end within %v", what, e.opts.Timeout)
		}
	}
}

// streamErr returns the data, entries and error of a stream of a Get.
func streamErr(its []zx.Item) (data []byte, dirs []zx.Dir, err error) {
	for _, it := range its {
		if it.Err != nil {
			return data, dirs, it.Err
		}
		data = append(data, it.Data...)
		if it.Dir != nil {
			dirs = append(dirs, it.Dir)
		}
	}
	return data, dirs, nil
}

// isKind reports whether err is of one of kinds.
func isKind(err error, kinds ...zx.Kind) bool {
	for _, k := range kinds {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// wantErr fails the test unless err is of one of kinds.
func (e *env) wantErr(err error, what string, kinds ...zx.Kind) {
	e.t.Helper()
	if err == nil {
		e.t.Fatalf("%s: no error, want %s", what, kindList(kinds))
	}
	if !isKind(err, kinds...) {
		e.t.Fatalf("%s: error %q (kind %q), want %s", what, err, zx.KindOf(err), kindList(kinds))
	}
}

func kindList(kinds []zx.Kind) string {
	var s []string
	for _, k := range kinds {
		s = append(s, strconv.Quote(k.Error()))
	}
	return strings.Join(s, " or ")
}

func (e *env) statErr(p string) (zx.Dir, error) {
	e.t.Helper()
	r := recv(e, e.tr.Stat(e.ctx, p), "stat "+p)
	if r.Err == nil {
		e.checkEntry(r.Dir, "stat "+p)
	}
	return r.Dir, r.Err
}

func (e *env) stat(p string) zx.Dir {
	e.t.Helper()
	d, err := e.statErr(p)
	if err != nil {
		e.t.Fatalf("stat %s: %v", p, err)
	}
	return d
}

// notExist fails unless p does not exist.
func (e *env) notExist(p string) {
	e.t.Helper()
	d, err := e.statErr(p)
	if err == nil {
		e.t.Fatalf("stat %s: exists (%v), want it gone", p, d)
	}
	e.wantErr(err, "stat "+p, zx.ErrNotExist)
}

func reader(data []byte) *strings.Reader {
	if data == nil {
		return nil
	}
	return strings.NewReader(string(data))
}

func (e *env) putErr(p string, d zx.Dir, off int64, data []byte) (zx.Dir, error) {
	e.t.Helper()
	var c <-chan zx.Reply
	if data == nil {
		c = e.tr.Put(e.ctx, p, d, off, nil)
	} else {
		c = e.tr.Put(e.ctx, p, d, off, reader(data))
	}
	r := recv(e, c, "put "+p)
	if r.Err == nil {
		e.checkEntry(r.Dir, "put "+p)
	}
	return r.Dir, r.Err
}

func (e *env) put(p string, d zx.Dir, off int64, data []byte) zx.Dir {
	e.t.Helper()
	nd, err := e.putErr(p, d, off, data)
	if err != nil {
		e.t.Fatalf("put %s %v: %v", p, d, err)
	}
	return nd
}

// getErr returns the data or entries a Get sends.
func (e *env) getErr(p string, off, count int64) ([]byte, []zx.Dir, error) {
	e.t.Helper()
	what := fmt.Sprintf("get %s %d %d", p, off, count)
	its := collect(e, e.tr.Get(e.ctx, p, off, count), what, false)
	for _, it := range its {
		if it.Dir != nil && it.Data != nil {
			e.t.Fatalf("%s: an Item has both Dir and Data", what)
		}
	}
	return streamErr(its)
}

func (e *env) read(p string) string {
	e.t.Helper()
	b, ds, err := e.getErr(p, 0, -1)
	if err != nil {
		e.t.Fatalf("get %s: %v", p, err)
	}
	if ds != nil {
		e.t.Fatalf("get %s: file sent entries", p)
	}
	return string(b)
}

func (e *env) readRange(p string, off, count int64) string {
	e.t.Helper()
	b, _, err := e.getErr(p, off, count)
	if err != nil {
		e.t.Fatalf("get %s %d %d: %v", p, off, count, err)
	}
	return string(b)
}

func (e *env) readDir(p string) []zx.Dir {
	e.t.Helper()
	b, ds, err := e.getErr(p, 0, -1)
	if err != nil {
		e.t.Fatalf("get %s: %v", p, err)
	}
	if b != nil {
		e.t.Fatalf("get %s: directory sent data", p)
	}
	for _, d := range ds {
		e.checkEntry(d, "get "+p)
	}
	return ds
}

func (e *env) wstatErr(p string, d zx.Dir) (zx.Dir, error) {
	e.t.Helper()
	r := recv(e, e.tr.Wstat(e.ctx, p, d), "wstat "+p)
	if r.Err == nil {
		e.checkEntry(r.Dir, "wstat "+p)
	}
	return r.Dir, r.Err
}

func (e *env) wstat(p string, d zx.Dir) zx.Dir {
	e.t.Helper()
	nd, err := e.wstatErr(p, d)
	if err != nil {
		e.t.Fatalf("wstat %s %v: %v", p, d, err)
	}
	return nd
}

func (e *env) move(from, to string) error {
	e.t.Helper()
	return recv(e, e.tr.Move(e.ctx, from, to), "move "+from+" "+to)
}

func (e *env) remove(p string) error {
	e.t.Helper()
	return recv(e, e.tr.Remove(e.ctx, p), "remove "+p)
}

func (e *env) removeAll(p string) error {
	e.t.Helper()
	return recv(e, e.tr.RemoveAll(e.ctx, p), "removeall "+p)
}

func (e *env) mk(spec ...string) {
	e.t.Helper()
	MkTree(e.t, e.tr, spec...)
}

func (e *env) check(spec ...string) {
	e.t.Helper()
	CheckTree(e.t, e.tr, "/", spec...)
}

// same fails unless got equals want, but for the attributes in ignore and
// upper-case ones (which layers above a tree may add).
func (e *env) same(what string, want, got zx.Dir, ignore ...string) {
	e.t.Helper()
	if d := Diff(stored(want), stored(got), ignore...); d != "" {
		e.t.Fatalf("%s: entries differ:\n%s", what, d)
	}
}

// stored returns d without upper-case attributes.
func stored(d zx.Dir) zx.Dir {
	c := make(zx.Dir, len(d))
	for k, v := range d {
		if !zx.IsTransient(k) {
			c[k] = v
		}
	}
	return c
}

var (
	decimal = regexp.MustCompile(`^-?[0-9]+$`)
	octal   = regexp.MustCompile(`^0[0-7]{1,4}$`)
)

// checkEntry fails unless d has every attribute an entry must have, well
// formed.
func (e *env) checkEntry(d zx.Dir, what string) {
	e.t.Helper()
	if d == nil {
		e.t.Fatalf("%s: nil entry", what)
	}
	for _, k := range []string{zx.AName, zx.APath, zx.AType, zx.ASize, zx.AMode, zx.AMtime, zx.AUid, zx.AGid} {
		if _, ok := d[k]; !ok {
			e.t.Fatalf("%s: entry lacks %q: %v", what, k, d)
		}
	}
	p := d.Path()
	if cp, err := zx.CleanPath(p); err != nil || cp != p || !strings.HasPrefix(p, "/") {
		e.t.Fatalf("%s: path %q is not clean", what, p)
	}
	if want := p[strings.LastIndexByte(p, '/')+1:]; p == "/" && d.Name() != "/" || p != "/" && d.Name() != want {
		e.t.Fatalf("%s: name %q does not match path %q", what, d.Name(), p)
	}
	if !strings.Contains("-dlpscbC", d.Type()) || len(d.Type()) != 1 {
		e.t.Fatalf("%s: bad type %q", what, d.Type())
	}
	if !decimal.MatchString(d[zx.ASize]) || d.Size() < 0 {
		e.t.Fatalf("%s: bad size %q", what, d[zx.ASize])
	}
	if !octal.MatchString(d[zx.AMode]) {
		e.t.Fatalf("%s: bad mode %q", what, d[zx.AMode])
	}
	for _, k := range []string{zx.AMtime, zx.AUid, zx.AGid} {
		if !decimal.MatchString(d[k]) {
			e.t.Fatalf("%s: bad %s %q", what, k, d[k])
		}
	}
	if d.Type() == zx.TypeLink && d[zx.ATarget] == "" {
		e.t.Fatalf("%s: link without target: %v", what, d)
	}
}

// wantTime fails unless attribute k of d is the time ns given, at the
// tree's resolution.
func (e *env) wantTime(d zx.Dir, k string, ns int64) {
	e.t.Helper()
	want := ns
	if r := int64(e.opts.TimeResolution); r > 1 {
		want = ns - ns%r
	}
	if got := d.Int(k); got != want {
		e.t.Fatalf("%s: %s = %d, want %d", d.Path(), k, got, want)
	}
}

// recent fails unless attribute k of d is a time close to now.
func (e *env) recent(d zx.Dir, k string, since time.Time) {
	e.t.Helper()
	t := d.Time(k)
	slack := 2*time.Second + e.opts.TimeResolution
	if t.Before(since.Add(-slack)) || t.After(time.Now().Add(slack)) {
		e.t.Fatalf("%s: %s = %v, want a time since %v", d.Path(), k, t, since)
	}
}

// names returns the names of entries, in their order.
func names(ds []zx.Dir) []string {
	var ns []string
	for _, d := range ds {
		ns = append(ns, d.Name())
	}
	return ns
}
