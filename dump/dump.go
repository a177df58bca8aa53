package dump

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/pred"
)

// Options configure a dump.
type Options struct {
	// Tree names the tree in the store (required; see ValidTreeName).
	Tree string
	// Source describes the location dumped (zx://... or a local
	// directory), recorded in the snapshot. A dump into a tree whose
	// latest snapshot has another source fails, unless Force is set.
	Source string
	Force  bool
	// Exclude are predicates (see package pred): entries for which any
	// holds are not dumped, nor anything below them. Paths in them are
	// paths in the dumped tree ("/" is its root).
	Exclude []string
	// Now is the clock (time.Now if nil): the snapshot is named after
	// the time the run starts.
	Now func() time.Time
	// Warn is told about entries that could not be dumped (nil: ignored).
	Warn func(err error)
	// Progress is told about bytes read, and about bytes to read as
	// they become known; both may be nil. They are called from one
	// goroutine.
	Progress func(n int64)
	Total    func(n int64)
	// Window is the number of Gets kept in flight (default 32).
	Window int
}

// Stats summarize a dump.
type Stats struct {
	Snapshot  string  `json:"snapshot"`  // TREE/YYYY/MMDD[.N]
	Files     int     `json:"files"`     // regular files in the snapshot
	Dirs      int     `json:"dirs"`      // directories in the snapshot
	Others    int     `json:"others"`    // links, devices ...
	Bytes     int64   `json:"bytes"`     // bytes in the files of the snapshot
	Read      int     `json:"read"`      // files whose data was read
	ReadBytes int64   `json:"readBytes"` // bytes read from the source
	Reused    int     `json:"reused"`    // files not read: unchanged since the last snapshot
	NewBlobs  int     `json:"newBlobs"`  // blobs written to the store
	NewBytes  int64   `json:"newBytes"`  // bytes in them
	Errors    int     `json:"errors"`    // entries left out because they could not be read
	Seconds   float64 `json:"seconds"`
}

// ExcludePred returns the find predicate that selects the entries not
// excluded by any of excl and prunes the excluded ones.
func ExcludePred(excl []string) (string, error) {
	var terms []string
	for _, e := range excl {
		if strings.TrimSpace(e) == "" {
			continue
		}
		if _, err := pred.Parse(e); err != nil {
			return "", fmt.Errorf("bad exclude predicate %q: %w", e, err)
		}
		terms = append(terms, "("+e+")")
	}
	if len(terms) == 0 {
		return "", nil
	}
	x := "(" + strings.Join(terms, " | ") + ")"
	return x + " & prune | !" + x, nil
}

// fatal reports whether an error from the source ends the run rather
// than concerning one entry.
func fatal(err error) bool {
	switch zx.KindOf(err) {
	case zx.ErrIO, zx.ErrCanceled, zx.ErrTimeout, zx.ErrProtocol, zx.ErrAuth, zx.ErrNoSpace, zx.ErrLimit:
		return true
	}
	return false
}

// entry is one entry of the snapshot being built.
type entry struct {
	d      zx.Dir
	failed bool
}

// run is one dump in progress.
type run struct {
	s    *Store
	o    Options
	st   Stats
	ents []*entry
	wg   sync.WaitGroup  // blob commits
	sem  chan struct{}   // commits running at once
	mu   sync.Mutex      // guards st's blob counts and errs
	errs []error         // commit errors
	dirs map[string]bool // blob directories with new entries, to sync
	newB atomic.Int64
}

func (r *run) warn(err error) {
	r.st.Errors++
	if r.o.Warn != nil {
		r.o.Warn(err)
	}
}

// commit stores a file's contents in the background and sets its hash.
func (r *run) commit(e *entry, w *blobWriter) {
	r.sem <- struct{}{}
	r.wg.Add(1)
	go func() {
		defer func() { <-r.sem; r.wg.Done() }()
		sum, created, err := w.commit()
		r.mu.Lock()
		defer r.mu.Unlock()
		if err != nil {
			r.errs = append(r.errs, err)
			e.failed = true
			return
		}
		e.d[AHash] = sum
		e.d.SetInt(zx.ASize, w.n)
		if created {
			if r.dirs == nil {
				r.dirs = map[string]bool{}
			}
			r.dirs[filepath.Dir(r.s.BlobPath(sum))] = true
			r.st.NewBlobs++
			r.st.NewBytes += w.n
		}
	}()
}

