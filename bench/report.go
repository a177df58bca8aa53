package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Target is one of the issue's benchmark targets, checked against a run.
type Target struct {
	Issue  int    `json:"issue,omitempty"` // the issue that sets it
	Name   string `json:"name"`
	Status string `json:"status"` // "met", "missed" or "not measured"
	Detail string `json:"detail"`
}

// rows is the order of the table, with the label of each workload.
var rows = []struct{ w, label string }{
	{WFind, "find a missing name"},
	{WGrep, "grep a missing string"},
	{WRm, "rm a copy of the tree (zx: find + removes)"},
	{WRmAll, "rm a copy of the tree (zx: RemoveAll)"},
	{WWrite, "write one file"},
	{WRead, "read one file"},
}

// find returns the result for a workload, system and link, or nil. The
// RemoveAll row is compared with the same sshfs rm -rf.
func (rep *Report) find(w, sys string, rtt, rate float64) *Result {
	if sys == "sshfs" || sys == "local" {
		w = sshfsBase(w)
	}
	if sys == "local" {
		// Run once, recorded at RTT 0: the floor at every RTT.
		rtt, rate = 0, 0
	}
	for _, r := range rep.Results {
		if r.Workload == w && r.System == sys && r.RTTms == rtt && r.RateMbit == rate {
			return r
		}
	}
	return nil
}

// rttEq returns (t − t at RTT 0)/RTT for a result: how many round trips'
// worth of time the RTT added. It is a time ratio, not a count.
func (rep *Report) rttEq(r *Result) (float64, bool, bool) {
	if r == nil || r.RTTms == 0 || r.RateMbit != 0 {
		return 0, false, false
	}
	t, proj, ok := r.Time()
	base := rep.find(r.Workload, r.System, 0, 0)
	if !ok || base == nil {
		return 0, false, false
	}
	t0, proj0, ok0 := base.Time()
	if !ok0 {
		return 0, false, false
	}
	return (t - t0) / (r.RTTms / 1000), proj || proj0, true
}

func fmtSecs(t float64) string {
	switch {
	case t < 0.01:
		return fmt.Sprintf("%.2f ms", t*1000)
	case t < 1:
		return fmt.Sprintf("%.0f ms", t*1000)
	case t < 100:
		return fmt.Sprintf("%.2f s", t)
	}
	return fmt.Sprintf("%.0f s", t)
}

func fmtLink(rtt, rate float64) string {
	s := fmt.Sprintf("%g ms", rtt)
	if rate > 0 {
		s += fmt.Sprintf(" @ %g Mbit/s", rate)
	}
	return s
}

