package bench

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// The FUSE suite (Config.FUSE, "zxbench --fuse"): the same UNIX programs
// on a zx mount (package mount over package cache over one client
// connection, mounted in this process so that the connection's round trips
// can be counted) and on an sshfs mount, both through the same wan proxy.
//
// Every measurement mounts afresh (a new connection, cache and kernel
// superblock for zx; a new sshfs process for sshfs), so caches start cold;
// "warm" workloads run the command once, untimed, on that mount and then
// time the second run. Whatever a workload needs on the server (a copy of
// the tree to remove, an empty directory to extract into, a clean C
// project) is made on the server's disk before mounting, outside the
// timing.

// FUSE workload names (those of the write workloads of issue 14 are in
// fusewrite.go).
const (
	FFind     = "find"
	FGrepCold = "grep-cold"
	FGrepWarm = "grep-warm"
	FLs       = "ls"
	FDiff     = "diff"
	FRm       = "rm"
	FRmWB     = FRm + "-wb"
	FTar      = "tar"
	FTarWB    = FTar + "-wb"
	FGit      = "git"
	FMake     = "make"
	// write and read are WWrite and WRead.
)

// zxMode is a way of mounting zx that the workloads that write run in,
// besides the default one.
type zxMode struct {
	suffix string // added to the workload's name: "" for the default mode
	flag   string // the zx mount flag that selects it, for labels
	// writeBack: mount.Options.WriteBack over a cache with a journal in
	// a fresh directory on local disk (zx mount --writeback).
	writeBack bool
}

// zxModes are the modes the workloads that write run in, the default
// first. A mode the mount gains (the delegations of issue 14, or a strict
// mode beside them) is one more entry here and its options in mountZX.
var zxModes = []zxMode{
	{},
	{suffix: "-wb", flag: "--writeback", writeBack: true},
}

// fuseBase lists the FUSE suite's workloads in report order; those marked
// modes also run in every other mode of zxModes, as workloads of their
// own (base + suffix), zx only.
var fuseBase = []struct {
	w     string
	modes bool
}{
	{FFind, false}, {FGrepCold, false}, {FGrepWarm, false}, {FLs, false}, {FDiff, false},
	{FRm, true}, {FTar, true}, {FCp, true}, {FClone, true}, {FGit, false}, {FCommit, true},
	{FMake, false}, {FSQLite, true}, {FSQLiteWAL, true}, {WWrite, false}, {WRead, false},
}

// writeWorkloads are issue 14's: what people do on a remote tree that
// writes (the group "writes").
var writeWorkloads = []string{FRm, FTar, FCp, FClone, FCommit, FMake, FSQLite, FSQLiteWAL}

// FUSEWorkloads lists the FUSE suite's workloads in report order.
var FUSEWorkloads = func() []string {
	var ws []string
	for _, b := range fuseBase {
		ws = append(ws, b.w)
		if b.modes {
			for _, m := range zxModes[1:] {
				ws = append(ws, b.w+m.suffix)
			}
		}
	}
	return ws
}()

// fuseGroups are the names --workloads accepts besides single workloads:
// a workload that runs in several modes names them all.
var fuseGroups = func() map[string][]string {
	g := map[string][]string{
		"grep": {FGrepCold, FGrepWarm},
		"file": {WWrite, WRead},
	}
	for _, b := range fuseBase {
		if b.modes {
			g[b.w] = append(g[b.w], b.w)
			for _, m := range zxModes[1:] {
				g[b.w] = append(g[b.w], b.w+m.suffix)
			}
		}
	}
	for _, w := range writeWorkloads {
		g["writes"] = append(g["writes"], g[w]...)
		if len(g[w]) == 0 {
			g["writes"] = append(g["writes"], w)
		}
	}
	return g
}()

