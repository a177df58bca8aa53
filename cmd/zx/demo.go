package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/mount"
	"github.com/zxfs/zx/server"
	"github.com/zxfs/zx/wan"
)

func demoCommand() command {
	return command{
		name:    "demo",
		args:    "[--once] [--rtt DURATION] [DIR]",
		summary: "serve a tree through emulated latency and show what zx does with it",
		help: "Demo serves DIR (default: the Go source tree, $(go env GOROOT)/src, if there is one, else the " +
			"current directory) read-only on a loopback port behind an emulated link with --rtt of round-trip " +
			"time, all in this process, and then runs, showing the round trips each waited for and the time " +
			"it took: a find of every *.go file, a grep of all of them for a string that is in none, an ls -l " +
			"of the root, and a ping; then it mounts the tree with FUSE (when /dev/fuse is there) and lists a " +
			"directory and reads a file twice through the mount. Then it keeps serving (and mounted), so you can try other commands, until " +
			"interrupted; with --once it exits after the demo.",
		exit:    "0 the demo ran (and, without --once, was then stopped by SIGINT or SIGTERM); 1 a step failed; 2 bad usage.",
		example: "zx demo\nzx demo --once --rtt 100ms ~/src",
		run:     runDemo,
	}
}

func runDemo(args []string) int {
	c := demoCommand()
	fs := newFlagSet(c)
	once := fs.Bool("once", false, "exit after the demo instead of serving on")
	rtt := fs.Duration("rtt", 50*time.Millisecond, "round-trip time to emulate")
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) > 1 {
		return usageError(c, "at most one DIR")
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "zx demo: "+format+"\n", a...)
		return exitFail
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir := ""
	if len(rest) == 1 {
		dir = rest[0]
	} else {
		dir = goSrc(ctx)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fail("%v", err)
	}
	tree, err := lfs.New(dir, lfs.Options{ReadOnly: true})
	if err != nil {
		return fail("cannot serve %s: %v", dir, err)
	}
	defer tree.Close()
	srv, err := server.New(map[string]zx.Tree{defaultTree: tree}, defaultTree, server.Config{})
	if err != nil {
		return fail("%v", err)
	}
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail("%v", err)
	}
	go srv.Serve(l)
	lag, err := wan.Listen("127.0.0.1:0", l.Addr().String(), wan.Config{RTT: *rtt})
	if err != nil {
		return fail("%v", err)
	}
	defer lag.Close()
	conn, err := client.Dial(ctx, lag.Addr(), client.Options{})
	if err != nil {
		return fail("%v", err)
	}
	defer conn.Close()

	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	fmt.Fprintf(out, "zx demo: %s, read-only, through %v of emulated round-trip time\n\n", dir, *rtt)
	if err := runDemoSteps(ctx, out, conn, conn.Tree("")); err != nil {
		out.Flush()
		return fail("%v", err)
	}
	mnt, unmount, err := demoMount(ctx, out, conn)
	if err != nil {
		fmt.Fprintf(out, "zx demo: not mounting (%v)\n", err)
	} else {
		defer unmount()
	}
	if *once {
		return exitOK
	}
	fmt.Fprintf(out, "\nzx demo: serving %s at zx://%s/ (through %v of emulated latency) — try: zx find zx://%s/ '~*.go' --stats ; Ctrl-C to stop\n",
		dir, lag.Addr(), *rtt, lag.Addr())
	if mnt != "" {
		fmt.Fprintf(out, "zx demo: mounted at %s — try: ls -l %s ; cat %s/... \n", mnt, mnt, mnt)
	}
	out.Flush()
	<-ctx.Done()
	return exitOK
}

// goSrc returns $(go env GOROOT)/src if there is one, else ".".
func goSrc(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err == nil {
		src := filepath.Join(strings.TrimSpace(string(b)), "src")
		if fi, err := os.Stat(src); err == nil && fi.IsDir() {
			return src
		}
	}
	return "."
}

