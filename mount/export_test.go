package mount

// SetReleaseHooks sets the test hooks that order a release against a
// truncation (see testHooks).
func SetReleaseHooks(m *FS, releasing, released, truncating func(p string)) {
	m.hooks.Store(&testHooks{releasing: releasing, released: released, truncating: truncating})
}

// SetStatHook sets the test hook run once a stat of Getattr or Open is
// answered, before the mount uses the reply (see testHooks), keeping the
// release hooks.
func SetStatHook(m *FS, statted func(p string)) {
	th := &testHooks{}
	if old := m.hooks.Load(); old != nil {
		*th = *old
	}
	th.statted = statted
	m.hooks.Store(th)
}

// SetLookupHooks sets the test hooks run once the stat of a Lookup is
// answered, before the mount uses it (looked), and before the mount
// drops the kernel's attributes of a node after its writes were answered
// (refreshing), keeping the others (see testHooks).
func SetLookupHooks(m *FS, looked, refreshing func(p string)) {
	th := &testHooks{}
	if old := m.hooks.Load(); old != nil {
		*th = *old
	}
	th.looked, th.refreshing = looked, refreshing
	m.hooks.Store(th)
}
