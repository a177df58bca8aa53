package repl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"sort"
	"strings"

	"github.com/zxfs/zx"
)

// maxPred bounds the predicate of one FindGet: a request must fit in one
// frame of the protocol (64 KiB).
const maxPred = 48 << 10

// A batch is one FindGet: the files below root whose paths pred names.
type batch struct {
	root, pred string
	n          int
}

// batches groups the paths (sorted) into FindGet requests. Each predicate
// names its files and prunes every directory that does not lead to one,
// so the tree walks only what it must.
func batches(paths []string) []batch {
	var bs []batch
	var files, dirs []string
	var seen map[string]bool
	size := 0
	root := ""
	flush := func() {
		if len(files) == 0 {
			return
		}
		p := "(" + strings.Join(files, " | ") + ") | type=d & !(" + strings.Join(dirs, " | ") + ") & prune"
		bs = append(bs, batch{root: root, pred: p, n: len(files)})
		files, dirs, seen, size, root = nil, nil, nil, 0, ""
	}
	for _, p := range paths {
		t := "path=" + quote(p)
		var ds []string
		for d := zx.Parent(p); ; d = zx.Parent(d) {
			if !seen[d] {
				ds = append(ds, "path="+quote(d))
			}
			if d == "/" {
				break
			}
		}
		add := len(t) + 3
		for _, d := range ds {
			add += len(d) + 3
		}
		if size+add > maxPred {
			flush()
			ds = ds[:0]
			for d := zx.Parent(p); ; d = zx.Parent(d) {
				ds = append(ds, "path="+quote(d))
				if d == "/" {
					break
				}
			}
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		for d := zx.Parent(p); ; d = zx.Parent(d) {
			seen[d] = true
			if d == "/" {
				break
			}
		}
		files = append(files, t)
		dirs = append(dirs, ds...)
		size += add
		if root == "" {
			root = zx.Parent(p)
		} else {
			root = commonDir(root, zx.Parent(p))
		}
	}
	flush()
	return bs
}

// commonDir returns the deepest directory both a and b are at or below.
func commonDir(a, b string) string {
	for !zx.HasPrefix(b, a) {
		a = zx.Parent(a)
	}
	return a
}

// A file is what a fetch delivers: the entry (as read with the data), and
// the data as it comes.
type fileSink interface {
	// start is called with a file's entry; it returns false to skip it.
	start(p string, d zx.Dir) bool
	data(b []byte)
	// end is called after the last data of the file started; err is set
	// when the data is not all there.
	end(err error)
}

var errChanged = errors.New("changed while it was copied; it will be copied in the next sync")

// fetch reads the files at paths (sorted) from tree t and delivers them to
// sink: with FindGet (a batch of paths per request, all issued at once),
// or, when the tree cannot find, with one Get per file (at most 64 ahead).
// It returns the paths that did not come, and why.
func fetch(ctx context.Context, t zx.Tree, paths []string, want map[string]*Entry, sink fileSink) map[string]error {
	return drain(ctx, t, paths, want, sink, openFetch(ctx, t, paths))
}

// openFetch issues the FindGet requests that read the files at paths
// (sorted), or returns nil if t cannot find.
func openFetch(ctx context.Context, t zx.Tree, paths []string) []<-chan zx.Item {
	f, ok := t.(zx.Finder)
	if !ok || len(paths) == 0 {
		return nil
	}
	var streams []<-chan zx.Item
	for _, b := range batches(paths) {
		streams = append(streams, f.FindGet(ctx, b.root, zx.FindOpts{Pred: b.pred}))
	}
	return streams
}

// drain delivers the files of streams (from openFetch) to sink; or, when t
// cannot find, reads them with Get.
func drain(ctx context.Context, t zx.Tree, paths []string, want map[string]*Entry, sink fileSink, streams []<-chan zx.Item) map[string]error {
	missing := map[string]error{}
	seen := map[string]bool{}
	_, finder := t.(zx.Finder)
	var streamErr error
	drainFind := func(c <-chan zx.Item) {
		started := false
		var n, size int64
		end := func(err error) {
			if !started {
				return
			}
			started = false
			if err == nil && n != size {
				err = errChanged
			}
			sink.end(err)
		}
		for it := range c {
			switch {
			case it.Err != nil && it.Dir != nil && it.Dir.Path() != "":
				// One entry could not be read; the stream goes on.
				if p := it.Dir.Path(); want[p] != nil && !seen[p] {
					seen[p] = true
					missing[p] = it.Err
				}
			case it.Err != nil:
				end(it.Err)
				if streamErr == nil {
					streamErr = it.Err
				}
			case it.Dir != nil:
				end(nil)
				p := it.Dir.Path()
				if want[p] == nil || seen[p] {
					continue
				}
				seen[p] = true
				if it.Dir.Type() != zx.TypeFile {
					missing[p] = errChanged
					continue
				}
				started = sink.start(p, it.Dir)
				n, size = 0, it.Dir.Size()
			case started && len(it.Data) > 0:
				n += int64(len(it.Data))
				sink.data(it.Data)
			}
		}
		end(nil)
	}
	drainGet := func(d zx.Dir, c <-chan zx.Item) {
		p := d.Path()
		seen[p] = true
		started := sink.start(p, d)
		var n int64
		var err error
		for it := range c {
			if it.Err != nil {
				if err == nil {
					err = it.Err
				}
				continue
			}
			if started && err == nil && len(it.Data) > 0 {
				n += int64(len(it.Data))
				sink.data(it.Data)
			}
		}
		if err == nil && n != d.Size() {
			err = errChanged
		}
		if started {
			sink.end(err)
		}
		if err != nil && !started {
			missing[p] = err
		}
	}
	if finder {
		for _, c := range streams {
			drainFind(c)
		}
	} else {
		type get struct {
			d zx.Dir
			c <-chan zx.Item
		}
		gets := make(chan get, 64)
		go func() {
			defer close(gets)
			for _, p := range paths {
				e := want[p]
				d := zx.Dir{zx.APath: p, zx.AType: zx.TypeFile, zx.AMode: e.Mode}
				d.SetInt(zx.ASize, e.Size)
				d.SetInt(zx.AMtime, e.Mtime)
				select {
				case gets <- get{d, t.Get(ctx, p, 0, -1)}:
				case <-ctx.Done():
					return
				}
			}
		}()
		for g := range gets {
			drainGet(g.d, g.c)
		}
	}
	for _, p := range paths {
		if !seen[p] {
			switch {
			case ctx.Err() != nil:
				missing[p] = zx.Errorf("get", p, ctx.Err())
			case streamErr != nil:
				missing[p] = streamErr
			default:
				missing[p] = zx.E(zx.ErrNotExist, "get", p, "gone while syncing")
			}
		}
	}
	return missing
}

// hashSink hashes the files fetched.
type hashSink struct {
	sums map[string]string
	p    string
	h    hash.Hash
}

func (s *hashSink) start(p string, d zx.Dir) bool {
	s.p, s.h = p, sha256.New()
	return true
}

func (s *hashSink) data(b []byte) { s.h.Write(b) }

func (s *hashSink) end(err error) {
	if err == nil {
		s.sums[s.p] = hex.EncodeToString(s.h.Sum(nil))
	}
}

// compareContents hashes the files changed on both sides with the same
// size, on both sides, and decides: the same contents are in sync (their
// attributes follow the newer), different contents a conflict.
func (r *run) compareContents(ctx context.Context) {
	sort.Strings(r.compare)
	var sums [2]map[string]string
	done := make(chan int, 2)
	for s := range 2 {
		sums[s] = map[string]string{}
		want := map[string]*Entry{}
		for _, p := range r.compare {
			want[p] = r.cur(s, p)
		}
		go func() {
			fetch(ctx, r.trees[s].t, r.compare, want, &hashSink{sums: sums[s]})
			done <- s
		}()
	}
	<-done
	<-done
	for _, p := range r.compare {
		d := r.dec[p]
		ha, hb := sums[0][p], sums[1][p]
		switch {
		case ha == "" || hb == "":
			d.kind = dSkip
			r.log(Action{Op: "error", Path: p, Msg: "changed on both sides; could not compare the contents: left alone"}, true)
		case ha == hb:
			a, b := r.cur(0, p), r.cur(1, p)
			d.hash = ha
			d.kind, d.src = dFrom, 0
			if b.Mtime > a.Mtime {
				d.src = 1
			}
		default:
			r.conflict(d, "changed on both sides")
		}
	}
}
