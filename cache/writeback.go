package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/zxfs/zx"
)

// WriteBack sends file data to the remote in the background: Write
// journals a file's writes on the local disk, issues them at once (so
// they take their place in the connection's request order, before any
// later request on the same file) and returns without waiting for the
// server, or for a lost connection to be re-established: while the link
// is down, records wait in the journal and are sent when it is back.
// Sync waits for everything written before it. A record leaves
// the journal when the server has acknowledged all of it; one the server
// refuses is moved to the journal's rejected/ directory, logged, counted,
// and reported by the next Sync. Records left by an earlier session (a
// crash, or an unmount that could not reach the server) are sent again
// by Replay.
//
// Lock order: WriteBack.mu, then Cache.mu (through the tree's methods,
// never while holding WriteBack.mu across a wait), then WriteBack.emu.
type WriteBack struct {
	t   zx.Tree
	j   *journal
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc

	host      string      // this client's name, in conflict copies' names
	conflicts conflictLog // changes kept aside (see Conflict)

	mu       sync.Mutex
	seq      uint64
	recs     map[uint64]*wbRec // not yet acknowledged, by seq
	paths    map[string]*wbPath
	errs     []error // refusals not yet reported by Sync
	nstuck   int     // records in recs that are stuck
	leftover []*record
	stats    WriteBackStats

	// The contents of files with pending records, kept so that reads
	// of them never wait for the server (see Contents): a file's at
	// most maxFile bytes, all of them together at most maxMem.
	maxFile, maxMem int64
	mem             int64 // bytes in paths' contents
	// base, if set (by the cache), returns the cached contents of the
	// file at p when they are valid and no write of p is in flight:
	// what a record of writes in place applies to.
	base func(p string) ([]byte, bool)

	// reclaim, if set (by the cache, with delegations), asks the
	// server again for the delegation of a path that records of an
	// earlier session were made under: see Replay.
	reclaim func(ctx context.Context, p string) zx.Grant

	// emu guards ents, the entries Entry answers with (pp.d with
	// pp.size, for the paths that have both), published under mu
	// too: emu is a leaf lock, so that the cache may ask with its own
	// lock held (see Lock order above).
	emu  sync.Mutex
	ents map[string]zx.Dir
}

// Origin says how a record was made: for which user (Caller, nil for
// the tree's default user; a mount shared by several users), and under
// which delegation (Under, "" for none: see Replay).
type Origin struct {
	Caller *zx.Caller
	Under  string
}

// writeBackKey marks the context of a record's requests, for the cache
// (see Cache.Put).
type writeBackKey struct{}

// wbRec is a record in flight.
type wbRec struct {
	r       *record
	size    int64         // the file's size once the record is applied
	done    chan struct{} // closed when acknowledged or refused
	settled chan struct{} // closed when the current attempt is over
	stuck   bool          // failed for want of the server: kept, sent again by Sync
	active  bool          // issued, replies not all in
	// tries counts the issues of the record: a change issued again (or
	// replayed) may have been applied by an earlier try whose reply was
	// lost, which explains some refusals (see settleChange).
	tries int
	// out, for a Change, receives its outcome once settled (not while
	// it waits for the server).
	out chan zx.Reply
	// err is why the server refused it (set before done is closed).
	err error
}

type wbPath struct {
	n    int
	size int64
	// data is the file's contents once its pending records are
	// applied, if known: the records began with the whole file (it was
	// created or truncated to zero through the mount), or the cache
	// held the contents they were written over. Never changed in
	// place: a reader may hold it.
	data  []byte
	known bool
	// d is the file's entry as the writer left it (SetEntry), nil if
	// unknown.
	d   zx.Dir
	gen uint64 // counts the records written (see hide)
}

// WriteBackStats counts what the write-back queue did.
type WriteBackStats struct {
	Pending      int   // records not yet acknowledged by the server
	PendingBytes int64 // their data
	Stuck        int   // of those, records that failed for want of the server
	Written      int64 // records acknowledged
	Conflicts    int64 // records the server refused, kept as conflict copies or reported (see Conflict)
	Rejected     int64 // of those, records that could not even be kept on the server (kept in rejected/)
	Replayed     int64 // records replayed from an earlier session
	Journal      string
}