// Dump archives the tree at root of src into the store as a new snapshot
// of o.Tree and returns its statistics. It learns the tree with one Find;
// files whose path, size and mtime are those of the latest snapshot's
// entry are not read again. When the tree has no snapshot yet, one
// FindGet reads everything. If ctx is cancelled or the source fails, no
// snapshot is written.
func (s *Store) Dump(ctx context.Context, src zx.Tree, root string, o Options) (*Stats, error) {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	start, t0 := now(), time.Now()
	if !ValidTreeName(o.Tree) {
		return nil, zx.E(zx.ErrInvalid, "dump", o.Tree, "bad tree name (letters, digits, . _ - + : , and not starting with .)")
	}
	root, err := zx.CleanPath(root)
	if err != nil {
		return nil, err
	}
	pr, err := ExcludePred(o.Exclude)
	if err != nil {
		return nil, zx.E(zx.ErrInvalid, "dump", "", err.Error())
	}
	s.cleanTemp()
	prev, err := s.Latest(o.Tree)
	if err != nil {
		return nil, fmt.Errorf("reading the latest snapshot of %s: %w", o.Tree, err)
	}
	if prev != nil && !o.Force && o.Source != "" && prev.Source != "" && prev.Source != o.Source {
		return nil, fmt.Errorf("tree %s holds dumps of %s, not %s: choose another name, or force it", o.Tree, prev.Source, o.Source)
	}
	if o.Window <= 0 {
		o.Window = 32
	}
	r := &run{s: s, o: o, sem: make(chan struct{}, 8)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f, isFinder := src.(zx.Finder)
	if prev == nil && isFinder {
		err = r.findGet(ctx, f, root, pr)
	} else {
		err = r.findThenGet(ctx, src, root, pr, prev)
	}
	if err == nil {
		err = ctx.Err()
	}
	r.wg.Wait()
	if err == nil && len(r.errs) > 0 {
		err = fmt.Errorf("writing to the store: %w", r.errs[0])
	}
	if err != nil {
		return &r.st, err
	}
	// The new blobs' names are made durable before a snapshot names them.
	for d := range r.dirs {
		if err := syncDir(d); err != nil {
			return &r.st, fmt.Errorf("writing to the store: %w", err)
		}
	}
	entries := r.finish()
	if len(entries) == 0 || entries[0][zx.APath] != "/" {
		return &r.st, zx.E(zx.ErrIO, "dump", root, "the root of the tree could not be read")
	}
	end := now()
	hdr := Header{Tree: o.Tree, Source: o.Source, Start: start, End: end}
	name, err := s.writeSnapshot(hdr, entries, start)
	if err != nil {
		return &r.st, fmt.Errorf("writing the snapshot: %w", err)
	}
	r.st.Snapshot = o.Tree + "/" + name
	r.st.Seconds = time.Since(t0).Seconds()
	return &r.st, nil
}

// add records an entry from the source.
func (r *run) add(d zx.Dir) *entry {
	nd := make(zx.Dir, len(d))
	for k, v := range d {
		if keepAttr(k) {
			nd[k] = v
		}
	}
	e := &entry{d: nd}
	r.ents = append(r.ents, e)
	return e
}

// findGet reads the whole tree with one FindGet.
func (r *run) findGet(ctx context.Context, f zx.Finder, root, pr string) error {
	var cur *entry
	var w *blobWriter
	done := func() {
		if w != nil {
			r.st.Read++
			r.commit(cur, w)
		}
		cur, w = nil, nil
	}
	defer func() {
		if w != nil {
			w.abort()
		}
	}()
	for it := range f.FindGet(ctx, root, zx.FindOpts{Pred: pr, Spref: root, Dpref: "/"}) {
		switch {
		case it.Err != nil && it.Dir == nil:
			return it.Err
		case it.Err != nil:
			if fatal(it.Err) {
				return it.Err
			}
			if cur != nil && it.Dir.Path() == cur.d.Path() {
				w.abort()
				cur.failed = true
				cur, w = nil, nil
			}
			r.warn(it.Err)
		case it.Dir != nil:
			done()
			cur = r.add(it.Dir)
			if cur.d.Type() == zx.TypeFile {
				w = r.s.newBlob()
			}
		case it.Data != nil && w != nil:
			w.Write(it.Data)
			r.st.ReadBytes += int64(len(it.Data))
			if r.o.Progress != nil {
				r.o.Progress(int64(len(it.Data)))
			}
		}
	}
	done()
	return ctx.Err()
}

// findThenGet learns the tree with one Find and reads the files that
// changed with pipelined Gets.
func (r *run) findThenGet(ctx context.Context, src zx.Tree, root, pr string, prev *Snapshot) error {
	var need []*entry
	var total int64
	for it := range pred.Find(ctx, src, root, zx.FindOpts{Pred: pr, Spref: root, Dpref: "/"}) {
		switch {
		case it.Err != nil && it.Dir == nil:
			return it.Err
		case it.Err != nil:
			if fatal(it.Err) {
				return it.Err
			}
			r.warn(it.Err)
		case it.Dir != nil:
			e := r.add(it.Dir)
			if e.d.Type() != zx.TypeFile {
				continue
			}
			if prev != nil {
				if pd := prev.Lookup(e.d.Path()); pd != nil && pd[zx.AType] == zx.TypeFile &&
					pd[zx.ASize] == e.d[zx.ASize] && pd[zx.AMtime] == e.d[zx.AMtime] && r.s.HasBlob(pd[AHash]) {
					e.d[AHash] = pd[AHash]
					r.st.Reused++
					continue
				}
			}
			need = append(need, e)
			total += e.d.Size()
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.o.Total != nil {
		r.o.Total(total)
	}
	// Gets are issued Window ahead of the one being read.
	type job struct {
		e *entry
		c <-chan zx.Item
	}
	jobs := make(chan job, r.o.Window)
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(jobs)
		for _, e := range need {
			if gctx.Err() != nil {
				return
			}
			p := path.Join(root, e.d.Path())
			jobs <- job{e, src.Get(gctx, p, 0, -1)}
		}
	}()
	var ferr error
	for j := range jobs {
		if ferr != nil {
			for range j.c {
			}
			continue
		}
		w := r.s.newBlob()
		var err error
		for it := range j.c {
			if it.Err != nil && err == nil {
				err = it.Err
			}
			if it.Data != nil && err == nil {
				w.Write(it.Data)
				r.st.ReadBytes += int64(len(it.Data))
				if r.o.Progress != nil {
					r.o.Progress(int64(len(it.Data)))
				}
			}
		}
		if err == nil {
			err = gctx.Err()
		}
		switch {
		case err == nil:
			r.st.Read++
			r.commit(j.e, w)
		case fatal(err):
			w.abort()
			ferr = err
			cancel()
		default:
			w.abort()
			j.e.failed = true
			r.warn(err)
		}
	}
	return ferr
}

// finish drops the entries that failed, and those below directories
// that are gone, computes directory hashes and counts.
func (r *run) finish() []zx.Dir {
	var ents []zx.Dir
	have := map[string]bool{}
	for _, e := range r.ents {
		p := e.d.Path()
		if e.failed || p == "" || (p != "/" && !have[path.Dir(p)]) {
			continue
		}
		if e.d.Type() == zx.TypeFile && e.d[AHash] == "" {
			continue
		}
		if e.d.IsDir() {
			have[p] = true
		}
		ents = append(ents, e.d)
	}
	// Directory hashes, deepest first.
	kids := map[string][]zx.Dir{}
	for _, d := range ents {
		if p := d.Path(); p != "/" {
			kids[path.Dir(p)] = append(kids[path.Dir(p)], d)
		}
	}
	dirs := slices.DeleteFunc(slices.Clone(ents), func(d zx.Dir) bool { return !d.IsDir() })
	slices.SortStableFunc(dirs, func(a, b zx.Dir) int { return zx.Depth(b.Path()) - zx.Depth(a.Path()) })
	for _, d := range dirs {
		k := kids[d.Path()]
		slices.SortFunc(k, func(a, b zx.Dir) int { return strings.Compare(path.Base(a.Path()), path.Base(b.Path())) })
		d[AHash] = dirHash(k)
	}
	for _, d := range ents {
		switch d.Type() {
		case zx.TypeFile:
			r.st.Files++
			r.st.Bytes += d.Size()
		case zx.TypeDir:
			r.st.Dirs++
		default:
			r.st.Others++
		}
	}
	return ents
}

// ErrNoSnapshot is returned when a tree has no snapshot to look at.
var ErrNoSnapshot = errors.New("no snapshot")
