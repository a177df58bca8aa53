// Package bench compares native zx with sshfs on this machine, in one run,
// through the same WAN emulator (package wan), on Go's own source tree.
//
// For each emulated round-trip time (0, 10, 50 and 100 ms by default) the
// harness runs the same workloads twice: once with the zx Go API over a real
// TCP connection to a zx server (an lfs tree over a scratch copy of the
// source tree), and once with the ordinary UNIX tools over an sshfs mount of
// the same directory, served by a private sshd. Both connections go through
// a wan proxy with the same settings.
//
// Workloads:
//
//   - find: look for a name that does not exist (zx: one Find with
//     "name=NAME"; sshfs: find MNT -name NAME);
//   - grep: look for a string that does not exist in any file (zx: one
//     FindGet over the regular files, scanning the data as it streams, as zx
//     grep does; sshfs: grep -r STRING MNT);
//   - rm: remove a fresh copy of the tree, made on the server's disk with
//     cp -a outside the timing (zx: one Find and pipelined Removes, files as
//     they stream in and then directories deepest first, and also one
//     RemoveAll; sshfs: rm -rf MNT/copy);
//   - write and read one 128 MiB file of random data (zx: one Put / one Get;
//     sshfs: dd bs=1M conv=fsync to the mount / dd bs=1M from it), also with
//     the rate limited (100 Mbit/s by default) at the largest RTT.
//
// The sshfs mount is remounted before every workload, so its caches start
// cold; zx keeps no client cache, and each zx measurement uses a fresh
// connection. Every measurement has a time cap: an sshfs run that exceeds it
// is killed and reported as "> cap", and its time is projected either from
// its progress (rm: entries removed by then) or from a run on a subtree
// scaled by the number of directories (find), files (grep) or entries (rm).
// When a smaller RTT already showed that a workload will exceed the cap, the
// full run is skipped and only the projection is made. Every projection is
// labelled as such in the outputs.
//
// The FUSE suite (Config.FUSE; see fuse.go) runs unmodified programs
// instead — find, grep -r cold and warm, ls -lR, diff -r, rm -rf, tar -x,
// git status, make and dd — on a zx mount (package mount, served by this
// process so that its connection's round trips can be counted) and on the
// same sshfs mount, and writes fuse.md, fuse.json and fuse.png.
//
// Main is the command (bench/zxbench: go run ./bench/zxbench); Run is the
// library entry point. The harness is not part of the zx command, so that
// the binary users install does not carry it and its plotting library.
package bench

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/zxfs/zx/bench/internal/testbed"
	"github.com/zxfs/zx/wan"
)

// Config configures a run.
type Config struct {
	Tree      string          // directory to copy and work on
	RTTs      []time.Duration // emulated round-trip times
	Rate      int64           // bytes/s for the rate-limited file transfer; 0: skip it
	RateRTT   time.Duration   // RTT of the rate-limited transfer (the largest RTT by default)
	Cap       time.Duration   // time cap of each measurement
	FileSize  int64           // size of the big file
	OutDir    string          // where native.{md,json,png} (or fuse.*) go ("" = don't write)
	Workloads []string        // subset of find, grep, rm, file ("" or nil = all)
	NoSSHFS   bool            // measure zx only
	Command   string          // the command line, for the report
	Log       io.Writer       // progress messages (nil: discard)

	// The FUSE suite (fuse.md): the same programs on a zx mount and on
	// sshfs, instead of the Go API against sshfs (native.md).
	FUSE     bool
	TarBytes int64  // file data in the tar archive (default 35 MB)
	CFiles   int    // .c files in the C project besides main.c (default 40)
	Shared   string // a note for the report: who else used the machine during the run
	// The write workloads of issue 14 (fusewrite.go).
	WriteFiles   int // files in the tree cp -a copies and in the git repository (default 300)
	Transactions int // sqlite transactions, committed one at a time (default 200)

	// LoopbackOnly measures only the server's raw rates on loopback
	// (Report.Loopback): no emulator, no sshd, no workloads, no files.
	LoopbackOnly bool

	// ServeCommand, when set, is the command (program and arguments, to
	// which the flags and the directory are added) of the server whose raw
	// rates on loopback are measured: `zx serve`, a process of its own as
	// deployed. When empty they are measured against a server in this
	// process.
	ServeCommand []string
}

// Suites.
const (
	SuiteNative = "native"
	SuiteFUSE   = "fuse"
)

// Workload names of the native suite.
const (
	WFind        = "find"
	WGrep        = "grep"
	WRm          = "rm"
	WRmAll       = "rm-removeall"
	WWrite       = "write"
	WRead        = "read"
	groupFile    = "file"
	missingName  = "zxbench-no-such-file"
	missingBytes = "zxbench-no-such-string"
)

