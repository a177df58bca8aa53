package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/zxfs/zx/repl"
)

func replCommand() command {
	return command{
		name:    "repl",
		args:    "[--dry-run] [-v] [--state FILE] [--exclude PRED] [--json] [--stats] [--timeout D] A B",
		summary: "keep two trees in sync, both ways",
		help: "Repl makes the trees A and B equal, both ways: what was created, changed, renamed or " +
			"removed on one side since the last sync is done on the other. Each is a local directory " +
			"or a zx:// location (side a is the first, b the second). Each side is listed with one " +
			"find; only the differences travel. A path changed on both sides is a conflict: both " +
			"versions are kept (the older renamed PATH.conflict-SIDE-YYYYMMDD-HHMMSS), reported on " +
			"stdout, and the exit status is 1. The state of the last sync is a JSON file, by default " +
			"DIR/.zx-repl/NAME.json in the first local side (NAME after the other side); with two " +
			"zx trees, --state is required. An interrupted run leaves every file old or new, and " +
			"the next run finishes the job. -v prints every action; --dry-run prints what it would " +
			"do and changes nothing; --json prints one object per action and a summary. A progress " +
			"bar shows on stderr when it is a terminal. See docs/repl.md.",
		exit:    "0 in sync; 1 conflicts or errors; 2 bad usage.",
		example: "zx repl ~/src/proj zx://server/@src/proj",
		run:     runRepl,
	}
}

func runRepl(args []string) int {
	c := replCommand()
	var opts commonFlags
	fs := newFlagSet(c)
	opts.register(fs)
	dry := fs.Bool("dry-run", false, "print what would be done, and do nothing")
	verbose := fs.Bool("v", false, "print every action as it is done")
	stateFile := fs.String("state", "", "the state `FILE` (default: DIR/.zx-repl/NAME.json in the first local side)")
	exclude := fs.String("exclude", "", "a find predicate `PRED` for entries not to sync, on both sides (e.g. 'name=.git | ~*.o')")
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 2 {
		return usageError(c, "want two trees: a local directory or zx:// location each")
	}
	if *stateFile == "" && strings.Contains(rest[0], "://") && strings.Contains(rest[1], "://") {
		return usageError(c, "with two zx trees, say where to keep the sync state: --state FILE")
	}
	s := newSession(c.name, opts)
	var sides [2]*side
	for i, arg := range rest {
		sd, err := s.openSide(arg, false)
		if err != nil {
			return s.close(s.sideFailed(err))
		}
		defer sd.close()
		sides[i] = sd
	}
	file := *stateFile
	if file == "" {
		for i, sd := range sides {
			if sd.local != "" {
				file = filepath.Join(sd.local, repl.StateDir, stateName(sides[1-i].desc)+".json")
				break
			}
		}
		if file == "" {
			s.errorf("with two zx trees, say where to keep the sync state: --state FILE")
			return s.close(exitUsage)
		}
	} else if abs, err := filepath.Abs(file); err == nil {
		file = abs
	}
	st, err := repl.LoadState(file)
	if err != nil {
		s.errorf("%v", err)
		return s.close(exitFail)
	}
	for i, sd := range sides {
		rec := &st.A
		if i == 1 {
			rec = &st.B
		}
		if *rec != "" && *rec != sd.desc {
			s.errorf("state file %s records side %s as %s, not %s: give each pair of trees its own --state", file, "ab"[i:i+1], *rec, sd.desc)
			return s.close(exitUsage)
		}
		*rec = sd.desc
	}
	excl := *exclude
	// A state file kept inside a local side (not in .zx-repl) is not
	// synced, nor are its temporary files.
	for _, sd := range sides {
		if sd.local == "" {
			continue
		}
		rel, err := filepath.Rel(sd.local, file)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") || strings.HasPrefix(rel, repl.StateDir[1:]+"/") {
			continue
		}
		x := fmt.Sprintf("path=%q | path~%q", "/"+rel, "/"+rel+".tmp-*")
		if strings.TrimSpace(excl) != "" {
			x = "(" + excl + ") | " + x
		}
		excl = x
	}

	undone := 0
	prog := (*progress)(nil)
	if !opts.json && !*dry {
		prog = newProgress(0)
	}
	ro := repl.Options{
		DryRun:  *dry,
		Exclude: excl,
		Total:   prog.grow,
		Bytes:   prog.add,
		Log: func(a repl.Action) {
			switch {
			case a.Err != "" && s.ctx.Err() != nil:
				// Cut short: one line at the end says so.
				undone++
				if opts.json {
					s.emit(a)
				}
			case opts.json:
				s.emit(a)
			case a.Err != "":
				s.errorf("%s", a)
			case a.Op == "conflict" || *verbose || *dry:
				s.println(a.String())
			}
		},
	}
	rep, err := repl.Sync(s.ctx, sides[0].t, sides[1].t, st, ro)
	prog.finish()
	if err != nil {
		return s.close(s.fail(err))
	}
	if s.ctx.Err() != nil && undone > 0 {
		s.fail(s.ctx.Err())
		s.errorf("%d actions not done; what was done is recorded: run it again to finish", undone)
	}
	if opts.json {
		s.emit(map[string]any{"summary": map[string]any{
			"copied": rep.Copied, "bytes": rep.Bytes, "removed": rep.Removed, "moved": rep.Moved,
			"attrs": rep.Attrs, "conflicts": rep.Conflicts, "errors": rep.Errors,
			"inSync": rep.InSync(), "dryRun": *dry,
		}})
	} else {
		sum := summary(rep)
		if *dry {
			sum = "dry run, nothing done: " + sum
		}
		s.out.Flush()
		fmt.Fprintf(os.Stderr, "zx repl: %s\n", sum)
	}
	if !rep.InSync() {
		return s.close(exitFail)
	}
	return s.close(exitOK)
}

// summary says what a sync did, in one line.
func summary(r *repl.Report) string {
	var parts []string
	if r.Copied > 0 {
		parts = append(parts, fmt.Sprintf("%d copied (%s)", r.Copied, fmtBytes(r.Bytes)))
	}
	if r.Moved > 0 {
		parts = append(parts, fmt.Sprintf("%d moved", r.Moved))
	}
	if r.Removed > 0 {
		parts = append(parts, fmt.Sprintf("%d removed", r.Removed))
	}
	if r.Attrs > 0 {
		parts = append(parts, fmt.Sprintf("%d attributes", r.Attrs))
	}
	if r.Conflicts > 0 {
		parts = append(parts, plural(int64(r.Conflicts), "conflict"))
	}
	if r.Errors > 0 {
		parts = append(parts, plural(int64(r.Errors), "error"))
	}
	if len(parts) == 0 {
		return "in sync"
	}
	return strings.Join(parts, ", ")
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._@-]+`)

// stateName turns the other side's description into a file name.
func stateName(desc string) string {
	n := strings.Trim(unsafeName.ReplaceAllString(strings.TrimPrefix(desc, "zx://"), "_"), "_.")
	if n == "" {
		n = "state"
	}
	return n
}
