package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFUSESuiteSmall runs every workload of the FUSE suite on a tiny tree
// at RTT 0 with zx only, in each of zx's modes, and on the local disk: the
// fixtures are made, each program runs on a real zx mount, its outcome is
// checked (the copy is gone, the archive is extracted whole, the tree is
// copied whole, the clone is complete and clean, the commit is made, every
// transaction's row is in the database, the C program builds and runs, the
// file written is intact), round trips are counted, and the report is
// written. It checks the harness, not speed.
func TestFUSESuiteSmall(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("SKIPPED: needs root to mount FUSE (CI runs it as root)")
	}
	if err := checkFUSE(); err != nil {
		t.Skipf("SKIPPED: %v", err)
	}
	for _, p := range []string{"sqlite3", "strace"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: %s is missing (.ci/run installs it)", p)
		}
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
		Cap: time.Minute, FileSize: 1 << 20, TarBytes: 4000, CFiles: 3, WriteFiles: 12, Transactions: 5, OutDir: out,
		Command: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	got, local := map[string]*Result{}, map[string]*Result{}
	for _, r := range rep.Results {
		switch r.System {
		case "zx":
			got[r.Workload] = r
		case "local":
			local[r.Workload] = r
		default:
			t.Errorf("%s: system %q, want only zx and the local disk", r.Workload, r.System)
		}
	}
	for _, w := range FUSEWorkloads {
		r := local[w]
		switch m, _ := modeOf(w); {
		case m != zxModes[0] || w == WWrite || w == WRead:
			if r != nil {
				t.Errorf("%s: ran on the local disk", w)
			}
		case r == nil:
			t.Errorf("%s: no result on the local disk", w)
		case r.Error != "" || r.Capped || r.Seconds <= 0 || r.RTTms != 0 || !strings.Contains(r.Method, "DIR"):
			t.Errorf("%s on the local disk: %+v", w, r)
		}
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
	variants := 0
	for _, w := range FUSEWorkloads {
		if m, _ := modeOf(w); m != zxModes[0] {
			variants++
			if r := got[w]; r != nil && r.Error == "" && r.FlushSeconds <= 0 {
				t.Errorf("%s: the wait for written-back data was not timed", w)
			}
		}
	}
	if variants != 7 {
		t.Errorf("%d workloads in --writeback mode, want 7 (rm, tar, cp, clone, commit, sqlite, sqlite-wal)", variants)
	}
	// Every transaction is one or more blocking round trips: its fsyncs
	// wait for the server.
	for _, w := range []string{FSQLite, FSQLiteWAL} {
		if r := got[w]; r != nil && r.RoundTrips < 5 {
			t.Errorf("%s: %d round trips for 5 transactions", w, r.RoundTrips)
		}
	}
	if wi := rep.Fuse.Writes; wi == nil || wi.Files != 12 || wi.Entries <= 12 || wi.CloneEntries <= 12 || wi.Transactions != 5 ||
		wi.FsyncsPerTx["delete"] < 1 || wi.FsyncsPerTx["wal"] < 1 {
		t.Errorf("write fixtures: %+v", rep.Fuse.Writes)
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
	for _, s := range []string{"## Targets of issue 3", "warm git status < 10 round trips", "git status (warm)", "The FUSE floor", "FUSE floor",
		"## Targets of issue 14", "git clone (12 files)", "sqlite: 5 transactions (WAL) (zx --writeback)", "fsync or fdatasync calls per transaction"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("fuse.md lacks %q", s)
		}
	}
}

// TestFUSEChecksFail checks that the checks of the workloads that write
// fail when the command did not do its work: the inputs are made, the
// command is not run, and every check must say what is missing.
func TestFUSEChecksFail(t *testing.T) {
	for _, p := range []string{"git", "make", "cc", "sqlite3"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("SKIPPED: %s is missing (.ci/run installs it)", p)
		}
	}
	tree := t.TempDir()
	for _, d := range []string{"a/x", "b"} {
		if err := os.MkdirAll(filepath.Join(tree, d), 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if err := os.WriteFile(filepath.Join(tree, d, fmt.Sprintf("f%d.go", i)), []byte("package p\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := newEnv()
	defer e.cleanup()
	r := newRunner(Config{FUSE: true, NoSSHFS: true, Tree: tree, RTTs: []time.Duration{0}, Cap: time.Minute,
		CFiles: 2, WriteFiles: 4, Transactions: 3,
		// Not tar: its fixtures need FUSE (the FUSE floor).
		Workloads: []string{FRm, FCp, FClone, FCommit, FMake, FSQLite, FSQLiteWAL}}, e, SuiteFUSE)
	if err := r.scratch(); err != nil {
		t.Fatal(err)
	}
	fx, err := r.fuseSetup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, j := range r.fuseJobs(fx) {
		if j.mode != zxModes[0] {
			continue
		}
		if err := j.prep("."); err != nil {
			t.Fatalf("%s: prep: %v", j.w, err)
		}
		err := j.check()
		t.Logf("%s, not run: %v", j.w, err)
		if err == nil {
			t.Errorf("%s: the check passed without the command", j.w)
		}
		checked++
	}
	if checked != 7 {
		t.Errorf("%d checks, want 7", checked)
	}
}
