package main

import (
	"fmt"
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
			"deletes one.",
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