// NewWriteBack returns a write-back queue sending to t, journaling in dir.
// Records found in dir are kept for Replay.
func NewWriteBack(dir string, t zx.Tree, log *slog.Logger) (*WriteBack, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j, err := openJournal(dir)
	if err != nil {
		return nil, err
	}
	recs, maxSeq, errs := j.load()
	for _, err := range errs {
		log.Warn("cache: " + err.Error())
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &WriteBack{
		t: t, j: j, log: log, ctx: ctx, cancel: cancel,
		recs: make(map[uint64]*wbRec), paths: make(map[string]*wbPath),
		leftover: recs,
		maxFile:  64 << 20, maxMem: 512 << 20,
		ents: make(map[string]zx.Dir),
	}
	w.stats.Journal = dir
	w.host, _ = os.Hostname()
	w.conflicts.file = filepath.Join(dir, conflictsFile)
	// Past every number in the journal, acknowledgements included: a
	// new record must not take the number of an acknowledged one.
	w.seq = maxSeq
	go j.committer(ctx, log)
	return w, nil
}

// Leftover returns how many records an earlier session left to replay.
func (w *WriteBack) Leftover() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.leftover)
}

// Replay sends the records an earlier session left in the journal, in
// their order, and waits for them (bounded by ctx). It returns how many
// reached the server.
func (w *WriteBack) Replay(ctx context.Context) (int, error) {
	w.mu.Lock()
	recs := w.leftover
	w.leftover = nil
	var ws []*wbRec
	for _, r := range recs {
		// Replayed: it may have been applied before the crash.
		wr := &wbRec{r: r, size: -1, done: make(chan struct{}), tries: 1}
		if r.Change != nil {
			wr.out = make(chan zx.Reply, 1)
		}
		w.add(wr)
		ws = append(ws, wr)
	}
	reclaim := w.reclaim
	w.mu.Unlock()
	// Records made under a delegation are applied as they are only if
	// nobody else changed what they change since: the delegation is
	// still ours, or the server says what others changed after it
	// revoked it. Otherwise they are kept as conflicts.
	grants := make(map[string]zx.Grant)
	for _, wr := range ws {
		u := wr.r.Under
		if _, ok := grants[u]; u == "" || ok {
			continue
		}
		if reclaim == nil {
			grants[u] = zx.Grant{Err: zx.E(zx.ErrNotSupp, "delegate", u, "no delegations")}
		} else {
			grants[u] = reclaim(ctx, u)
		}
	}
	for _, wr := range ws {
		if u := wr.r.Under; u != "" && overtaken(wr.r, grants[u]) {
			w.log.Warn("cache: a journaled change may have been overtaken on the server; kept as a conflict", "path", wr.r.Path, "delegation", u)
			w.setAside(wr, zx.E(zx.ErrBusy, "replay", wr.r.Path,
				"the delegation of "+u+" it was made under was revoked, and another client may have changed it since; not applied over that"))
			continue
		}
		w.log.Info("cache: replaying write-back record", "path", wr.r.Path, "seq", wr.r.Seq)
		w.issue(wr, false)
	}
	w.mu.Lock()
	var attempts []chan struct{}
	for _, wr := range ws {
		attempts = append(attempts, wr.settled)
	}
	w.mu.Unlock()
	for _, a := range attempts {
		select {
		case <-a:
		case <-ctx.Done():
		}
	}
	n := 0
	for _, wr := range ws {
		select {
		case <-wr.done:
			n++
		default:
		}
	}
	if n < len(ws) {
		return n, zx.E(zx.ErrIO, "replay", "/", fmt.Sprintf("%d of %d write-back records could not be sent; they stay in the journal", len(ws)-n, len(ws)))
	}
	w.mu.Lock()
	w.stats.Replayed += int64(n)
	// What the server refused was kept as a conflict (logged, listed):
	// reported by the next Sync, not a reason to refuse the mount.
	w.mu.Unlock()
	return n, nil
}

// overtaken reports whether the record r, made under a delegation that
// Replay asked for again and got g, may have been overtaken by another
// client's change: unless the delegation is still held, or the server
// tells what others changed since it revoked it and none of it concerns
// r, it may.
func overtaken(r *record, g zx.Grant) bool {
	switch {
	case g.Held:
		return false
	case !g.Revoked || g.All:
		return true // forgotten (a restart), or too much changed to tell
	}
	paths := []string{r.Path}
	if r.Change != nil && r.Change.To != "" {
		paths = append(paths, r.Change.To)
	}
	for _, q := range g.Touched {
		for _, p := range paths {
			if zx.Overlaps(p, q) {
				return true
			}
		}
	}
	return false
}