// fuseGroupNames returns the names of fuseGroups, sorted.
func fuseGroupNames() []string {
	var ns []string
	for n := range fuseGroups {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// modeOf returns the zx mode of workload w and the workload it is a
// variant of (w itself in the default mode).
func modeOf(w string) (zxMode, string) {
	for _, m := range zxModes[1:] {
		if b, ok := strings.CutSuffix(w, m.suffix); ok {
			for _, fb := range fuseBase {
				if fb.w == b && fb.modes {
					return m, b
				}
			}
		}
	}
	return zxModes[0], w
}

// fuseWant says whether the FUSE workload w was asked for.
func (c *Config) fuseWant(w string) bool {
	if len(c.Workloads) == 0 {
		return true
	}
	for _, x := range c.Workloads {
		if x == w {
			return true
		}
		for _, g := range fuseGroups[x] {
			if g == w {
				return true
			}
		}
	}
	return false
}

// fuseWantAny says whether workload base was asked for in any mode.
func (c *Config) fuseWantAny(base string) bool {
	if c.fuseWant(base) {
		return true
	}
	for _, m := range zxModes[1:] {
		if c.fuseWant(base + m.suffix) {
			return true
		}
	}
	return false
}

// checkFUSEWorkload says whether name is a FUSE workload or group.
func checkFUSEWorkload(name string) bool {
	if _, ok := fuseGroups[name]; ok {
		return true
	}
	for _, w := range FUSEWorkloads {
		if w == name {
			return true
		}
	}
	return false
}

// Unit kinds: what a workload's time scales with, for projections from a
// subtree (dirs, files, entries) or from progress (entries, objects).
const (
	unitDirs    = "directories"
	unitFiles   = "files"
	unitEntries = "entries"
)

// fuseJob is one FUSE workload, run the same way on both mounts.
type fuseJob struct {
	w     string
	label string
	// mode: the zx mode it runs in. In any but the default one it is a
	// variant of workload base, zx only: the report compares it with
	// the sshfs and local runs of base.
	mode zxMode
	base string
	// warm: run once untimed on the same mount, then time the second run.
	warm bool
	ok   []int // exit codes that are not failures
	// cmd is the command on mount point mnt, for subtree rel ("." =
	// the whole workload).
	cmd func(mnt, rel string) []string
	// unit: when set, an over-the-cap run is projected from a run on a
	// subtree of the tree, scaled by this unit.
	unit string
	// prep runs on the server's disk before mounting, outside the timing.
	prep func(rel string) error
	// progress reports, after a capped run, how much of the work was
	// done out of how much; a capped run is projected from it.
	progress func() (done, total int64)
	// check verifies the outcome of a complete run (nil: fine).
	check func() error
	// subs and whole, when set, replace the tree's subtrees and the
	// whole tree for projections from a subtree (the git repository
	// holds only part of the tree).
	subs  []subtree
	whole *subtree
	// fixedRel, when set, is a subtree that matches nothing: a run on it
	// measures the job's fixed cost, which projections do not scale.
	fixedRel string
	// items is what a complete run handles (entries, files, bytes).
	items int64
	// coldOf: for a warm job, the cold job whose cost its untimed first
	// run has.
	coldOf *fuseJob
	// costs: rough sshfs round trips per unit of the whole workload
	// (from the issue), used only to decide whether to attempt the full
	// run at all, never for a reported figure.
	rough float64
}

// fuseFixtures are the inputs made once per run.
type fuseFixtures struct {
	sliceDirs  []string // top-level directories of the tree in the slice
	slice      subtree  // the slice's counts (files, dirs, entries)
	sliceBytes int64
	tarFile    string  // the archive of the slice, on local disk
	tarEntries int64   // entries in the archive
	tarBytes   int64   // its size
	floor      float64 // tar -x on the server's disk
	fuseFloor  float64 // tar -x into a pass-through FUSE mount of it
	repoFiles  int64
	cFiles     int
	writeFixtures
}

// FuseInfo describes the FUSE run's fixtures, for the report.
type FuseInfo struct {
	Slice        []string `json:"slice"` // top-level dirs of the tree in the tar archive and the git repository
	SliceFiles   int64    `json:"slice_files"`
	SliceEntries int64    `json:"slice_entries"`
	SliceBytes   int64    `json:"slice_bytes"`
	TarBytes     int64    `json:"tar_bytes"`
	TarEntries   int64    `json:"tar_entries"`
	TarFloorSecs float64  `json:"tar_floor_seconds"` // tar -x of the archive on the server's own disk (best of 2)
	// tar -x of the archive into a go-fuse pass-through (loopback) mount
	// of a directory of the server's disk, with zx's FUSE mount options
	// (best of 2): what FUSE alone costs on this machine.
	TarFUSEFloorSecs float64 `json:"tar_fuse_floor_seconds,omitempty"`
	RepoFiles        int64   `json:"repo_files"`
	CFiles           int     `json:"c_files"`
	Writeback        string  `json:"writeback"` // how write-back mode was run, or why not
	SharedMachine    string  `json:"shared_machine,omitempty"`
	// Writes describes the fixtures of the write workloads of issue 14
	// (nil when none ran).
	Writes *WriteInfo `json:"writes,omitempty"`
}

// pickSlice picks top-level directories of the tree whose file data
// add up to about want bytes (largest first that fit), for the archive
// and the repository.
func (r *runner) pickSlice(want int64) ([]string, subtree, int64, error) {
	root := filepath.Join(r.export, "tree")
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, subtree{}, 0, err
	}
	type cand struct {
		name  string
		bytes int64
		s     subtree
	}
	var cs []cand
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		var c cand
		c.name = e.Name()
		for _, s := range r.subs {
			if s.rel == c.name {
				c.s = s
			}
		}
		filepath.WalkDir(filepath.Join(root, c.name), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				if fi, err := d.Info(); err == nil {
					c.bytes += fi.Size()
				}
			}
			return nil
		})
		cs = append(cs, c)
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].bytes > cs[j].bytes })
	var names []string
	var tot subtree
	var bytes int64
	for _, c := range cs {
		if bytes+c.bytes > want+want/10 {
			continue
		}
		names = append(names, c.name)
		bytes += c.bytes
		tot.files += c.s.files
		tot.dirs += c.s.dirs
		tot.entries += c.s.entries
	}
	if len(names) == 0 {
		// A tree smaller than the target (or with one huge directory):
		// take the smallest directory, or fail.
		if len(cs) == 0 {
			return nil, subtree{}, 0, fmt.Errorf("the tree %s has no directories to make an archive of", r.cfg.Tree)
		}
		c := cs[len(cs)-1]
		names, bytes, tot = []string{c.name}, c.bytes, c.s
	}
	sort.Strings(names)
	return names, tot, bytes, nil
}

