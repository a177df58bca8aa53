package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/zxfs/zx"
)

func wstatCommand() command {
	return command{
		name:    "wstat",
		args:    "[--json] [--stats] [--timeout D] zx://HOST/PATH ATTR=VALUE...",
		summary: "change attributes of an entry",
		help: "Wstat changes the attributes of an entry and prints the resulting entry (as stat does). " +
			"mode is octal (mode=0600); size truncates or extends a file; mtime and atime take nanoseconds " +
			"since the epoch or an RFC 3339 time (mtime=2024-05-01T12:00:00Z); uid and gid are numeric. " +
			"Other lower-case names are user attributes, stored on the server: an empty VALUE (colour=) " +
			"deletes one. On a symbolic link, uid, gid and times change the link itself; a mode other than " +
			"its own (0777) fails, as Linux cannot change a link's mode and requests never follow links.",
		example: "zx wstat zx://127.0.0.1/notes.txt mode=0600 colour=blue",
		run:     runWstat,
	}
}

func runWstat(args []string) int {
	c := wstatCommand()
	var opts commonFlags
	fs := newFlagSet(c)
	opts.register(fs)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) < 2 {
		return usageError(c, "want a zx:// location and at least one ATTR=VALUE")
	}
	d := zx.Dir{}
	for _, a := range rest[1:] {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" {
			return usageError(c, fmt.Sprintf("bad attribute %q: want ATTR=VALUE", a))
		}
		if k == zx.AMtime || k == zx.AAtime {
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				v = zx.FormatTime(t)
			}
		}
		if msg := checkWstatValue(k, v); msg != "" {
			return usageError(c, fmt.Sprintf("bad value %q for %s: %s", v, k, msg))
		}
		d[k] = v
	}
	s := newSession(c.name, opts)
	loc, err := s.parse(rest[0])
	if err != nil {
		s.errorf("%v", err)
		return s.close(exitUsage)
	}
	t, err := s.tree(loc)
	if err != nil {
		return s.close(s.fail(err))
	}
	r := <-t.Wstat(s.ctx, loc.Path, d)
	if r.Err != nil {
		return s.close(s.fail(r.Err))
	}
	s.printEntry(r.Dir)
	return s.close(exitOK)
}

// checkWstatValue says what is wrong with v as the value of the system
// attribute k, or "" if nothing is (or k is not one wstat checks), so that
// a mistyped value is a usage error here rather than a failure on the
// server.
func checkWstatValue(k, v string) string {
	switch k {
	case zx.AMode:
		if m, err := strconv.ParseUint(v, 8, 32); err != nil || m > 0o7777 {
			return "want octal permission bits (at most 07777), e.g. mode=0644"
		}
	case zx.ASize:
		if _, err := strconv.ParseUint(v, 10, 63); err != nil {
			return "want a number of bytes, e.g. size=0"
		}
	case zx.AUid, zx.AGid:
		if _, err := strconv.ParseUint(v, 10, 32); err != nil {
			return "want a numeric id, e.g. " + k + "=1000"
		}
	case zx.AMtime, zx.AAtime:
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return "want nanoseconds since the epoch or an RFC 3339 time, e.g. " + k + "=2024-05-01T12:00:00Z"
		}
	}
	return ""
}
