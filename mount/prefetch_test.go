package mount_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/lfs"
)

// walkTree makes under dir 1+6+36+216 = 259 directories, with two files
// in each leaf and one in each other directory.
func walkTree(t *testing.T, dir string) {
	t.Helper()
	var mk func(d string, depth int)
	mk = func(d string, depth int) {
		must(t, os.WriteFile(filepath.Join(d, "f0"), []byte(d), 0o644))
		if depth == 3 {
			must(t, os.WriteFile(filepath.Join(d, "f1"), []byte(d), 0o644))
			return
		}
		for i := range 6 {
			sub := filepath.Join(d, fmt.Sprintf("d%d", i))
			must(t, os.Mkdir(sub, 0o755))
			mk(sub, depth+1)
		}
	}
	mk(dir, 0)
}

// TestPrefetchWalk runs find and ls -lR over a cold tree of 259
// directories on a new mount over a 20 ms link: the first listing of the
// root (the mount's own, when it starts) starts a prefetch of the whole
// subtree, and the walk costs no round trip per directory (sshfs pays
// two). Round trips are counted from the connection's start: the mount's
// stat and listing of the root, and, for find, a statfs.
func TestPrefetchWalk(t *testing.T) {
	need(t, "find", "ls")
	srvDir := t.TempDir()
	walkTree(t, srvDir)
	tr, err := lfs.New(srvDir, lfs.Options{})
	must(t, err)
	t.Cleanup(func() { tr.Close() })
	addr := serve(t, tr)
	rel := func(out, root string) []string {
		var ps []string
		for l := range strings.Lines(out) {
			ps = append(ps, strings.TrimPrefix(strings.TrimSpace(l), root))
		}
		slices.Sort(ps)
		return ps
	}
	want := rel(run(t, "", nil, "find", srvDir), srvDir)
	if len(want) != 734 {
		t.Fatalf("find on the server's disk: %d entries, want 734", len(want))
	}
	for _, tc := range []struct {
		name     string
		copts    cache.Options
		find, ls int64
	}{
		// Waits not bounded in time (PrefetchWait), so that the counts
		// do not depend on the machine's load.
		{"whole", cache.Options{PrefetchWait: -1}, 3, 2},
		// Cut off every 150 entries, and resumed where it stopped:
		// about one round trip per 150 entries.
		{"cut", cache.Options{PrefetchEntries: 150, PrefetchWait: -1}, 9, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mnt(t, setup{addr: addr, rtt: 20 * time.Millisecond, copts: tc.copts})
			if out := run(t, "", nil, "find", e.dir, "-name", "missing"); out != "" {
				t.Fatalf("find -name missing: %q", out)
			}
			n := e.conn.Stats().RoundTrips
			t.Logf("find -name missing: %d round trips; cache %+v", n, e.c.Stats())
			if n > tc.find {
				t.Errorf("mount, find -name missing over 259 cold directories: %d round trips, want at most %d", n, tc.find)
			}
			// Everything is there, as on the server's disk.
			if got := rel(run(t, "", nil, "find", e.dir), e.dir); !slices.Equal(got, want) {
				t.Errorf("find on the mount: %d entries, want %d", len(got), len(want))
			}
			// And cached: walking again costs nothing (ls, which does
			// not statfs as find does; the mount keeps that a second).
			before := e.conn.Stats().RoundTrips
			run(t, "", nil, "ls", "-lR", e.dir)
			if n := e.conn.Stats().RoundTrips - before; n != 0 {
				t.Errorf("ls -lR after find: %d round trips, want 0", n)
			}
		})
		t.Run(tc.name+"-ls", func(t *testing.T) {
			e := mnt(t, setup{addr: addr, rtt: 20 * time.Millisecond, copts: tc.copts})
			out := run(t, "", nil, "ls", "-lR", e.dir)
			n := e.conn.Stats().RoundTrips
			t.Logf("ls -lR: %d round trips; cache %+v", n, e.c.Stats())
			if n > tc.ls {
				t.Errorf("mount, ls -lR over 259 cold directories: %d round trips, want at most %d", n, tc.ls)
			}
			wantLs := run(t, "", nil, "ls", "-lR", srvDir)
			if strings.Count(out, "\n") != strings.Count(wantLs, "\n") || strings.Count(out, " f1\n") != 216 {
				t.Errorf("ls -lR on the mount: %d lines (%d f1), on the server's disk %d", strings.Count(out, "\n"), strings.Count(out, " f1\n"), strings.Count(wantLs, "\n"))
			}
		})
	}
}
