package bench

import (
	"testing"
	"time"
)

func TestLargestSubtree(t *testing.T) {
	subs := []subtree{
		{rel: "a", files: 3, dirs: 1, entries: 4},
		{rel: "b", files: 40, dirs: 5, entries: 45},
		{rel: "c", files: 200, dirs: 20, entries: 220},
		{rel: "d", files: 1000, dirs: 90, entries: 1090},
	}
	for _, tc := range []struct {
		name         string
		min, total   int64
		per, budget  float64
		want         string
		wantNotFound bool
	}{
		{"largest that fits", 5, 1000, 0.1, 25, "c", false},
		{"all fit but the whole", 5, 1000, 0.001, 100, "c", false},
		{"none fits: the smallest", 5, 1000, 10, 1, "b", false},
		{"too small to count", 300, 1000, 0.1, 25, "", true},
	} {
		s, ok := largestSubtree(subs, unitFiles, tc.min, tc.total, tc.per, tc.budget)
		if ok == tc.wantNotFound || s.rel != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, s.rel, ok, tc.want)
		}
	}
}

// A warm job's first, untimed run costs what a cold run costs: the git
// status of the FUSE run of 2026-11-24 had a warm time projected at 12 s
// at 50 ms, was attempted in full at 100 ms, and its first run took the
// whole 45 s cap. Its estimate must count the cold run.
func TestEstimateWarm(t *testing.T) {
	repo := subtree{rel: ".", files: 3779, dirs: 295, entries: 4074}
	git := &fuseJob{w: FGit, warm: true, unit: unitFiles, rough: 5, whole: &repo, items: 3779}
	rep := &Report{Results: []*Result{
		{Workload: FGit, System: "zx", Seconds: 0.12, RoundTrips: 4},
		{Workload: FGit, System: "sshfs", Seconds: 0.12, RoundTrips: -1},
		{Workload: FGit, System: "zx", RTTms: 50, Seconds: 0.37, RoundTrips: 3},
		{Workload: FGit, System: "sshfs", RTTms: 50, Skipped: true, Projected: 12.14, RoundTrips: -1},
	}}
	l := &linkRun{runner: &runner{rep: rep}, rtt: 100 * time.Millisecond}
	if est, ok := l.fuseEstimate(git, "sshfs"); !ok || est > 45 {
		t.Fatalf("warm time alone: %.1f s, %v; want the extrapolation, under the cap", est, ok)
	}
	if est, ok := l.fuseEstimateWarm(git, "sshfs"); !ok || est < 1000 {
		t.Errorf("sshfs with its first run: %.1f s, %v; want the rough cold cost, about 1890 s", est, ok)
	}
	if est, ok := l.fuseEstimateWarm(git, "zx"); !ok || est > 1 {
		t.Errorf("zx: %.1f s, %v; want its extrapolated warm time, under a second", est, ok)
	}
}
