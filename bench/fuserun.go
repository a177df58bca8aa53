package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/client"
	zxmount "github.com/zxfs/zx/mount"
	"github.com/zxfs/zx/wan"
)

// zxMount is a zx FUSE mount served by this process, over its own
// connection, so that its round trips can be counted.
type zxMount struct {
	conn *client.Conn
	ca   *cache.Cache
	fs   *zxmount.FS
}

// mountZX mounts the server behind addr on mnt in mode m: with the
// mount's defaults (as zx mount does), or in write-back mode with its
// journal in a fresh directory journal (as zx mount --writeback does).
func (e *env) mountZX(ctx context.Context, addr, mnt string, m zxMode, journal string) (*zxMount, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	c, err := client.Dial(dctx, addr, client.Options{})
	if err != nil {
		return nil, err
	}
	if _, err := c.Attach(dctx, ""); err != nil {
		c.Close()
		return nil, err
	}
	z := &zxMount{conn: c}
	var copts cache.Options
	opts := zxmount.Options{FsName: "zxbench"}
	if m.writeBack {
		copts.Journal, opts.WriteBack = journal, true
	}
	if z.ca, err = cache.Open(c.Tree(""), copts); err != nil {
		c.Close()
		return nil, err
	}
	z.fs, err = zxmount.Mount(mnt, z.ca, opts)
	if err != nil {
		z.ca.Close()
		c.Close()
		return nil, err
	}
	e.onCleanup(z.unmount)
	return z, nil
}

// unmount unmounts and closes; it may be called more than once.
func (z *zxMount) unmount() {
	if z.fs != nil {
		z.fs.Unmount()
		z.fs = nil
	}
	if z.ca != nil {
		z.ca.Close()
		z.ca = nil
	}
	if z.conn != nil {
		z.conn.Close()
		z.conn = nil
	}
}

// fuseLink runs the FUSE suite through a fresh pair of proxies with the
// given RTT and rate (rate > 0: only the big file).
func (r *runner) fuseLink(ctx context.Context, jobs []*fuseJob, rtt time.Duration, rate int64) error {
	l, err := r.newLink(rtt, rate)
	if err != nil {
		return err
	}
	defer l.close()
	if rate == 0 {
		for _, j := range jobs {
			if err := l.fuseJob(ctx, j, "zx"); err != nil {
				return err
			}
			if l.sp != nil && j.mode == zxModes[0] {
				if err := l.fuseJob(ctx, j, "sshfs"); err != nil {
					return err
				}
			}
		}
	}
	if r.cfg.fuseWant(WWrite) || r.cfg.fuseWant(WRead) {
		return l.fuseFile(ctx)
	}
	return nil
}

func (l *linkRun) mountPoint(sys string) string {
	switch sys {
	case "zx":
		return filepath.Join(l.dir, "zmnt")
	case "local":
		// The server's own directory: the command on the local disk.
		return l.export
	}
	return filepath.Join(l.dir, "mnt")
}

// localRuns is how many times each job runs on the local disk, the best
// counting: its times are small, and on a shared machine one says little.
const localRuns = 3

// fuseLocal runs each job (in the default mode) on the local disk: the
// same command on the directory the servers export, with no network or
// FUSE. Its best run is the floor the report compares with at every RTT,
// recorded at RTT 0.
func (r *runner) fuseLocal(ctx context.Context, jobs []*fuseJob) error {
	r.cfg.logf("== the local disk (best of %d)", localRuns)
	l := &linkRun{runner: r}
	for _, j := range jobs {
		if j.mode != zxModes[0] {
			continue
		}
		var best *Result
		for range localRuns {
			res, err := l.fuseOnce(ctx, j, "local", ".", r.cfg.Cap)
			if err != nil {
				return err
			}
			if best == nil || res.Error != "" || res.Capped || best.Error == "" && !best.Capped && res.Seconds < best.Seconds {
				best = res
			}
			if res.Error != "" || res.Capped {
				break
			}
		}
		if best.Items == 0 && best.Error == "" && !best.Capped {
			best.Items = j.items
		}
		l.add(best)
	}
	return nil
}

