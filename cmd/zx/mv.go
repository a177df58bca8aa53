package main

import (
	"path"
	"strings"
)

func mvCommand() command {
	return command{
		name:    "mv",
		args:    "[--json] [--stats] [--timeout D] zx://HOST/FROM TO",
		summary: "rename an entry",
		help: "Mv renames FROM to TO on the server, replacing TO if it is a file or an empty directory. " +
			"TO is a zx:// location on the same server and tree, an absolute path in the tree, or a path " +
			"relative to the directory of FROM (so \"zx mv zx://h/a/x y\" renames /a/x to /a/y). " +
			"With --json it prints {\"from\":...,\"to\":...}.",
		example: "zx mv zx://127.0.0.1/draft.txt final.txt",
		run:     runMv,
	}
}

func runMv(args []string) int {
	c := mvCommand()
	var opts commonFlags
	fs := newFlagSet(c)
	opts.register(fs)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 2 {
		return usageError(c, "want a zx:// location and where to move it")
	}
	s := newSession(c.name, opts)
	from, err := s.parse(rest[0])
	if err != nil {
		s.errorf("%v", err)
		return s.close(exitUsage)
	}
	to := rest[1]
	switch {
	case strings.HasPrefix(to, "zx://"):
		loc, err := s.parse(to)
		if err != nil {
			s.errorf("%v", err)
			return s.close(exitUsage)
		}
		if loc.Addr != from.Addr || loc.Tree != from.Tree {
			s.errorf("cannot move between servers or trees (%s to %s): use zx get and zx put", from, loc)
			return s.close(exitUsage)
		}
		to = loc.Path
	case strings.HasPrefix(to, "/"):
	default:
		to = path.Join(path.Dir(from.Path), to)
	}
	if from.Path == "/" {
		s.errorf("cannot move the root of a tree")
		return s.close(exitUsage)
	}
	t, err := s.tree(from)
	if err != nil {
		return s.close(s.fail(err))
	}
	if err := <-t.Move(s.ctx, from.Path, to); err != nil {
		return s.close(s.fail(err))
	}
	if s.opts.json {
		s.emit(map[string]string{"from": from.Path, "to": path.Clean(to)})
	}
	return s.close(exitOK)
}