func sizeLabel(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// nativeRows is the native report's order, with each workload's label.
func (rep *Report) nativeRows() []panel {
	var ps []panel
	for _, row := range rows {
		label := row.label
		if row.w == WWrite || row.w == WRead {
			label += " (" + sizeLabel(rep.FileSize) + ")"
		}
		ps = append(ps, panel{w: row.w, label: label})
	}
	return ps
}

// Markdown renders the report.
func (rep *Report) Markdown() string {
	if rep.Suite == SuiteFUSE {
		return rep.fuseMarkdown()
	}
	pg := &page{rep: rep, failed: "error "}
	p := pg.printf
	pg.head("zx vs sshfs, native: the benchmark of issue 2", "")
	pg.machine()
	t := rep.Tree
	p("\n## Setup\n\n")
	p("- Tree: a scratch copy of `%s`: %d regular files, %d directories, %d entries in all, %.1f MB of file data.\n",
		t.Path, t.Files, t.Dirs, t.Entries, float64(t.Bytes)/1e6)
	p("- zx: the Go API (package client) over one TCP connection, dialled afresh for each measurement, to a zx server exporting the scratch directory with lfs.\n")
	p("- sshfs: `sshfs -p PORT -o IdentityFile=KEY,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes root@127.0.0.1:DIR MNT` (default caching options; `-f` only to keep it our child) to a private sshd on loopback, remounted before every workload so its caches start cold.\n")
	p(proxySetup)
	p("- Every measurement is capped at %s. A slower sshfs run is killed and reported as \"> cap\" with a projection, labelled with what it comes from; when a smaller RTT already showed that the full run exceeds the cap, it is skipped and only projected. Projections are estimates, not measurements.\n", fmtSecs(rep.CapSecs))
	p("- Total run time: %.0f s.\n", rep.Elapsed)

	p("\n## Results\n\n")
	p("| workload | RTT | zx | sshfs | sshfs/zx | zx round trips | zx RTT-equiv. | sshfs RTT-equiv. | MB on link zx / sshfs |\n")
	p("|---|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range rep.comparisons(rep.nativeRows()) {
		z, s := c.z, c.s
		ratio, _, _ := ratioCell(z, s)
		rts := "—"
		if z != nil && z.RoundTrips >= 0 && z.Error == "" {
			rts = fmt.Sprint(z.RoundTrips)
		}
		sEq := rep.eqCell(s)
		if c.w == WRmAll {
			sEq = "(as above)"
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |\n", c.label, fmtLink(c.rtt, c.rate),
			pg.timeCell(z), pg.timeCell(s), ratio, rts, rep.eqCell(z), sEq, mbCell(z), mbCell(s))
	}
	p("\nRTT-equiv. = (time − time at RTT 0) / RTT: how many round trips' worth of time the latency added. It is a ratio of times, not a count of messages (sshfs's round trips are not observable from outside); for zx, \"zx round trips\" is the count of blocking round trips the program waited for (client.Conn.Stats().RoundTrips). In the rate-limited rows the transfer time dominates and no RTT-equivalent is given.\n")
	p("The sshfs column of the RemoveAll row is the same `rm -rf` measurement as the row above it.\n")

	if lb := rep.Loopback; lb != nil {
		p("\n## Server's raw rates on loopback (no emulator)\n\n")
		if lb.Server != "" {
			p("- server: %s; the client is the benchmark's process.\n", lb.Server)
		}
		p("- find over the whole tree (every entry matches), %d runs: %s entries/s (median %.0f, best %.0f).\n",
			len(lb.FindEntriesPerSec), joinf(lb.FindEntriesPerSec, "%.0f"), median(lb.FindEntriesPerSec), maxf(lb.FindEntriesPerSec))
		if lb.ServerCPUPerEntry > 0 {
			p("- CPU per entry of those finds: server %.2f µs, client %.2f µs (the server process's user + system time, and the benchmark process's, over the entries received).\n",
				us(lb.ServerCPUPerEntry), us(lb.ClientCPUPerEntry))
		}
		if len(lb.WalkEntriesPerSec) > 0 {
			p("- the floor on this machine: a bare walk of the same tree (getdents and statx of each entry, one worker per CPU, nothing encoded or sent), %d runs: %s entries/s (median %.0f). No find can stream faster here; the find's median is %.0f%% of it.\n",
				len(lb.WalkEntriesPerSec), joinf(lb.WalkEntriesPerSec, "%.0f"), median(lb.WalkEntriesPerSec),
				100*median(lb.FindEntriesPerSec)/median(lb.WalkEntriesPerSec))
		}
		p("- findget over its regular files (%s): %s MB/s (best %.0f; 1 MB = 10⁶ bytes, counted as file data or, for the fallback, bytes received).\n",
			lb.FindGetMethod, joinf(lb.FindGetMBPerSec, "%.0f"), maxf(lb.FindGetMBPerSec))
	}

	pg.targets(2)
	pg.notesSection()
	p("\n## Methods\n\n| workload | zx | sshfs |\n|---|---|---|\n")
	for _, row := range rows {
		zm, sm := rep.methods(row.w)
		if row.w == WRmAll && sm == "" {
			sm = "(the rm -rf above)"
		}
		if zm != "" || sm != "" {
			p("| %s | `%s` | `%s` |\n", row.w, zm, sm)
		}
	}
	p("\n![time vs RTT](native.png)\n")
	return pg.b.String()
}

func joinf(xs []float64, f string) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprintf(f, x))
	}
	return strings.Join(s, ", ")
}