// method is j's command line on subtree rel, for the report.
func (l *linkRun) method(j *fuseJob, sys, rel string) string {
	mnt := l.mountPoint(sys)
	var args []string
	for _, a := range j.cmd(mnt, rel) {
		if strings.ContainsAny(a, " \"'$*&") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args = append(args, a)
	}
	to := "MNT"
	if sys == "local" {
		to = "DIR"
	}
	m := strings.ReplaceAll(strings.Join(args, " "), mnt, to)
	m = strings.ReplaceAll(m, l.dir, "LOCAL")
	if j.warm {
		m += " (run once untimed first)"
	}
	return m
}

// restartSSHD starts a new sshd (its predecessor died) and a new proxy
// for it with this link's settings.
func (l *linkRun) restartSSHD(ctx context.Context) error {
	dir, err := os.MkdirTemp(l.dir, "ssh-")
	if err != nil {
		return err
	}
	if l.sshPort, l.key, err = l.env.sshd(ctx, dir); err != nil {
		return fmt.Errorf("restarting sshd: %v", err)
	}
	sp, err := wan.Listen("127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", l.sshPort), l.sp.Config())
	if err != nil {
		return err
	}
	l.sp.Close()
	l.sp = sp
	return nil
}

// fuseOnce mounts for sys, runs job on subtree rel with the time cap capd,
// and unmounts.
func (l *linkRun) fuseOnce(ctx context.Context, j *fuseJob, sys, rel string, capd time.Duration) (*Result, error) {
	res := l.result(j.w, sys)
	if j.prep != nil {
		if err := j.prep(rel); err != nil {
			return nil, err
		}
	}
	mnt := l.mountPoint(sys)
	args := j.cmd(mnt, rel)
	res.Method = l.method(j, sys, rel)
	var bytes func() int64
	rts := func() int64 { return -1 }
	var flush func(context.Context) error // wait for written-back data
	switch sys {
	case "zx":
		journal := ""
		if j.mode.writeBack {
			var err error
			if journal, err = os.MkdirTemp(l.dir, "journal-"); err != nil {
				return nil, err
			}
			defer os.RemoveAll(journal)
		}
		z, err := l.env.mountZX(ctx, l.zp.Addr(), mnt, j.mode, journal)
		if err != nil {
			// One measurement lost, not the run.
			res.Error = "zx mount: " + err.Error()
			return res, nil
		}
		defer z.unmount()
		flush = z.fs.Sync
		c := z.conn
		rts = func() int64 { return c.Stats().RoundTrips }
		bytes = func() int64 { return proxyBytes(l.zp) }
	case "sshfs":
		m, err := l.env.sshfsMount(ctx, portOf(l.sp.Addr()), l.key, l.export, mnt)
		if err != nil && ctx.Err() == nil {
			// Seen on the shared machine: our sshd gone mid-run. Start
			// another behind a new proxy, and retry once.
			l.cfg.logf("  sshfs mount failed (%v)", err)
			if alive, log := l.env.sshdAlive(); !alive {
				l.cfg.logf("  our sshd is gone (its log: %q); starting another", log)
				if rerr := l.restartSSHD(ctx); rerr != nil {
					return nil, rerr
				}
			}
			m, err = l.env.sshfsMount(ctx, portOf(l.sp.Addr()), l.key, l.export, mnt)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			res.Error = "sshfs mount: " + err.Error()
			return res, nil
		}
		defer m.unmount()
		bytes = func() int64 { return proxyBytes(l.sp) }
	case "local":
		bytes = func() int64 { return 0 }
		res.RTTms = 0
	}
	if j.warm {
		_, capped, err := runCmd(ctx, capd, j.ok, args[0], args[1:]...)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if capped {
			res.Capped, res.CapSeconds = true, capd.Seconds()
			res.ProjectedFrom = "the untimed first run already exceeded the cap"
			return res, nil
		}
		if err != nil {
			res.Error = "first run: " + err.Error()
			return res, nil
		}
	}
	rt0, b0 := rts(), bytes()
	self0, cmd0 := cpuNow()
	el, capped, err := runCmd(ctx, capd, j.ok, args[0], args[1:]...)
	self1, cmd1 := cpuNow()
	res.SelfCPUSeconds, res.CmdCPUSeconds = (self1 - self0).Seconds(), (cmd1 - cmd0).Seconds()
	if rt0 >= 0 {
		res.RoundTrips = rts() - rt0
	}
	time.Sleep(l.rtt/2 + 10*time.Millisecond) // let the proxy count the last bytes
	res.Bytes = bytes() - b0
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case capped:
		res.Capped, res.CapSeconds = true, capd.Seconds()
	case err != nil:
		res.Error = err.Error()
	default:
		res.Seconds = el.Seconds()
		if j.mode != zxModes[0] && flush != nil {
			// What the command wrote, on the server (mount.FS.Sync,
			// what fsync and zx sync wait for).
			fctx, cancel := context.WithTimeout(ctx, capd)
			t0 := time.Now()
			err := flush(fctx)
			cancel()
			if err != nil {
				res.Error = "waiting for the written-back data: " + err.Error()
			} else {
				res.FlushSeconds = time.Since(t0).Seconds()
			}
		}
		if j.mode == zxModes[0] && flush != nil && j.check != nil && rel == "." && res.Error == "" {
			// Changes the mount pipelined (rm's last rmdir) may still
			// be on their way, for about one RTT: the check waits for
			// them, outside the timing.
			fctx, cancel := context.WithTimeout(ctx, capd)
			if err := flush(fctx); err != nil {
				res.Error = "waiting for pipelined changes: " + err.Error()
			}
			cancel()
		}
		if j.check != nil && rel == "." && res.Error == "" {
			if err := j.check(); err != nil {
				res.Error = err.Error()
			}
		}
	}
	return res, nil
}

