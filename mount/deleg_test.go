package mount_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/wan"
)

// TestDelegatedUntar: in the default mode, a directory the mount makes is
// delegated to it, and unpacking files into it waits for a constant number
// of round trips, not one per file (close returns once the file is
// journaled). Another mount that reads the files right after (no sleep,
// no polling) sees every byte: its lookups make the server recall the
// delegation, which the holder gives back after sending what it had.
func TestDelegatedUntar(t *testing.T) {
	const files = 30
	when := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	e := wbMount(t, wbSetup{copts: cache.Options{Journal: t.TempDir(), Delegate: true}})
	other := mnt(t, setup{addr: e.addr})
	must(t, os.WriteFile(e.p("first"), nil, 0o644)) // a first change, waited for
	must(t, e.m.Sync(context.Background()))
	waitFor(t, "the recalls stream", func() bool { return e.c.Delegations() != nil })
	e.proxy.SetConfig(wan.Config{RTT: 100 * time.Millisecond})
	rt := e.conn.Stats().RoundTrips
	untar(t, e.p("x"), files, when)
	n := e.conn.Stats().RoundTrips - rt
	t.Logf("tar -x of a directory and %d files at 100 ms RTT under a delegation: %d round trips", files, n)
	if n > 5 {
		t.Errorf("took %d round trips, want a constant (at most 5), not one per file", n)
	}
	if ds := e.c.Delegations(); ds == nil || len(ds.Held) != 1 || ds.Held[0] != "/x" {
		t.Fatalf("delegations %+v, want /x held", ds)
	}
	// The other mount reads at once what close returned for.
	for i := range files {
		name := fmt.Sprintf("x/f%d", i)
		if got := readFile(t, other.p(name)); got != fmt.Sprintf("data of f%d", i) {
			t.Fatalf("the other mount reads %s as %q right after the holder's close", name, got)
		}
	}
	if ds := e.c.Delegations(); ds.Recalls != 1 || len(ds.Held) != 0 {
		t.Errorf("delegations after the other mount looked: %+v, want /x recalled", ds)
	}
	checkUntar(t, filepath.Join(e.srvDir, "x"), files, when)
	// Given back, the holder's changes wait for the server again.
	rt = e.conn.Stats().RoundTrips
	must(t, os.WriteFile(e.p("x/after"), []byte("after the recall"), 0o644))
	if n := e.conn.Stats().RoundTrips - rt; n < 1 {
		t.Errorf("a close after the recall waited %d round trips, want at least 1", n)
	}
	if got := readFile(t, other.p("x/after")); got != "after the recall" {
		t.Errorf("the other mount reads %q", got)
	}
}
