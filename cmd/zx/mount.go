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
	"path/filepath"
	"strconv"
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
		args:    "[-f] [-o OPTIONS] [--cache-dir DIR] [--writeback|--strict] [--fsync server|local] [--coherency D] [--timeout D] [--idmap MAP] [--prefetch N] [--siblings SIZE] zx://HOST[:PORT]/PATH|ssh://[USER@]HOST[:PORT]/DIR MOUNTPOINT",
		summary: "mount a remote tree with FUSE, with coherent caching",
		help: "Mount makes the tree at PATH on the server appear at MOUNTPOINT, for unmodified " +
			"programs. Metadata and file data are cached and kept coherent by change notices " +
			"the server pushes (or, if it cannot, by a coherency window), so a cached file opens " +
			"with no round trip and a directory listing is one request; the first listing of a " +
			"directory also streams the metadata of its subtree (up to --prefetch entries), so " +
			"walking it (find, ls -R) costs no round trip per directory; reading a file also streams " +
			"the directory's other small files (up to --siblings bytes at a time), so reading them " +
			"(grep -r, diff -r) costs no round trip per file, and once a program walks a subtree " +
			"(reads files, then moves into a subdirectory) the subtree's small files are streamed " +
			"in its order, --siblings bytes ahead. With --cache-dir, file data " +
			"is also kept on disk across mounts (revalidated with one find when mounting). " +
			"By default the mount asks the server for a delegation of each directory it makes " +
			"(tar -x, git clone, cp -r into the mount): while it holds one, close() and changes " +
			"inside return once journaled on local disk and are sent in the background; another " +
			"client that looks there makes the server recall it first, so it sees everything " +
			"whose close() returned. Elsewhere close() returns once the server has the data " +
			"(close-to-open). --strict never uses delegations; with --writeback close() never " +
			"waits for the server. fsync, 'zx sync MOUNTPOINT' and 'zx umount' wait for what is " +
			"journaled, and a journal left by a crash is replayed at the next mount (in " +
			"--cache-dir, default ~/.cache/zx). Every wait for the server is bounded " +
			"by --timeout (then EIO/ETIMEDOUT), per operation of a program: with the server gone, a stat " +
			"or an open fails within --timeout, not a multiple of it. It runs in the background once mounted unless -f " +
			"is given; unmount with 'zx umount MOUNTPOINT' or 'fusermount3 -u MOUNTPOINT'. " +
			"OPTIONS, as in fstab, separated by commas: ro, allow_other, default_permissions, " +
			"cache_dir=DIR, cache_size=SIZE, writeback, strict, fsync=server|local, coherency=D, timeout=D, idmap=MAP, prefetch=N, siblings=SIZE, debug, " +
			"nonempty (mount on a directory that has entries, hiding them; refused otherwise); " +
			"rw, defaults, auto, noauto, user, nofail, _netdev and the like are accepted and ignored. " +
			"docs/cache.md states the guarantees. An ssh:// location runs ssh (with the " +
			"user's ssh configuration, agent and known hosts, as sshfs does) to start \"zx serve --stdio DIR\" " +
			"on the host, and mounts the tree it serves.",
		exit:    "0 mounted (the daemon serves it); 1 not mounted (the server cannot be reached, MOUNTPOINT is not an empty directory or is mounted already, the cache directory is in use ...); 2 bad usage or option.",
		example: "zx mount -o writeback,cache_dir=$HOME/.cache/zx zx://127.0.0.1/src /mnt/src && ls -l /mnt/src",
		run:     runMount,
	}
}

type mountOptions struct {
	sec        secFlags
	ssh        sshFlags
	foreground bool
	debug      bool
	coherency  time.Duration
	timeout    time.Duration
	cacheDir   string
	cacheSize  int64
	writeback  bool
	strict     bool
	idmap      string
	prefetch   int
	siblings   int64
	nonempty   bool // mount over a directory that has entries (-o nonempty)
	compress   compressFlag
	mo         mount.Options
}

// parseCacheSize parses a size such as 512M, 2G or 1000000.
// parseSiblings parses the sibling stream bound: a size, or 0 for none.
func parseSiblings(s string) (int64, error) {
	if s == "0" {
		return 0, nil
	}
	n, err := parseCacheSize(s)
	if err != nil {
		return 0, fmt.Errorf("bad size %q: want e.g. 2M, or 0 for none", s)
	}
	return n, nil
}

func parseCacheSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "k"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"):
		mult = 1 << 30
	case strings.HasSuffix(s, "T"):
		mult = 1 << 40
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("bad size %q: want e.g. 512M or 2G", s)
	}
	return n * mult, nil
}

