package mount_test

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDirLinks: a directory's link count follows the directories made
// in it, removed from it and renamed into and out of it, also while the
// directory's own creation is in flight (its attributes then come from
// what the mount made of it): mkdir d, mkdir d/f, stat d gave 2 links
// (TestDifferential, ZX_SEED=15382854698176646224).
func TestDirLinks(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			forBackendsOpts(t, mode.opts, func(t *testing.T, e *env, disk string) {
				step := 0
				nlink := func(p string, want uint64) {
					t.Helper()
					var st unix.Stat_t
					must(t, unix.Stat(e.p(p), &st))
					if st.Nlink != want {
						t.Errorf("step %d: %s has %d links, want %d", step, p, st.Nlink, want)
					}
				}
				do := func(err error) {
					t.Helper()
					step++
					must(t, err)
				}
				do(os.Mkdir(e.p("t"), 0o755))
				do(os.Mkdir(e.p("t/a"), 0o755))
				do(os.Mkdir(e.p("t/a/f"), 0o755))
				nlink("t/a", 3)
				do(os.Mkdir(e.p("t/a/g"), 0o755))
				nlink("t/a", 4)
				do(os.WriteFile(e.p("t/a/file"), nil, 0o644))
				nlink("t/a", 4)
				do(os.Remove(e.p("t/a/g")))
				nlink("t/a", 3)
				do(os.Mkdir(e.p("t/b"), 0o755))
				do(os.Rename(e.p("t/a/f"), e.p("t/b/f")))
				nlink("t/a", 2)
				nlink("t/b", 3)
				do(os.Rename(e.p("t/b/f"), e.p("t/b/f2")))
				nlink("t/b", 3)
				do(e.m.Sync(t.Context()))
				nlink("t/a", 2)
				nlink("t/b", 3)
				nlink("t", 4)
			})
		})
	}
}
