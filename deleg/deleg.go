// Package deleg is a server's table of delegations: promises to one
// client (an owner) that nobody else will look at a path without the
// server first recalling it from that client (docs/design.md,
// "Delegations").
//
// The table decides grants, finds the delegations a request of another
// owner conflicts with, runs recalls and waits for their end, and revokes
// what a holder does not give back within the lease. It knows nothing of
// connections or the wire: a holder is an interface that can be asked to
// give a path back, and the server tells the table when a holder's
// connection comes and goes.
//
// Lock order: Table.mu only; Holder methods are never called with it held.
package deleg

import (
	"context"
	"sync"
	"time"

	"github.com/zxfs/zx"
)

// A Holder is the connection through which an owner holds its
// delegations.
type Holder interface {
	// Recall asks the holder to send what it has pending under path and
	// then give the delegation back (Table.Return). It must not block.
	Recall(tree, path string)
}

// Scope says which requests of other owners conflict with a delegation.
type Scope int

const (
	// Inside: a request on the path or below it (stat, get, put,
	// wstat, remove, link, sync).
	Inside Scope = iota
	// Walk: a request that reaches the whole subtree of its path (find,
	// findget, removeall, either end of a move): it conflicts with a
	// delegation on, below or above its path.
	Walk
)

// Config configures a Table.
type Config struct {
	// Lease is how long a delegation outlives its holder's connection,
	// or a recall the holder does not answer (default 15s).
	Lease time.Duration
	// Cooldown is how long after a recall caused by another owner the
	// path is not delegated again (default 2s): two clients taking
	// turns on one directory would otherwise recall each other's
	// delegations on every request.
	Cooldown time.Duration
	// Now returns the time (default time.Now): tests move it.
	Now func() time.Time
}

// A Deleg is a delegation.
type Deleg struct {
	Tree, Path, Owner string

	// Under Table.mu:
	holder    Holder        // nil while the owner's connection is lost
	lost      time.Time     // when the holder's connection was lost
	recalled  time.Time     // when a recall was sent (zero: none)
	done      chan struct{} // closed when returned or revoked
	revoked   bool
	returning bool
}

// Done is closed once the delegation was returned or revoked.
func (d *Deleg) Done() <-chan struct{} { return d.done }

// Stats counts what a table did.
type Stats struct {
	Held     int   // delegations held now
	Granted  int64 // grants
	Refused  int64 // requests for a delegation refused
	Recalls  int64 // recalls sent
	Returned int64 // delegations given back
	Revoked  int64 // delegations taken back for want of an answer
}

// Revocation is what a table keeps of a delegation it revoked, for its
// owner to learn when it comes back (Grant): the paths other owners
// changed under it since (Touched), or All when there were too many to
// keep.
type Revocation struct {
	Tree, Path, Owner string
	At                time.Time
	Touched           map[string]bool
	All               bool
}

// maxRevoked bounds the revocations kept; the oldest goes first.
// maxTouched bounds the paths kept for one revocation: past it, All.
const (
	maxRevoked = 1024
	maxTouched = 1000
)

// Table holds a server's delegations. It is safe for concurrent use.
type Table struct {
	cfg Config

	mu      sync.Mutex
	byTree  map[string]map[*Deleg]struct{}
	holders map[string]Holder    // by owner, while its connection is up
	cool    map[string]time.Time // tree+"\x00"+path: not delegated again before
	timers  map[*Deleg]*time.Timer
	revoked []*Revocation // oldest first
	st      Stats
}

// maxCool is how many cooling paths the table keeps before it forgets
// those whose cooldown is over.
const maxCool = 4096