// setFsync sets what fsync waits for: "server" or "local".
func (o *mountOptions) setFsync(v string) error {
	switch v {
	case "server":
		o.mo.FsyncLocal = false
	case "local":
		o.mo.FsyncLocal = true
	default:
		return fmt.Errorf("want server or local, not %q", v)
	}
	return nil
}

func parseMountOpts(s string, o *mountOptions) error {
	for _, opt := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(opt), "=")
		var err error
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
		case "writeback":
			o.writeback = true
		case "strict":
			o.strict = true
		case "fsync":
			err = o.setFsync(v)
		case "nonempty":
			o.nonempty = true
		case "cache_dir":
			o.cacheDir = v
		case "cache_size":
			o.cacheSize, err = parseCacheSize(v)
		case "idmap":
			o.idmap = v
		case "coherency":
			o.coherency, err = time.ParseDuration(v)
		case "timeout":
			o.timeout, err = time.ParseDuration(v)
		case "siblings":
			o.siblings, err = parseSiblings(v)
		case "prefetch":
			o.prefetch, err = strconv.Atoi(v)
			if err == nil && o.prefetch < 0 {
				err = errors.New("want a number of entries, 0 for none")
			}
		case "rw", "defaults", "auto", "noauto", "user", "nouser", "users", "nofail", "_netdev", "exec", "noexec", "suid", "nosuid", "dev", "nodev", "atime", "noatime", "relatime":
		default:
			return fmt.Errorf("unknown mount option %q", k)
		}
		if err != nil {
			return fmt.Errorf("option %s=%s: %v", k, v, err)
		}
	}
	return nil
}

func runMount(args []string) int {
	c := mountCommand()
	var o mountOptions
	fs := newFlagSet(c)
	fs.BoolVar(&o.foreground, "f", false, "stay in the foreground")
	opts := fs.String("o", "", "mount `OPTIONS`, comma-separated (see above)")
	fs.DurationVar(&o.coherency, "coherency", time.Second, "how stale cached metadata may be when the server cannot push change notices")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "bound on every wait for the server; a call not answered by then fails (EIO/ETIMEDOUT)")
	fs.StringVar(&o.cacheDir, "cache-dir", "", "keep file data on disk in `DIR` too, across mounts (and the write-back journal)")
	cacheSize := fs.String("cache-size", "1G", "bound `SIZE` on the disk cache, e.g. 512M or 10G")
	fs.BoolVar(&o.writeback, "writeback", false, "close() does not wait for the server; data is journaled on disk (in --cache-dir, default ~/.cache/zx)")
	fs.BoolVar(&o.strict, "strict", false, "no delegations: every close() waits for the server")
	fs.Func("fsync", "what fsync of a journaled file (under a delegation, or with --writeback) waits for: `server` (its data on the server's disk, one round trip; default) or local (the client's journal on its disk)", o.setFsync)
	fs.StringVar(&o.idmap, "idmap", "user", "owner mapping `MAP`: user (the server's user shows as you), none, or file:PATH")
	fs.BoolVar(&o.debug, "debug", false, "log every FUSE request to stderr (implies -f)")
	siblings := fs.String("siblings", "8M", "`SIZE` in bytes of a directory's small files one read streams ahead, e.g. 2M (0: none)")
	fs.IntVar(&o.prefetch, "prefetch", 20000, "entries of metadata the first listing of a directory prefetches from its subtree (0: none)")
	o.ssh.register(fs)
	o.sec.register(fs)
	o.compress.register(fs)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	var err error
	if o.cacheSize, err = parseCacheSize(*cacheSize); err != nil {
		return usageError(c, "--cache-size: "+err.Error())
	}
	if o.siblings, err = parseSiblings(*siblings); err != nil {
		return usageError(c, "--siblings: "+err.Error())
	}
	if err := parseMountOpts(*opts, &o); err != nil {
		return usageError(c, err.Error())
	}
	if o.prefetch < 0 {
		return usageError(c, "--prefetch: want a number of entries, 0 for none")
	}
	if o.writeback && o.strict {
		return usageError(c, "--writeback and --strict exclude each other: pick one (default: delegations)")
	}
	if o.mo.IDMap, err = mount.ParseIDMap(o.idmap); err != nil {
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
	if isZXMount(mnt) {
		fmt.Fprintf(os.Stderr, "zx mount: %s is a zx mount already; unmount it first (zx umount %s)\n", mnt, mnt)
		return exitFail
	}
	// As fuse2 did (fusermount3 no longer checks): a mount over entries
	// hides them until unmounted, which is rarely what was meant.
	if ents, err := os.ReadDir(mnt); err == nil && len(ents) > 0 && !o.nonempty {
		fmt.Fprintf(os.Stderr, "zx mount: %s is not empty (%s ...): the mount would hide its entries; mount on an empty directory, or give -o nonempty to mount over them\n", mnt, ents[0].Name())
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

// mountHelperArgs translates the arguments mount(8) gives a helper
// (/sbin/mount.zx SPEC DIR [-sfnv] [-o OPTIONS]) into zx mount's: so a
// link named mount.zx makes "mount -t zx" and fstab entries work.
func mountHelperArgs(args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-o" && i+1 < len(args):
			out = append(out, "-o", args[i+1])
			i++
		case strings.HasPrefix(a, "-o") && len(a) > 2:
			out = append(out, "-o", a[2:])
		case strings.HasPrefix(a, "-t") && len(a) > 2, a == "-s", a == "-n", a == "-v", a == "-f":
			// sloppy, no mtab, verbose, fake: nothing to do
		case a == "-t" && i+1 < len(args):
			i++
		default:
			out = append(out, a)
		}
	}
	return out
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

// cacheDirFor returns the directory for the cache of loc under base
// (default ~/.cache/zx): one per location, so one base serves many mounts.
func cacheDirFor(base string, loc client.Location) (string, error) {
	if base == "" {
		ucd, err := os.UserCacheDir()
		if err != nil {
			return "", fmt.Errorf("no cache directory: give --cache-dir (%v)", err)
		}
		base = filepath.Join(ucd, "zx")
	}
	key := strings.Map(func(r rune) rune {
		if r == '/' || r == ':' || r == '@' || r < ' ' {
			return '_'
		}
		return r
	}, strings.TrimPrefix(loc.String(), "zx://"))
	return filepath.Join(base, key), nil
}

// lockDir takes an exclusive lock on dir for the life of the process, so
// that two mounts never share a cache or journal.
// The lock lasts while the returned file is open.
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is in use by another zx mount", dir)
	}
	return f, nil
}

