package repl

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/zxfs/zx"
)

type opKind int

const (
	oRemove  opKind = iota
	oMkdir          // create a directory
	oPut            // copy a file (data from a fetch)
	oLink           // create a symbolic link
	oMove           // rename (a rename on the other side)
	oAttr           // set mode (and mtime) only
	oDirTime        // set a created directory's mtime, after its contents
)

// An op is one request on tree dst, to make path p hold side src's
// version se.
type op struct {
	kind  opKind
	dst   int
	src   int
	p     string
	from  string // oMove: old path
	se    *Entry // the version to make (src's)
	xe    *Entry // what dst has (oMove: at from)
	early bool   // oRemove: before the creations
	keep  bool   // oRemove: the other side keeps its record (a replacement)
	times bool   // oAttr: mtime as well
}

func (o *op) action() Action {
	a := Action{Path: o.p, To: sideNames[o.dst]}
	if o.src >= 0 {
		a.From = sideNames[o.src]
	}
	switch o.kind {
	case oRemove:
		a.Op = "remove"
		a.From = ""
	case oMkdir, oLink, oPut:
		a.Op, a.Type = "copy", o.se.Type
		if o.kind == oPut {
			a.Size = o.se.Size
		}
	case oMove:
		a.Op, a.Path, a.NewPath, a.From = "move", o.from, o.p, ""
	case oAttr:
		a.Op = "attr"
	}
	return a
}

// record notes in the state that p holds side s's version se and the other
// side's version oe.
func (r *run) record(p string, s int, se, oe *Entry) {
	if s == 0 {
		r.state.set(p, se, oe)
	} else {
		r.state.set(p, oe, se)
	}
}

// withHash returns e with the hash recorded for it, if the state has one
// for the same version.
func (r *run) withHash(s int, p string, e *Entry) *Entry {
	if e == nil || e.Type != zx.TypeFile {
		return e
	}
	if re := r.recorded(s, p); re != nil && re.SHA256 != "" && re.Size == e.Size && re.Mtime == e.Mtime {
		c := *e
		c.SHA256 = re.SHA256
		return &c
	}
	return e
}

func withSum(e *Entry, sum string) *Entry {
	if e == nil || sum == "" {
		return e
	}
	c := *e
	c.SHA256 = sum
	return &c
}

// plan ops for decision d.
func (r *run) addOps(d *decision, ops *[]*op) {
	switch d.kind {
	case dFrom:
		r.addFrom(d, d.src, 1-d.src, d.p, ops)
	case dConflict:
		w, l := d.src, 1-d.src
		// After the loser's version moved to q on its side, the winner's
		// goes to p there, and the loser's to q on the winner's side.
		r.addCreate(w, l, d.p, r.cur(w, d.p), ops)
		r.addCreate(l, w, d.q, r.cur(l, d.p), ops)
	}
}

func (r *run) addCreate(s, x int, p string, se *Entry, ops *[]*op) {
	o := &op{dst: x, src: s, p: p, se: se}
	switch se.Type {
	case zx.TypeDir:
		o.kind = oMkdir
	case zx.TypeLink:
		o.kind = oLink
	default:
		o.kind = oPut
	}
	*ops = append(*ops, o)
}

