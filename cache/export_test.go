package cache

import "time"

// SetSiblingHook sets a function called (without the cache's lock)
// before a file a sibling stream brought is installed. Set it before the
// cache is used.
func SetSiblingHook(c *Cache, f func(path string)) { c.sib.beforeInstall = f }

// SetJournalSyncHook sets a function called with the name of each file or
// directory the write-back journal's group commit fsyncs, after the
// fsync. Set it before the first Write.
func SetJournalSyncHook(w *WriteBack, f func(name string)) { w.j.onSync = f }

// CommitJournal runs the journal's group commit now.
func CommitJournal(w *WriteBack) error { return w.j.commit() }

// SetPrefetchStall sets how long a request waits for a prefetch that
// makes no progress (prefetchStall). Set it before the cache is used.
func SetPrefetchStall(c *Cache, d time.Duration) { c.pfStall = d }