func mountForeground(loc client.Location, mnt string, o mountOptions) int {
	level := slog.LevelWarn
	if o.debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "zx mount: %v\n", err)
		return exitFail
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	copts := cache.Options{Coherency: o.coherency, Logger: log, PrefetchEntries: o.prefetch}
	if o.prefetch <= 0 {
		copts.PrefetchEntries = -1
	}
	copts.SiblingBytes = o.siblings
	if o.siblings <= 0 {
		copts.SiblingBytes = -1
	}
	// A journal: for write-back, for delegations (a change answered
	// under one is journaled first), and for a disk cache.
	useDir := o.cacheDir != "" || o.writeback || !o.strict
	if !useDir {
		// A write-back mount of this location left data in the default
		// journal (a crash): replay it, even without --writeback now.
		if dir, err := cacheDirFor("", loc); err == nil {
			recs, _ := cache.JournalPending(filepath.Join(dir, "journal"))
			useDir = len(recs) > 0
		}
	}
	if useDir {
		dir, err := cacheDirFor(o.cacheDir, loc)
		if err != nil {
			return fail(err)
		}
		lock, err := lockDir(dir)
		switch {
		case err != nil && (o.writeback || o.cacheDir != ""):
			return fail(err)
		case err != nil:
			// Another mount of this location uses the default
			// journal: this one does without delegations.
			log.Warn("no delegations: every close() waits for the server", "why", err)
			o.strict = true
		default:
			defer lock.Close()
			copts.Journal = filepath.Join(dir, "journal")
			if o.cacheDir != "" {
				copts.Dir, copts.DiskBytes = filepath.Join(dir, "data"), o.cacheSize
			}
		}
	}
	copts.Delegate = !o.strict && !o.writeback
	o.mo.NoDelegations = o.strict

	copts2, err := clientOptions(loc, o.sec)
	if err != nil {
		return fail(err)
	}
	// A lost connection is dialled again with backoff; a request waits
	// for it at most the timeout. The cache's watch comes back with an
	// Overflow, so everything cached is revalidated.
	copts2.Reconnect = true
	copts2.ReconnectWait = o.timeout
	dctx, cancel := context.WithTimeout(ctx, o.timeout)
	copts2.Mux.Compression = o.compress.mode
	conn, err := dial(dctx, loc, o.ssh, copts2)
	cancel()
	if err != nil {
		return fail(err)
	}
	defer conn.Close()
	t := conn.Tree(loc.Tree)
	actx, cancel := context.WithTimeout(ctx, o.timeout)
	// The stat of the directory to mount travels with the attach: one
	// round trip, and a path that is missing or not a directory fails
	// here, at once, rather than after the cache's watch gave up on it.
	stc := t.Stat(actx, loc.Path)
	_, err = t.Conn().Attach(actx, loc.Tree)
	st := <-stc
	cancel()
	if err != nil {
		return fail(err)
	}
	if st.Err != nil {
		return fail(fmt.Errorf("cannot mount %s: %v", loc, st.Err))
	}
	if !st.Dir.IsDir() {
		return fail(fmt.Errorf("cannot mount %s: %s is not a directory on the server (mount the directory holding it)", loc, loc.Path))
	}
	ca, err := cache.Open(subtree.New(t, loc.Path), copts)
	if err != nil {
		return fail(err)
	}
	defer ca.Close()
	wb := ca.WriteBack()
	if wb != nil && wb.Leftover() > 0 {
		// Data an earlier session's close() returned for: the server
		// gets it before anything else happens.
		rctx, cancel := context.WithTimeout(ctx, 10*o.timeout)
		n, err := wb.Replay(rctx)
		cancel()
		if err != nil {
			return fail(fmt.Errorf("replaying the write-back journal: %v; the data stays in %s; mount again when the server is reachable", err, copts.Journal))
		}
		log.Warn("replayed the write-back journal of an earlier session", "records", n)
	}
	o.mo.Coherency = o.coherency
	o.mo.Timeout = o.timeout
	o.mo.WriteBack = o.writeback
	o.mo.Debug = o.debug
	o.mo.Logger = log
	if o.mo.FsName == "" {
		o.mo.FsName = loc.String()
	}
	m, err := mount.Mount(mnt, ca, o.mo)
	if err != nil {
		return fail(err)
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
		// Closed (with Reconnect, a lost link does not end it).
		log.Warn("connection closed", "err", conn.Err())
		<-done
	}
	if wb != nil {
		// Unmounted (perhaps by fusermount3 -u) with data still on its
		// way: wait for it, bounded; what is left stays journaled for
		// the next mount.
		sctx, cancel := context.WithTimeout(context.Background(), 10*o.timeout)
		err := wb.Sync(sctx)
		cancel()
		if err != nil {
			log.Error("unmounted with write-back data not on the server; it stays journaled and is sent at the next mount", "err", err)
			return exitFail
		}
	}
	return exitOK
}

