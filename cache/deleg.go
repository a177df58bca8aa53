package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/zxfs/zx"
)

// Delegations the cache holds from its remote (docs/design.md,
// "Delegations"). The mount asks for one (Delegate) on a directory or file
// it has just made; while one covers a path (Delegated), the mount answers
// closes and changes there once they are in the write-back journal,
// without waiting for the server. A recall from the server takes the
// delegation away at once (so no new change is answered locally), waits
// for the changes being journaled under it, sends again what waits for
// the link, and gives it back: the server serves the other client once
// everything sent before the return is applied.
//
// Lock order: delegs.mu, then a held's mu (never the other way); neither
// is held across a request.
type delegs struct {
	c     *Cache
	d     zx.Delegator
	owner string
	// granted and lost, if set, are told of each delegation granted,
	// and given up or refused (SetDelegationHooks), never with a lock
	// held.
	granted, lost func(p string)

	mu      sync.Mutex
	held    map[string]*held // by path
	asking  map[string]bool
	up      bool          // the recalls stream is in place
	readyc  chan struct{} // closed once it first was (readied)
	readied bool
	grants  int64
	refused int64
	recalls int64
	// notBefore: paths not to ask for again before then (refused,
	// or recalled: another client uses them).
	notBefore map[string]time.Time
}

// askAgain is how long the cache waits before it asks again for a
// delegation that was refused or recalled.
const askAgain = 10 * time.Second

// held is one delegation. Changes made under it hold mu for reading while
// they are journaled and issued; a recall takes it for writing, so that
// every change answered under the delegation is on its way before the
// delegation is given back.
type held struct {
	mu   sync.RWMutex
	gone bool
}

// ownerFile is the file of the journal's directory that keeps the
// owner id of the mount's delegations: a remount after a crash names the
// same owner, and may find its delegations kept within their lease.
const ownerFile = "owner"

// ownerID returns the owner id kept in the journal directory dir, making
// one the first time.
func ownerID(dir string) (string, error) {
	f := filepath.Join(dir, ownerFile)
	if b, err := os.ReadFile(f); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var r [16]byte
	rand.Read(r[:])
	id := hex.EncodeToString(r[:])
	tmp := f + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, f); err != nil {
		return "", err
	}
	return id, nil
}

// startDelegs starts taking delegations from the remote, if it can give
// them and the cache journals (a change answered under a delegation must
// survive a crash of the client before the server has it).
func (c *Cache) startDelegs() {
	d, ok := c.remote.(zx.Delegator)
	if !ok || c.wb == nil || !c.opts.Delegate {
		return
	}
	owner, err := ownerID(c.opts.Journal)
	if err != nil {
		c.log.Warn("cache: no delegations: "+err.Error(), "journal", c.opts.Journal)
		return
	}
	ds := &delegs{c: c, d: d, owner: owner, held: make(map[string]*held), asking: make(map[string]bool), readyc: make(chan struct{}), notBefore: make(map[string]time.Time)}
	c.dl = ds
	c.wb.mu.Lock()
	c.wb.reclaim = ds.reclaim
	c.wb.mu.Unlock()
	go ds.loop()
}

// reclaim asks again for the delegation of p, that journal records of an
// earlier session were made under, once the recalls stream is up; if
// granted, the cache holds it while they are replayed.
func (ds *delegs) reclaim(ctx context.Context, p string) zx.Grant {
	select {
	case <-ds.readyc:
	case <-ctx.Done():
		return zx.Grant{Err: zx.Errorf("delegate", p, ctx.Err())}
	}
	g := <-ds.d.Delegate(ctx, p)
	if g.Err == nil {
		ds.mu.Lock()
		if ds.held[p] == nil {
			ds.held[p] = &held{}
		}
		ds.mu.Unlock()
	}
	return g
}

