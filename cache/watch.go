package cache

import (
	"path"
	"time"

	"github.com/zxfs/zx"
)

// inval is one call of Options.OnInvalidate.
type inval struct {
	path string
	what Inval
}

// acknowledge acknowledges applied notices (zx.Event.Ack), once the
// layer above has applied the invalidations reported for them (inval:
// some were).
func (c *Cache) acknowledge(acks []func(), inval bool) {
	if len(acks) == 0 {
		return
	}
	done := func() {
		for _, a := range acks {
			a()
		}
	}
	c.cbmu.Lock()
	b := c.barrier
	c.cbmu.Unlock()
	if b == nil || !inval {
		done()
		return
	}
	b(done)
}

func (c *Cache) callback(cbs []inval) {
	if len(cbs) == 0 {
		return
	}
	c.cbmu.Lock()
	f := c.onInval
	c.cbmu.Unlock()
	if f == nil {
		return
	}
	for _, cb := range cbs {
		f(cb.path, cb.what)
	}
}

// watchLoop keeps a watch of "/" on the remote, applying its notices,
// and re-establishes it with backoff when it fails. While there is none,
// cached entries are trusted for the coherency window only.
//
// With a remote that can (zx.AckWatcher, the client), the watch is
// acknowledged: a notice of another client's change carries Ack, which the
// cache calls once it has applied it and the layer above has applied the
// invalidations it reported (SetInvalidateBarrier); the other client's
// reply waits for that (docs/cache.md, "Change notices").
func (c *Cache) watchLoop(w zx.Watcher) {
	defer close(c.done)
	backoff := 100 * time.Millisecond
	readyOnce := false
	watch := w.Watch
	if aw, ok := w.(zx.AckWatcher); ok {
		watch = aw.WatchAcked
	}
	for c.ctx.Err() == nil {
		ec := watch(c.ctx, "/")
		up := false
		for ev := range ec {
			if ev.Err != nil && !up && !readyOnce && zx.KindOf(ev.Err) == zx.ErrNotSupp {
				// The tree cannot watch (a dump store, say): asking
				// again would only drop the cache each time. The
				// coherency window it is, for the life of the cache.
				c.log.Info("cache: the tree cannot watch; using the coherency window", "err", ev.Err)
				go func() {
					for range ec {
					}
				}()
				close(c.ready)
				return
			}
			if ev.Err != nil {
				c.log.Warn("cache: watch failed", "err", ev.Err)
				break
			}
			if !up {
				if ev.Kind != zx.Ready {
					continue
				}
				up = true
				backoff = 100 * time.Millisecond
				if readyOnce && c.wb != nil {
					go c.wb.Retry() // the server is back
				}
				c.mu.Lock()
				c.watching = true
				c.epoch++
				c.mu.Unlock()
				if !readyOnce {
					readyOnce = true
					close(c.ready)
				}
				continue
			}
			c.mu.Lock()
			c.stats.Events++
			var cbs []inval
			if p := ev.Dir.Path(); ev.Kind != zx.Overflow && (c.pend[p] > 0 || ev.From != "" && c.pend[ev.From] > 0) {
				// A local write on p is in flight: this may be its own
				// notice. Decide when its reply is in (see end).
				if c.pend[p] == 0 {
					p = ev.From
				}
				if ev.Ack != nil {
					// Another client's change (never ours), whose
					// writer waits for us, maybe while our write
					// waits for it: apply it now and acknowledge,
					// and once more when our reply is in (it may be
					// older than this).
					cbs = c.apply(ev)
					again := ev
					again.Ack = nil
					c.deferred[p] = append(c.deferred[p], again)
				} else {
					c.deferred[p] = append(c.deferred[p], ev)
				}
			} else {
				cbs = c.apply(ev)
			}
			c.mu.Unlock()
			c.callback(cbs)
			if ev.Ack != nil {
				c.acknowledge([]func(){ev.Ack}, len(cbs) > 0)
			}
		}
		// Drain, in case we broke out early.
		go func() {
			for range ec {
			}
		}()
		c.mu.Lock()
		wasUp := c.watching
		c.watching = false
		c.epoch++
		c.record(zx.Overflow, false, "/")
		c.dropAll()
		if wasUp {
			// Everything is dropped, here and in the kernel: an
			// invalidation, as an overflow notice's is.
			c.stats.Invalidations++
		}
		c.mu.Unlock()
		if wasUp {
			c.callback([]inval{{"/", InvalAll}})
		}
		if c.ctx.Err() != nil {
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// sameEntry reports whether two entries are equal but for times that
// change without the file changing (atime, ctime).
func sameEntry(a, b zx.Dir) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	n := 0
	for k, v := range a {
		if k == zx.AAtime || k == zx.ACtime || zx.IsTransient(k) {
			continue
		}
		if b[k] != v {
			return false
		}
		n++
	}
	for k := range b {
		if k != zx.AAtime && k != zx.ACtime && !zx.IsTransient(k) {
			n--
		}
	}
	return n == 0
}

// older reports whether entry a describes the path at a time before b
// did: an earlier ctime, which the server sets on every change, from one
// clock. The file need not be the same: a put that replaces a file makes
// a new one (a new inode) with a later ctime, so the notice of the
// create before it is older than the entry its reply installed.
func older(a, b zx.Dir) bool {
	if b == nil {
		return false
	}
	ca, cb := a.Int(zx.ACtime), b.Int(zx.ACtime)
	return ca > 0 && cb > 0 && ca < cb
}

// unlinked notes that the name p, whose entry was old (nil: none cached),
// went or was replaced, and adds the invalidations to report for the
// other names of the file it named: their link count dropped. When the
// cache does not know what p named, that is any cached entry with nlink
// over 1 (link.go).
func (c *Cache) unlinked(p string, old *entry, cbs []inval) []inval {
	var qs []string
	switch {
	case old != nil && old.d != nil:
		// A directory: the files below it are dropped with it, and
		// drop makes their other names stale.
		qs = c.staleLinks(old.d, p)
	case old == nil:
		if pe, ok := c.listed(zx.Parent(p)); ok && !pe.kids[path.Base(p)] {
			return cbs // p did not exist
		}
		qs = c.staleMulti()
	}
	for _, q := range qs {
		cbs = append(cbs, inval{q, InvalAttr})
	}
	return cbs
}

// apply applies a change notice to the cache and returns the
// invalidations to report. c.mu is held.
func (c *Cache) apply(ev zx.Event) []inval {
	p := ev.Dir.Path()
	if ev.Kind == zx.Overflow {
		// Also what a re-established connection says: notices may have
		// been missed, and written-back data may be waiting to be sent.
		if c.wb != nil {
			go c.wb.Retry()
		}
		c.record(zx.Overflow, false, "/")
		c.dropAll()
		c.stats.Invalidations++
		return []inval{{"/", InvalAll}}
	}
	if p == "" {
		return nil
	}
	if p, err := zx.CleanPath(p); err != nil || p != ev.Dir.Path() {
		return nil
	}
	old := c.ents[p]
	if ev.Kind == zx.Created && old != nil && old.d != nil && old.d.Type() == ev.Dir.Type() && old.d[zx.AIno] != "" && old.d[zx.AIno] == ev.Dir[zx.AIno] {
		// The name names the file the cache has (the notice of our
		// own create, stat'ed by the server after later changes, such
		// as files made in a new directory): only its attributes may
		// have changed. Its listing stays, and the kernel's entry.
		ev.Kind = zx.Changed
	}
	switch ev.Kind {
	case zx.Created, zx.Changed:
		if old != nil && sameEntry(old.d, ev.Dir) {
			return nil // our own change, already cached
		}
		if old != nil && older(ev.Dir, old.d) {
			return nil // a change before the one cached (notices lag replies)
		}
	case zx.Removed:
		if old != nil && old.d == nil {
			return nil
		}
	}
	c.stats.Invalidations++
	// Notices only ever drop what is cached: one may describe a state
	// older than a reply already installed (notices and replies travel on
	// different streams), so installing it could go back in time.
	var cbs []inval
	switch ev.Kind {
	case zx.Created:
		c.record(ev.Kind, false, p)
		c.forget(p)
		for _, q := range c.staleLinks(ev.Dir, p) {
			cbs = append(cbs, inval{q, InvalAttr}) // its link count
		}
		if pe := c.ents[zx.Parent(p)]; pe != nil && pe.kids != nil {
			pe.kids[path.Base(p)] = true // its entry is missing: a lookup misses
		}
		cbs = append(cbs, inval{p, InvalEntry}, inval{zx.Parent(p), InvalAttr})
	case zx.Changed:
		c.record(ev.Kind, false, p)
		for _, q := range c.staleLinks(ev.Dir, p) {
			cbs = append(cbs, inval{q, InvalAttr | InvalData})
		}
		what := InvalAttr
		if old == nil || old.d == nil || old.d[zx.ASize] != ev.Dir[zx.ASize] || old.d[zx.AMtime] != ev.Dir[zx.AMtime] || old.d.Type() != ev.Dir.Type() {
			what |= InvalData
		}
		if old != nil && old.d != nil && old.d.Type() != ev.Dir.Type() {
			what |= InvalEntry
			c.forget(p)
		} else if old != nil {
			old.stale = true
		}
		cbs = append(cbs, inval{p, what})
	case zx.Removed:
		c.record(ev.Kind, false, p)
		cbs = c.unlinked(p, old, cbs)
		c.forget(p)
		cbs = append(cbs, inval{p, InvalEntry}, inval{zx.Parent(p), InvalAttr})
	case zx.Moved:
		from, err := zx.CleanPath(ev.From)
		if err != nil {
			from = p
		}
		c.record(ev.Kind, false, from, p)
		cbs = c.unlinked(p, old, cbs) // a file it replaced lost a name
		c.forget(from)
		c.forget(p)
		for _, q := range c.staleLinks(ev.Dir, p) {
			cbs = append(cbs, inval{q, InvalAttr}) // its ctime
		}
		if pe := c.ents[zx.Parent(p)]; pe != nil && pe.kids != nil {
			pe.kids[path.Base(p)] = true
		}
		cbs = append(cbs, inval{from, InvalEntry}, inval{p, InvalEntry},
			inval{zx.Parent(from), InvalAttr}, inval{zx.Parent(p), InvalAttr})
	default:
		c.record(zx.Overflow, false, "/")
		c.dropAll()
		return []inval{{"/", InvalAll}}
	}
	return cbs
}
