package bench

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/wan"
)

// Result is one measurement: one workload, one system, one link setting.
type Result struct {
	Workload string  `json:"workload"`
	System   string  `json:"system"` // "zx" or "sshfs"
	RTTms    float64 `json:"rtt_ms"`
	RateMbit float64 `json:"rate_mbit,omitempty"` // 0: unlimited
	Method   string  `json:"method"`

	// Seconds is the wall time of the complete run, when it completed
	// within the cap.
	Seconds float64 `json:"seconds,omitempty"`
	// Capped says the run was killed at the cap (after CapSeconds).
	Capped     bool    `json:"capped,omitempty"`
	CapSeconds float64 `json:"cap_seconds,omitempty"`
	// Skipped says the complete run was not attempted because a smaller
	// RTT showed it would take longer than the cap.
	Skipped bool `json:"skipped,omitempty"`
	// Projected is an estimate of the complete run's time when it was
	// capped or skipped, and ProjectedFrom says what it was computed from.
	// It is never a measurement.
	Projected     float64 `json:"projected_seconds,omitempty"`
	ProjectedFrom string  `json:"projected_from,omitempty"`

	// FlushSeconds, for write-back runs, is how long the mount's Sync
	// took after the timed command: the wait until everything the
	// command wrote was on the server (not part of Seconds).
	FlushSeconds float64 `json:"flush_seconds,omitempty"`
	// SelfCPUSeconds (FUSE suite) is the CPU time (user + system) the
	// benchmark's own process used during the timed command: the zx
	// mount, cache and server and the WAN proxies all run there (sshfs
	// and sshd do not). CmdCPUSeconds is the command's own (its
	// children included). On a shared machine they vary less than the
	// time.
	SelfCPUSeconds float64 `json:"self_cpu_seconds,omitempty"`
	CmdCPUSeconds  float64 `json:"cmd_cpu_seconds,omitempty"`

	// RoundTrips is the number of blocking round trips the zx program
	// waited for (client.Conn.Stats().RoundTrips); -1 for sshfs, where it
	// is not observable.
	RoundTrips int64 `json:"round_trips"`
	// Bytes is what crossed the emulated link, both directions.
	Bytes int64 `json:"bytes"`
	// Items is what the run saw: entries (find, rm), files (grep) or
	// bytes (write, read).
	Items int64  `json:"items,omitempty"`
	Error string `json:"error,omitempty"`
}

// Time returns the time to report: measured, or projected (proj true), or
// ok false when there is neither.
func (r *Result) Time() (secs float64, proj, ok bool) {
	switch {
	case r.Error != "":
		return 0, false, false
	case r.Seconds > 0 && !r.Capped && !r.Skipped:
		return r.Seconds, false, true
	case r.Projected > 0:
		return r.Projected, true, true
	}
	return 0, false, false
}

// TreeStats describes the tree worked on.
type TreeStats struct {
	Path    string `json:"path"`
	Files   int64  `json:"files"`   // regular files
	Dirs    int64  `json:"dirs"`    // directories, the root included
	Entries int64  `json:"entries"` // everything, the root included
	Bytes   int64  `json:"bytes"`   // of regular files
}