func (r *run) addFrom(d *decision, s, x int, p string, ops *[]*op) {
	se, xe := r.cur(s, p), r.cur(x, p)
	add := func(o *op) { o.dst, o.src, o.p = x, s, p; *ops = append(*ops, o) }
	remove := func(keep bool) { add(&op{kind: oRemove, xe: xe, keep: keep}); (*ops)[len(*ops)-1].src = -1 }
	switch {
	case d.moveFrom != "":
		add(&op{kind: oMove, from: d.moveFrom, se: se, xe: r.cur(x, d.moveFrom)})
	case d.hash != "":
		add(&op{kind: oAttr, se: withSum(se, d.hash), xe: withSum(xe, d.hash), times: true})
	case se == nil:
		if xe == nil {
			if !r.opts.DryRun {
				r.state.del(p)
			}
			return
		}
		remove(false)
	case se.Type == zx.TypeDir:
		switch {
		case xe.isDir() && xe.Mode == se.Mode:
			if !r.opts.DryRun {
				r.record(p, s, se, xe)
			}
		case xe.isDir():
			add(&op{kind: oAttr, se: se, xe: xe})
		default:
			if xe != nil {
				remove(true)
			}
			r.addCreate(s, x, p, se, ops)
		}
	case se.Type == zx.TypeLink:
		if xe != nil && xe.Type == zx.TypeLink && xe.Target == se.Target {
			if !r.opts.DryRun {
				r.record(p, s, se, xe)
			}
			return
		}
		if xe != nil {
			remove(true)
		}
		r.addCreate(s, x, p, se, ops)
	default:
		rs := r.recorded(s, p)
		if xe != nil && xe.Type == zx.TypeFile && rs != nil && rs.Type == zx.TypeFile &&
			rs.Size == se.Size && rs.Mtime == se.Mtime && same(r.recorded(x, p), xe) && xe.Size == se.Size {
			// Only the mode changed.
			add(&op{kind: oAttr, se: r.withHash(s, p, se), xe: r.withHash(x, p, xe)})
			return
		}
		if xe != nil && xe.Type != zx.TypeFile {
			remove(true)
		}
		r.addCreate(s, x, p, se, ops)
	}
}

// execute applies the decisions.
func (r *run) execute(ctx context.Context) error {
	dry := r.opts.DryRun
	// Paths in sync: record them; conflicts: report them.
	var conflicts []*decision
	for _, p := range r.paths {
		d := r.dec[p]
		if !dry {
			switch d.kind {
			case dRecord:
				r.record(p, 0, r.withHash(0, p, r.cur(0, p)), r.withHash(1, p, r.cur(1, p)))
			case dDrop:
				r.state.del(p)
			}
		}
		if d.msg != "" {
			r.log(Action{Op: "conflict", Path: p, NewPath: d.q, Msg: d.msg}, false)
		}
		if d.kind == dConflict {
			conflicts = append(conflicts, d)
		}
	}

	var saveStop chan struct{}
	var saveDone chan struct{}
	if !dry && r.state.file != "" {
		saveStop, saveDone = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(saveDone)
			t := time.NewTicker(r.opts.SaveEvery)
			defer t.Stop()
			for {
				select {
				case <-saveStop:
					return
				case <-t.C:
					r.state.Save()
				}
			}
		}()
	}

	// Conflicts first: each loser's version moves aside on its side, all
	// at once; the rest waits for them.
	var wg sync.WaitGroup
	for _, d := range conflicts {
		l := 1 - d.src
		mv := &op{kind: oMove, dst: l, src: -1, from: d.p, p: d.q}
		if dry {
			r.log(mv.action(), false)
			continue
		}
		ec := r.trees[l].t.Move(ctx, d.p, d.q)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := <-ec
			a := mv.action()
			if err != nil {
				a.Err = err.Error()
				d.kind = dSkip
			} else if rec := r.state.get(d.p); rec != nil {
				// The path no longer holds the loser's version.
				if l == 0 {
					r.state.set(d.p, nil, rec.B)
				} else {
					r.state.set(d.p, rec.A, nil)
				}
			}
			r.log(a, err != nil)
		}()
	}
	wg.Wait()

	var ops []*op
	for _, p := range r.paths {
		r.addOps(r.dec[p], &ops)
	}
	// Removals before a creation at or above their path go first.
	var created [2]map[string]bool
	for i := range created {
		created[i] = map[string]bool{}
	}
	for _, o := range ops {
		if o.kind != oRemove && o.kind != oAttr {
			created[o.dst][o.p] = true
		}
	}
	var early, late, mkdirs, others []*op
	var puts [2][]*op // by source side
	var total int64
	for _, o := range ops {
		switch o.kind {
		case oRemove:
			for q := o.p; ; q = zx.Parent(q) {
				if created[o.dst][q] {
					o.early = true
					break
				}
				if q == "/" {
					break
				}
			}
			if o.early {
				early = append(early, o)
			} else {
				late = append(late, o)
			}
		case oMkdir:
			mkdirs = append(mkdirs, o)
		case oPut:
			puts[o.src] = append(puts[o.src], o)
			total += o.se.Size
		default:
			others = append(others, o)
		}
	}
	deepestFirst := func(os []*op) {
		sort.SliceStable(os, func(i, j int) bool { return os[i].p > os[j].p })
	}
	deepestFirst(early)
	deepestFirst(late)
	if r.opts.Total != nil {
		r.opts.Total(total)
	}

	if dry {
		for _, list := range [][]*op{early, mkdirs, others, puts[0], puts[1], late} {
			for _, o := range list {
				r.log(o.action(), false)
			}
		}
		return nil
	}

	do := func(list []*op) {
		for _, o := range list {
			r.issue(ctx, o, &wg)
		}
	}
	do(early)
	do(mkdirs)
	do(others)
	// Every read is issued before any write it could wait for.
	var streams [2][]<-chan zx.Item
	for s := range 2 {
		sort.Slice(puts[s], func(i, j int) bool { return puts[s][i].p < puts[s][j].p })
		paths := make([]string, len(puts[s]))
		for i, o := range puts[s] {
			paths[i] = o.p
		}
		streams[s] = openFetch(ctx, r.trees[s].t, paths)
	}
	var fwg sync.WaitGroup
	for s := range 2 {
		if len(puts[s]) == 0 {
			continue
		}
		fwg.Add(1)
		go func() {
			defer fwg.Done()
			r.copyFiles(ctx, s, puts[s], streams[s], &wg)
		}()
	}
	fwg.Wait()
	do(late)
	// Created directories get their times once their contents are in.
	for i := len(mkdirs) - 1; i >= 0; i-- {
		o := mkdirs[i]
		if o.se.Mtime != 0 {
			r.issue(ctx, &op{kind: oDirTime, dst: o.dst, src: o.src, p: o.p, se: o.se}, &wg)
		}
	}
	wg.Wait()

	if saveStop != nil {
		close(saveStop)
		<-saveDone
	}
	if !dry {
		if err := r.state.Save(); err != nil {
			return err
		}
	}
	return nil
}

