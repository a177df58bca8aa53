package bench

import (
	"fmt"
	"strings"
)

// fuseRows is the FUSE report's order, with each workload's label.
func (rep *Report) fuseRows() []panel {
	var ps []panel
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.Workload] = true
	}
	labels := map[string]string{
		FFind:      "find -name missing",
		FGrepCold:  "grep -r (cold)",
		FGrepWarm:  "grep -r (warm)",
		FLs:        "ls -lR",
		FDiff:      "diff -r of two copies",
		FRm:        "rm -rf a copy of the tree",
		FTar:       "tar -x of the archive",
		FGit:       "git status (warm)",
		FMake:      "make of the C project",
		FCp:        "cp -a of a tree",
		FClone:     "git clone",
		FCommit:    "git add + commit",
		FSQLite:    "sqlite transactions (DELETE journal)",
		FSQLiteWAL: "sqlite transactions (WAL)",
		WWrite:     "write one file (" + sizeLabel(rep.FileSize) + ")",
		WRead:      "read one file (" + sizeLabel(rep.FileSize) + ")",
	}
	if wi := rep.writeInfo(); wi.Files > 0 {
		labels[FCp] = fmt.Sprintf("cp -a of a tree of %d files", wi.Files)
		labels[FClone] = fmt.Sprintf("git clone (%d files)", wi.Files)
		labels[FCommit] = fmt.Sprintf("git add + commit (%d files)", 2*wi.Changes)
	}
	if wi := rep.writeInfo(); wi.Transactions > 0 {
		labels[FSQLite] = fmt.Sprintf("sqlite: %d transactions (DELETE journal)", wi.Transactions)
		labels[FSQLiteWAL] = fmt.Sprintf("sqlite: %d transactions (WAL)", wi.Transactions)
	}
	for _, w := range FUSEWorkloads {
		if seen[w] {
			m, base := modeOf(w)
			label := labels[base]
			if m.flag != "" {
				label += " (zx " + m.flag + ")"
			}
			ps = append(ps, panel{w: w, label: label})
		}
	}
	return ps
}

// writeInfo returns the write workloads' fixtures (zero when none ran).
func (rep *Report) writeInfo() WriteInfo {
	if rep.Fuse == nil || rep.Fuse.Writes == nil {
		return WriteInfo{}
	}
	return *rep.Fuse.Writes
}

// sshfsBase is the workload of sshfs (and of the local disk) a zx
// workload is compared with: the variants in zx's other modes have no
// run of their own there.
func sshfsBase(w string) string {
	if w == WRmAll {
		return WRm
	}
	_, base := modeOf(w)
	return base
}

// bandwidthBound says whether a FUSE workload's time is its bytes over
// the link's bandwidth (the big file), rather than round trips.
func bandwidthBound(w string) bool { return w == WWrite || w == WRead }

