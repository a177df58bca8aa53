package lfs

import (
	"sync"
	"time"
)

// xattrMemo remembers which inodes were seen to have no extended
// attributes, and at which ctime, so that a walk need not ask again with
// listxattrat(2) for each entry: on this kind of machine that system call
// costs as much as the statx a walk makes anyway (about 1.3 µs), and most
// files have no extended attributes.
//
// It is exact, not a cache with a lifetime, because setting or removing
// an extended attribute sets the inode's ctime to the current time. An
// inode is remembered only when its ctime is older than the moment the
// listing started by more than the kernel's timestamp granularity (the
// coarse clock lags by at most a tick, a few milliseconds; racyMargin is
// far more). Any later change then gets a ctime greater than the one
// remembered, so a statx that returns the remembered ctime proves that no
// extended attribute was set since: the same reasoning as git's "racily
// clean" index entries. A new inode that reuses a number was created after
// the listing, so its ctime differs too. A step of the system clock
// backwards by less than racyMargin is covered by the margin; the memo
// notices a larger one (the wall clock then falls behind the monotonic
// one) and starts over.
type xattrMemo struct {
	mu sync.Mutex
	// For each device, for each inode, the ctime (ns) at which it was
	// seen without extended attributes. (Maps keyed by integers have a
	// faster path than those keyed by a struct: this is on the path of
	// every entry a find streams.)
	m       map[uint64]map[uint64]int64
	n       int              // inodes in m
	lastDev uint64           // the device of last
	last    map[uint64]int64 // m[lastDev], when not nil

	// When the memo started, on both clocks: the wall clock stepped back
	// when it has since advanced less than the monotonic one.
	baseWall int64     // ns since the epoch
	baseMono time.Time // with its monotonic reading

	hits, asked int64 // entries the memo vouched for, entries it did not
}

type inodeKey struct {
	dev uint64 // major<<32 | minor
	ino uint64
}

// racyMargin is how much older than the listing a ctime must be for the
// inode to be remembered.
const racyMargin = 100 * time.Millisecond

// maxMemo bounds the inodes remembered (about 40 bytes each); past it the
// memo starts over.
const maxMemo = 1 << 20

// check forgets everything when the wall clock stepped back by more than
// half of racyMargin since the memo started. mu is held.
func (x *xattrMemo) check(now time.Time) {
	if x.baseMono.IsZero() {
		x.baseWall, x.baseMono = now.UnixNano(), now
		return
	}
	wall := time.Duration(now.UnixNano() - x.baseWall)
	if wall < now.Sub(x.baseMono)-racyMargin/2 {
		x.forget()
		x.baseWall, x.baseMono = now.UnixNano(), now
	}
}

func (x *xattrMemo) forget() {
	x.m, x.n, x.last = nil, 0, nil
}

// inodes returns the map of the inodes of device dev, nil if none is
// remembered and !add. mu is held.
func (x *xattrMemo) inodes(dev uint64, add bool) map[uint64]int64 {
	if x.last != nil && x.lastDev == dev {
		return x.last
	}
	m := x.m[dev]
	if m == nil {
		if !add {
			return nil
		}
		if x.m == nil {
			x.m = make(map[uint64]map[uint64]int64)
		}
		m = make(map[uint64]int64)
		x.m[dev] = m
	}
	x.lastDev, x.last = dev, m
	return m
}

// bare reports whether the inode was seen without extended attributes at
// this ctime. mu is held.
func (x *xattrMemo) bare(k inodeKey, ctime int64) bool {
	c, ok := x.inodes(k.dev, false)[k.ino]
	return ok && c == ctime
}

// remember records that the inode, at ctime, had no extended attributes
// when listed at or after listed. mu is held.
func (x *xattrMemo) remember(k inodeKey, ctime int64, listed time.Time) {
	if ctime >= listed.Add(-racyMargin).UnixNano() {
		return
	}
	if x.n >= maxMemo {
		x.forget()
	}
	m := x.inodes(k.dev, true)
	if _, ok := m[k.ino]; !ok {
		x.n++
	}
	m[k.ino] = ctime
}
