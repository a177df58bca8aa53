package mount_test

import (
	"os"
	"testing"
	"time"
)

// TestWatchLostCounted: when the cache's watch is lost (the link dies and
// the client does not reconnect), the cache drops everything it holds and
// the mount drops the kernel's copies; that is an invalidation like an
// overflow notice's, and the cache's Invalidations (shown in /Ctl) must
// count it. It did not: only notices were counted.
func TestWatchLostCounted(t *testing.T) {
	e := mnt(t, setup{rtt: 5 * time.Millisecond})
	must(t, os.WriteFile(e.p("f"), []byte("data"), 0o644))
	if _, err := os.Stat(e.p("f")); err != nil {
		t.Fatal(err)
	}
	if !e.c.Watching() {
		t.Fatal("the cache has no live watch after mounting")
	}
	before := e.c.Stats().Invalidations
	e.proxy.Cut()
	deadline := time.Now().Add(10 * time.Second)
	for e.c.Watching() {
		if time.Now().After(deadline) {
			t.Fatal("the cache still says it watches 10 s after the link was cut")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := e.c.Stats().Invalidations; got != before+1 {
		t.Errorf("invalidations: %d after the watch was lost, want %d (the drop of everything counts once)", got, before+1)
	}
}