// fuseSetup makes the fixtures the asked-for workloads need.
func (r *runner) fuseSetup(ctx context.Context) (*fuseFixtures, error) {
	cfg := r.cfg
	fx := &fuseFixtures{cFiles: cfg.CFiles}
	tree := filepath.Join(r.export, "tree")
	if cfg.fuseWant(FDiff) {
		cfg.logf("copying the tree for diff")
		if err := copyTree(tree, filepath.Join(r.export, "tree2")); err != nil {
			return nil, err
		}
	}
	var err error
	if fx.sliceDirs, fx.slice, fx.sliceBytes, err = r.pickSlice(cfg.TarBytes); err != nil {
		return nil, err
	}
	if cfg.fuseWantAny(FTar) {
		fx.tarFile = filepath.Join(r.dir, "slice.tar")
		args := append([]string{"-cf", fx.tarFile, "-C", tree}, fx.sliceDirs...)
		if out, err := exec.CommandContext(ctx, "tar", args...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("tar -c: %v: %s", err, out)
		}
		fi, err := os.Stat(fx.tarFile)
		if err != nil {
			return nil, err
		}
		fx.tarBytes = fi.Size()
		out, err := exec.CommandContext(ctx, "tar", "-tf", fx.tarFile).Output()
		if err != nil {
			return nil, fmt.Errorf("tar -t: %v", err)
		}
		fx.tarEntries = int64(strings.Count(string(out), "\n"))
		// The floor: the same extraction on the server's own disk.
		for i := 0; i < 2; i++ {
			dst := filepath.Join(r.dir, "floor")
			os.RemoveAll(dst)
			if err := os.Mkdir(dst, 0o755); err != nil {
				return nil, err
			}
			t0 := time.Now()
			if out, err := exec.CommandContext(ctx, "tar", "-xf", fx.tarFile, "-C", dst).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("tar -x (floor): %v: %s", err, out)
			}
			el := time.Since(t0).Seconds()
			if fx.floor == 0 || el < fx.floor {
				fx.floor = el
			}
			os.RemoveAll(dst)
		}
		if fx.fuseFloor, err = r.fuseFloor(ctx, fx.tarFile, 2); err != nil {
			return nil, err
		}
		cfg.logf("archive: %s, %.1f MB, %d entries; tar -x on local disk %.3f s, into a pass-through FUSE mount %.3f s", strings.Join(fx.sliceDirs, " "),
			float64(fx.tarBytes)/1e6, fx.tarEntries, fx.floor, fx.fuseFloor)
	}
	if cfg.fuseWant(FGit) {
		cfg.logf("making a git repository of %s", strings.Join(fx.sliceDirs, " "))
		repo := filepath.Join(r.export, "repo")
		if err := os.Mkdir(repo, 0o755); err != nil {
			return nil, err
		}
		for _, d := range fx.sliceDirs {
			if err := copyTree(filepath.Join(tree, d), filepath.Join(repo, d)); err != nil {
				return nil, err
			}
		}
		// Each mount numbers inodes its own way, and git's index records
		// inode numbers and ctimes: with the default core.checkStat the
		// first status on every new mount would re-read every file.
		// "minimal" (mtime and size) keeps the server-made index valid
		// on both mounts, so the untimed first run is a metadata walk.
		for _, args := range [][]string{
			{"init", "-q"},
			{"config", "core.checkStat", "minimal"},
			{"config", "core.trustctime", "false"},
			{"add", "-A"},
			{"-c", "user.name=zx bench", "-c", "user.email=bench@zx.invalid", "commit", "-q", "-m", "zx bench"},
		} {
			c := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...)
			if out, err := c.CombinedOutput(); err != nil {
				return nil, fmt.Errorf("git %s: %v: %s", args[0], err, out)
			}
		}
		out, err := exec.CommandContext(ctx, "git", "-C", repo, "ls-files").Output()
		if err != nil {
			return nil, fmt.Errorf("git ls-files: %v", err)
		}
		fx.repoFiles = int64(strings.Count(string(out), "\n"))
	}
	if cfg.fuseWant(FMake) {
		if err := writeCProject(filepath.Join(r.export, "cproj"), cfg.CFiles); err != nil {
			return nil, err
		}
	}
	if err := r.writeSetup(ctx, fx); err != nil {
		return nil, err
	}
	return fx, nil
}

