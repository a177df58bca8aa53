package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/pred"
)

func rmCommand() command {
	return command{
		name:    "rm",
		args:    "[-r] [-f] [--find PREDICATE] [--json] [--stats] [--timeout D] zx://HOST/PATH...",
		summary: "remove files and trees",
		help: "Rm removes each file or empty directory given; -r removes directories and everything below " +
			"them; -f ignores paths that do not exist. All the requests are sent before any reply is read. " +
			"With --find, it removes every entry below the one location given that matches PREDICATE: one " +
			"Find request streams the matching entries and a Remove for each is sent as it arrives, without " +
			"waiting, so removing thousands of files costs a few round trips. Matching directories are " +
			"removed after everything else (with -r, with their contents). With --json it prints " +
			"{\"path\":...,\"removed\":true} for each entry removed.",
		example: "zx rm zx://127.0.0.1/tmp/a zx://127.0.0.1/tmp/b\nzx rm --find '- & ~*.o' zx://127.0.0.1/src",
		run:     runRm,
	}
}

func runRm(args []string) int {
	c := rmCommand()
	var opts commonFlags
	fs := newFlagSet(c)
	recursive := fs.Bool("r", false, "remove directories and their contents")
	force := fs.Bool("f", false, "ignore paths that do not exist")
	find := fs.String("find", "", "remove the entries below the location that match `PREDICATE`")
	opts.register(fs)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) == 0 {
		return usageError(c, "want at least one zx:// location")
	}
	findMode := false
	fs.Visit(func(f *flag.Flag) { findMode = findMode || f.Name == "find" })
	if findMode {
		if len(rest) != 1 {
			return usageError(c, "--find takes one location")
		}
		if _, err := pred.Parse(*find); err != nil {
			return usageError(c, fmt.Sprintf("bad predicate: %v", err))
		}
	}
	s := newSession(c.name, opts)
	type req struct {
		path string
		ec   <-chan error
	}
	var reqs []req
	for _, arg := range rest {
		loc, err := s.parse(arg)
		if err != nil {
			s.errorf("%v", err)
			return s.close(exitUsage)
		}
		if loc.Path == "/" && !findMode {
			s.errorf("refusing to remove the root of %s", arg)
			return s.close(exitUsage)
		}
		t, err := s.tree(loc)
		if err != nil {
			return s.close(s.fail(err))
		}
		if findMode {
			return s.close(s.rmFind(t, loc.Path, *find, *recursive, *force))
		}
		rm := t.Remove
		if *recursive {
			rm = t.RemoveAll
		}
		reqs = append(reqs, req{loc.Path, rm(s.ctx, loc.Path)})
	}
	code = exitOK
	for _, r := range reqs {
		code = max(code, s.removed(r.path, <-r.ec, *force))
	}
	return s.close(code)
}

// removed reports the result of removing path.
func (s *session) removed(path string, err error, force bool) int {
	if err != nil && !(force && zx.KindOf(err) == zx.ErrNotExist) {
		return s.fail(err)
	}
	if err == nil && s.opts.json {
		s.emit(map[string]any{"path": path, "removed": true})
	}
	return exitOK
}

// rmFind removes the entries below path matching p: one Find, and a
// Remove per entry issued as soon as it arrives. Directories are removed
// at the end, deepest first, after their contents.
func (s *session) rmFind(t zxFinderTree, path, p string, recursive, force bool) int {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	type req struct {
		path string
		ec   <-chan error
	}
	var reqs []req
	var dirs []string
	code := exitOK
	for it := range t.Find(ctx, path, zx.FindOpts{Pred: p}) {
		if it.Err != nil {
			code = s.fail(it.Err)
			continue
		}
		if it.Dir.IsDir() {
			dirs = append(dirs, it.Dir.Path())
			continue
		}
		reqs = append(reqs, req{it.Dir.Path(), t.Remove(ctx, it.Dir.Path())})
	}
	if err := s.ctx.Err(); err != nil {
		return s.fail(zx.Errorf("find", path, err))
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		rm := t.Remove
		if recursive {
			rm = t.RemoveAll
		}
		reqs = append(reqs, req{dirs[i], rm(ctx, dirs[i])})
	}
	for _, r := range reqs {
		code = max(code, s.removed(r.path, <-r.ec, force))
	}
	return code
}