func (rep *Report) fuseMarkdown() string {
	pg := &page{rep: rep, failed: "not run / error "}
	p := pg.printf
	fi := rep.Fuse
	if fi == nil {
		fi = &FuseInfo{}
	}
	warning := ""
	if fi.SharedMachine != "" {
		warning = fmt.Sprintf("**The machine was shared during this run:** %s. Times, especially small ones and RTT 0, are noisier than on an idle machine; round-trip counts are not affected.", fi.SharedMachine)
	}
	pg.head("zx vs sshfs and the local disk through FUSE: the benchmarks of issues 3 and 14", warning)
	pg.machine()
	t := rep.Tree
	p("\n## Setup\n\n")
	p("- Tree: a scratch copy of `%s`: %d regular files, %d directories, %d entries in all, %.1f MB of file data. find, grep, ls and rm work on all of it; diff compares it with a second copy.\n",
		t.Path, t.Files, t.Dirs, t.Entries, float64(t.Bytes)/1e6)
	if len(fi.Slice) > 0 {
		p("- Part of the tree used for tar and git: the top-level directories %s (%d files, %d entries, %.1f MB of file data).\n",
			"`"+strings.Join(fi.Slice, "`, `")+"`", fi.SliceFiles, fi.SliceEntries, float64(fi.SliceBytes)/1e6)
	}
	if fi.TarBytes > 0 {
		p("- tar: an uncompressed archive of that part, %.1f MB, %d entries, on local disk, extracted with `tar -xf` into an empty directory of the mount. The floor: the same extraction on the server's own disk took %s (best of 2); the write-back target compares with floor + one RTT.\n",
			float64(fi.TarBytes)/1e6, fi.TarEntries, fmtSecs(fi.TarFloorSecs))
		if fi.TarFUSEFloorSecs > 0 {
			p("- The FUSE floor: the same extraction into a pass-through FUSE mount of a directory of the server's disk (go-fuse's loopback file system, served by the benchmark's process with the FUSE mount options and the long entry and attribute timeouts zx's mount uses; no network, cache or journal) took %s (best of 2), %.0f µs per entry: what any FUSE file system pays on this machine before doing any work of its own.\n",
				fmtSecs(fi.TarFUSEFloorSecs), fi.TarFUSEFloorSecs/float64(max(fi.TarEntries, 1))*1e6)
		}
	}
	if fi.RepoFiles > 0 {
		p("- git: a repository made on the server's disk from a copy of that part (%d files committed, with `core.checkStat=minimal` and `core.trustctime=false` so that the index made on the server's disk stays valid on mounts that number inodes their own way); `git status --porcelain` runs once untimed on the fresh mount, then is timed.\n", fi.RepoFiles)
	}
	if wi := rep.writeInfo(); wi.Files > 0 || wi.Transactions > 0 {
		if wi.Files > 0 {
			p("- cp, clone, commit: a tree of the first %d files of the tree in walk order (%d entries, %.1f MB) on local disk, copied into the mount with `cp -a` (the check: the same names, contents, modes and mtimes); a git repository of the same files (one commit, packed with `git gc`) on local disk, cloned into the mount with `git clone --no-hardlinks` (%d entries in a clone); and a clone of it made on the server's disk before mounting, with %d files modified and %d added, where `git add -A` and `git commit` run one after the other (with `core.checkStat=minimal` and `core.trustctime=false` as for git status, and an index that is not racily clean).\n",
				wi.Files, wi.Entries, float64(wi.Bytes)/1e6, wi.CloneEntries, wi.Changes, wi.Changes)
		}
		if wi.Transactions > 0 {
			p("- sqlite: `sqlite3` runs a script of %d transactions, each `BEGIN; INSERT INTO t(v) VALUES(randomblob(200)); COMMIT;`, one at a time, with `PRAGMA synchronous=FULL`, on a database made empty on the server's disk before mounting, in journal_mode=DELETE (sqlite's default) or WAL. ", wi.Transactions)
			if wi.FsyncsPerTx != nil {
				p("The script makes %.2f fsync or fdatasync calls per transaction with the DELETE journal and %.2f in WAL mode (%s).\n",
					wi.FsyncsPerTx["delete"], wi.FsyncsPerTx["wal"], wi.FsyncNote)
			} else {
				p("The fsyncs per transaction were %s.\n", wi.FsyncNote)
			}
		}
	}
	p("- local disk: each workload of the default mode run with the same command on the directory the servers export (no network, no FUSE; the page cache warm from making the inputs), best of %d: the floor the zx/local ratio compares with at every RTT.\n", localRuns)
	if fi.CFiles > 0 {
		p("- make: a generated C project of %d .c files (8 small functions each, one header per ten files) built from clean with `make -s` (sequential, the system's cc), objects and program written to the mount.\n", fi.CFiles)
	}
	p("- zx: `mount.Mount` over `cache.New` over one client connection (the stack `zx mount` uses, mount's default options: close-to-open, change notices from the server), mounted by the benchmark process itself so that `client.Conn.Stats().RoundTrips` can be read; the programs run as child processes. Write-back mode: %s.\n", fi.Writeback)
	p("- sshfs: `sshfs -p PORT -o IdentityFile=KEY,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes root@127.0.0.1:DIR MNT` (default caching options) to a private sshd on loopback.\n")
	p("- Every measurement mounts afresh (zx: new connection, cache and kernel superblock; sshfs: a new sshfs), so caches start cold; \"warm\" workloads run once untimed on that mount and time the second run. Inputs (a copy to remove, an empty directory, a clean C project) are made on the server's disk before mounting, outside the timing.\n")
	p(proxySetup)
	p("- Every measurement is capped at %s. A slower run is killed and reported as \"> cap\" with a projection labelled with what it comes from (a run on a subtree scaled by directories, files or entries; or the progress made by the cap). When earlier RTTs show that the full run would exceed the cap, it is not attempted: only the subtree, or a run cut short at a third of the cap, is made, and projected. Projections are estimates, not measurements; round trips are given only for complete runs.\n", fmtSecs(rep.CapSecs))
	var rtts, missing []string
	for _, r := range rep.RTTsMs {
		rtts = append(rtts, fmt.Sprintf("%g ms", r))
	}
	for _, want := range []float64{0, 10, 50, 100} {
		found := false
		for _, r := range rep.RTTsMs {
			found = found || r == want
		}
		if !found {
			missing = append(missing, fmt.Sprintf("%g ms", want))
		}
	}
	p("- RTTs run: %s", strings.Join(rtts, ", "))
	if len(missing) > 0 {
		p(" (issue 3 asks also for %s: not run here)", strings.Join(missing, ", "))
	}
	if rep.RateMbit > 0 {
		p("; the big file also at %g Mbit/s and %g ms", rep.RateMbit, rep.RateRTT)
	}
	p(".\n")
	p("- Total run time: %.0f s.\n", rep.Elapsed)

	p("\n## Results\n\n")
	p("| workload | RTT | zx | sshfs | local disk | sshfs/zx | zx/local | zx round trips | zx round trips per item | zx RTT-equiv. | sshfs RTT-equiv. | MB on link zx / sshfs |\n")
	p("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, c := range rep.comparisons(rep.fuseRows()) {
		z, s := c.z, c.s
		ratio, _, _ := ratioCell(z, s)
		loc := rep.find(c.w, "local", 0, 0)
		local, toLocal := "—", "—"
		if c.rate == 0 && loc != nil {
			local = pg.timeCell(loc)
			// ratioCell(a, b) is b's time over a's.
			toLocal, _, _ = ratioCell(loc, z)
		}
		rts, per := "—", "—"
		if z != nil && z.RoundTrips >= 0 && z.Error == "" && !z.Capped && !z.Skipped {
			rts = fmt.Sprint(z.RoundTrips)
			if z.Items > 0 && !bandwidthBound(c.w) {
				per = fmt.Sprintf("%.3f / %s", float64(z.RoundTrips)/float64(z.Items), itemName(c.w))
			}
		}
		sEq := rep.eqCell(s)
		if c.w != sshfsBase(c.w) {
			sEq = "(sshfs " + sshfsBase(c.w) + ")"
		}
		p("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |\n", c.label, fmtLink(c.rtt, c.rate),
			pg.timeCell(z), pg.timeCell(s), local, ratio, toLocal, rts, per, rep.eqCell(z), sEq, mbCell(z), mbCell(s))
	}
	p("\nThe local disk column is the same command run on the directory the servers export (no network, no FUSE; best of %d), whatever the RTT; zx/local is zx's time over it. \"zx round trips\" is the count of blocking round trips the mount's connection waited for during the timed run (`client.Conn.Stats().RoundTrips`), exact and independent of timing. RTT-equiv. = (time − time at RTT 0) / RTT: how many round trips' worth of time the latency added, a ratio of times (sshfs's round trips are not observable from outside). The rows of zx's other modes (--writeback) have no sshfs or local run of their own: their sshfs and local columns are those of the same program in the default rows; \"+ … sync\" is how long the mount's Sync (what fsync and zx sync wait for) took after the command returned, until its data was on the server: not part of the time.\n", localRuns)

	pg.targets(3)
	pg.targets(14)
	pg.notesSection()
	p("\n## Commands\n\nMNT is the mount point, LOCAL the benchmark's scratch directory on local disk. On the local disk the zx command runs with MNT the directory the servers export.\n\n| workload | zx | sshfs |\n|---|---|---|\n")
	for _, row := range rep.fuseRows() {
		zm, sm := rep.methods(row.w)
		if sm == "" && row.w != sshfsBase(row.w) {
			sm = "(as " + sshfsBase(row.w) + ")"
		}
		p("| %s | `%s` | `%s` |\n", row.w, zm, sm)
	}
	p("\n![time vs RTT](fuse.png)\n")
	return pg.b.String()
}

