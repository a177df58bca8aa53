package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

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
			"durable. ('sync -f' does not reach a FUSE mount: Linux does not pass syncfs on.)",
		exit: "0 all of it is on the server's disk; 1 some data could not be sent (it stays in the mount's journal), " +
			"the server's disk failed, or MOUNTPOINT is not a zx mount; 2 bad usage.",
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
// limit of our own).
func syncMount(dir string, timeout time.Duration) error {
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
		return fmt.Errorf("%s: written data still not on the server after %v; it stays journaled", dir, timeout)
	}
	switch {
	case err == nil:
		return nil
	case mountGone(err):
		return errMountGone
	case errors.Is(err, syscall.EIO), errors.Is(err, syscall.ETIMEDOUT):
		return fmt.Errorf("%s: written data could not all be sent to the server (%v); it stays in the mount's journal and is sent when the server is back, or at the next mount", dir, err)
	}
	return fmt.Errorf("%s: %v", dir, err)
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
