package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zxfs/zx/ctl"
	"github.com/zxfs/zx/mount"
)

func syncCommand() command {
	return command{
		name:    "sync",
		args:    "[--timeout D] MOUNTPOINT",
		summary: "wait until a zx mount's written data is on the server's disk",
		help: "Sync waits until everything written through the zx mount at MOUNTPOINT before it " +
			"has been acknowledged by the server (with 'zx mount --writeback', where close() does " +
			"not wait, that is the journal; without it, close already waited), and then has the " +
			"server flush the exported file system to its disk (syncfs), so that the data survives " +
			"a power loss of the server. It is an fsync of the mount point; a program's fsync of a " +
			"file or directory in the mount waits the same way and makes that file or directory " +
			"durable. ('sync -f' does not reach a FUSE mount: Linux does not pass syncfs on.) " +
			"If it fails, it reads the mount's status (MOUNTPOINT/Ctl) and says what is true: that " +
			"nothing written is waiting and only the server's disk could not be flushed, or how much is " +
			"waiting and where it is kept (the journal with --writeback, else the mount's memory), " +
			"and why the server could not be reached.",
		exit: "0 all of it is on the server's disk; 1 some data could not be sent, " +
			"the server could not be reached or its disk failed, or MOUNTPOINT is not a zx mount; 2 bad usage.",
		example: "cp -r build /mnt/src/ && zx sync /mnt/src",
		run:     runSync,
	}
}

func runSync(args []string) int {
	c := syncCommand()
	fs := newFlagSet(c)
	timeout := fs.Duration("timeout", 0, "give up waiting after this long (default: the mount's own --timeout bounds it)")
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
		fmt.Fprintf(os.Stderr, "zx sync: %v\n", err)
		return exitFail
	}
	return exitOK
}

// errMountGone: the mount's process died; there is nothing to wait for.
var errMountGone = errors.New("the mount's process is gone; data it had not sent is replayed at the next mount")

// mountGone reports whether err says that a FUSE mount's connection is
// over: ENOTCONN once its process died, ECONNABORTED for a request the
// kernel aborted as it died (or when the connection was aborted through
// /sys/fs/fuse/connections).
func mountGone(err error) bool {
	return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
}

// syncMount fsyncs the mount point dir, giving up after timeout (0: no
// limit of our own). If that fails, it reads the mount's control file to
// say what is true: a *syncError says whether written data is pending,
// where it is kept, and why the server could not be reached.
func syncMount(dir string, timeout time.Duration) error {
	err := fsyncMount(dir, timeout)
	if err == nil || err == errMountGone {
		return err
	}
	se := &syncError{dir: dir, err: err}
	text, rerr := readCtl(filepath.Join(dir, ctl.Name), timeout)
	if mountGone(rerr) {
		return errMountGone
	}
	if rerr != nil {
		se.unknown = rerr
		return se
	}
	secs := ctl.Parse(text)
	se.why = ctl.BelowError(secs)
	for _, sec := range secs {
		switch sec.Kind {
		case "mount":
			se.open = word(sec, "writeback", 0)
			se.openBytes = word(sec, "dirty", 0)
			se.ahead = word(sec, "pipelined", 0)
		case "cache":
			se.journaled = word(sec, "writeback", 0)
			se.journaledBytes = word(sec, "dirty", 0)
			if j := sec.Get("journal"); len(j) > 0 {
				se.journal = strings.Join(j, " ")
			}
		}
	}
	return se
}

// word returns the i'th word after key in sec as a number (0 if none).
func word(sec ctl.Section, key string, i int) int64 {
	w := sec.Get(key)
	if len(w) <= i {
		return 0
	}
	n, _ := strconv.ParseInt(w[i], 10, 64)
	return n
}