// setAside settles wr as refused with err without sending it: it is kept
// as a conflict (see finish).
func (w *WriteBack) setAside(wr *wbRec, err error) {
	w.mu.Lock()
	wr.active, wr.settled = true, make(chan struct{})
	wr.tries++
	w.mu.Unlock()
	w.finish(wr, zx.Reply{Err: err})
}

// add registers wr. w.mu is held.
func (w *WriteBack) add(wr *wbRec) {
	w.recs[wr.r.Seq] = wr
	w.stats.PendingBytes += wr.r.DataLen
	if wr.size >= 0 {
		pp := w.paths[wr.r.Path]
		if pp == nil {
			pp = &wbPath{}
			w.paths[wr.r.Path] = pp
		}
		pp.n++
		pp.size = wr.size
		w.publish(wr.r.Path, pp)
	}
}

// publish makes Entry answer for p what pp (nil: nothing) says. w.mu is
// held.
func (w *WriteBack) publish(p string, pp *wbPath) {
	w.emu.Lock()
	defer w.emu.Unlock()
	if pp == nil || pp.n <= 0 || pp.d == nil {
		delete(w.ents, p)
		return
	}
	d := pp.d.Clone()
	d.SetInt(zx.ASize, pp.size)
	w.ents[p] = d
}

// Write journals the writes ops (with their data, concatenated) to the
// file at p, whose size is size once they are applied, and issues them,
// made as o says.
// When it returns nil the writes survive a crash of the client, and they
// are ordered before any request issued on the tree after it.
func (w *WriteBack) Write(o Origin, p string, ops []Op, data []byte, size int64) error {
	w.mu.Lock()
	w.seq++
	r := &record{Seq: w.seq, Path: p, Ops: ops, Caller: o.Caller, Under: o.Under}
	w.mu.Unlock()
	// Journaling under no lock: records are written in parallel; their
	// issue order is their seq order only per handle, which is what
	// the request order needs (a file's writes come from its handles'
	// flushes, which are serialized per handle).
	if err := w.j.write(r, data); err != nil {
		return err
	}
	// Records that failed for want of the server go first: this one
	// must not overtake them. Neither waits for a lost connection to
	// come back (zx.WithFailFast): the data is safe in the journal, and
	// a record that finds the link down is stuck, sent again by the
	// next Retry (the watch coming back, a change, Sync).
	w.retry(true)
	wr := &wbRec{r: r, size: size, done: make(chan struct{})}
	w.mu.Lock()
	w.contents(p, ops, data, size)
	w.add(wr)
	w.mu.Unlock()
	w.issue(wr, true)
	return nil
}

// Change journals the change c of the entry at p and issues it, as Write
// does for data: when it returns nil, the change survives a crash of the
// client and is ordered before every record written after it, so a file
// written in a directory made (or renamed) without waiting is replayed
// after its directory. The channel receives the change's outcome once it
// is settled: applied, or refused (then it is also a Conflict); not while
// it waits in the journal for the server.
func (w *WriteBack) Change(o Origin, p string, c Change) (<-chan zx.Reply, error) {
	w.mu.Lock()
	w.seq++
	r := &record{Seq: w.seq, Path: p, Change: &c, Caller: o.Caller, Under: o.Under}
	w.mu.Unlock()
	if err := w.j.write(r, nil); err != nil {
		return nil, err
	}
	w.retry(true)
	wr := &wbRec{r: r, size: -1, done: make(chan struct{}), out: make(chan zx.Reply, 1)}
	w.mu.Lock()
	w.add(wr)
	w.mu.Unlock()
	w.issue(wr, true)
	return wr.out, nil
}

