package mount

// SetReleaseHooks sets the test hooks that order a release against a
// truncation (see testHooks).
func SetReleaseHooks(m *FS, releasing, released, truncating func(p string)) {
	m.hooks.Store(&testHooks{releasing, released, truncating})
}