// writeCProject generates a small C project of n source files, a shared
// header per ten files and a Makefile that builds one program.
func writeCProject(dir string, n int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var objs, decls []string
	for i := 0; i < (n+9)/10; i++ {
		h := fmt.Sprintf("#ifndef MOD%[1]d_H\n#define MOD%[1]d_H\n#include <stddef.h>\n#include <stdint.h>\n", i)
		for j := i * 10; j < min(n, i*10+10); j++ {
			h += fmt.Sprintf("uint64_t f%d(uint64_t x);\n", j)
		}
		h += "#endif\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("mod%d.h", i)), []byte(h), 0o644); err != nil {
			return err
		}
	}
	for j := 0; j < n; j++ {
		var b strings.Builder
		fmt.Fprintf(&b, "#include <stdio.h>\n#include <string.h>\n#include \"mod%d.h\"\n\n", j/10)
		for k := 0; k < 8; k++ {
			fmt.Fprintf(&b, "static uint64_t g%d_%d(uint64_t x) {\n\tfor (int i = 0; i < %d; i++)\n\t\tx = x * 6364136223846793005ULL + %d;\n\treturn x ^ (x >> %d);\n}\n\n", j, k, k+3, j*8+k+1, k+7)
		}
		fmt.Fprintf(&b, "uint64_t f%d(uint64_t x) {\n\treturn g%[1]d_0(x) + g%[1]d_1(x) + g%[1]d_2(x) + g%[1]d_3(x) + g%[1]d_4(x) + g%[1]d_5(x) + g%[1]d_6(x) + g%[1]d_7(x);\n}\n", j)
		name := fmt.Sprintf("f%d", j)
		if err := os.WriteFile(filepath.Join(dir, name+".c"), []byte(b.String()), 0o644); err != nil {
			return err
		}
		objs = append(objs, name+".o")
		decls = append(decls, fmt.Sprintf("\tx = f%d(x);", j))
	}
	main := "#include <stdio.h>\n#include <stdint.h>\n"
	for i := 0; i < (n+9)/10; i++ {
		main += fmt.Sprintf("#include \"mod%d.h\"\n", i)
	}
	main += "\nint main(void) {\n\tuint64_t x = 1;\n" + strings.Join(decls, "\n") + "\n\tprintf(\"%llu\\n\", (unsigned long long)x);\n\treturn 0;\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "main.c"), []byte(main), 0o644); err != nil {
		return err
	}
	objs = append(objs, "main.o")
	mk := "CFLAGS = -O1\nOBJS = " + strings.Join(objs, " ") + "\n\nprog: $(OBJS)\n\t$(CC) -o $@ $(OBJS)\n\n" +
		"%.o: %.c $(wildcard mod*.h)\n\t$(CC) $(CFLAGS) -c -o $@ $<\n\nclean:\n\trm -f prog $(OBJS)\n"
	return os.WriteFile(filepath.Join(dir, "Makefile"), []byte(mk), 0o644)
}

