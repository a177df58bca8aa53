package repl

import (
	"fmt"
	"path"
	"sync"

	"github.com/zxfs/zx"
)

// What to do with a path.
type dkind int

const (
	dNone     dkind = iota // in sync and recorded: nothing to do
	dRecord                // the same on both sides: record it
	dDrop                  // gone from both sides: forget it
	dFrom                  // make the other side like side src
	dConflict              // winner src keeps the path; the loser's version moves to q
	dMoved                 // moved away on the other side by a rename (see moveFrom)
	dSkip                  // unknown on a side (unreadable): leave alone
	dCompare               // files changed on both sides: compare contents
)

type decision struct {
	p        string
	kind     dkind
	src      int    // dFrom: source side; dConflict: winner
	q        string // dConflict: where the loser's version goes
	msg      string // a conflict to report
	moveFrom string // dFrom: the other side moves this path to p
	hash     string // dCompare: equal contents' hash, once compared
}

// run is one Sync.
type run struct {
	opts  Options
	state *State
	trees [2]*side

	rec      map[string]*Record // the state at the start
	paths    []string           // every path, sorted
	dec      map[string]*decision
	compare  []string        // paths to compare
	newNames map[string]bool // conflict names taken

	mu  sync.Mutex // guards rep and the calls of opts.Log
	rep *Report
}

func (r *run) cur(s int, p string) *Entry { return r.trees[s].cur[p] }

func (r *run) recorded(s int, p string) *Entry {
	rec := r.rec[p]
	if rec == nil {
		return nil
	}
	if s == 0 {
		return rec.A
	}
	return rec.B
}

// log reports an action. Conflicts and failures are counted.
func (r *run) log(a Action, failed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if failed && a.Err == "" {
		a.Err = "failed"
	}
	switch {
	case a.Err != "":
		r.rep.Errors++
	case a.Op == "conflict":
		r.rep.Conflicts++
	case a.Op == "copy":
		r.rep.Copied++
		r.rep.Bytes += a.Size
	case a.Op == "remove":
		r.rep.Removed++
	case a.Op == "move":
		r.rep.Moved++
	case a.Op == "attr":
		r.rep.Attrs++
	}
	r.rep.Actions = append(r.rep.Actions, a)
	if r.opts.Log != nil {
		r.opts.Log(a)
	}
}

// plan decides what to do with every path.
func (r *run) plan() {
	r.rec = r.state.snapshot()
	all := map[string]bool{}
	for _, s := range r.trees {
		for p := range s.cur {
			all[p] = true
		}
	}
	for p := range r.rec {
		all[p] = true
	}
	r.paths = sortedPaths(all)
	r.dec = make(map[string]*decision, len(r.paths))
	r.newNames = map[string]bool{}
	for _, p := range r.paths {
		r.dec[p] = r.decide(p)
	}
	r.keepChanged()
	r.renames()
}

// decide compares each side's entry at p with its record.
func (r *run) decide(p string) *decision {
	d := &decision{p: p}
	if r.trees[0].unreadable(p) || r.trees[1].unreadable(p) {
		d.kind = dSkip
		return d
	}
	a, b := r.cur(0, p), r.cur(1, p)
	ca, cb := !same(r.recorded(0, p), a), !same(r.recorded(1, p), b)
	switch {
	case !ca && !cb:
		if a == nil && b == nil {
			d.kind = dDrop
		}
	case ca && !cb:
		d.kind, d.src = dFrom, 0
	case cb && !ca:
		d.kind, d.src = dFrom, 1
	case a == nil && b == nil:
		d.kind = dDrop
	case a == nil || b == nil:
		// Removed on one side, changed on the other: keep the change.
		s := 0
		if a == nil {
			s = 1
		}
		d.kind, d.src = dFrom, s
		what := "changed"
		if r.recorded(s, p) == nil {
			what = "created"
		}
		d.msg = fmt.Sprintf("removed on %s, %s on %s: kept %s's version", sideNames[1-s], what, sideNames[s], sideNames[s])
	case a.Type == b.Type && a.Type == zx.TypeDir:
		// Directories on both sides: their contents merge.
		d.kind = dRecord
		if a.Mode != b.Mode {
			d.kind, d.src = dFrom, 0
		}
	case a.Type == b.Type && a.Type == zx.TypeLink && a.Target == b.Target:
		d.kind = dRecord
	case a.Type == b.Type && a.Type == zx.TypeFile && a.Size == b.Size:
		if a.Mtime == b.Mtime && a.Mode == b.Mode {
			d.kind = dRecord
		} else {
			d.kind = dCompare
			r.compare = append(r.compare, p)
		}
	default:
		r.conflict(d, "changed on both sides")
	}
	return d
}