// contents works out the contents of the file at p once the writes ops
// (with data) are applied over its pending records, before the record
// that holds them is added, and keeps them when they are known and
// small enough. w.mu is held.
func (w *WriteBack) contents(p string, ops []Op, data []byte, size int64) {
	pp := w.paths[p]
	var cur []byte
	known := false
	switch {
	case pp != nil:
		cur, known = pp.data, pp.known
	case w.base != nil:
		cur, known = w.base(p)
	}
	var off int64
	shared := true // cur is not ours to change
	for _, op := range ops {
		switch {
		case op.Whole:
			cur, known, shared = data[off:off+op.Len], true, true
		case op.Trunc && op.Off == 0:
			cur, known, shared = nil, true, false
		case !known:
			// Written over contents we do not have.
		case op.Trunc:
			if op.Off > w.maxFile {
				known = false
				break
			}
			nb := make([]byte, op.Off)
			copy(nb, cur)
			cur, shared = nb, false
		default:
			end := max(op.Off+op.Len, int64(len(cur)))
			if end > w.maxFile {
				known = false
				break
			}
			if shared || end > int64(len(cur)) {
				nb := make([]byte, end)
				copy(nb, cur)
				cur, shared = nb, false
			}
			copy(cur[op.Off:], data[off:off+op.Len])
		}
		off += op.Len
	}
	if known && int64(len(cur)) != size {
		known = false // cannot happen; do not guess
	}
	var had int64
	if pp != nil {
		had = int64(len(pp.data))
	}
	if known && (size > w.maxFile || w.mem-had+size > w.maxMem) {
		known = false
	}
	if known && shared {
		// The caller's buffer (the mount's handle goes on writing
		// into it), or the cache's: our own copy.
		cur = bytes.Clone(cur)
	}
	if pp == nil {
		pp = &wbPath{}
		w.paths[p] = pp
	}
	w.mem -= int64(len(pp.data))
	pp.data, pp.known = nil, known
	pp.gen++
	if known {
		if cur == nil {
			cur = []byte{}
		}
		pp.data = cur
		w.mem += int64(len(cur))
	}
}

// SetEntry notes d as the entry of the file at p while it has pending
// records (the mount's, with the size and mtime its writes gave it), so
// that Entry answers for it.
func (w *WriteBack) SetEntry(p string, d zx.Dir) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pp := w.paths[p]; pp != nil && pp.n > 0 && d != nil && d.Type() == zx.TypeFile {
		pp.d = d.Clone()
		w.publish(p, pp)
	}
}

// Entry returns the entry of the file at p, with the size through its
// pending records, if it has any and SetEntry told one.
func (w *WriteBack) Entry(p string) (zx.Dir, bool) {
	w.emu.Lock()
	defer w.emu.Unlock()
	d, ok := w.ents[p]
	if !ok {
		return nil, false
	}
	return d.Clone(), true
}

// wstat applies d (attributes, a size) to what the queue knows of the
// file at p, if it has records pending: a change of it is being sent
// behind them.
func (w *WriteBack) wstat(p string, d zx.Dir) {
	w.mu.Lock()
	defer w.mu.Unlock()
	pp := w.paths[p]
	if pp == nil || pp.n <= 0 {
		return
	}
	pp.gen++
	if sz, ok := d[zx.ASize]; ok {
		size := d.Size()
		if sz == "" || size < 0 {
			// Not a size: the server says.
			w.mem -= int64(len(pp.data))
			pp.data, pp.known, pp.d = nil, false, nil
			w.publish(p, pp)
			return
		}
		pp.size = size
		if pp.known && size <= w.maxFile && w.mem+size-int64(len(pp.data)) <= w.maxMem {
			nb := make([]byte, size)
			copy(nb, pp.data)
			w.mem += size - int64(len(pp.data))
			pp.data = nb
		} else if pp.known {
			w.mem -= int64(len(pp.data))
			pp.data, pp.known = nil, false
		}
	}
	if pp.d != nil {
		nd := pp.d.Clone()
		for k, v := range d {
			switch {
			case k == zx.ASize:
			case v == "":
				delete(nd, k)
			default:
				nd[k] = v
			}
		}
		pp.d = nd
	}
	w.publish(p, pp)
}

// hide takes away what the queue knows of the files at and below p
// (their entries and contents; not their records), which a remove or a
// move is about to change on the server: reads of them go to the server
// again, behind the change. If the change fails, restore puts them back
// (unless the files were written since): the mount still shows them.
func (w *WriteBack) hide(p string) (restore func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	type hidden struct {
		q     string
		pp    *wbPath
		gen   uint64
		data  []byte
		known bool
		d     zx.Dir
	}
	var hs []hidden
	for q, pp := range w.paths {
		if q != p && !zx.HasPrefix(q, p) || !pp.known && pp.d == nil {
			continue
		}
		hs = append(hs, hidden{q, pp, pp.gen, pp.data, pp.known, pp.d})
		w.mem -= int64(len(pp.data))
		pp.data, pp.known, pp.d = nil, false, nil
		w.publish(q, pp)
	}
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, h := range hs {
			pp := h.pp
			if pp.n <= 0 || w.paths[h.q] != pp || pp.gen != h.gen {
				continue
			}
			pp.data, pp.known, pp.d = h.data, h.known, h.d
			w.mem += int64(len(pp.data))
			w.publish(h.q, pp)
		}
	}
}