// prior returns the times of workload w on sys at RTT 0 and at the
// largest smaller non-zero RTT measured or projected so far.
func (l *linkRun) prior(w, sys string) (t0, tr, rtt float64, has0, ok bool) {
	for _, res := range l.rep.Results {
		if res.Workload != w || res.System != sys || res.RateMbit != 0 {
			continue
		}
		t, _, has := res.Time()
		if !has {
			continue
		}
		if res.RTTms == 0 {
			t0, has0 = t, true
		} else if res.RTTms < ms(l.rtt) && res.RTTms > rtt {
			tr, rtt, ok = t, res.RTTms, true
		}
	}
	return
}

// fuseEstimate guesses the whole workload's time on sys at this RTT: by
// linear extrapolation in the RTT from earlier results, or, for sshfs with
// only the RTT 0 result, from the rough round-trip costs. It only
// decides whether to attempt the full run; no reported figure comes from
// it.
func (l *linkRun) fuseEstimate(j *fuseJob, sys string) (float64, bool) {
	t0, tr, r, has0, ok := l.prior(j.w, sys)
	if ok && has0 {
		return t0 + (tr-t0)*ms(l.rtt)/r, true
	}
	if !has0 {
		return 0, false
	}
	if sys == "zx" {
		// The RTT 0 run's blocking round trips, each costing one RTT.
		if base := l.rep.find(j.w, "zx", 0, 0); base != nil && base.RoundTrips >= 0 {
			return t0 + float64(base.RoundTrips)*l.rtt.Seconds(), true
		}
	}
	if sys == "sshfs" {
		return l.roughEstimate(j, t0)
	}
	return 0, false
}

// roughEstimate guesses j's time on sshfs at this RTT from its time t0 at
// RTT 0 and the rough round-trip costs.
func (l *linkRun) roughEstimate(j *fuseJob, t0 float64) (float64, bool) {
	if j.rough <= 0 {
		return 0, false
	}
	return t0 + j.rough*float64(j.roughUnits(l.runner))*l.rtt.Seconds(), true
}

// fuseEstimateWarm is fuseEstimate for a warm job, whose untimed first
// run costs what a cold run costs: the larger of the two. The cold cost
// is its cold counterpart's estimate; without one, on sshfs, the rough
// estimate (extrapolating the warm times alone once led to a full git
// status attempt at 100 ms whose first run took the whole cap, and no
// figure).
func (l *linkRun) fuseEstimateWarm(j *fuseJob, sys string) (float64, bool) {
	est, ok := l.fuseEstimate(j, sys)
	if !j.warm {
		return est, ok
	}
	var cold float64
	okc := false
	switch {
	case j.coldOf != nil:
		cold, okc = l.fuseEstimate(j.coldOf, sys)
	case sys == "sshfs":
		if t0, _, _, has0, _ := l.prior(j.w, sys); has0 {
			cold, okc = l.roughEstimate(j, t0)
		}
	}
	if okc {
		return max(est, cold), true
	}
	return est, ok
}