// conflict makes d a conflict between the two versions at its path: the
// directory, or else the newer version, wins.
func (r *run) conflict(d *decision, why string) {
	a, b := r.cur(0, d.p), r.cur(1, d.p)
	w := 0
	switch {
	case a.isDir():
	case b.isDir():
		w = 1
	case b.Mtime > a.Mtime:
		w = 1
	}
	l := 1 - w
	d.kind, d.src = dConflict, w
	d.q = r.conflictName(d.p, l)
	kind := "newer"
	if r.cur(w, d.p).isDir() {
		kind = "a directory"
	}
	d.msg = fmt.Sprintf("%s: kept %s's version (%s) at the path; %s's version (%s) is now %s on both sides",
		why, sideNames[w], kind, sideNames[l], r.cur(l, d.p), d.q)
}

// conflictName returns a free name for side l's version of p.
func (r *run) conflictName(p string, l int) string {
	base := fmt.Sprintf("%s.conflict-%s-%s", p, sideNames[l], r.opts.Now().Format("20060102-150405"))
	q := base
	for i := 1; r.cur(0, q) != nil || r.cur(1, q) != nil || r.rec[q] != nil || r.newNames[q]; i++ {
		q = fmt.Sprintf("%s.%d", base, i)
	}
	r.newNames[q] = true
	return q
}

// final reports whether something will be at p after the sync, and
// whether it is a directory.
func (r *run) final(d *decision) (exists, dir bool) {
	a, b := r.cur(0, d.p), r.cur(1, d.p)
	switch d.kind {
	case dNone, dRecord, dSkip, dCompare:
		if a != nil {
			return true, a.isDir()
		}
		return b != nil, b.isDir()
	case dFrom, dConflict:
		e := r.cur(d.src, d.p)
		return e != nil, e.isDir()
	}
	return false, false
}

// keepChanged makes sure that no removal wipes out an entry the other side
// changed: every directory leading to an entry that stays is kept (or
// recreated) as a directory.
func (r *run) keepChanged() {
	need := map[string]bool{}
	forced := map[string]bool{}
	for i := len(r.paths) - 1; i >= 0; i-- {
		p := r.paths[i]
		d := r.dec[p]
		if need[p] && r.keepDir(d) {
			forced[p] = true
		}
		if ok, _ := r.final(d); ok {
			need[zx.Parent(p)] = true
		}
	}
	// Report the topmost directory kept.
	for p := range forced {
		if forced[zx.Parent(p)] && r.dec[p].kind == dFrom {
			r.dec[p].msg = ""
		}
	}
}

func (r *run) keepDir(d *decision) bool {
	if _, dir := r.final(d); dir || d.kind == dSkip {
		return false
	}
	if d.kind != dFrom {
		return false // cannot happen: something below p exists as a directory somewhere
	}
	s, o := d.src, 1-d.src
	if !r.cur(o, d.p).isDir() {
		return false
	}
	if r.cur(s, d.p) == nil {
		d.src = o
		d.msg = fmt.Sprintf("removed on %s, but %s changed entries below it: kept them", sideNames[s], sideNames[o])
		return true
	}
	what := "file"
	if r.cur(s, d.p).Type == zx.TypeLink {
		what = "link"
	}
	r.conflict(d, fmt.Sprintf("replaced by a %s on %s, but %s changed entries below it", what, sideNames[s], sideNames[o]))
	return true
}

// renames turns the removal of a file at one path and its creation at
// another, on the same side, into a move on the other side.
func (r *run) renames() {
	type key struct {
		size, mtime int64
		mode        string
	}
	for s := range 2 {
		o := 1 - s
		gone := map[key][]string{}
		made := map[key][]string{}
		for _, p := range r.paths {
			d := r.dec[p]
			if d.kind != dFrom || d.src != s || d.msg != "" {
				continue
			}
			se, oe := r.cur(s, p), r.cur(o, p)
			switch {
			case se == nil && oe != nil && oe.Type == zx.TypeFile && same(r.recorded(o, p), oe):
				rs := r.recorded(s, p)
				if rs != nil && rs.Type == zx.TypeFile {
					k := key{rs.Size, rs.Mtime, rs.Mode}
					gone[k] = append(gone[k], p)
				}
			case se != nil && se.Type == zx.TypeFile && oe == nil && r.rec[p] == nil:
				k := key{se.Size, se.Mtime, se.Mode}
				made[k] = append(made[k], p)
			}
		}
		for k, gs := range gone {
			ms := made[k]
			if len(ms) == 0 {
				continue
			}
			pairs := [][2]string{}
			if len(gs) == 1 && len(ms) == 1 {
				pairs = append(pairs, [2]string{gs[0], ms[0]})
			} else {
				// Ambiguous: pair only names unique on both sides.
				byName := func(ps []string) map[string][]string {
					m := map[string][]string{}
					for _, p := range ps {
						m[path.Base(p)] = append(m[path.Base(p)], p)
					}
					return m
				}
				gn, mn := byName(gs), byName(ms)
				for n, g := range gn {
					if m := mn[n]; len(g) == 1 && len(m) == 1 {
						pairs = append(pairs, [2]string{g[0], m[0]})
					}
				}
			}
			for _, pr := range pairs {
				r.dec[pr[0]].kind = dMoved
				r.dec[pr[1]].moveFrom = pr[0]
			}
		}
	}
}