// fsyncMount fsyncs the mount point dir, giving up after timeout.
func fsyncMount(dir string, timeout time.Duration) error {
	f, err := os.Open(dir)
	if mountGone(err) {
		return errMountGone
	}
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		done <- f.Sync()
		f.Close()
	}()
	var tc <-chan time.Time
	if timeout > 0 {
		tc = time.After(timeout)
	}
	select {
	case err = <-done:
	case <-tc:
		return fmt.Errorf("not done after %v: %w", timeout, syscall.ETIMEDOUT)
	}
	if mountGone(err) {
		return errMountGone
	}
	return err
}

// readCtl reads the control file ctlPath, giving up after timeout (0:
// none of our own; the mount bounds its own waits).
func readCtl(ctlPath string, timeout time.Duration) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := os.ReadFile(ctlPath)
		done <- result{b, err}
	}()
	var tc <-chan time.Time
	if timeout > 0 {
		tc = time.After(timeout)
	}
	select {
	case r := <-done:
		return r.b, r.err
	case <-tc:
		return nil, fmt.Errorf("reading %s: not done after %v", ctlPath, timeout)
	}
}

// A syncError is a sync of a mount that failed, with what the mount's
// control file says about it.
type syncError struct {
	dir     string
	err     error // the fsync's
	unknown error // the control file could not be read: nothing is known
	why     string

	open, openBytes           int64 // files with writes held in open handles, and their bytes
	ahead                     int64 // changes sent ahead, not journaled, not answered yet
	journaled, journaledBytes int64 // write-back records not on the server
	journal                   string
}

// pending reports whether anything written through the mount may not be
// on the server.
func (e *syncError) pending() bool {
	return e.unknown != nil || e.open+e.ahead+e.journaled > 0
}

// inMemory reports whether some of what is pending is held only by the
// mount's process (lost if it ends).
func (e *syncError) inMemory() bool { return e.unknown != nil || e.open+e.ahead > 0 }

// server says why the server could not be reached, or what it answered.
func (e *syncError) server() string {
	if e.why != "" {
		return e.why
	}
	return e.err.Error()
}

func (e *syncError) Error() string {
	if e.unknown != nil {
		return fmt.Sprintf("%s: %v; whether written data is waiting to be sent is unknown: the mount's status cannot be read (%v)", e.dir, e.err, e.unknown)
	}
	if !e.pending() {
		return fmt.Sprintf("%s: nothing written through the mount is waiting to be sent, but the server could not make "+
			"what it has durable on its disk: %s", e.dir, e.server())
	}
	var what []string
	if e.journaled > 0 {
		what = append(what, fmt.Sprintf("%d journaled changes (%d bytes)", e.journaled, e.journaledBytes))
	}
	if e.ahead > 0 {
		what = append(what, fmt.Sprintf("%d changes sent ahead and not answered", e.ahead))
	}
	if e.open > 0 {
		what = append(what, fmt.Sprintf("writes to %d open files (%d bytes)", e.open, e.openBytes))
	}
	msg := fmt.Sprintf("%s: written data is not all on the server (%s): %s", e.dir, strings.Join(what, ", "), e.server())
	if e.journaled > 0 {
		msg += "\nThe journaled changes are kept in the journal " + e.journal + " and sent when the server is back, or at the next mount."
	}
	if e.inMemory() {
		msg += "\nThe rest is held in the memory of the mount's process and sent when the server is back: " +
			"unmounting (zx umount --force) or killing the mount before then loses it."
	}
	return msg
}

// isZXMount reports whether dir is the mount point of a zx mount (file
// system type fuse.zx in /proc/self/mountinfo), live or with its process
// gone. An fsync of any other directory would succeed and sync nothing.
func isZXMount(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	// Resolve links in the parent only: a dead mount cannot be stat'ed
	// (ENOTCONN), and a mount point is no link.
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(dir, filepath.Base(abs))
	}
	fstype, ok := mount.FSType(abs)
	return ok && fstype == "fuse.zx"
}

// notZXMount reports that dir is not a zx mount point, for c (sync,
// umount), and returns the exit status.
func notZXMount(c command, dir string) int {
	fmt.Fprintf(os.Stderr, "zx %s: %s is not a zx mount (give the mount point of one: mount | grep fuse.zx lists them)\n", c.name, dir)
	return exitFail
}
