package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFUSESuiteSmall runs every workload of the FUSE suite on a tiny tree
// at RTT 0 with zx only: the fixtures are made, each program runs on a
// real zx mount, its outcome is checked (the copy is gone, the archive is
// extracted whole, the C program builds and runs, the file written is
// intact), round trips are counted, and the report is written. It checks
// the harness, not speed.
func TestFUSESuiteSmall(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("SKIPPED: needs root to mount FUSE (CI runs it as root)")
	}
	if err := checkFUSE(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	tree := t.TempDir()
	for _, d := range []string{"a/x", "a/y", "b", "c/z"} {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ {
			data := strings.Repeat(fmt.Sprintf("%s line %d\n", d, i), 50*(i+1))
			if err := os.WriteFile(filepath.Join(tree, d, fmt.Sprintf("f%d.go", i)), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{
		FUSE: true, NoSSHFS: true, Tree: tree, RTTs: []time.Duration{0},
		Cap: time.Minute, FileSize: 1 << 20, TarBytes: 4000, CFiles: 3, OutDir: out,
		Command: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*Result{}
	for _, r := range rep.Results {
		if r.System != "zx" {
			t.Errorf("%s: system %q, want only zx", r.Workload, r.System)
		}
		got[r.Workload] = r
	}
	for _, w := range FUSEWorkloads {
		r := got[w]
		if r == nil {
			t.Errorf("%s: no result", w)
			continue
		}
		if r.Error != "" || r.Capped || r.Seconds <= 0 {
			t.Errorf("%s: %+v", w, r)
		}
		if r.RoundTrips < 0 {
			t.Errorf("%s: round trips not counted", w)
		}
		if !strings.Contains(r.Method, "MNT") {
			t.Errorf("%s: method %q does not name the mount", w, r.Method)
		}
	}
	for _, w := range []string{FRmWB, FTarWB} {
		if r := got[w]; r != nil && r.Error == "" && r.FlushSeconds <= 0 {
			t.Errorf("%s: the wait for written-back data was not timed", w)
		}
	}
	// A cold grep must fetch file data.
	if r := got[FGrepCold]; r != nil && r.RoundTrips == 0 {
		t.Errorf("cold grep: 0 round trips")
	}
	if fi := rep.Fuse; fi == nil || fi.TarEntries == 0 || fi.RepoFiles == 0 || fi.CFiles != 4 || fi.TarFUSEFloorSecs <= 0 {
		t.Errorf("fixtures: %+v", rep.Fuse)
	}
	for _, f := range []string{"fuse.md", "fuse.json", "fuse.png"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "fuse.md"))
	for _, s := range []string{"## Targets of issue 3", "warm git status < 10 round trips", "git status (warm)", "The FUSE floor", "FUSE floor"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("fuse.md lacks %q", s)
		}
	}
}