func itemName(w string) string {
	switch sshfsBase(w) {
	case FGrepCold, FGrepWarm, FDiff, FGit, FClone, FCommit:
		return "file"
	case FMake:
		return ".c file"
	case FSQLite, FSQLiteWAL:
		return "transaction"
	}
	return "entry"
}

// fuseTargets checks issue 3's benchmark targets.
func (rep *Report) fuseTargets() []Target {
	var ts []Target
	// 1. At 50 ms, default mode, every workload that is not
	// bandwidth-bound at least 10× faster than sshfs.
	for _, row := range rep.fuseRows() {
		if bandwidthBound(row.w) || row.w != sshfsBase(row.w) || issue14Only(row.w) {
			continue
		}
		tg := Target{Name: "at 50 ms, " + row.label + " ≥ 10× faster than sshfs", Status: "not measured"}
		z, s := rep.find(row.w, "zx", 50, 0), rep.find(row.w, "sshfs", 50, 0)
		if c, v, ok := ratioCell(z, s); ok {
			tz, projz, _ := z.Time()
			tsh, projs, _ := s.Time()
			tg.Status = "missed"
			if v >= 10 {
				tg.Status = "met"
			}
			if projz || projs {
				tg.Status += " (on a projection)"
			}
			tg.Detail = fmt.Sprintf("zx %s, sshfs %s: %s", fmtSecs(tz), fmtSecs(tsh), c)
		}
		ts = append(ts, tg)
	}
	// 2. rm -r under 0.1 round trip per entry (both modes), and warm git
	// status under 10 round trips, at every RTT measured.
	for _, c := range []struct {
		w, name string
		limit   float64
		perItem bool
	}{
		{FRm, "rm -r < 0.1 round trip per entry (default mode)", 0.1, true},
		{FRmWB, "rm -r < 0.1 round trip per entry (--writeback)", 0.1, true},
		{FGit, "warm git status < 10 round trips", 10, false},
	} {
		tg := Target{Name: c.name, Status: "not measured"}
		var ds []string
		met := true
		for _, rtt := range rep.RTTsMs {
			z := rep.find(c.w, "zx", rtt, 0)
			if z == nil || z.RoundTrips < 0 || z.Error != "" || z.Capped || z.Skipped {
				continue
			}
			v := float64(z.RoundTrips)
			d := fmt.Sprintf("%d", z.RoundTrips)
			if c.perItem && z.Items > 0 {
				v /= float64(z.Items)
				d = fmt.Sprintf("%d for %d entries = %.3f", z.RoundTrips, z.Items, v)
			}
			met = met && v < c.limit
			ds = append(ds, fmt.Sprintf("%g ms: %s", rtt, d))
		}
		tg.judge(met, ds, "; ")
		if len(ds) == 0 {
			if z := rep.find(c.w, "zx", 0, 0); z != nil && z.Error != "" {
				tg.Detail = z.Error
			}
		}
		ts = append(ts, tg)
	}
	// 3. With --writeback, tar -x within 3× of the floor (tar -x on the
	// server's own disk, plus one RTT).
	tg := Target{Name: "tar -x with --writeback within 3× of the floor (local tar -x + one RTT)", Status: "not measured"}
	if fi := rep.Fuse; fi != nil && fi.TarFloorSecs > 0 {
		var ds []string
		met := true
		for _, rtt := range rep.RTTsMs {
			z := rep.find(FTarWB, "zx", rtt, 0)
			if z == nil {
				continue
			}
			if z.Error != "" {
				tg.Detail = z.Error
				continue
			}
			floor := fi.TarFloorSecs + rtt/1000
			tz, proj, ok := z.Time()
			if !ok {
				met = false
				ds = append(ds, fmt.Sprintf("%g ms: > cap", rtt))
				continue
			}
			met = met && !proj && tz <= 3*floor
			d := fmt.Sprintf("%g ms: %s vs floor %s = %.1f×", rtt, fmtSecs(tz), fmtSecs(floor), tz/floor)
			if fi.TarFUSEFloorSecs > 0 {
				// What FUSE alone costs (pass-through mount + one
				// RTT): the part of the gap no FUSE file system
				// closes on this machine.
				ff := fi.TarFUSEFloorSecs + rtt/1000
				d = fmt.Sprintf("%g ms: zx %s / FUSE floor %s / local floor %s = %.1f× the local floor, %.1f× the FUSE floor",
					rtt, fmtSecs(tz), fmtSecs(ff), fmtSecs(floor), tz/floor, tz/ff)
			}
			if proj {
				d += " (projected)"
			} else if z.FlushSeconds > 0 {
				d += fmt.Sprintf(" (then %s until all on the server)", fmtSecs(z.FlushSeconds))
			}
			if z.SelfCPUSeconds > 0 && fi.TarEntries > 0 {
				d += fmt.Sprintf("; CPU per entry: zx process (mount, cache, server, proxies) %.2f ms, tar %.2f ms",
					z.SelfCPUSeconds/float64(fi.TarEntries)*1e3, z.CmdCPUSeconds/float64(fi.TarEntries)*1e3)
			}
			ds = append(ds, d)
		}
		tg.judge(met, ds, "; ")
	}
	ts = append(ts, tg)
	// 4. Bandwidth-bound workloads within 1.3× of bytes/bandwidth + one
	// RTT, on the rate-limited link.
	for _, w := range []string{WWrite, WRead} {
		tg := Target{Name: fmt.Sprintf("%s %s within 1.3× of bytes/bandwidth + one RTT (%g Mbit/s, %g ms)", w, sizeLabel(rep.FileSize), rep.RateMbit, rep.RateRTT), Status: "not measured"}
		if z := rep.find(w, "zx", rep.RateRTT, rep.RateMbit); z != nil && rep.RateMbit > 0 {
			floor := float64(rep.FileSize)*8/(rep.RateMbit*1e6) + rep.RateRTT/1000
			if tz, proj, ok := z.Time(); ok && !proj {
				tg.Status = "missed"
				if tz <= 1.3*floor {
					tg.Status = "met"
				}
				tg.Detail = fmt.Sprintf("%s vs %s = %.2f×", fmtSecs(tz), fmtSecs(floor), tz/floor)
				if s := rep.find(w, "sshfs", rep.RateRTT, rep.RateMbit); s != nil {
					if tsh, _, ok := s.Time(); ok {
						tg.Detail += fmt.Sprintf(" (sshfs %s = %.2f×)", fmtSecs(tsh), tsh/floor)
					}
				}
			} else if z.Error != "" {
				tg.Detail = z.Error
			} else {
				tg.Status, tg.Detail = "missed", "over the cap"
			}
		}
		ts = append(ts, tg)
	}
	// 5. At RTT 0, nothing slower than sshfs by more than 1.5×.
	var ws []string
	for _, row := range rep.fuseRows() {
		if !issue14Only(row.w) {
			ws = append(ws, row.w)
		}
	}
	ts = append(ts, rep.noSlowerTarget("at RTT 0, no workload slower than sshfs by more than 1.5×", ws, 1.5))
	for i := range ts {
		ts[i].Issue = 3
	}
	return append(ts, rep.writeTargets()...)
}