func (j *fuseJob) roughUnits(r *runner) int64 {
	if j.unit != "" {
		return unitsOf(j.unit, j.wholeOf(r))
	}
	return j.items
}

// unitsOf counts s in unit.
func unitsOf(unit string, s subtree) int64 {
	switch unit {
	case unitDirs:
		return s.dirs
	case unitFiles:
		return s.files
	}
	return s.entries
}

// fuseSubtree picks the largest subtree whose run should take about budget
// seconds at this RTT, given the estimated time of the whole.
func (l *linkRun) fuseSubtree(j *fuseJob, whole, budget float64) subtree {
	total := unitsOf(j.unit, j.wholeOf(l.runner))
	subs := l.subs
	if j.subs != nil {
		subs = j.subs
	}
	if s, ok := largestSubtree(subs, j.unit, 5, total, whole/float64(max(total, 1)), budget); ok {
		return s
	}
	return j.wholeOf(l.runner)
}

// wholeOf returns what the whole of j's work covers.
func (j *fuseJob) wholeOf(r *runner) subtree {
	if j.whole != nil {
		return *j.whole
	}
	return r.whole()
}

// fuseJob measures job j on sys at this link, with the cap: the whole
// workload when it is expected to fit in the cap; otherwise (or when it
// was capped) a projection, labelled with what it comes from: a run on a
// subtree scaled by the job's unit, or the progress of a run cut short.
func (l *linkRun) fuseJob(ctx context.Context, j *fuseJob, sys string) error {
	capd := l.cfg.Cap
	est, hasEst := l.fuseEstimateWarm(j, sys)
	limit := capd.Seconds()
	if hasEst && est > limit && (j.unit != "" || j.progress != nil) {
		res := l.result(j.w, sys)
		res.Skipped = true
		var why string
		if j.unit != "" {
			budget := capd.Seconds() / 3
			if j.warm && sys == "sshfs" {
				// sshfs keeps what it cached for 20 s: the second run
				// must start within that to be warm.
				budget = min(budget, 15)
			}
			sub := l.fuseSubtree(j, est, budget)
			w, err := l.projectSubtree(ctx, res, j, sys, sub, capd)
			if err != nil {
				return err
			}
			why = w
			res.Method = l.method(j, sys, ".")
		} else {
			short := capd / 3
			sr, err := l.fuseOnce(ctx, j, sys, ".", short)
			if err != nil {
				return err
			}
			res.Method = sr.Method
			if !sr.Capped {
				// It finished after all: that is a measurement.
				sr.Method = res.Method
				l.add(sr)
				return nil
			}
			res.RoundTrips = -1
			why = l.projectProgress(res, j, short)
		}
		res.ProjectedFrom = fmt.Sprintf("full run not attempted (expected ≈ %.0f s, over the %.0f s cap); %s", est, capd.Seconds(), why)
		l.add(res)
		return nil
	}
	res, err := l.fuseOnce(ctx, j, sys, ".", capd)
	if err != nil {
		return err
	}
	if res.Capped {
		why := res.ProjectedFrom // set when the untimed first run was capped
		if why != "" {
			why += "; "
		}
		switch {
		case j.progress != nil:
			why += l.projectProgress(res, j, capd)
		case j.unit != "":
			sub := l.fuseSubtree(j, capd.Seconds()*3, capd.Seconds()/3)
			w, err := l.projectSubtree(ctx, res, j, sys, sub, capd)
			if err != nil {
				return err
			}
			why += w
		default:
			why += "no projection"
		}
		res.ProjectedFrom = why
	}
	if res.Items == 0 && res.Error == "" && !res.Capped {
		res.Items = j.items
	}
	l.add(res)
	return nil
}

