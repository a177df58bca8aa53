package cache

// SetSiblingHook sets a function called (without the cache's lock)
// before a file a sibling stream brought is installed. Set it before the
// cache is used.
func SetSiblingHook(c *Cache, f func(path string)) { c.sib.beforeInstall = f }
