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
