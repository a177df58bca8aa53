package main

import (
	"fmt"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/pred"
)

func findCommand() command {
	return command{
		name:    "find",
		args:    "[--json] [--stats] [--timeout D] zx://HOST/PATH [PREDICATE]",
		summary: "find entries matching a predicate, in one request",
		help: "Find walks the tree below PATH on the server and prints the path of every entry for which " +
			"PREDICATE is true (default: every entry), one per line, directories before their contents, " +
			"or, with --json, one JSON object of attributes per entry. The server walks the tree: " +
			"the whole find is one request and one round trip, however many entries it visits. " +
			"Entries that cannot be read are reported on stderr and make the exit status 1, but the " +
			"walk goes on. See docs/predicates.md for predicates: '~*.go', 'd', 'size>10M & mtime>-1d'.",
		example: "zx find zx://127.0.0.1/src '- & ~*.go & !~*_test.go'",
		run:     runFind,
	}
}

func runFind(args []string) int {
	c := findCommand()
	var opts commonFlags
	fs := newFlagSet(c)
	opts.register(fs)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) < 1 || len(rest) > 2 {
		return usageError(c, "want a zx:// location and at most one predicate (quote it)")
	}
	p := ""
	if len(rest) == 2 {
		p = rest[1]
	}
	if _, err := pred.Parse(p); err != nil {
		return usageError(c, fmt.Sprintf("bad predicate: %v", err))
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
	code = exitOK
	for it := range t.Find(s.ctx, loc.Path, zx.FindOpts{Pred: p}) {
		switch {
		case it.Err != nil:
			code = s.fail(it.Err)
		case s.opts.json:
			s.emit(it.Dir)
		default:
			s.println(it.Dir.Path())
		}
	}
	if err := s.ctx.Err(); err != nil && code == exitOK {
		code = s.fail(zx.Errorf("find", loc.Path, err))
	}
	return s.close(code)
}