// issue sends the request of o (all but oPut) and, in the background,
// waits for its reply and records the result.
func (r *run) issue(ctx context.Context, o *op, wg *sync.WaitGroup) {
	t := r.trees[o.dst].t
	var rc <-chan zx.Reply
	var ec <-chan error
	switch o.kind {
	case oRemove:
		ec = t.Remove(ctx, o.p)
	case oMove:
		ec = t.Move(ctx, o.from, o.p)
	case oMkdir:
		rc = t.Put(ctx, o.p, zx.Dir{zx.AType: zx.TypeDir, zx.AMode: o.se.Mode}, 0, nil)
	case oLink:
		d := zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: o.se.Target}
		if o.se.Mtime != 0 {
			d.SetInt(zx.AMtime, o.se.Mtime)
		}
		rc = t.Put(ctx, o.p, d, 0, nil)
	case oAttr:
		d := zx.Dir{}
		if o.se.Mode != "" {
			d[zx.AMode] = o.se.Mode
		}
		if o.times {
			d.SetInt(zx.AMtime, o.se.Mtime)
		}
		rc = t.Wstat(ctx, o.p, d)
	case oDirTime:
		d := zx.Dir{}
		d.SetInt(zx.AMtime, o.se.Mtime)
		rc = t.Wstat(ctx, o.p, d)
	default:
		panic("repl: bad op")
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		var nd zx.Dir
		if rc != nil {
			rep := <-rc
			err, nd = rep.Err, rep.Dir
		} else {
			err = <-ec
		}
		if o.kind == oRemove && errors.Is(err, zx.ErrNotExist) {
			err = nil
		}
		if o.kind == oDirTime {
			if err != nil {
				r.log(Action{Op: "error", To: sideNames[o.dst], Path: o.p, Msg: "setting the directory's mtime", Err: err.Error()}, true)
			}
			return
		}
		a := o.action()
		if err != nil {
			a.Err = err.Error()
			r.log(a, true)
			return
		}
		switch o.kind {
		case oRemove:
			if rec := r.state.get(o.p); o.keep && rec != nil {
				if o.dst == 0 {
					r.state.set(o.p, nil, rec.B)
				} else {
					r.state.set(o.p, rec.A, nil)
				}
			} else if !o.keep {
				r.state.del(o.p)
			}
		case oMove:
			r.state.del(o.from)
			r.record(o.p, o.src, o.se, o.xe)
		default:
			xe := o.xe
			if e := entryOf(nd); nd != nil && e != nil {
				xe = withSum(e, o.xe.sum())
			}
			if xe == nil {
				xe = o.se
			}
			r.record(o.p, o.src, o.se, xe)
		}
		r.log(a, false)
	}()
}