// New returns an empty table.
func New(cfg Config) *Table {
	if cfg.Lease <= 0 {
		cfg.Lease = 15 * time.Second
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Table{cfg: cfg, byTree: make(map[string]map[*Deleg]struct{}),
		holders: make(map[string]Holder), cool: make(map[string]time.Time),
		timers: make(map[*Deleg]*time.Timer)}
}

// Lease returns the table's lease.
func (t *Table) Lease() time.Duration { return t.cfg.Lease }

// Attach notes that owner's connection is h: delegations the owner kept
// through a lost connection are held through h again, and recalls sent
// meanwhile are sent again.
func (t *Table) Attach(owner string, h Holder) {
	var again []*Deleg
	t.mu.Lock()
	t.holders[owner] = h
	for _, ds := range t.byTree {
		for d := range ds {
			if d.Owner != owner {
				continue
			}
			d.holder, d.lost = h, time.Time{}
			if tm := t.timers[d]; tm != nil && d.recalled.IsZero() {
				tm.Stop()
				delete(t.timers, d)
			}
			if !d.recalled.IsZero() {
				again = append(again, d)
			}
		}
	}
	t.mu.Unlock()
	for _, d := range again {
		h.Recall(d.Tree, d.Path)
	}
}

// Detach notes that h, owner's connection, is lost: its delegations are
// revoked unless the owner comes back within the lease.
func (t *Table) Detach(owner string, h Holder) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.holders[owner] != h {
		return
	}
	delete(t.holders, owner)
	now := t.cfg.Now()
	for _, ds := range t.byTree {
		for d := range ds {
			if d.Owner == owner && d.holder == h {
				d.holder, d.lost = nil, now
				t.armLocked(d)
			}
		}
	}
}

// armLocked starts d's lease timer, unless running. t.mu is held.
func (t *Table) armLocked(d *Deleg) {
	if t.timers[d] != nil {
		return
	}
	t.timers[d] = time.AfterFunc(t.cfg.Lease, func() { t.revoke(d) })
}

// Grant delegates path of tree to owner, whose connection is h, unless
// another owner holds a delegation that overlaps it or the path was
// recalled for another owner less than the cooldown ago. A delegation
// the owner already holds on path or above it covers path: Grant
// reports true and makes none.
//
// It also returns what it kept of the owner's revoked delegations on
// path or below it (nil if none), which it then forgets if the grant was
// made, and whether the owner held the delegation already.
func (t *Table) Grant(tree, path, owner string, h Holder) (ok, held bool, rv *Revocation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rv = t.revocationLocked(tree, path, owner)
	now := t.cfg.Now()
	if until, ok := t.cool[tree+"\x00"+path]; ok {
		if now.Before(until) {
			t.st.Refused++
			return false, false, rv
		}
		delete(t.cool, tree+"\x00"+path)
	}
	for d := range t.byTree[tree] {
		if !zx.Overlaps(d.Path, path) {
			continue
		}
		if d.Owner != owner {
			t.st.Refused++
			return false, false, rv
		}
		if d.recalled.IsZero() && (d.Path == path || zx.HasPrefix(path, d.Path)) {
			return true, true, nil
		}
	}
	t.forgetRevocationsLocked(tree, path, owner)
	t.holders[owner] = h
	d := &Deleg{Tree: tree, Path: path, Owner: owner, holder: h, done: make(chan struct{})}
	if t.byTree[tree] == nil {
		t.byTree[tree] = make(map[*Deleg]struct{})
	}
	t.byTree[tree][d] = struct{}{}
	t.st.Granted++
	return true, false, rv
}

// revocationLocked merges the owner's revocations on path or below it
// into one (nil if none). t.mu is held.
func (t *Table) revocationLocked(tree, path, owner string) *Revocation {
	var out *Revocation
	for _, r := range t.revoked {
		if r.Tree != tree || r.Owner != owner || !(r.Path == path || zx.HasPrefix(r.Path, path)) {
			continue
		}
		if out == nil {
			out = &Revocation{Tree: tree, Path: path, Owner: owner, At: r.At, Touched: make(map[string]bool)}
		}
		out.All = out.All || r.All
		for p := range r.Touched {
			out.Touched[p] = true
		}
	}
	return out
}

// forgetRevocationsLocked drops the owner's revocations on path or
// below it: it is told of them. t.mu is held.
func (t *Table) forgetRevocationsLocked(tree, path, owner string) {
	keep := t.revoked[:0]
	for _, r := range t.revoked {
		if r.Tree == tree && r.Owner == owner && (r.Path == path || zx.HasPrefix(r.Path, path)) {
			continue
		}
		keep = append(keep, r)
	}
	clear(t.revoked[len(keep):])
	t.revoked = keep
}

// Touch notes that a request of an owner (other than the revoked
// delegations' owners) changed paths of tree: revocations that cover
// them keep them, for their owners to learn.
func (t *Table) Touch(tree, owner string, paths ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.revoked {
		if r.Tree != tree || r.Owner == owner || r.All {
			continue
		}
		for _, p := range paths {
			if p == r.Path || zx.HasPrefix(p, r.Path) || zx.HasPrefix(r.Path, p) {
				if len(r.Touched) >= maxTouched {
					r.All, r.Touched = true, nil
					break
				}
				r.Touched[p] = true
			}
		}
	}
}