// countEntries counts what lies under dir (dir itself not included), and
// the names with the given suffix.
func countEntries(dir, suffix string) (n, withSuffix int64) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		n++
		if suffix != "" && strings.HasSuffix(p, suffix) {
			withSuffix++
		}
		return nil
	})
	return n, withSuffix
}

// fuseJobs returns the workloads of the FUSE suite, in report order.
func (r *runner) fuseJobs(fx *fuseFixtures) []*fuseJob {
	tree := filepath.Join(r.export, "tree")
	whole := r.whole()
	in := func(mnt, dir, rel string) string { return filepath.Join(mnt, dir, rel) }
	var jobs []*fuseJob
	add := func(j *fuseJob) {
		if r.cfg.fuseWant(j.w) {
			jobs = append(jobs, j)
		}
	}
	add(&fuseJob{w: FFind, label: "find -name missing", unit: unitDirs, rough: 2, items: whole.entries,
		cmd: func(mnt, rel string) []string { return []string{"find", in(mnt, "tree", rel), "-name", missingName} }})
	grep := func(mnt, rel string) []string { return []string{"grep", "-r", missingBytes, in(mnt, "tree", rel)} }
	grepCold := &fuseJob{w: FGrepCold, label: "grep -r (cold)", unit: unitFiles, rough: 2.5, ok: []int{1}, items: whole.files, cmd: grep}
	add(grepCold)
	add(&fuseJob{w: FGrepWarm, label: "grep -r (warm)", unit: unitFiles, rough: 2.5, ok: []int{1}, items: whole.files, cmd: grep,
		warm: true, coldOf: grepCold})
	add(&fuseJob{w: FLs, label: "ls -lR", unit: unitDirs, rough: 2, items: whole.entries,
		cmd: func(mnt, rel string) []string { return []string{"ls", "-lR", in(mnt, "tree", rel)} }})
	add(&fuseJob{w: FDiff, label: "diff -r of two copies", unit: unitFiles, rough: 5, items: 2 * whole.files,
		cmd: func(mnt, rel string) []string {
			return []string{"diff", "-r", in(mnt, "tree", rel), in(mnt, "tree2", rel)}
		}})

	cp := filepath.Join(r.export, "copy")
	rm := func(m zxMode) *fuseJob {
		return &fuseJob{w: FRm + m.suffix, label: "rm -rf a copy of the tree", mode: m, base: FRm, rough: 1.5, items: whole.entries,
			cmd:  func(mnt, rel string) []string { return []string{"rm", "-rf", filepath.Join(mnt, "copy")} },
			prep: func(string) error { return copyTree(tree, cp) },
			progress: func() (int64, int64) {
				left, _ := countEntries(cp, "")
				if _, err := os.Lstat(cp); err == nil {
					left++
				}
				return whole.entries - left, whole.entries
			},
			check: func() error {
				if _, err := os.Lstat(cp); err == nil {
					return fmt.Errorf("the copy is still there after rm")
				}
				return nil
			}}
	}
	for _, m := range zxModes {
		add(rm(m))
	}

	untar := filepath.Join(r.export, "untar")
	tar := func(m zxMode) *fuseJob {
		return &fuseJob{w: FTar + m.suffix, label: fmt.Sprintf("tar -x of a %.0f MB archive", float64(fx.tarBytes)/1e6), mode: m, base: FTar,
			rough: 10, items: fx.tarEntries,
			cmd: func(mnt, rel string) []string {
				return []string{"tar", "-xf", fx.tarFile, "-C", filepath.Join(mnt, "untar")}
			},
			prep: func(string) error {
				if err := os.RemoveAll(untar); err != nil {
					return err
				}
				return os.Mkdir(untar, 0o755)
			},
			progress: func() (int64, int64) { n, _ := countEntries(untar, ""); return n, fx.tarEntries },
			check: func() error {
				if n, _ := countEntries(untar, ""); n != fx.tarEntries {
					return fmt.Errorf("%d entries extracted, the archive has %d", n, fx.tarEntries)
				}
				return nil
			}}
	}
	for _, m := range zxModes {
		add(tar(m))
	}
	r.writeJobs(fx, add)

	// git status with a pathspec looks at that part of the index and
	// the work tree only: the subtree runs for projections.
	var repoSubs []subtree
	for _, s := range r.subs {
		for _, d := range fx.sliceDirs {
			if s.rel == d || strings.HasPrefix(s.rel, d+"/") {
				repoSubs = append(repoSubs, s)
			}
		}
	}
	repoWhole := fx.slice
	repoWhole.rel = "."
	add(&fuseJob{w: FGit, label: "git status (warm)", warm: true, items: fx.repoFiles, unit: unitFiles, rough: 5,
		subs: repoSubs, whole: &repoWhole, fixedRel: "zxbench-none",
		cmd: func(mnt, rel string) []string {
			args := []string{"git", "-c", "safe.directory=*", "-C", filepath.Join(mnt, "repo"), "status", "--porcelain"}
			if rel != "." {
				args = append(args, "--", rel)
			}
			return args
		}})
	cproj := filepath.Join(r.export, "cproj")
	add(&fuseJob{w: FMake, label: fmt.Sprintf("make (%d .c files)", fx.cFiles+1), rough: 30, items: int64(fx.cFiles + 1),
		cmd: func(mnt, rel string) []string { return []string{"make", "-s", "-C", filepath.Join(mnt, "cproj")} },
		prep: func(string) error {
			out, err := exec.Command("make", "-s", "-C", cproj, "clean").CombinedOutput()
			if err != nil {
				return fmt.Errorf("make clean: %v: %s", err, out)
			}
			return nil
		},
		progress: func() (int64, int64) {
			// Objects built, and the program linked.
			_, objs := countEntries(cproj, ".o")
			if _, err := os.Stat(filepath.Join(cproj, "prog")); err == nil {
				objs++
			}
			return objs, int64(fx.cFiles + 2)
		},
		check: func() error {
			// Through a shell: this process serves the zx mount, and
			// a child of it must not touch the mount before its exec
			// (a garbage collection during the fork deadlocks).
			out, err := exec.Command("/bin/sh", "-c", `exec "$0"`, filepath.Join(cproj, "prog")).Output()
			if err != nil || len(strings.TrimSpace(string(out))) == 0 {
				return fmt.Errorf("the program built does not run: %v", err)
			}
			return nil
		}})
	return jobs
}