func umountCommand() command {
	return command{
		name:    "umount",
		args:    "[--force] [--timeout D] MOUNTPOINT",
		summary: "unmount a zx mount",
		help: "Umount first waits until data written through the mount is on the server (as " +
			"'zx sync'; it matters with --writeback). If the server cannot be reached, it reads the " +
			"mount's status (MOUNTPOINT/Ctl): with nothing waiting to be sent it says why the server " +
			"was unreachable and unmounts; with data waiting it says how much, where it is kept and why " +
			"the server is unreachable, and refuses, unless --force is given: then journaled data (with " +
			"--writeback) stays in the mount's journal and is sent at the next mount of the same location " +
			"with the same cache directory, while data only the mount's process holds (writes sent ahead " +
			"without --writeback) is lost, as it says. It then " +
			"unmounts with fusermount3, lazily if the mount is busy or its server is gone, so it " +
			"always succeeds for a zx mount with nothing pending.",
		exit:    "0 unmounted; 1 not unmounted (written data could not reach the server, or MOUNTPOINT is not a zx mount); 2 bad usage.",
		example: "zx umount /mnt/src",
		run:     runUmount,
	}
}

func runUmount(args []string) int {
	c := umountCommand()
	fs := newFlagSet(c)
	force := fs.Bool("force", false, "unmount even if written data is not on the server yet (it stays journaled)")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for written data to reach the server")
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 1 {
		return usageError(c, "want a mount point")
	}
	if !isZXMount(rest[0]) {
		return notZXMount(c, rest[0])
	}
	if err := syncMount(rest[0], *timeout); err != nil {
		var se *syncError
		switch {
		case err == errMountGone:
			fmt.Fprintf(os.Stderr, "zx umount: %v\n", err)
		case errors.As(err, &se) && !se.pending():
			// Nothing to lose: the server being unreachable is no
			// reason to keep the mount. Say why it was, though.
			fmt.Fprintf(os.Stderr, "zx umount: note: %s: nothing written through the mount was waiting to be sent; "+
				"the server could not be reached: %s\n", rest[0], se.server())
		case *force:
			fmt.Fprintf(os.Stderr, "zx umount: unmounting anyway (--force): %v\n", err)
		case errors.As(err, &se) && !se.inMemory():
			fmt.Fprintf(os.Stderr, "zx umount: not unmounted: %v\nUse --force to unmount anyway: the journal is kept and sent at the next mount\n", err)
			return exitFail
		default:
			fmt.Fprintf(os.Stderr, "zx umount: not unmounted: %v\nWait until the server is back (zx sync %s), or use --force to unmount anyway and lose what the mount's process holds\n", err, rest[0])
			return exitFail
		}
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