// runDemoSteps runs the demo's commands over conn, printing each with the
// round trips it waited for and the time it took.
func runDemoSteps(ctx context.Context, out *bufio.Writer, conn *client.Conn, t *client.Tree) error {
	step := func(title string, f func() (string, error)) error {
		rt0, in0, t0 := conn.Stats().RoundTrips, conn.Stats().BytesIn, time.Now()
		res, err := f()
		if err != nil {
			return err
		}
		st := conn.Stats()
		fmt.Fprintf(out, "$ %s\n%s\n  -> %s, %s in, %v\n\n", title, res, plural(st.RoundTrips-rt0, "round trip"),
			fmtBytes(st.BytesIn-in0), time.Since(t0).Round(time.Millisecond))
		out.Flush()
		return nil
	}
	const goFiles = "- & ~*.go"
	err := step("zx find zx://ADDR/ '"+goFiles+"'  (counting)", func() (string, error) {
		n := 0
		for it := range t.Find(ctx, "/", zx.FindOpts{Pred: goFiles}) {
			if it.Err != nil && it.Dir == nil {
				return "", it.Err
			}
			n++
		}
		return fmt.Sprintf("  %d Go files", n), ctx.Err()
	})
	if err != nil {
		return err
	}
	absent := fmt.Sprintf("zx-demo-absent-%d", time.Now().UnixNano())
	err = step("zx grep "+absent+" zx://ADDR/ '~*.go'", func() (string, error) {
		files := 0
		g := &grepScan{re: regexpQuote(absent), fileDone: func(string, int) { files++ }}
		matched, _ := g.run(findGet(ctx, t, "/", goFiles))
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if matched {
			return "", fmt.Errorf("the absent string %q was found", absent)
		}
		return fmt.Sprintf("  no match in %d files", files), nil
	})
	if err != nil {
		return err
	}
	err = step("zx ls -l zx://ADDR/", func() (string, error) {
		_, entries, err := startList(ctx, t, "/", true).wait()
		if err != nil {
			return "", err
		}
		var b strings.Builder
		const show = 15
		writeLong(&b, entries[:min(len(entries), show)], zx.Dir.Name, time.Now(), newOwners())
		if len(entries) > show {
			fmt.Fprintf(&b, "... and %d more\n", len(entries)-show)
		}
		return "  " + strings.ReplaceAll(strings.TrimSuffix(b.String(), "\n"), "\n", "\n  "), nil
	})
	if err != nil {
		return err
	}
	return step("zx ping -c 1 zx://ADDR", func() (string, error) {
		d, err := conn.Ping(ctx)
		return fmt.Sprintf("  rtt %v (a protocol ping: not a request, so not counted)", d.Round(10*time.Microsecond)), err
	})
}

// demoMount mounts the served tree read-only with FUSE on a temporary
// directory and shows what programs see through it: a first listing of a
// directory costs no round trip (the root's listing, as the mount starts,
// prefetched the subtree's metadata), a cold file one, the same file again
// none. It returns the mount point and how to undo it.
func demoMount(ctx context.Context, out *bufio.Writer, conn *client.Conn) (string, func(), error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return "", nil, fmt.Errorf("no /dev/fuse: %v", err)
	}
	mnt, err := os.MkdirTemp("", "zx-demo-mnt-")
	if err != nil {
		return "", nil, err
	}
	ca := cache.New(conn.Tree(""), cache.Options{})
	m, err := mount.Mount(mnt, ca, mount.Options{ReadOnly: true, FsName: "zx-demo"})
	if err != nil {
		os.Remove(mnt)
		return "", nil, err
	}
	undo := func() {
		m.Unmount()
		os.Remove(mnt)
	}
	run := func(title string, name string, args ...string) {
		rt0, t0 := conn.Stats().RoundTrips, time.Now()
		b, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(lines) > 8 {
			lines = append(lines[:8], fmt.Sprintf("... and %d more lines", len(lines)-8))
		}
		res := "  " + strings.Join(lines, "\n  ")
		if err != nil {
			res += fmt.Sprintf("\n  (%v)", err)
		}
		fmt.Fprintf(out, "$ %s\n%s\n  -> %s, %v\n\n", title, res,
			plural(conn.Stats().RoundTrips-rt0, "round trip"), time.Since(t0).Round(time.Millisecond))
		out.Flush()
	}
	fmt.Fprintf(out, "zx demo: mounted with FUSE at %s\n\n", mnt)
	// A directory below the root (the mount lists the root as it starts),
	// and a small file, read cold and then warm.
	var sub, file string
	if ents, err := os.ReadDir(mnt); err == nil {
		for _, e := range ents {
			if e.IsDir() && sub == "" {
				sub = e.Name()
			}
		}
	}
	if sub == "" {
		return mnt, undo, nil
	}
	run("ls -l MNT/"+sub+"  (first listing; the mount prefetches metadata)", "ls", "-l", filepath.Join(mnt, sub))
	if ents, err := os.ReadDir(mnt); err == nil {
		for _, e := range ents {
			if info, err := e.Info(); err == nil && e.Type().IsRegular() && info.Size() < 1<<20 {
				file = e.Name()
				break
			}
		}
	}
	if file != "" {
		run("cksum MNT/"+file+"  (cold)", "cksum", filepath.Join(mnt, file))
		run("cksum MNT/"+file+"  (cached, unchanged)", "cksum", filepath.Join(mnt, file))
	}
	return mnt, undo, nil
}
