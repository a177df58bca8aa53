package lfs

import (
	"sync"
	"time"
)

// linkMemo remembers the targets of symbolic links by inode and ctime, so
// that an entry does not read a link again each time it is listed or
// stat'ed: readlink(2) sets the link's atime on a relatime disk, and an
// entry must not disturb the times it reports (after a utimensat of the
// link itself, the next readlink would move its atime to now).
//
// A link's target never changes while its inode lives; the ctime tells a
// new link that reuses an inode number from the one remembered, as in
// xattrMemo: a target read by readlink is remembered only when the ctime
// is older than the read by more than racyMargin, so any later link with
// that number has a greater ctime. A target the FS itself just set or
// kept (a symlink it created, one whose times or owner it changed) is
// remembered at the ctime it then has, after checking that the inode is
// still the one it acted on.
type linkMemo struct {
	mu sync.Mutex
	m  map[inodeKey]linkSeen
}

type linkSeen struct {
	ctime  int64
	target string
}

// maxLinks bounds the links remembered; past it the memo starts over.
const maxLinks = 1 << 16

// target returns the remembered target of the link at ctime.
func (l *linkMemo) target(k inodeKey, ctime int64) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s, ok := l.m[k]
	if !ok || s.ctime != ctime {
		return "", false
	}
	return s.target, true
}

// read records a target read by readlink, before read, for the inode at
// ctime.
func (l *linkMemo) read(k inodeKey, ctime int64, target string, read time.Time) {
	if ctime >= read.Add(-racyMargin).UnixNano() {
		return
	}
	l.set(k, ctime, target)
}

// set records the target of the inode at ctime.
func (l *linkMemo) set(k inodeKey, ctime int64, target string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || len(l.m) >= maxLinks {
		l.m = make(map[inodeKey]linkSeen)
	}
	l.m[k] = linkSeen{ctime, target}
}