// targets checks the issue's targets.
func (rep *Report) targets() []Target {
	var ts []Target
	// 1. At 50 ms, find and rm of the whole tree within 10 round trips'
	// time plus transfer (the time at RTT 0 through the same proxy).
	for _, w := range []struct{ w, name string }{
		{WFind, "find of the whole tree at 50 ms within 10 round trips' time plus transfer"},
		{WRm, "rm of the whole tree (find + removes) at 50 ms within 10 round trips' time plus transfer"},
		{WRmAll, "rm of the whole tree (RemoveAll) at 50 ms within 10 round trips' time plus transfer"},
	} {
		tg := Target{Name: w.name, Status: "not measured"}
		r := rep.find(w.w, "zx", 50, 0)
		base := rep.find(w.w, "zx", 0, 0)
		if r != nil && base != nil {
			t, _, ok := r.Time()
			t0, _, ok0 := base.Time()
			if ok && ok0 {
				eq := (t - t0) / 0.05
				tg.Status = "missed"
				if eq <= 10 {
					tg.Status = "met"
				}
				tg.Detail = fmt.Sprintf("%s at 50 ms vs %s at RTT 0 (the transfer): %.1f round trips' worth of added time; %d blocking round trips counted",
					fmtSecs(t), fmtSecs(t0), eq, r.RoundTrips)
			}
		}
		ts = append(ts, tg)
	}
	// 2. Find streaming at least 200,000 entries/s on loopback.
	tg := Target{Name: "find streams ≥ 200,000 entries/s on loopback", Status: "not measured"}
	if lb := rep.Loopback; lb != nil && len(lb.FindEntriesPerSec) > 0 {
		// The median, not the best run: the target is a steady rate.
		med := median(lb.FindEntriesPerSec)
		tg.Status = "missed"
		if med >= 200000 {
			tg.Status = "met"
		}
		tg.Detail = fmt.Sprintf("median of %d runs: %.0f entries/s (best %.0f; %s)", len(lb.FindEntriesPerSec), med, maxf(lb.FindEntriesPerSec), joinf(lb.FindEntriesPerSec, "%.0f"))
		if len(lb.WalkEntriesPerSec) > 0 {
			tg.Detail += fmt.Sprintf("; a bare walk of the tree on this machine: %.0f entries/s", median(lb.WalkEntriesPerSec))
		}
	}
	ts = append(ts, tg)
	// 3. The big file at the rate and RTT moving at ≥ 90% of the rate.
	for _, w := range []string{WWrite, WRead} {
		tg := Target{Name: fmt.Sprintf("%s %s at %g Mbit/s and %g ms at ≥ 90 Mbit/s effective", w, sizeLabel(rep.FileSize), rep.RateMbit, rep.RateRTT), Status: "not measured"}
		if r := rep.find(w, "zx", rep.RateRTT, rep.RateMbit); r != nil && rep.RateMbit > 0 {
			if t, _, ok := r.Time(); ok {
				mbit := float64(rep.FileSize) * 8 / 1e6 / t
				tg.Status = "missed"
				if mbit >= 90 {
					tg.Status = "met"
				}
				tg.Detail = fmt.Sprintf("%s: %.1f Mbit/s effective", fmtSecs(t), mbit)
				if s := rep.find(w, "sshfs", rep.RateRTT, rep.RateMbit); s != nil {
					if ts, _, ok := s.Time(); ok {
						tg.Detail += fmt.Sprintf(" (sshfs: %s, %.1f Mbit/s)", fmtSecs(ts), float64(rep.FileSize)*8/1e6/ts)
					}
				}
			}
		}
		ts = append(ts, tg)
	}
	// 4. Nothing slower than sshfs at RTT 0 by more than 1.5×.
	var ws []string
	for _, row := range rows {
		ws = append(ws, row.w)
	}
	ts = append(ts, rep.noSlowerTarget("nothing slower than sshfs at RTT 0 by more than 1.5×", ws, 1.5))
	for i := range ts {
		ts[i].Issue = 2
	}
	return ts
}

// write writes the suite's .md, .json and .png (native.* or fuse.*) to
// dir.
func (rep *Report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := SuiteNative // also for files older than Report.Suite
	if rep.Suite == SuiteFUSE {
		base = SuiteFUSE
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, base+".json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, base+".md"), []byte(rep.Markdown()), 0o644); err != nil {
		return err
	}
	return rep.plot(filepath.Join(dir, base+".png"))
}