// loop takes the recalls until the cache closes.
func (ds *delegs) loop() {
	ctx := ds.c.ctx
	for r := range ds.d.Recalls(ctx, ds.owner) {
		switch {
		case r.Err != nil:
			if zx.KindOf(r.Err) != zx.ErrNotSupp && ctx.Err() == nil {
				ds.c.log.Warn("cache: delegations end", "err", r.Err)
			}
			ds.dropAll()
			return
		case r.Ready:
			ds.mu.Lock()
			again := ds.readied // a second Ready: the stream was opened again
			if !ds.readied {
				close(ds.readyc)
				ds.readied = true
			}
			ds.up = true
			var paths []string
			for p := range ds.held {
				paths = append(paths, p)
			}
			ds.mu.Unlock()
			if !again || len(paths) == 0 {
				continue
			}
			// Back after a lost connection: what the server still
			// holds for us is ours again; what it revoked is not.
			for _, p := range paths {
				go ds.confirm(p)
			}
		default:
			go ds.recall(r.Path)
		}
	}
}

// confirm asks again for a delegation held before the connection was
// lost, and gives it up if the server no longer grants it.
func (ds *delegs) confirm(p string) {
	ctx, cancel := context.WithTimeout(ds.c.ctx, time.Minute)
	defer cancel()
	g := <-ds.d.Delegate(ctx, p)
	if g.Err == nil && g.Held {
		return
	}
	// Revoked meanwhile, or forgotten by a server that restarted: it is
	// not ours any more (a grant made now is given back: it would not
	// cover what happened meanwhile), and not asked for again for a
	// while (other clients may be coming back too).
	ds.mu.Lock()
	ds.notBefore[p] = time.Now().Add(askAgain)
	ds.mu.Unlock()
	ds.drop(p)
	if g.Err == nil {
		ds.c.wb.Retry()
		<-ds.d.Return(ctx, p)
	}
}

// recall gives the delegation of p back.
func (ds *delegs) recall(p string) {
	ds.mu.Lock()
	ds.recalls++
	ds.notBefore[p] = time.Now().Add(askAgain)
	ds.mu.Unlock()
	ds.drop(p)
	// What waits for the link is sent again first; then the return,
	// which the server applies after everything sent before it.
	ds.c.wb.Retry()
	ctx, cancel := context.WithTimeout(ds.c.ctx, time.Minute)
	defer cancel()
	if err := <-ds.d.Return(ctx, p); err != nil && ctx.Err() == nil {
		ds.c.log.Warn("cache: giving a delegation back", "path", p, "err", err)
	}
}

// drop forgets the delegation of p, once the changes being made under it
// are journaled and issued.
func (ds *delegs) drop(p string) {
	ds.mu.Lock()
	h := ds.held[p]
	delete(ds.held, p)
	lost := ds.lost
	ds.mu.Unlock()
	if h != nil {
		h.mu.Lock()
		h.gone = true
		h.mu.Unlock()
	}
	if lost != nil {
		lost(p)
	}
}

// SetDelegationHooks makes the cache call granted with the path of each
// delegation it is granted, and lost with that of each it gives up
// (recalled, revoked, refused, or the cache closing): what the mount
// knew of the subtree only because nobody else could change it no longer
// holds.
func (c *Cache) SetDelegationHooks(granted, lost func(p string)) {
	if ds := c.dl; ds != nil {
		ds.mu.Lock()
		ds.granted, ds.lost = granted, lost
		ds.mu.Unlock()
	}
}

