package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/mount"
	"github.com/zxfs/zx/subtree"
)

func mountCommand() command {
	return command{
		name:    "mount",
		args:    "[-f] [-o OPTIONS] [--coherency D] [--debug] zx://HOST[:PORT]/PATH|ssh://[USER@]HOST[:PORT]/DIR MOUNTPOINT",
		summary: "mount a remote tree with FUSE, with coherent caching",
		help: "Mount makes the tree at PATH on the server appear at MOUNTPOINT, for unmodified " +
			"programs. Metadata and file data are cached and kept coherent by change notices " +
			"the server pushes (or, if it cannot, by a coherency window), so a cached file opens " +
			"with no round trip and a directory listing is one request. close() returns once the " +
			"server has the data (close-to-open). It runs in the background once mounted unless -f " +
			"is given; unmount with 'zx umount MOUNTPOINT' or 'fusermount3 -u MOUNTPOINT'. " +
			"OPTIONS, as in fstab, separated by commas: ro, allow_other, default_permissions, " +
			"coherency=D, debug; rw, defaults, auto, noauto, user, nofail and _netdev are accepted " +
			"and ignored. docs/cache.md states the guarantees. An ssh:// location runs ssh (with the " +
			"user's ssh configuration, agent and known hosts, as sshfs does) to start \"zx serve --stdio DIR\" " +
			"on the host, and mounts the tree it serves.",
		example: "zx mount zx://127.0.0.1/src /mnt/src && ls -l /mnt/src",
		run:     runMount,
	}
}

type mountOptions struct {
	sec        secFlags
	foreground bool
	debug      bool
	coherency  time.Duration
	ssh        sshFlags
	mo         mount.Options
}

func parseMountOpts(s string, o *mountOptions) error {
	for _, opt := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(opt), "=")
		switch k {
		case "":
		case "ro":
			o.mo.ReadOnly = true
		case "allow_other":
			o.mo.AllowOther = true
		case "default_permissions":
			o.mo.DefaultPermissions = true
		case "debug":
			o.debug = true
		case "coherency":
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("option coherency=%s: %v", v, err)
			}
			o.coherency = d
		case "rw", "defaults", "auto", "noauto", "user", "nouser", "nofail", "_netdev", "exec", "noexec", "suid", "nosuid", "dev", "nodev":
		default:
			return fmt.Errorf("unknown mount option %q", k)
		}
	}
	return nil
}

func runMount(args []string) int {
	c := mountCommand()
	var o mountOptions
	fs := newFlagSet(c)
	fs.BoolVar(&o.foreground, "f", false, "stay in the foreground")
	opts := fs.String("o", "", "mount options, comma-separated (see above)")
	fs.DurationVar(&o.coherency, "coherency", time.Second, "how stale cached metadata may be when the server cannot push change notices")
	fs.BoolVar(&o.debug, "debug", false, "log every FUSE request to stderr (implies -f)")
	o.ssh.register(fs)
	o.sec.register(fs)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if err := parseMountOpts(*opts, &o); err != nil {
		return usageError(c, err.Error())
	}
	if len(rest) != 2 {
		return usageError(c, "want a zx:// location and a mount point")
	}
	loc, err := client.ParseLocation(rest[0])
	if err != nil {
		return usageError(c, err.Error())
	}
	mnt := rest[1]
	if st, err := os.Stat(mnt); err != nil || !st.IsDir() {
		fmt.Fprintf(os.Stderr, "zx mount: %s is not a directory; create it first (mkdir -p %s)\n", mnt, mnt)
		return exitFail
	}
	if o.debug {
		o.foreground = true
	}
	if !o.foreground {
		return daemonize(args)
	}
	return mountForeground(loc, mnt, o)
}

// daemonize runs this mount again in the foreground in a new session, and
// returns once it has mounted (or failed), as mount(8) users expect.
func daemonize(args []string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "zx mount: %v\n", err)
		return exitFail
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "zx mount: %v\n", err)
		return exitFail
	}
	cmd := exec.Command(exe, append([]string{"mount", "-f"}, args...)...)
	cmd.Env = append(os.Environ(), "ZX_MOUNT_READY_FD=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout = nil
	cmd.Stderr = w // until mounted, errors come back to us
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "zx mount: %v\n", err)
		return exitFail
	}
	w.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "zx mount: ready" {
			cmd.Process.Release()
			return exitOK
		}
		fmt.Fprintln(os.Stderr, line)
	}
	cmd.Wait()
	return exitFail
}

func mountForeground(loc client.Location, mnt string, o mountOptions) int {
	level := slog.LevelWarn
	if o.debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	opts, err := clientOptions(loc, o.sec)
	if err != nil {
		cancel()
		fmt.Fprintf(os.Stderr, "zx mount: %v\n", err)
		return exitFail
	}
	conn, err := dial(dctx, loc, o.ssh, opts)
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "zx mount: %v\n", err)
		return exitFail
	}
	defer conn.Close()
	t := conn.Tree(loc.Tree)
	if _, err := t.Conn().Attach(ctx, loc.Tree); err != nil {
		fmt.Fprintf(os.Stderr, "zx mount: %v\n", err)
		return exitFail
	}
	ca := cache.New(subtree.New(t, loc.Path), cache.Options{Coherency: o.coherency})
	o.mo.Coherency = o.coherency
	o.mo.Debug = o.debug
	o.mo.Logger = log
	if o.mo.FsName == "" {
		o.mo.FsName = loc.String()
	}
	m, err := mount.Mount(mnt, ca, o.mo)
	if err != nil {
		fmt.Fprintf(os.Stderr, "zx mount: %v\n", err)
		return exitFail
	}
	if fd := os.Getenv("ZX_MOUNT_READY_FD"); fd == "3" {
		ready := os.NewFile(3, "ready")
		fmt.Fprintln(ready, "zx mount: ready")
		ready.Close()
		// From now on, errors go to the log only.
		if devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
			syscall.Dup2(int(devnull.Fd()), 2)
		}
	}
	done := make(chan struct{})
	go func() { m.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		if err := m.Unmount(); err != nil {
			fmt.Fprintf(os.Stderr, "zx mount: unmount: %v\n", err)
		}
		<-done
	case <-conn.Done():
		// The connection is gone: calls fail with EIO until unmounted.
		// (Reconnecting is future work; see docs/cache.md.)
		log.Warn("connection lost", "err", conn.Err())
		<-done
	}
	return exitOK
}

func umountCommand() command {
	return command{
		name:    "umount",
		args:    "MOUNTPOINT",
		summary: "unmount a zx mount",
		help: "Umount unmounts a FUSE mount with fusermount3, lazily if it is busy or its server " +
			"is gone, so it always succeeds for a zx mount.",
		example: "zx umount /mnt/src",
		run:     runUmount,
	}
}

func runUmount(args []string) int {
	c := umountCommand()
	fs := newFlagSet(c)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 1 {
		return usageError(c, "want a mount point")
	}
	out, err := exec.Command("fusermount3", "-u", rest[0]).CombinedOutput()
	if err == nil {
		return exitOK
	}
	out2, err2 := exec.Command("fusermount3", "-u", "-z", rest[0]).CombinedOutput()
	if err2 == nil {
		return exitOK
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		fmt.Fprintf(os.Stderr, "zx umount: fusermount3 not found: install fuse3\n")
		return exitFail
	}
	fmt.Fprintf(os.Stderr, "zx umount: %s%s", out, out2)
	return exitFail
}