// issue14Only says whether w is one of the workloads issue 14 added,
// which issue 3's targets do not cover.
func issue14Only(w string) bool {
	switch sshfsBase(w) {
	case FCp, FClone, FCommit, FSQLite, FSQLiteWAL:
		return true
	}
	return false
}

// ran says whether workload w has a result.
func (rep *Report) ran(w string) bool {
	for _, r := range rep.Results {
		if r.Workload == w {
			return true
		}
	}
	return false
}

// writeTargets checks issue 14's benchmark targets for the workloads that
// write, in the default mode, for those that ran.
func (rep *Report) writeTargets() []Target {
	labels := map[string]string{}
	for _, row := range rep.fuseRows() {
		labels[row.w] = row.label
	}
	var ts []Target
	// 1. At 100 ms, within 1.5× their own time at RTT 0 plus 10 round
	// trips.
	for _, w := range []string{FTar, FCp, FClone, FCommit, FMake} {
		if !rep.ran(w) {
			continue
		}
		tg := Target{Issue: 14, Name: fmt.Sprintf("at 100 ms, %s ≤ 1.5× its time at RTT 0 + 10 round trips", labels[w]), Status: "not measured"}
		z0, z := rep.find(w, "zx", 0, 0), rep.find(w, "zx", 100, 0)
		if z0 != nil && z != nil {
			t0, proj0, ok0 := z0.Time()
			t, proj, ok := z.Time()
			if ok0 && ok {
				bound := 1.5*t0 + 10*0.1
				tg.judge(t <= bound, []string{fmt.Sprintf("%s at 100 ms; 1.5 × %s + 10 × 100 ms = %s", fmtSecs(t), fmtSecs(t0), fmtSecs(bound))}, "")
				if proj || proj0 {
					tg.Status += " (on a projection)"
				}
			}
		} else if z == nil {
			tg.Detail = "no run at 100 ms"
		}
		ts = append(ts, tg)
	}
	// 2. The database: one blocking round trip per fsync it does. The
	// count does not depend on the RTT: every complete run counts.
	wi := rep.writeInfo()
	for _, w := range []string{FSQLite, FSQLiteWAL} {
		if !rep.ran(w) {
			continue
		}
		f := wi.FsyncsPerTx[sqliteModes[w]]
		tg := Target{Issue: 14, Name: labels[w] + ": one blocking round trip per fsync", Status: "not measured"}
		if f <= 0 || wi.Transactions <= 0 {
			tg.Detail = "the fsyncs per transaction were " + wi.FsyncNote
			ts = append(ts, tg)
			continue
		}
		fsyncs := f * float64(wi.Transactions)
		var ds []string
		met := true
		for _, rtt := range rep.RTTsMs {
			z := rep.find(w, "zx", rtt, 0)
			if z == nil || z.RoundTrips < 0 || z.Error != "" || z.Capped || z.Skipped {
				continue
			}
			// A few more for opening the database.
			met = met && float64(z.RoundTrips) <= fsyncs+10
			ds = append(ds, fmt.Sprintf("%g ms: %d round trips for %.0f fsyncs (%d transactions × %.2f) = %.2f per fsync",
				rtt, z.RoundTrips, fsyncs, wi.Transactions, f, float64(z.RoundTrips)/fsyncs))
		}
		tg.judge(met, ds, "; ")
		ts = append(ts, tg)
	}
	// 3. --fsync local: a mode zx does not have yet.
	if rep.ran(FSQLite) || rep.ran(FSQLiteWAL) {
		ts = append(ts, Target{Issue: 14, Name: "with --fsync local, the database at 100 ms ≤ 2× its time at RTT 0", Status: "not measured",
			Detail: "zx has no --fsync local mode yet"})
	}
	// 4. At RTT 0, nothing slower than sshfs by more than 1.2×.
	var ws []string
	for _, row := range rep.fuseRows() {
		if m, _ := modeOf(row.w); m == zxModes[0] {
			ws = append(ws, row.w)
		}
	}
	tg := rep.noSlowerTarget("at RTT 0, in the default mode, no workload slower than sshfs by more than 1.2×", ws, 1.2)
	tg.Issue = 14
	return append(ts, tg)
}