// Contents returns the contents of the file at p once its pending
// records are applied, if it has any and the queue knows them (see
// wbPath.data). The caller must not change them. The cache answers reads
// of the file with them rather than asking the server: the server may be
// unreachable, and has not seen those writes anyway.
func (w *WriteBack) Contents(p string) ([]byte, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pp := w.paths[p]; pp != nil && pp.known && pp.n > 0 {
		return pp.data, true
	}
	return nil, false
}

// issue sends wr's ops, reading their data from the journal, and, in the
// background, waits for their replies. With failFast, a lost connection
// fails them at once (and wr is stuck) rather than being waited for.
func (w *WriteBack) issue(wr *wbRec, failFast bool) {
	r := wr.r
	ctx := zx.WithBackground(w.ctx)
	if r.Caller != nil {
		ctx = zx.WithCaller(ctx, *r.Caller)
	}
	if r.Change == nil {
		ctx = context.WithValue(ctx, writeBackKey{}, true)
	}
	if failFast {
		ctx = zx.WithFailFast(ctx)
	}
	w.mu.Lock()
	if wr.stuck {
		w.nstuck--
	}
	wr.active, wr.stuck = true, false
	wr.tries++
	wr.settled = make(chan struct{})
	w.mu.Unlock()
	if c := r.Change; c != nil {
		var rc <-chan zx.Reply
		switch c.Op {
		case "put":
			rc = w.t.Put(ctx, r.Path, zx.Dir(c.Dir).Clone(), 0, nil)
		case "wstat":
			rc = w.t.Wstat(ctx, r.Path, zx.Dir(c.Dir).Clone())
		case "move":
			rc = replyOf(w.t.Move(ctx, r.Path, c.To))
		case "remove":
			rc = replyOf(w.t.Remove(ctx, r.Path))
		}
		go func() { w.finish(wr, <-rc) }()
		return
	}
	var rcs []<-chan zx.Reply
	var off int64
	for _, op := range r.Ops {
		switch {
		case op.Trunc:
			d := zx.Dir{}
			d.SetInt(zx.ASize, op.Off)
			rcs = append(rcs, w.t.Wstat(ctx, r.Path, d))
		case op.Whole:
			d := zx.Dir{zx.AType: zx.TypeFile}
			d.SetInt(zx.ASize, op.Len)
			rcs = append(rcs, w.t.Put(ctx, r.Path, d, 0, r.section(off, op.Len)))
		default:
			rcs = append(rcs, w.t.Put(ctx, r.Path, zx.Dir{}, op.Off, r.section(off, op.Len)))
		}
		off += op.Len
	}
	go func() {
		var first error
		for _, rc := range rcs {
			if rep := <-rc; rep.Err != nil && first == nil {
				first = rep.Err
			}
		}
		w.finish(wr, zx.Reply{Err: first})
	}()
}

// replyOf turns the outcome of a Move or Remove into a Reply.
func replyOf(ec <-chan error) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	go func() { c <- zx.Reply{Err: <-ec} }()
	return c
}

// Retry sends again, in order, the records that failed for want of the
// server. The cache calls it when its watch comes back (the connection
// was re-established); Sync calls it too, and the mount before a change,
// so that the change does not overtake them: it waits for a lost
// connection as the change would.
func (w *WriteBack) Retry() { w.retry(false) }

func (w *WriteBack) retry(failFast bool) {
	w.mu.Lock()
	if w.nstuck == 0 {
		w.mu.Unlock()
		return
	}
	var again []*wbRec
	for _, wr := range w.recs {
		if wr.stuck && !wr.active {
			again = append(again, wr)
		}
	}
	w.mu.Unlock()
	slices.SortFunc(again, func(a, b *wbRec) int { return compareSeq(a.r.Seq, b.r.Seq) })
	for _, wr := range again {
		w.issue(wr, failFast)
	}
}