// Delegating reports whether a delegation covers p or was asked for p or
// a directory above it and not yet answered.
func (c *Cache) Delegating(p string) bool {
	ds := c.dl
	if ds == nil {
		return false
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.coveredLocked(p) != nil {
		return true
	}
	for q := p; ; q = zx.Parent(q) {
		if ds.asking[q] {
			return true
		}
		if q == "/" {
			return false
		}
	}
}

func (ds *delegs) dropAll() {
	ds.mu.Lock()
	var ps []string
	for p := range ds.held {
		ps = append(ps, p)
	}
	ds.up = false
	ds.mu.Unlock()
	for _, p := range ps {
		ds.drop(p)
	}
}

// Delegate asks, in the background, for a delegation of p (a directory or
// file just made through the cache). Nothing waits for the answer: until
// it is granted, changes under p are made as without.
func (c *Cache) Delegate(p string) {
	ds := c.dl
	if ds == nil {
		return
	}
	ds.mu.Lock()
	if !ds.up || ds.asking[p] || ds.coveredLocked(p) != nil || time.Now().Before(ds.notBefore[p]) {
		ds.mu.Unlock()
		return
	}
	ds.asking[p] = true
	ds.mu.Unlock()
	gc := ds.d.Delegate(zx.WithBackground(c.ctx), p) // nobody waits for it
	go func() {
		err := (<-gc).Err
		ds.mu.Lock()
		delete(ds.asking, p)
		if err != nil {
			ds.refused++
			// Not asked again for a while: someone else uses it.
			if len(ds.notBefore) > 4096 {
				clear(ds.notBefore)
			}
			ds.notBefore[p] = time.Now().Add(askAgain)
			lost := ds.lost
			ds.mu.Unlock()
			if lost != nil {
				lost(p)
			}
			return
		}
		ds.grants++
		ds.held[p] = &held{}
		granted := ds.granted
		ds.mu.Unlock()
		if granted != nil {
			granted(p)
		}
	}()
}

// coveredLocked returns the delegation that covers p, or nil. ds.mu is
// held.
func (ds *delegs) coveredLocked(p string) *held {
	for q := p; ; q = zx.Parent(q) {
		if h := ds.held[q]; h != nil {
			return h
		}
		if q == "/" {
			return nil
		}
	}
}

// Delegated reports whether a delegation covers p: then a change of p may
// be answered once journaled, without waiting for the server. The caller
// journals and issues the change, then calls release; until then a recall
// waits.
func (c *Cache) Delegated(p string) (release func(), ok bool) {
	ds := c.dl
	if ds == nil {
		return nil, false
	}
	ds.mu.Lock()
	h := ds.coveredLocked(p)
	ds.mu.Unlock()
	if h == nil {
		return nil, false
	}
	h.mu.RLock()
	if h.gone {
		h.mu.RUnlock()
		return nil, false
	}
	return h.mu.RUnlock, true
}

// DelegationOf returns the path of the delegation that covers p, or "".
func (c *Cache) DelegationOf(p string) string {
	ds := c.dl
	if ds == nil {
		return ""
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for q := p; ; q = zx.Parent(q) {
		if ds.held[q] != nil {
			return q
		}
		if q == "/" {
			return ""
		}
	}
}

// DelegStats says what delegations the cache holds and did.
type DelegStats struct {
	Held                      []string
	Granted, Refused, Recalls int64
}

// Delegations returns what the cache holds and did (nil without
// delegations).
func (c *Cache) Delegations() *DelegStats {
	ds := c.dl
	if ds == nil {
		return nil
	}
	ds.mu.Lock()
	defer ds.mu.Unlock()
	s := &DelegStats{Granted: ds.grants, Refused: ds.refused, Recalls: ds.recalls}
	for p := range ds.held {
		s.Held = append(s.Held, p)
	}
	return s
}

// returnAll gives every delegation back (the cache closes), after what
// waits for the link is sent again, bounded by ctx.
func (ds *delegs) returnAll(ctx context.Context) {
	ds.mu.Lock()
	var ps []string
	for p := range ds.held {
		ps = append(ps, p)
	}
	ds.mu.Unlock()
	if len(ps) == 0 {
		return
	}
	for _, p := range ps {
		ds.drop(p)
	}
	ds.c.wb.Retry()
	var ecs []<-chan error
	for _, p := range ps {
		ecs = append(ecs, ds.d.Return(ctx, p))
	}
	for _, ec := range ecs {
		<-ec
	}
}