// runFUSE runs the FUSE suite.
func runFUSE(ctx context.Context, cfg Config, e *env) (*Report, error) {
	start := time.Now()
	if cfg.CFiles <= 0 {
		cfg.CFiles = 40
	}
	if cfg.TarBytes <= 0 {
		cfg.TarBytes = 35e6
	}
	if cfg.WriteFiles <= 0 {
		cfg.WriteFiles = 300
	}
	if cfg.Transactions <= 0 {
		cfg.Transactions = 200
	}
	r := newRunner(cfg, e, SuiteFUSE)
	if err := checkFUSE(); err != nil {
		return nil, err
	}
	if !cfg.NoSSHFS {
		if err := checkTools(); err != nil {
			return nil, err
		}
	}
	if err := r.scratch(); err != nil {
		return nil, err
	}
	if err := os.Mkdir(filepath.Join(r.dir, "zmnt"), 0o700); err != nil {
		return nil, err
	}
	fx, err := r.fuseSetup(ctx)
	if err != nil {
		return nil, err
	}
	if r.zxAddr, _, err = e.zxServer(r.export); err != nil {
		return nil, err
	}
	r.rep.Facts = facts(cfg.NoSSHFS)
	r.rep.Facts["load average at start (1, 5, 15 min)"] = loadavg()
	if err := r.startSSHD(ctx); err != nil {
		return nil, err
	}
	if cfg.fuseWant(WWrite) || cfg.fuseWant(WRead) {
		if err := r.makeData(); err != nil {
			return nil, err
		}
	}
	info := &FuseInfo{Slice: fx.sliceDirs, SliceFiles: fx.slice.files, SliceEntries: fx.slice.entries,
		SliceBytes: fx.sliceBytes, TarBytes: fx.tarBytes, TarEntries: fx.tarEntries, TarFloorSecs: fx.floor, TarFUSEFloorSecs: fx.fuseFloor,
		RepoFiles: fx.repoFiles, CFiles: fx.cFiles + 1, SharedMachine: cfg.Shared}
	info.Writeback = writebackMode()
	if tree, _, sqlite := cfg.wantsWrites(); tree || sqlite {
		info.Writes = &WriteInfo{Files: fx.smallFiles, Entries: fx.smallEntries, Bytes: fx.smallBytes,
			CloneEntries: fx.cloneEntries, Changes: commitChanges, FsyncsPerTx: fx.fsyncs, FsyncNote: fx.fsyncNote}
		if sqlite {
			info.Writes.Transactions = cfg.Transactions
		}
	}
	r.rep.Fuse = info
	jobs := r.fuseJobs(fx)
	if err := r.fuseLocal(ctx, jobs); err != nil {
		return nil, err
	}
	for _, rtt := range cfg.RTTs {
		if err := r.fuseLink(ctx, jobs, rtt, 0); err != nil {
			return nil, err
		}
	}
	if cfg.Rate > 0 && (cfg.fuseWant(WWrite) || cfg.fuseWant(WRead)) {
		if err := r.fuseLink(ctx, nil, r.cfg.RateRTT, cfg.Rate); err != nil {
			return nil, err
		}
	}
	r.rep.Targets = r.rep.fuseTargets()
	r.rep.Facts["load average at end (1, 5, 15 min)"] = loadavg()
	return r.rep, r.finish(start)
}