// projectSubtree runs j on subtree sub and sets res's projection from
// it, scaled by j's unit. For a job with a fixed cost (fixedRel), a run
// on nothing measures that cost, which is not scaled.
func (l *linkRun) projectSubtree(ctx context.Context, res *Result, j *fuseJob, sys string, sub subtree, capd time.Duration) (string, error) {
	sr, err := l.fuseOnce(ctx, j, sys, sub.rel, capd)
	if err != nil {
		return "", err
	}
	res.RoundTrips = -1 // a count is not projected
	if sr.Error != "" || sr.Capped {
		return fmt.Sprintf("no projection: the run on %s also failed or exceeded the cap", sub.rel), nil
	}
	fixed, fixedNote := 0.0, ""
	if j.fixedRel != "" {
		fr, err := l.fuseOnce(ctx, j, sys, j.fixedRel, capd)
		if err != nil {
			return "", err
		}
		if fr.Error == "" && !fr.Capped {
			fixed = min(fr.Seconds, sr.Seconds)
			fixedNote = fmt.Sprintf("%.2f s for nothing (%s) + ", fixed, j.fixedRel)
		}
	}
	u, total := unitsOf(j.unit, sub), unitsOf(j.unit, j.wholeOf(l.runner))
	res.Projected = fixed + (sr.Seconds-fixed)*float64(total)/float64(u)
	rts := ""
	if sr.RoundTrips >= 0 {
		rts = fmt.Sprintf(", %d round trips", sr.RoundTrips)
	}
	there := fmt.Sprintf("%.2f s there%s", sr.Seconds, rts)
	if fixedNote != "" {
		there = fixedNote + "(" + there + " − that)"
	}
	return fmt.Sprintf("projected from %s (%d files, %d dirs): %s × %d/%d %s",
		filepath.Join(filepath.Base(l.cfg.Tree), sub.rel), sub.files, sub.dirs, there, total, u, j.unit), nil
}

// projectProgress sets res's projection from how far a run capped at capd
// got.
func (l *linkRun) projectProgress(res *Result, j *fuseJob, capd time.Duration) string {
	done, total := j.progress()
	if done <= 0 {
		return "no projection: nothing was done within the cap"
	}
	res.Projected = capd.Seconds() * float64(total) / float64(done)
	return fmt.Sprintf("projected from progress: %d of %d done in %.0f s", done, total, capd.Seconds())
}

// fuseFile writes then reads the big file through each mount, with dd.
func (l *linkRun) fuseFile(ctx context.Context) error {
	big := filepath.Join(l.export, "big")
	defer os.Remove(big)
	write := &fuseJob{w: WWrite, items: l.cfg.FileSize,
		cmd: func(mnt, rel string) []string {
			return []string{"dd", "if=" + l.bigSrc, "of=" + filepath.Join(mnt, "big"), "bs=1M", "conv=fsync", "status=none"}
		},
		prep:  func(string) error { return os.RemoveAll(big) },
		check: func() error { return l.sameAsData(big) }}
	read := &fuseJob{w: WRead, items: l.cfg.FileSize,
		cmd: func(mnt, rel string) []string {
			return []string{"dd", "if=" + filepath.Join(mnt, "big"), "of=/dev/null", "bs=1M", "status=none"}
		},
		prep: func(string) error { return l.ensureBig(big) }}
	systems := []string{"zx"}
	if l.sp != nil {
		systems = append(systems, "sshfs")
	}
	for _, sys := range systems {
		for _, j := range []*fuseJob{write, read} {
			if !l.cfg.fuseWant(j.w) {
				continue
			}
			res, err := l.fuseOnce(ctx, j, sys, ".", fileCap(l.cfg.Cap))
			if err != nil {
				return err
			}
			l.addTransfer(res)
		}
	}
	return nil
}

// fileCap is the cap of the big file's transfers: they are not projected,
// so they get at least 90 s (sshfs reads 128 MiB at 100 ms in about 55 s).
func fileCap(c time.Duration) time.Duration { return max(c, 90*time.Second) }

// cpuNow returns the CPU time (user + system) used so far by this process
// and by its children that were waited for.
func cpuNow() (self, children time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		children = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return self, children
}