// Loopback holds the server's raw rates, without the emulator.
type Loopback struct {
	FindEntriesPerSec []float64 `json:"find_entries_per_sec"`
	FindGetMBPerSec   []float64 `json:"findget_mb_per_sec"` // 1 MB = 10^6 bytes
	FindGetMethod     string    `json:"findget_method"`
	Server            string    `json:"server,omitempty"` // what served: "" in older files (a server in the benchmark's process)

	// What the finds cost in CPU, per entry received: the server's (when
	// it is a process of its own) and the benchmark process's (the
	// client's). Zero in older files.
	ServerCPUPerEntry time.Duration `json:"server_cpu_ns_per_entry,omitempty"`
	ClientCPUPerEntry time.Duration `json:"client_cpu_ns_per_entry,omitempty"`
	// The rate of a bare walk of the exported tree on this machine (see
	// walkFloor): what no find can beat here. Absent in older files.
	WalkEntriesPerSec []float64 `json:"walk_floor_entries_per_sec,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	Suite    string            `json:"suite,omitempty"` // SuiteNative ("" in older files) or SuiteFUSE
	Command  string            `json:"command"`
	Facts    map[string]string `json:"facts"`
	Tree     TreeStats         `json:"tree"`
	RTTsMs   []float64         `json:"rtts_ms"`
	RateMbit float64           `json:"rate_mbit,omitempty"`
	RateRTT  float64           `json:"rate_rtt_ms,omitempty"`
	CapSecs  float64           `json:"cap_seconds"`
	FileSize int64             `json:"file_size"`
	Loopback *Loopback         `json:"loopback,omitempty"`
	Fuse     *FuseInfo         `json:"fuse,omitempty"`
	Results  []*Result         `json:"results"`
	Targets  []Target          `json:"targets"`
	Elapsed  float64           `json:"elapsed_seconds"`
}

// subtree is a directory of the tree with what lies under it.
type subtree struct {
	rel                  string // relative to the tree
	files, dirs, entries int64
}

type runner struct {
	cfg     Config
	env     *env
	rep     *Report
	dir     string // scratch directory
	export  string // exported directory
	zxAddr  string
	sshPort int
	key     string
	data    []byte // the big file's contents
	bigSrc  string // the same, on local disk, for dd
	subs    []subtree
}

// The runs of the loopback rates: a find of the tree takes a few tens of
// milliseconds, and on a shared machine one run says little, so its rate
// is the median of many.
const (
	loopbackFindRuns    = 11
	loopbackFindGetRuns = 3
)

// loopback measures the server's raw rates, without the emulator, and
// the floor of the find rate on this machine.
func (r *runner) loopback(ctx context.Context) error {
	r.cfg.logf("loopback rates (no emulator)")
	lb := &Loopback{Server: "a server in the benchmark's process"}
	addr := r.zxAddr
	pid := 0
	if len(r.cfg.ServeCommand) > 0 {
		a, p, stop, err := serveChild(ctx, r.cfg.ServeCommand, r.export)
		if err != nil {
			return err
		}
		defer stop()
		addr, pid = a, p
		lb.Server = "`" + filepath.Base(r.cfg.ServeCommand[0]) + " " + strings.Join(r.cfg.ServeCommand[1:], " ") + "`, a process of its own"
	}
	for range loopbackFindRuns {
		n, took, err := walkFloor(ctx, filepath.Join(r.export, "tree"))
		if err != nil {
			return err
		}
		lb.WalkEntriesPerSec = append(lb.WalkEntriesPerSec, float64(n)/took.Seconds())
	}
	// CPU per entry is told apart only when the server is a process of
	// its own.
	self0, _ := cpuNow()
	srv0, srvErr := procCPU(pid)
	rates, entries, err := zxLoopbackFind(ctx, addr, loopbackFindRuns)
	if err != nil {
		return err
	}
	lb.FindEntriesPerSec = rates
	self1, _ := cpuNow()
	if srv1, err := procCPU(pid); pid != 0 && srvErr == nil && err == nil && entries > 0 {
		lb.ClientCPUPerEntry = (self1 - self0) / time.Duration(entries)
		lb.ServerCPUPerEntry = (srv1 - srv0) / time.Duration(entries)
	}
	lb.FindGetMBPerSec, lb.FindGetMethod, err = zxLoopbackFindGet(ctx, addr, loopbackFindGetRuns)
	if err != nil {
		return err
	}
	r.rep.Loopback = lb
	r.cfg.logf("  find %.0f entries/s (median of %d; a bare walk %.0f), findget %.0f MB/s (best of %d)",
		median(lb.FindEntriesPerSec), len(lb.FindEntriesPerSec), median(lb.WalkEntriesPerSec),
		maxf(lb.FindGetMBPerSec), len(lb.FindGetMBPerSec))
	return nil
}

func run(ctx context.Context, cfg Config, e *env) (*Report, error) {
	if cfg.FUSE {
		return runFUSE(ctx, cfg, e)
	}
	start := time.Now()
	r := newRunner(cfg, e, SuiteNative)
	if !cfg.NoSSHFS && !cfg.LoopbackOnly {
		if err := checkTools(); err != nil {
			return nil, err
		}
	}
	if err := r.scratch(); err != nil {
		return nil, err
	}
	var err error
	var finder bool
	if r.zxAddr, finder, err = e.zxServer(r.export); err != nil {
		return nil, err
	}
	r.rep.Facts = facts(cfg.NoSSHFS)
	r.rep.Facts["lfs implements zx.Finder (server-side find/findget)"] = yesno(finder)
	if cfg.LoopbackOnly {
		return r.rep, r.loopback(ctx)
	}
	if err := r.startSSHD(ctx); err != nil {
		return nil, err
	}
	if cfg.want(WWrite) || cfg.want(WRead) {
		if err := r.makeData(); err != nil {
			return nil, err
		}
	}

	if err := r.loopback(ctx); err != nil {
		return nil, err
	}

	for _, rtt := range cfg.RTTs {
		if err := r.link(ctx, rtt, 0); err != nil {
			return nil, err
		}
	}
	if cfg.Rate > 0 && (cfg.want(WWrite) || cfg.want(WRead)) {
		if err := r.link(ctx, r.cfg.RateRTT, cfg.Rate); err != nil {
			return nil, err
		}
	}
	r.rep.Targets = r.rep.targets()
	return r.rep, r.finish(start)
}

// newRunner returns the runner of one run of a suite, with the report's
// account of the configuration filled in.
func newRunner(cfg Config, e *env, suite string) *runner {
	if cfg.RateRTT == 0 {
		for _, d := range cfg.RTTs {
			cfg.RateRTT = max(cfg.RateRTT, d)
		}
	}
	r := &runner{cfg: cfg, env: e, rep: &Report{
		Suite:    suite,
		Command:  cfg.Command,
		CapSecs:  cfg.Cap.Seconds(),
		FileSize: cfg.FileSize,
	}}
	for _, d := range cfg.RTTs {
		r.rep.RTTsMs = append(r.rep.RTTsMs, ms(d))
	}
	if cfg.Rate > 0 {
		r.rep.RateMbit = float64(cfg.Rate) * 8 / 1e6
		r.rep.RateRTT = ms(cfg.RateRTT)
	}
	return r
}

// scratch makes the scratch directory with its copy of the tree, and
// counts the copy.
func (r *runner) scratch() error {
	r.cfg.logf("copying %s to a scratch directory", r.cfg.Tree)
	var err error
	if r.dir, err = r.env.scratch(&r.cfg); err != nil {
		return err
	}
	r.export = filepath.Join(r.dir, "export")
	return r.treeStats()
}

// startSSHD starts the private sshd that sshfs mounts from, unless the
// run measures zx only.
func (r *runner) startSSHD(ctx context.Context) error {
	if r.cfg.NoSSHFS {
		return nil
	}
	r.cfg.logf("starting sshd")
	var err error
	r.sshPort, r.key, err = r.env.sshd(ctx, filepath.Join(r.dir, "ssh"))
	return err
}

// finish records the run's time and writes the report to cfg.OutDir, if
// it is set.
func (r *runner) finish(start time.Time) error {
	r.rep.Elapsed = time.Since(start).Seconds()
	if r.cfg.OutDir == "" {
		return nil
	}
	if err := r.rep.write(r.cfg.OutDir); err != nil {
		return err
	}
	r.cfg.logf("wrote %s", filepath.Join(r.cfg.OutDir, r.rep.Suite+".{md,json,png}"))
	return nil
}

// makeData makes the big file's contents (random, the same every run)
// and writes them to their local copy, for dd.
func (r *runner) makeData() error {
	r.data = make([]byte, r.cfg.FileSize)
	rng := rand.NewChaCha8([32]byte{'z', 'x'})
	rng.Read(r.data)
	r.bigSrc = filepath.Join(r.dir, "big.src")
	return os.WriteFile(r.bigSrc, r.data, 0o600)
}

func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func yesno(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// median returns the median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func maxf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// treeStats counts the copy of the tree and every directory in it.
func (r *runner) treeStats() error {
	root := filepath.Join(r.export, "tree")
	counts := map[string]*subtree{}
	ts := TreeStats{Path: r.cfg.Tree}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		ts.Entries++
		var isFile, isDir bool
		switch {
		case d.IsDir():
			isDir = true
			ts.Dirs++
			counts[rel] = &subtree{rel: rel}
		case d.Type().IsRegular():
			isFile = true
			ts.Files++
			if fi, err := d.Info(); err == nil {
				ts.Bytes += fi.Size()
			}
		}
		for a := rel; ; a = filepath.Dir(a) {
			if s := counts[a]; s != nil {
				s.entries++
				if isFile {
					s.files++
				}
				if isDir {
					s.dirs++
				}
			}
			if a == "." {
				break
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.rep.Tree = ts
	for _, s := range counts {
		if s.rel != "." {
			r.subs = append(r.subs, *s)
		}
	}
	sort.Slice(r.subs, func(i, j int) bool { return r.subs[i].rel < r.subs[j].rel })
	return nil
}

func facts(nosshfs bool) map[string]string {
	f := map[string]string{
		"date (UTC)":  time.Now().UTC().Format(time.RFC3339),
		"nproc":       fmt.Sprint(runtime.NumCPU()),
		"go":          runtime.Version(),
		"GOOS/GOARCH": runtime.GOOS + "/" + runtime.GOARCH,
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		f["kernel"] = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				f["cpu"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		l, _, _ := strings.Cut(string(b), "\n")
		f["memory"] = strings.Join(strings.Fields(strings.TrimPrefix(l, "MemTotal:")), " ")
	}
	if !nosshfs {
		if out, err := exec.Command("sshfs", "--version").CombinedOutput(); err == nil {
			var vs []string
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				vs = append(vs, strings.TrimSpace(l))
			}
			f["sshfs"] = strings.Join(vs, "; ")
		}
		if out, err := exec.Command("ssh", "-V").CombinedOutput(); err == nil {
			f["ssh"] = strings.TrimSpace(string(out))
		}
	}
	return f
}

// link measures every workload through a fresh pair of proxies with the
// given RTT and rate (rate > 0: only the big file).
func (r *runner) link(ctx context.Context, rtt time.Duration, rate int64) error {
	l, err := r.newLink(rtt, rate)
	if err != nil {
		return err
	}
	defer l.close()
	if rate == 0 {
		if r.cfg.want(WFind) {
			if err := l.find(ctx); err != nil {
				return err
			}
		}
		if r.cfg.want(WGrep) {
			if err := l.grep(ctx); err != nil {
				return err
			}
		}
		if r.cfg.want(WRm) {
			if err := l.rm(ctx); err != nil {
				return err
			}
		}
	}
	if r.cfg.want(WWrite) || r.cfg.want(WRead) {
		if err := l.file(ctx); err != nil {
			return err
		}
	}
	return nil
}

// linkRun is the measurements at one link setting.
type linkRun struct {
	*runner
	rtt  time.Duration
	rate int64
	zp   *wan.Proxy // to the zx server
	sp   *wan.Proxy // to the sshd; nil with Config.NoSSHFS
}

// newLink starts a fresh pair of proxies with the given RTT and rate.
func (r *runner) newLink(rtt time.Duration, rate int64) (*linkRun, error) {
	wc := wan.Config{RTT: rtt, Rate: rate}
	label := fmt.Sprintf("RTT %v", rtt)
	if rate > 0 {
		label += fmt.Sprintf(", rate %.0f Mbit/s", float64(rate)*8/1e6)
	}
	r.cfg.logf("== %s", label)
	zp, err := wan.Listen("127.0.0.1:0", r.zxAddr, wc)
	if err != nil {
		return nil, err
	}
	l := &linkRun{runner: r, rtt: rtt, rate: rate, zp: zp}
	if !r.cfg.NoSSHFS {
		if l.sp, err = wan.Listen("127.0.0.1:0", fmt.Sprintf("127.0.0.1:%d", r.sshPort), wc); err != nil {
			zp.Close()
			return nil, err
		}
	}
	return l, nil
}

// close stops the link's proxies (the sshd's may have been replaced, see
// restartSSHD).
func (l *linkRun) close() {
	l.zp.Close()
	if l.sp != nil {
		l.sp.Close()
	}
}

func (l *linkRun) result(w, sys string) *Result {
	res := &Result{Workload: w, System: sys, RTTms: ms(l.rtt), RoundTrips: -1}
	if l.rate > 0 {
		res.RateMbit = float64(l.rate) * 8 / 1e6
	}
	return res
}

func proxyBytes(p *wan.Proxy) int64 { s := p.Stats(); return s.Up + s.Down }

func (l *linkRun) add(res *Result) {
	l.rep.Results = append(l.rep.Results, res)
	t, proj, ok := res.Time()
	var s string
	switch {
	case res.Error != "":
		s = "error: " + res.Error
	case !ok && res.Capped:
		s = fmt.Sprintf("> cap (%.0f s), no projection", res.CapSeconds)
	case proj:
		s = fmt.Sprintf("%.3f s PROJECTED (%s)", t, res.ProjectedFrom)
		if res.Capped {
			s = fmt.Sprintf("> cap (%.0f s); ", res.CapSeconds) + s
		}
	default:
		s = fmt.Sprintf("%.3f s", t)
	}
	rt := ""
	if res.RoundTrips >= 0 {
		rt = fmt.Sprintf(", %d round trips", res.RoundTrips)
	}
	cpu := ""
	if res.SelfCPUSeconds > 0 {
		cpu = fmt.Sprintf(", CPU %.2f s here + %.2f s the command", res.SelfCPUSeconds, res.CmdCPUSeconds)
	}
	l.cfg.logf("  %-12s %-5s %s%s, %.1f MB on the link%s", res.Workload, res.System, s, rt, float64(res.Bytes)/1e6, cpu)
}

// zx runs one zx measurement on a fresh connection through the proxy.
func (l *linkRun) zx(ctx context.Context, w string, f func(ctx context.Context, t *client.Tree) (int64, string, error)) *Result {
	res := l.result(w, "zx")
	c, err := client.Dial(ctx, l.zp.Addr(), client.Options{})
	if err != nil {
		res.Error = err.Error()
		l.add(res)
		return res
	}
	defer c.Close()
	if _, err := c.Ping(ctx); err != nil {
		res.Error = err.Error()
		l.add(res)
		return res
	}
	cctx, cancel := context.WithTimeout(ctx, l.cfg.Cap)
	defer cancel()
	rt0, b0 := c.Stats().RoundTrips, proxyBytes(l.zp)
	t0 := time.Now()
	n, method, err := f(cctx, c.Tree(""))
	el := time.Since(t0)
	res.Method, res.Items = method, n
	res.RoundTrips = c.Stats().RoundTrips - rt0
	time.Sleep(l.rtt/2 + 10*time.Millisecond) // let the proxy count the last bytes
	res.Bytes = proxyBytes(l.zp) - b0
	switch {
	case cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil:
		res.Capped, res.CapSeconds = true, l.cfg.Cap.Seconds()
	case err != nil:
		res.Error = err.Error()
	default:
		res.Seconds = el.Seconds()
	}
	l.add(res)
	return res
}

// sshfs mounts afresh (cold caches), runs one command with the cap and
// unmounts. prep runs before mounting, outside the timing.
func (l *linkRun) sshfs(ctx context.Context, w string, ok []int, args ...string) (*Result, error) {
	res := l.result(w, "sshfs")
	mnt := filepath.Join(l.dir, "mnt")
	m, err := l.env.sshfsMount(ctx, portOf(l.sp.Addr()), l.key, l.export, mnt)
	if err != nil {
		return nil, err
	}
	defer m.unmount()
	cmd := strings.Join(args, " ")
	res.Method = strings.ReplaceAll(cmd, mnt, "MNT")
	b0 := proxyBytes(l.sp)
	el, capped, err := runCmd(ctx, l.cfg.Cap, ok, args[0], args[1:]...)
	time.Sleep(l.rtt/2 + 10*time.Millisecond)
	res.Bytes = proxyBytes(l.sp) - b0
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case capped:
		res.Capped, res.CapSeconds = true, l.cfg.Cap.Seconds()
	case err != nil:
		res.Error = err.Error()
	default:
		res.Seconds = el.Seconds()
	}
	return res, nil
}

// estimate extrapolates the time of sshfs on units out of total units at
// this RTT, linearly in the RTT from earlier results; ok is false without
// a non-zero smaller RTT to go on.
func (l *linkRun) estimate(w string, units, total int64) (float64, bool) {
	t0, tr, r, _, ok := l.prior(w, "sshfs")
	if !ok {
		return 0, false
	}
	full := t0 + (tr-t0)*ms(l.rtt)/r
	return full * float64(units) / float64(total), true
}

// unitOf returns what a native workload's sshfs time scales with:
// directories read (find), files read (grep) or entries removed (rm).
func unitOf(w string) string {
	switch w {
	case WFind:
		return unitDirs
	case WGrep:
		return unitFiles
	}
	return unitEntries
}

func (r *runner) whole() subtree {
	t := r.rep.Tree
	return subtree{rel: ".", files: t.Files, dirs: t.Dirs, entries: t.Entries}
}

// pickSubtree chooses the largest subtree whose sshfs run should take about
// a third of the cap at this RTT.
func (l *linkRun) pickSubtree(w string) subtree {
	total := unitsOf(unitOf(w), l.whole())
	per, ok := l.estimate(w, 1, total)
	if !ok {
		// Rough costs from the issue: sshfs needs about 2 round trips per
		// directory walked, 2-2.5 per file read; allow 3 per entry removed.
		k := map[string]float64{WFind: 2.5, WGrep: 3, WRm: 3}[w]
		per = k * l.rtt.Seconds()
	}
	minUnits := map[string]int64{WFind: 10, WGrep: 30, WRm: 100}[w]
	if s, ok := largestSubtree(l.subs, unitOf(w), minUnits, total, per, l.cfg.Cap.Seconds()/3); ok {
		return s
	}
	return l.whole()
}

// largestSubtree returns the largest of subs, counted in unit, that
// should take at most budget seconds at per seconds a unit, or else the
// smallest; it passes over those with fewer than minUnits or with all
// total units. ok is false when none is left.
func largestSubtree(subs []subtree, unit string, minUnits, total int64, per, budget float64) (s subtree, ok bool) {
	var best, smallest *subtree
	for i := range subs {
		s := &subs[i]
		u := unitsOf(unit, *s)
		if u < minUnits || u >= total {
			continue
		}
		if smallest == nil || u < unitsOf(unit, *smallest) {
			smallest = s
		}
		if float64(u)*per <= budget && (best == nil || u > unitsOf(unit, *best)) {
			best = s
		}
	}
	if best == nil {
		best = smallest
	}
	if best == nil {
		return subtree{}, false
	}
	return *best, true
}

// shouldSkip says whether the full sshfs run is expected to exceed the cap,
// from the times at smaller RTTs.
func (l *linkRun) shouldSkip(w string) bool {
	total := unitsOf(unitOf(w), l.whole())
	est, ok := l.estimate(w, total, total)
	return ok && est > l.cfg.Cap.Seconds()
}

// projectFromSubtree runs the sshfs command on a subtree and scales its
// time to the whole tree by the workload's units.
func (l *linkRun) projectFromSubtree(ctx context.Context, res *Result, w string,
	run func(sub subtree) (*Result, error)) error {
	sub := l.pickSubtree(w)
	sr, err := run(sub)
	if err != nil {
		return err
	}
	if sr.Error != "" || sr.Capped {
		res.ProjectedFrom = fmt.Sprintf("no projection: the run on %s also failed or exceeded the cap", sub.rel)
		return nil
	}
	u, total := unitsOf(unitOf(w), sub), unitsOf(unitOf(w), l.whole())
	res.Projected = sr.Seconds * float64(total) / float64(u)
	res.ProjectedFrom = fmt.Sprintf("projected from %s (%d files, %d dirs): %.2f s there × %d/%d %s",
		filepath.Join(filepath.Base(l.cfg.Tree), sub.rel), sub.files, sub.dirs, sr.Seconds, total, u, unitOf(w))
	return nil
}

func (l *linkRun) find(ctx context.Context) error {
	l.zx(ctx, WFind, func(ctx context.Context, t *client.Tree) (int64, string, error) {
		return zxFind(ctx, t, "/tree", "name="+missingName)
	})
	if l.sp == nil {
		return nil
	}
	mnt := filepath.Join(l.dir, "mnt")
	cmd := func(rel string) []string {
		return []string{"find", filepath.Join(mnt, "tree", rel), "-name", missingName}
	}
	return l.sshfsWorkload(ctx, WFind, nil, cmd, nil)
}

func (l *linkRun) grep(ctx context.Context) error {
	l.zx(ctx, WGrep, func(ctx context.Context, t *client.Tree) (int64, string, error) {
		return zxGrep(ctx, t, "/tree", missingBytes)
	})
	if l.sp == nil {
		return nil
	}
	mnt := filepath.Join(l.dir, "mnt")
	cmd := func(rel string) []string {
		return []string{"grep", "-r", missingBytes, filepath.Join(mnt, "tree", rel)}
	}
	return l.sshfsWorkload(ctx, WGrep, []int{1}, cmd, nil)
}

func (l *linkRun) rm(ctx context.Context) error {
	tree := filepath.Join(l.export, "tree")
	cp := filepath.Join(l.export, "copy")
	for _, v := range []struct {
		w string
		f func(context.Context, *client.Tree, string) (int64, string, error)
	}{{WRm, zxRmFind}, {WRmAll, zxRmAll}} {
		if err := copyTree(tree, cp); err != nil {
			return err
		}
		res := l.zx(ctx, v.w, func(ctx context.Context, t *client.Tree) (int64, string, error) {
			return v.f(ctx, t, "/copy")
		})
		if _, err := os.Lstat(cp); err == nil && res.Error == "" && !res.Capped {
			res.Error = "the copy is still there after the remove"
		}
	}
	if l.sp == nil {
		return os.RemoveAll(cp)
	}
	mnt := filepath.Join(l.dir, "mnt")
	cmd := func(rel string) []string {
		return []string{"rm", "-rf", filepath.Join(mnt, "copy")}
	}
	prep := func(rel string) error { return copyTree(filepath.Join(tree, rel), cp) }
	err := l.sshfsWorkload(ctx, WRm, nil, cmd, prep)
	os.RemoveAll(cp)
	return err
}

// sshfsWorkload runs an sshfs workload on the whole tree with the cap, or,
// when it is expected to exceed the cap, only on a subtree; a capped or
// skipped run gets a labelled projection.
func (l *linkRun) sshfsWorkload(ctx context.Context, w string, ok []int,
	cmd func(rel string) []string, prep func(rel string) error) error {
	on := func(sub subtree) (*Result, error) {
		if prep != nil {
			if err := prep(sub.rel); err != nil {
				return nil, err
			}
		}
		return l.sshfs(ctx, w, ok, cmd(sub.rel)...)
	}
	if l.shouldSkip(w) {
		res := l.result(w, "sshfs")
		res.Method = strings.ReplaceAll(strings.Join(cmd("."), " "), filepath.Join(l.dir, "mnt"), "MNT")
		res.Skipped = true
		if err := l.projectFromSubtree(ctx, res, w, on); err != nil {
			return err
		}
		res.ProjectedFrom = "full run skipped (a smaller RTT showed it exceeds the cap); " + res.ProjectedFrom
		l.add(res)
		return nil
	}
	res, err := on(l.whole())
	if err != nil {
		return err
	}
	if res.Capped {
		if w == WRm {
			l.projectFromProgress(res)
		} else if err := l.projectFromSubtree(ctx, res, w, on); err != nil {
			return err
		}
	}
	l.add(res)
	return nil
}

// projectFromProgress projects a capped rm from the entries it removed.
func (l *linkRun) projectFromProgress(res *Result) {
	left := int64(0)
	filepath.WalkDir(filepath.Join(l.export, "copy"), func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			left++
		}
		return nil
	})
	total := l.rep.Tree.Entries
	done := total - left
	if done <= 0 {
		res.ProjectedFrom = "no projection: nothing was removed within the cap"
		return
	}
	res.Projected = res.CapSeconds * float64(total) / float64(done)
	res.ProjectedFrom = fmt.Sprintf("projected from progress: %d of %d entries removed in the %.0f s cap", done, total, res.CapSeconds)
}

// file writes then reads the big file.
func (l *linkRun) file(ctx context.Context) error {
	zxPath := filepath.Join(l.export, "zx-big")
	sshPath := filepath.Join(l.export, "sshfs-big")
	os.Remove(zxPath)
	os.Remove(sshPath)
	defer os.Remove(zxPath)
	defer os.Remove(sshPath)
	if l.cfg.want(WWrite) {
		l.zx(ctx, WWrite, func(ctx context.Context, t *client.Tree) (int64, string, error) {
			return zxWrite(ctx, t, "/zx-big", l.data)
		})
	}
	if err := l.ensureBig(zxPath); err != nil {
		return err
	}
	if l.cfg.want(WRead) {
		l.zx(ctx, WRead, func(ctx context.Context, t *client.Tree) (int64, string, error) {
			return zxRead(ctx, t, "/zx-big", l.data)
		})
	}
	if l.sp == nil {
		return nil
	}
	mnt := filepath.Join(l.dir, "mnt")
	if l.cfg.want(WWrite) {
		res, err := l.sshfs(ctx, WWrite, nil, "dd", "if="+l.bigSrc, "of="+filepath.Join(mnt, "sshfs-big"),
			"bs=1M", "conv=fsync", "status=none")
		if err != nil {
			return err
		}
		res.Method = strings.ReplaceAll(res.Method, l.bigSrc, "LOCAL")
		if res.Error == "" && !res.Capped {
			if err := l.sameAsData(sshPath); err != nil {
				res.Error = err.Error()
			}
		}
		l.addTransfer(res)
	}
	if err := l.ensureBig(sshPath); err != nil {
		return err
	}
	if l.cfg.want(WRead) {
		res, err := l.sshfs(ctx, WRead, nil, "dd", "if="+filepath.Join(mnt, "sshfs-big"), "of=/dev/null", "bs=1M", "status=none")
		if err != nil {
			return err
		}
		l.addTransfer(res)
	}
	return nil
}

// addTransfer adds the result of a transfer of the big file. Its time is
// not projected: over the cap, it has none.
func (l *linkRun) addTransfer(res *Result) {
	res.Items = l.cfg.FileSize
	if res.Capped {
		res.ProjectedFrom = "no projection"
	}
	l.add(res)
}

// ensureBig makes sure the file on the server's disk holds the data, for
// the read that follows, whatever the write before did.
func (l *linkRun) ensureBig(p string) error {
	if l.sameAsData(p) == nil {
		return nil
	}
	return os.WriteFile(p, l.data, 0o600)
}

func (l *linkRun) sameAsData(p string) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if len(b) != len(l.data) {
		return fmt.Errorf("%s holds %d bytes, want %d", filepath.Base(p), len(b), len(l.data))
	}
	for i := 0; i < len(b); i += 1 << 20 {
		j := min(i+1<<20, len(b))
		if string(b[i:j]) != string(l.data[i:j]) {
			return fmt.Errorf("%s differs near offset %d", filepath.Base(p), i)
		}
	}
	return nil
}