// checkFUSE fails with a clear message when this process cannot mount.
func checkFUSE() error {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no /dev/fuse: the FUSE suite mounts zx (run as root on a machine with FUSE)")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil && os.Getuid() != 0 {
		return fmt.Errorf("fusermount3 missing: apt-get install -y fuse3")
	}
	var missing []string
	for _, t := range []string{"find", "grep", "ls", "diff", "rm", "tar", "git", "make", "cc", "dd"} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the FUSE suite runs %s, which are missing: install them (apt-get install -y git make gcc tar diffutils)",
			strings.Join(missing, ", "))
	}
	return nil
}

// writebackMode says how write-back workloads are run.
func writebackMode() string {
	return "the `-wb` workloads mount with `mount.Options{WriteBack: true}` over `cache.Open` with a journal in a fresh directory on local disk (what `zx mount --writeback` does): close() does not wait for the server; after the timed command the benchmark waits for `FS.Sync` (what fsync and `zx sync` wait for) and reports that wait separately. In the default mode, changes the mount pipelined without waiting (rm's unlinks and rmdirs) may still be on their way when the command exits, for about one RTT: the check of the result waits for them (`FS.Sync`) first, outside the timing"
}

// loadavg returns the system's load averages, which say how busy the
// machine was around a run.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], ", ")
}