func (c *Config) want(w string) bool {
	if len(c.Workloads) == 0 {
		return true
	}
	for _, x := range c.Workloads {
		if x == w || (x == groupFile && (w == WWrite || w == WRead)) || (x == WRm && w == WRmAll) {
			return true
		}
	}
	return false
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
	}
}

// commandName is how the command is invoked, in messages and in the
// report's record of the exact command used.
const commandName = "go run ./bench/zxbench"

// Main runs the benchmark command with args (without the command name) and
// returns the exit status.
func Main(args []string) int {
	fs := flag.NewFlagSet("zxbench", flag.ContinueOnError)
	// Help goes to stdout, as for zx's commands; flag errors to stderr.
	fs.SetOutput(os.Stdout)
	for _, a := range args {
		if a == "--" {
			break
		}
		if a != "-h" && a != "-help" && a != "--help" && strings.HasPrefix(a, "-") {
			fs.SetOutput(os.Stderr)
		}
	}
	var (
		tree      = fs.String("tree", "", "directory tree to work on (default: $(go env GOROOT)/src)")
		rtts      = fs.String("rtts", "0,10ms,50ms,100ms", "comma-separated emulated round-trip times (a bare number is milliseconds)")
		rate      = fs.String("rate", "100mbit", "rate of the extra rate-limited file transfer at the largest RTT (\"0\" or \"\" skips it)")
		capf      = fs.Duration("cap", 120*time.Second, "time cap of each measurement: slower runs are killed and projected (in the native suite only sshfs runs can be)")
		size      = fs.Int64("size", 128<<20, "size in bytes of the big file")
		out       = fs.String("out", "docs/bench", "directory for the suite's .md, .json and .png (\"\" writes nothing)")
		workloads = fs.String("workloads", "", "comma-separated subset of the suite's workloads (default all): native: find,grep,rm,file; --fuse: "+
			strings.Join(FUSEWorkloads, ",")+" or the groups "+strings.Join(fuseGroupNames(), ",")+
			" (a workload's group is it in every zx mode; writes: issue 14's workloads that write)")
		nosshfs    = fs.Bool("no-sshfs", false, "measure zx only (no sshd; the native suite needs no FUSE then)")
		loopback   = fs.Bool("loopback", false, "measure only the server's raw rates on loopback (find entries/s, median of 11 runs, with the CPU per entry of server and client and the floor of a bare walk of the tree on this machine; findget MB/s, best of 3) against a zx serve process, print them and write nothing")
		quiet      = fs.Bool("q", false, "no progress messages on stderr")
		fuse       = fs.Bool("fuse", false, "run the FUSE suite (fuse.md, fuse.json, fuse.png): UNIX programs on a zx mount vs on sshfs")
		tarBytes   = fs.Int64("tar-bytes", 35e6, "--fuse: file data in the tar -x archive and the git repository, taken from top-level directories of the tree")
		cFiles     = fs.Int("c-files", 40, "--fuse: generated .c files in the C project (plus main.c)")
		writeFiles = fs.Int("write-files", 300, "--fuse: files of the tree in the tree cp -a copies into the mount and in the git repository cloned into it and committed to")
		txs        = fs.Int("transactions", 200, "--fuse: sqlite transactions, each one INSERT committed on its own (synchronous=FULL)")
		shared     = fs.String("shared", "", "--fuse: a note for the report on who else used the machine during the run (e.g. \"shared with 6 other engineers' builds and tests\")")
		cpuprof    = fs.String("cpuprofile", "", "write a CPU profile of this process (mounts, cache, server and proxies all run in it) to this file")
		zxBin      = fs.String("zx", "", "the zx command at `PATH` whose server (zx serve) the loopback rates measure, in the native suite and with --loopback (default: one built from the zx source tree this runs in)")
	)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: go run ./bench/zxbench [--fuse] [flags]

Zxbench compares zx with sshfs mounted from a private local sshd, in one run
on this machine, both through the same WAN emulator, at several round-trip
times, on a copy of Go's source tree. It needs root, /dev/fuse, sshd, sshfs
and fusermount3 (apt-get install -y openssh-server sshfs fuse3); the FUSE
suite also runs git, make, cc, tar and sqlite3. Run it from zx's source
tree (it builds the zx command for the server process it measures), or
give --zx.
Everything it starts is stopped and removed at the end, also on failure or
interrupt.

The native suite (the default) runs native zx (the Go API over a real TCP
connection) against the usual tools on sshfs: find a missing name, grep a
missing string, remove a copy of the tree, and write and read one big file
(also rate-limited). It writes native.md, native.json and native.png.

The FUSE suite (--fuse) runs the same unmodified programs on a zx mount
(package mount, served by this process, so that its connection's blocking
round trips are counted), on sshfs and on the local disk: find -name
missing, grep -r (cold and warm), ls -lR, diff -r of two copies of the
tree, rm -rf of a copy, tar -x of an archive of part of the tree
(--tar-bytes), git status (warm) in a repository of the same part, make
of a generated C project (--c-files), and dd of one big file to and from
the mount (also rate-limited); and what people do on a remote tree that
writes: cp -a of a tree of --write-files files into the mount, git clone
of a repository of them, git add and git commit in a checkout, and
sqlite3 committing --transactions transactions one at a time, with the
DELETE journal and in WAL mode (with strace installed, it counts the
fsyncs a transaction makes). The workloads that write also run in zx's
--writeback mode. Every measurement mounts afresh, so caches start cold;
warm workloads time a second run on the same mount. It writes fuse.md,
fuse.json and fuse.png.

Runs that exceed --cap are killed and their time is projected from their
progress or from a subtree; when smaller RTTs show that a run would exceed
the cap, only the subtree or a run cut short at a third of the cap is made.
Projections are labelled so.

Exit status: 0 success; 1 a measurement failed; 2 bad usage; 3 the
benchmark panicked; 130 interrupted (after cleaning up).

Flags:
`)
		// As zx's commands list them: --name for long flags.
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			dash := "--"
			if len(f.Name) == 1 {
				dash = "-"
			}
			fmt.Fprintf(fs.Output(), "  %s%s", dash, f.Name)
			if name != "" {
				fmt.Fprintf(fs.Output(), " %s", name)
			}
			fmt.Fprintf(fs.Output(), "\n    \t%s", usage)
			if d := f.DefValue; d != "" && d != "false" && d != "0" {
				fmt.Fprintf(fs.Output(), " (default %s)", d)
			}
			fmt.Fprintln(fs.Output())
		})
		fmt.Fprint(fs.Output(), "\nExample:\n\n\tgo run ./bench/zxbench --rtts 0,50ms --cap 60s --out /tmp/bench\n"+
			"\tgo run ./bench/zxbench --fuse --rtts 0,50ms,100ms --cap 60s --workloads find,grep,git\n"+
			"\tgo run ./bench/zxbench --fuse --rtts 0,50ms --cap 60s --workloads writes --out /tmp/writes\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "zxbench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	cfg := Config{Cap: *capf, FileSize: *size, OutDir: *out, NoSSHFS: *nosshfs, LoopbackOnly: *loopback,
		Command: strings.TrimSpace(commandName + " " + strings.Join(args, " "))}
	if !*quiet {
		cfg.Log = os.Stderr
	}
	var err error
	if cfg.RTTs, err = parseRTTs(*rtts); err != nil {
		fmt.Fprintf(os.Stderr, "zxbench: --rtts: %v\n", err)
		return 2
	}
	if *rate != "" && *rate != "0" {
		if cfg.Rate, err = wan.ParseRate(*rate); err != nil {
			fmt.Fprintf(os.Stderr, "zxbench: --rate: %v\n", err)
			return 2
		}
	}
	cfg.FUSE, cfg.TarBytes, cfg.CFiles, cfg.Shared = *fuse, *tarBytes, *cFiles, *shared
	cfg.WriteFiles, cfg.Transactions = *writeFiles, *txs
	if *workloads != "" {
		for _, w := range strings.Split(*workloads, ",") {
			w = strings.TrimSpace(w)
			switch {
			case cfg.FUSE && checkFUSEWorkload(w):
			case cfg.FUSE:
				fmt.Fprintf(os.Stderr, "zxbench: --workloads: unknown FUSE workload %q (want %s, or a group: %s)\n",
					w, strings.Join(FUSEWorkloads, ", "), strings.Join(fuseGroupNames(), ", "))
				return 2
			case w == WFind || w == WGrep || w == WRm || w == groupFile:
			default:
				fmt.Fprintf(os.Stderr, "zxbench: --workloads: unknown workload %q (want find, grep, rm, file)\n", w)
				return 2
			}
			cfg.Workloads = append(cfg.Workloads, w)
		}
	}
	cfg.Tree = *tree
	if cfg.Tree == "" {
		if cfg.Tree, err = testbed.GoSource(); err != nil {
			fmt.Fprintf(os.Stderr, "zxbench: no --tree given and %v\n", err)
			return 2
		}
	}
	if *zxBin != "" {
		if *zxBin, err = exec.LookPath(*zxBin); err != nil {
			fmt.Fprintf(os.Stderr, "zxbench: --zx: %v\n", err)
			return 2
		}
	}
	if cfg.Cap <= 0 || cfg.FileSize <= 0 || cfg.TarBytes <= 0 || cfg.CFiles <= 0 || cfg.WriteFiles <= 0 || cfg.Transactions <= 0 {
		fmt.Fprintln(os.Stderr, "zxbench: --cap, --size, --tar-bytes, --c-files, --write-files and --transactions must be positive")
		return 2
	}

	if *cpuprof != "" {
		f, err := os.Create(*cpuprof)
		if err != nil {
			fmt.Fprintf(os.Stderr, "zxbench: --cpuprofile: %v\n", err)
			return 2
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "zxbench: --cpuprofile: %v\n", err)
			return 2
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env := newEnv()
	// Clean up on a signal too: cancel the run, undo the setup, and exit.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigc)
	go func() {
		s, ok := <-sigc
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "zxbench: %v: cleaning up\n", s)
		cancel()
		env.cleanup()
		os.Exit(130)
	}()

	code := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				fmt.Fprintf(os.Stderr, "zxbench: panic: %v\n%s", r, debug.Stack())
				code = 3
			}
		}()
		defer env.cleanup()
		if !cfg.FUSE {
			// The loopback rates are measured against `zx serve`, a
			// process of its own as deployed.
			bin, err := zxCommand(ctx, *zxBin, env)
			if err != nil {
				fmt.Fprintf(os.Stderr, "zxbench: %v\n", err)
				code = 1
				return
			}
			cfg.ServeCommand = []string{bin, "serve"}
		}
		rep, err := run(ctx, cfg, env)
		if err != nil {
			fmt.Fprintf(os.Stderr, "zxbench: %v\n", err)
			code = 1
			return
		}
		switch {
		case cfg.LoopbackOnly:
			lb := rep.Loopback
			fmt.Printf("server: %s\nfind: %s entries/s (median %.0f, best %.0f)\n",
				lb.Server, joinf(lb.FindEntriesPerSec, "%.0f"), median(lb.FindEntriesPerSec), maxf(lb.FindEntriesPerSec))
			if lb.ServerCPUPerEntry > 0 {
				fmt.Printf("find CPU per entry: server %.2f µs, client %.2f µs\n", us(lb.ServerCPUPerEntry), us(lb.ClientCPUPerEntry))
			}
			fmt.Printf("bare walk (the floor): %s entries/s (median %.0f)\nfindget (%s): %s MB/s (best %.0f)\n",
				joinf(lb.WalkEntriesPerSec, "%.0f"), median(lb.WalkEntriesPerSec),
				lb.FindGetMethod, joinf(lb.FindGetMBPerSec, "%.0f"), maxf(lb.FindGetMBPerSec))
		case cfg.OutDir == "":
			os.Stdout.WriteString(rep.Markdown())
		}
	}()
	return code
}

// Run runs the benchmark and returns its report, writing the outputs to
// cfg.OutDir when it is set. Everything it sets up is undone before it
// returns.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	env := newEnv()
	defer env.cleanup()
	return run(ctx, cfg, env)
}

// zxCommand returns the zx command to serve with: bin when given, or else
// one built from the zx source tree the current directory is in, into a
// directory that e removes.
func zxCommand(ctx context.Context, bin string, e *env) (string, error) {
	if bin != "" {
		return bin, nil
	}
	dir, err := os.MkdirTemp("", "zxbench-zx-")
	if err != nil {
		return "", err
	}
	e.onCleanup(func() { os.RemoveAll(dir) })
	out := filepath.Join(dir, "zx")
	msg, err := exec.CommandContext(ctx, "go", "build", "-o", out, "github.com/zxfs/zx/cmd/zx").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the zx command whose server is measured (go build github.com/zxfs/zx/cmd/zx): %v: %s; "+
			"run from zx's source tree, or give --zx PATH", err, bytes.TrimSpace(msg))
	}
	return out, nil
}

func parseRTTs(s string) ([]time.Duration, error) {
	var ds []time.Duration
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := time.ParseDuration(f)
		if err != nil {
			var ms float64
			if _, err2 := fmt.Sscanf(f, "%g", &ms); err2 != nil {
				return nil, err
			}
			d = time.Duration(ms * float64(time.Millisecond))
		}
		if d < 0 {
			return nil, fmt.Errorf("negative RTT %v", d)
		}
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		return nil, errors.New("no RTT given")
	}
	return ds, nil
}
