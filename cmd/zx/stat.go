package main

import (
	"github.com/zxfs/zx"
)

func statCommand() command {
	return command{
		name:    "stat",
		args:    "[--json] [--stats] [--timeout D] zx://HOST/PATH...",
		summary: "print the attributes of entries",
		help: "Stat prints the attributes of each entry, one entry per line as name=value pairs " +
			"(path, name, type, size, mode, mtime, uid, gid, target first, then the rest sorted), " +
			"or, with --json, one JSON object of attributes per entry. All the requests are sent " +
			"before any reply is read, so stat of many paths costs one round trip.",
		example: "zx stat zx://127.0.0.1/README.md zx://127.0.0.1/src",
		run:     runStat,
	}
}

func runStat(args []string) int {
	c := statCommand()
	var opts commonFlags
	fs := newFlagSet(c)
	opts.register(fs)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) == 0 {
		return usageError(c, "want at least one zx:// location")
	}
	s := newSession(c.name, opts)
	replies := make([]<-chan zx.Reply, len(rest))
	code = exitOK
	for i, arg := range rest {
		loc, err := s.parse(arg)
		if err != nil {
			s.errorf("%v", err)
			return s.close(exitUsage)
		}
		t, err := s.tree(loc)
		if err != nil {
			return s.close(s.fail(err))
		}
		replies[i] = t.Stat(s.ctx, loc.Path)
	}
	for _, rc := range replies {
		r := <-rc
		if r.Err != nil {
			code = s.fail(r.Err)
			continue
		}
		s.printEntry(r.Dir)
	}
	return s.close(code)
}

// printEntry prints an entry as its attributes: name=value pairs, or JSON.
func (s *session) printEntry(d zx.Dir) {
	if s.opts.json {
		s.emit(d)
		return
	}
	s.println(d.String())
}