func (e *Entry) sum() string {
	if e == nil {
		return ""
	}
	return e.SHA256
}

var errPutEnded = errors.New("put ended")

// copyFiles reads the files of puts (sorted) from side s, from streams
// (see openFetch), and writes each to the other side with one Put, as its
// data arrives.
func (r *run) copyFiles(ctx context.Context, s int, puts []*op, streams []<-chan zx.Item, wg *sync.WaitGroup) {
	want := map[string]*Entry{}
	byPath := map[string]*op{}
	paths := make([]string, 0, len(puts))
	for _, o := range puts {
		want[o.p] = o.se
		byPath[o.p] = o
		paths = append(paths, o.p)
	}
	sink := &putSink{r: r, ctx: ctx, x: 1 - s, byPath: byPath, wg: wg}
	missing := drain(ctx, r.trees[s].t, paths, want, sink, streams)
	for _, p := range paths {
		if err, ok := missing[p]; ok {
			a := byPath[p].action()
			a.Err = err.Error()
			r.log(a, true)
		}
	}
}

// putSink writes the files a fetch delivers to tree x.
type putSink struct {
	r      *run
	ctx    context.Context
	x      int
	byPath map[string]*op
	wg     *sync.WaitGroup
	cur    *putting
}

type putting struct {
	pw   *io.PipeWriter
	h    hash.Hash
	n    int64
	werr error
	err  error
	done chan struct{}
}

func (ps *putSink) start(p string, d zx.Dir) bool {
	o := ps.byPath[p]
	se := entryOf(d)
	pr, pw := io.Pipe()
	pd := zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0", zx.AMode: se.Mode, zx.AMtime: d[zx.AMtime]}
	rc := ps.r.trees[ps.x].t.Put(ps.ctx, p, pd, 0, pr)
	pt := &putting{pw: pw, h: sha256.New(), done: make(chan struct{})}
	ps.cur = pt
	ps.wg.Add(1)
	go func() {
		defer ps.wg.Done()
		rep := <-rc
		pr.CloseWithError(errPutEnded)
		<-pt.done
		a := o.action()
		a.Size = pt.n
		err := rep.Err
		if err == nil && pt.err != nil {
			err = pt.err
		}
		if err != nil {
			if pt.err != nil {
				err = pt.err
			}
			a.Err = err.Error()
			ps.r.log(a, true)
			return
		}
		sum := hex.EncodeToString(pt.h.Sum(nil))
		xe := entryOf(rep.Dir)
		if rep.Dir == nil || xe == nil {
			xe = se
		}
		ps.r.record(p, o.src, withSum(se, sum), withSum(xe, sum))
		ps.r.log(a, false)
	}()
	return true
}

func (ps *putSink) data(b []byte) {
	pt := ps.cur
	pt.h.Write(b)
	pt.n += int64(len(b))
	if pt.werr == nil {
		if _, err := pt.pw.Write(b); err != nil {
			pt.werr = err
		} else if ps.r.opts.Bytes != nil {
			ps.r.opts.Bytes(int64(len(b)))
		}
	}
}

func (ps *putSink) end(err error) {
	pt := ps.cur
	ps.cur = nil
	pt.err = err
	if err != nil {
		pt.pw.CloseWithError(err)
	} else {
		pt.pw.Close()
	}
	close(pt.done)
}