// Revocations reports whether the table keeps any revocation (so that
// a server need not call Touch for every write when it keeps none).
func (t *Table) Revocations() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.revoked) > 0
}

// Conflicts returns the delegations of owners other than owner that a
// request on the paths of tree, of scope s, must wait for.
func (t *Table) Conflicts(tree, owner string, s Scope, paths ...string) []*Deleg {
	t.mu.Lock()
	defer t.mu.Unlock()
	ds := t.byTree[tree]
	if len(ds) == 0 {
		return nil
	}
	var out []*Deleg
	for d := range ds {
		if d.Owner == owner && owner != "" {
			continue
		}
		for _, p := range paths {
			inside := p == d.Path || zx.HasPrefix(p, d.Path)
			if inside || s == Walk && zx.HasPrefix(d.Path, p) {
				out = append(out, d)
				break
			}
		}
	}
	return out
}

// Recall recalls the delegations ds (from Conflicts) and waits until each
// was returned or revoked, or ctx is done. A holder that does not answer
// within the lease loses the delegation.
func (t *Table) Recall(ctx context.Context, ds []*Deleg) error {
	type send struct {
		h Holder
		d *Deleg
	}
	var sends []send
	t.mu.Lock()
	now := t.cfg.Now()
	for _, d := range ds {
		if d.revoked || d.returning || !d.recalled.IsZero() {
			continue
		}
		d.recalled = now
		if len(t.cool) >= maxCool {
			for k, until := range t.cool {
				if !now.Before(until) {
					delete(t.cool, k)
				}
			}
		}
		t.cool[d.Tree+"\x00"+d.Path] = now.Add(t.cfg.Cooldown)
		t.st.Recalls++
		t.armLocked(d)
		if d.holder != nil {
			sends = append(sends, send{d.holder, d})
		}
	}
	t.mu.Unlock()
	for _, s := range sends {
		s.h.Recall(s.d.Tree, s.d.Path)
	}
	for _, d := range ds {
		select {
		case <-d.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Returning looks up owner's delegation on path of tree, which its holder
// is giving back: once the barrier behind the holder's changes is passed,
// Return ends it. It returns nil if there is none.
func (t *Table) Returning(tree, path, owner string) *Deleg {
	t.mu.Lock()
	defer t.mu.Unlock()
	for d := range t.byTree[tree] {
		if d.Path == path && d.Owner == owner && !d.revoked {
			d.returning = true
			return d
		}
	}
	return nil
}

// Return ends d: its holder has given it back, with everything it had
// pending applied.
func (t *Table) Return(d *Deleg) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.endLocked(d) {
		t.st.Returned++
	}
}

// revoke ends d for want of an answer within the lease.
func (t *Table) revoke(d *Deleg) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if d.returning {
		return // its barrier is on the way
	}
	if t.endLocked(d) {
		d.revoked = true
		t.st.Revoked++
		if len(t.revoked) >= maxRevoked {
			t.revoked[0] = nil
			t.revoked = t.revoked[1:]
		}
		t.revoked = append(t.revoked, &Revocation{Tree: d.Tree, Path: d.Path, Owner: d.Owner, At: t.cfg.Now(), Touched: make(map[string]bool)})
	}
}

// endLocked removes d, waking those who wait for it. t.mu is held.
func (t *Table) endLocked(d *Deleg) bool {
	ds := t.byTree[d.Tree]
	if _, ok := ds[d]; !ok {
		return false
	}
	delete(ds, d)
	if len(ds) == 0 {
		delete(t.byTree, d.Tree)
	}
	if tm := t.timers[d]; tm != nil {
		tm.Stop()
		delete(t.timers, d)
	}
	close(d.done)
	return true
}

// Revoked reports whether d was taken back for want of an answer.
func (t *Table) Revoked(d *Deleg) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return d.revoked
}

// Held returns owner's delegations, for tests and /Ctl.
func (t *Table) Held(owner string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ps []string
	for _, ds := range t.byTree {
		for d := range ds {
			if d.Owner == owner {
				ps = append(ps, d.Tree+":"+d.Path)
			}
		}
	}
	return ps
}

// Stats returns the table's counters.
func (t *Table) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.st
	for _, ds := range t.byTree {
		s.Held += len(ds)
	}
	return s
}