// transient reports whether err means the server was not reached (the
// record may be sent again), rather than that it refused the write.
func transient(err error) bool {
	switch zx.KindOf(err) {
	case zx.ErrIO, zx.ErrTimeout, zx.ErrCanceled, zx.ErrProtocol, zx.ErrLimit:
		return true
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// finish records the outcome of wr.
func (w *WriteBack) finish(wr *wbRec, rep zx.Reply) {
	err := rep.Err
	// What was refused is kept or reported before the record leaves the
	// journal; the journal's disk work (removing the record, or moving it
	// aside) is done without w.mu: PendingSize, which every stat and chmod
	// of the mount asks, must not wait for the disk (tar -x spent a few
	// milliseconds per file there). The record stays active meanwhile,
	// so Retry leaves it alone.
	var kept *Conflict
	if err != nil && !transient(err) {
		w.mu.Lock()
		tries := wr.tries
		w.mu.Unlock()
		if wr.r.Change != nil {
			err, kept = w.settleChange(wr.r, err, tries)
		} else {
			kept = w.keep(wr.r, err)
		}
	}
	switch {
	case err != nil && !transient(err) && kept == nil:
		// Not even a conflict copy could be made: the data stays on
		// this disk.
		to := w.j.reject(wr.r)
		kept = &Conflict{Time: time.Now(), Path: wr.r.Path, Copy: "client:" + to, Op: "write",
			Reason: fmt.Sprintf("%v; no copy could be made on the server: the data is in %s on this client", err, to)}
		w.recordConflict(*kept, true)
	case err == nil || !transient(err):
		if jerr := w.j.done(wr.r); jerr != nil {
			// On the server, but replayed by the next session if
			// this one dies: harmless unless the file changes
			// meanwhile.
			w.log.Error("cache: "+jerr.Error(), "journal", w.j.dir)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	wr.active = false
	defer close(wr.settled)
	if wr.stuck {
		w.nstuck--
		wr.stuck = false
	}
	if err != nil && transient(err) {
		w.log.Warn("cache: write-back waits for the server", "path", wr.r.Path, "err", err)
		wr.stuck = true
		w.nstuck++
		return
	}
	if kept != nil {
		// Of the server's kind (ENOSPC, EACCES ...), for the fsync that
		// reports it.
		wr.err = zx.E(zx.KindOf(err), kept.Op, kept.Path, kept.Reason)
		w.errs = append(w.errs, wr.err)
	} else {
		w.stats.Written++
	}
	delete(w.recs, wr.r.Seq)
	w.stats.PendingBytes -= wr.r.DataLen
	if pp := w.paths[wr.r.Path]; pp != nil && wr.size >= 0 {
		if pp.n--; pp.n <= 0 {
			w.mem -= int64(len(pp.data))
			delete(w.paths, wr.r.Path)
			w.publish(wr.r.Path, nil)
		}
	}
	if wr.out != nil {
		wr.out <- zx.Reply{Dir: rep.Dir, Err: err}
	}
	close(wr.done)
}

// settleChange decides what a refusal of the journaled change r means.
// A change whose outcome is already there (a directory made that exists, an
// entry removed that is gone) is done; so is, when r was issued before
// (tries > 1, or replayed), a create whose entry exists or a move whose
// source is gone: the earlier try was applied and its reply lost. It
// returns err (nil when done) and the conflict it records otherwise.
func (w *WriteBack) settleChange(r *record, err error, tries int) (error, *Conflict) {
	c := r.Change
	k := zx.KindOf(err)
	switch {
	case c.Op == "put" && c.Dir[zx.AType] == zx.TypeDir && k == zx.ErrExist:
		return err, nil // the mount hears of the surprise; the directory is there
	case c.Op == "remove" && k == zx.ErrNotExist:
		return err, nil
	case tries > 1 && (c.Op == "put" && k == zx.ErrExist || c.Op == "move" && k == zx.ErrNotExist):
		return nil, nil
	}
	cf := Conflict{Time: time.Now(), Path: r.Path, Op: c.opName(), Reason: err.Error()}
	if c.Op == "move" {
		cf.Reason = "to " + c.To + ": " + cf.Reason
	}
	w.recordConflict(cf, false)
	return err, &cf
}

// keep keeps the written data of the record r, which the server refused
// with err, on the server all the same, and records the conflict: when the
// file's directory is gone, the directory is made again and the file put
// in it; otherwise (or if that fails) the data goes to a conflict copy
// beside the file (ConflictName), or in the nearest directory above that
// takes it. It returns nil if no copy could be made.
func (w *WriteBack) keep(r *record, err error) *Conflict {
	ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
	defer cancel()
	if r.Caller != nil {
		ctx = zx.WithCaller(ctx, *r.Caller)
	}
	cf := Conflict{Time: time.Now(), Path: r.Path, Op: "write"}
	if zx.KindOf(err) == zx.ErrNotExist && len(r.Ops) > 0 && r.Ops[0].Whole {
		if w.mkdirAll(ctx, zx.Parent(r.Path)) == nil && w.apply(ctx, r, r.Path, false) == nil {
			cf.Reason = fmt.Sprintf("%v; its directory was made again and the file written in it", err)
			w.recordConflict(cf, false)
			return &cf
		}
	}
	for dir, name := zx.Parent(r.Path), path.Base(r.Path); ; dir = zx.Parent(dir) {
		for n := 1; n <= 20; n++ {
			cp := ConflictName(zx.Join(dir, name), w.host, cf.Time, n)
			aerr := w.apply(ctx, r, cp, true)
			if aerr == nil {
				cf.Copy = cp
				cf.Reason = fmt.Sprintf("%v; the data was written to %s", err, cp)
				w.recordConflict(cf, false)
				return &cf
			}
			if zx.KindOf(aerr) != zx.ErrExist {
				break
			}
		}
		if dir == "/" || ctx.Err() != nil {
			return nil
		}
	}
}

// apply writes the data of the record r to the file at p, which it
// creates (exclusively, with excl) and fills as r says.
func (w *WriteBack) apply(ctx context.Context, r *record, p string, excl bool) error {
	ops := r.Ops
	var off int64
	create := zx.Dir{zx.AType: zx.TypeFile}
	if excl {
		create[zx.AExcl] = "y"
	}
	var first <-chan zx.Reply
	if len(ops) > 0 && ops[0].Whole {
		create.SetInt(zx.ASize, ops[0].Len)
		first = w.t.Put(ctx, p, create, 0, r.section(0, ops[0].Len))
		off = ops[0].Len
		ops = ops[1:]
	} else {
		create.SetInt(zx.ASize, 0)
		first = w.t.Put(ctx, p, create, 0, nil)
	}
	if rep := <-first; rep.Err != nil {
		return rep.Err
	}
	for _, op := range ops {
		var rc <-chan zx.Reply
		if op.Trunc {
			d := zx.Dir{}
			d.SetInt(zx.ASize, op.Off)
			rc = w.t.Wstat(ctx, p, d)
		} else {
			rc = w.t.Put(ctx, p, zx.Dir{}, op.Off, r.section(off, op.Len))
		}
		off += op.Len
		if rep := <-rc; rep.Err != nil {
			return rep.Err
		}
	}
	return nil
}

// mkdirAll makes the directory p and those above it that are missing.
func (w *WriteBack) mkdirAll(ctx context.Context, p string) error {
	if p == "/" {
		return nil
	}
	d, err := zx.Stat(ctx, w.t, p)
	switch {
	case err == nil && d.IsDir():
		return nil
	case err == nil:
		return zx.E(zx.ErrNotDir, "mkdir", p, "not a directory")
	case zx.KindOf(err) != zx.ErrNotExist:
		return err
	}
	if err := w.mkdirAll(ctx, zx.Parent(p)); err != nil {
		return err
	}
	rep := <-w.t.Put(ctx, p, zx.Dir{zx.AType: zx.TypeDir}, 0, nil)
	if rep.Err != nil && zx.KindOf(rep.Err) != zx.ErrExist {
		return rep.Err
	}
	return nil
}

// recordConflict logs and lists cf; rejected says its data could not be
// kept on the server.
func (w *WriteBack) recordConflict(cf Conflict, rejected bool) {
	w.log.Error("cache: a change the server refused was kept as a conflict", "op", cf.Op, "path", cf.Path, "copy", cf.Copy, "reason", cf.Reason)
	if err := w.conflicts.record(cf); err != nil {
		w.log.Error("cache: "+err.Error(), "journal", w.j.dir)
	}
	w.mu.Lock()
	w.stats.Conflicts++
	if rejected {
		w.stats.Rejected++
	}
	w.mu.Unlock()
}

// Conflicts returns the conflicts of this session, the most recent last
// (at most 20), and how many there were.
func (w *WriteBack) Conflicts() ([]Conflict, int) {
	w.conflicts.mu.Lock()
	defer w.conflicts.mu.Unlock()
	return slices.Clone(w.conflicts.last), w.conflicts.n
}

func (w *WriteBack) takeErrs() error {
	err := errors.Join(w.errs...)
	w.errs = nil
	return err
}

// Sync waits until every record written before it is on the server,
// sending again those that failed for want of the server. It returns an
// error if some are still pending when ctx is done or could not be sent
// (they stay journaled), or if the server refused some since the last
// Sync.
func (w *WriteBack) Sync(ctx context.Context) error {
	w.mu.Lock()
	var ws []*wbRec
	for _, wr := range w.recs {
		ws = append(ws, wr)
	}
	slices.SortFunc(ws, func(a, b *wbRec) int { return compareSeq(a.r.Seq, b.r.Seq) })
	w.mu.Unlock()
	w.Retry()
	w.mu.Lock()
	var attempts []chan struct{}
	for _, wr := range ws {
		if wr.settled != nil {
			attempts = append(attempts, wr.settled)
		}
	}
	w.mu.Unlock()
wait:
	for _, a := range attempts {
		select {
		case <-a:
		case <-ctx.Done():
			break wait
		}
	}
	for _, wr := range ws {
		select {
		case <-wr.done:
			continue
		default:
		}
		// What is left waits for the server in the journal: make it
		// survive a power loss now rather than at the next commit.
		if err := w.j.commit(); err != nil {
			w.log.Error("cache: "+err.Error(), "journal", w.j.dir)
		}
		break
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var left []string
	for _, wr := range ws {
		select {
		case <-wr.done:
		default:
			left = append(left, wr.r.Path)
		}
	}
	err := w.takeErrs()
	if len(left) > 0 {
		kind := zx.ErrIO
		if ctx.Err() != nil {
			kind = zx.ErrTimeout
		}
		err = errors.Join(err, zx.E(kind, "sync", "/", fmt.Sprintf("%d writes not yet on the server (kept in the journal %s): %s", len(left), w.j.dir, summarize(left))))
	}
	return err
}

// SyncPath waits until the records written before it that concern p
// (its data, or a change of p or to p) have been settled by the server,
// sending again first those that failed for want of it, and returns why
// the server refused any of them. It does not wait for other files': an
// fsync under a delegation or with write-back costs one round trip,
// whatever else is pending.
func (w *WriteBack) SyncPath(ctx context.Context, p string) error {
	w.Retry()
	w.mu.Lock()
	var ws []*wbRec
	for _, wr := range w.recs {
		r := wr.r
		if r.Path == p || r.Change != nil && r.Change.To == p {
			ws = append(ws, wr)
		}
	}
	w.mu.Unlock()
	var errs []error
	for _, wr := range ws {
		select {
		case <-wr.done:
			if wr.err != nil {
				errs = append(errs, wr.err)
			}
		case <-ctx.Done():
			kind := zx.ErrIO
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				kind = zx.ErrTimeout
			}
			return zx.E(kind, "sync", p, fmt.Sprintf("written data not yet on the server (kept in the journal %s)", w.j.dir))
		}
	}
	return errors.Join(errs...)
}

// Commit makes every record written so far survive a power loss of the
// client (fdatasync of the journal), without waiting for the server: an
// fsync with Options.FsyncLocal in the mount.
func (w *WriteBack) Commit() error { return w.j.commit() }

func compareSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func summarize(paths []string) string {
	if len(paths) > 5 {
		return fmt.Sprintf("%v and %d more", paths[:5], len(paths)-5)
	}
	return fmt.Sprint(paths)
}

// PendingSize reports the size the file at p will have once its pending
// writes are applied, if it has any.
func (w *WriteBack) PendingSize(p string) (int64, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if pp := w.paths[p]; pp != nil {
		return pp.size, true
	}
	return 0, false
}

// Stats returns the queue's counters.
func (w *WriteBack) Stats() WriteBackStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.stats
	s.Pending = len(w.recs) + len(w.leftover)
	for _, wr := range w.recs {
		if wr.stuck {
			s.Stuck++
		}
	}
	for _, r := range w.leftover {
		s.PendingBytes += r.DataLen
	}
	return s
}

// PendingPaths returns the paths with writes not yet on the server.
func (w *WriteBack) PendingPaths() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ps []string
	for _, wr := range w.recs {
		ps = append(ps, wr.r.Path)
	}
	for _, r := range w.leftover {
		ps = append(ps, r.Path)
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// Close stops sending. Records not yet acknowledged stay in the journal
// for the next session's Replay, committed to the disk.
func (w *WriteBack) Close() error {
	w.cancel()
	err := w.j.commit()
	if err != nil {
		// Cache.Close does not report it: say it here.
		w.log.Error("cache: "+err.Error(), "journal", w.j.dir)
	}
	w.j.close()
	return err
}
