package main

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/dump"
)

func dumpCommand() command {
	return command{
		name:    "dump",
		args:    "[--exclude PRED]... [--store DIR] [--name TREE] [--force] [--json] [--stats] [--timeout D] SRC",
		summary: "archive a tree into a deduplicated store, one snapshot per run",
		help: "Dump archives SRC (a zx:// location or a local directory) into a content-addressed store " +
			"(--store DIR, else $ZX_DUMP, else ~/.local/share/zx/dump) as a new snapshot " +
			"TREE/YYYY/MMDD (.1, .2 … for later runs of the day). Contents are stored once, named by " +
			"their SHA-256, so unchanged files cost nothing; files whose size and mtime match the " +
			"previous snapshot are not even read. TREE is --name, else the last element of SRC. Each " +
			"--exclude is a find predicate for entries to leave out, with everything below them " +
			"(paths in it are paths inside SRC). An interrupted dump writes no snapshot and leaves " +
			"the earlier ones intact. The store is browsable as a read-only tree: zx serve --dump " +
			"STORE. Run it daily from cron (see docs/dump.md).",
		exit:    "0 success; 1 if the dump failed or some entries could not be read (each is reported); 2 bad usage.",
		example: "zx dump --exclude 'name=.git' zx://server/@src/proj",
		run:     runDump,
	}
}

// strList is a flag that may be repeated.
type strList []string

func (l *strList) String() string     { return strings.Join(*l, " ") }
func (l *strList) Set(v string) error { *l = append(*l, v); return nil }

// storeDir returns the dump store's directory: flag, $ZX_DUMP, or the
// default under the user's data directory.
func storeDir(flag string) (string, error) {
	if flag != "" {
		return filepath.Abs(flag)
	}
	if d := os.Getenv("ZX_DUMP"); d != "" {
		return filepath.Abs(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no store: give --store DIR or set $ZX_DUMP (%v)", err)
	}
	return filepath.Join(home, ".local", "share", "zx", "dump"), nil
}

// treeName derives a store tree name from a source.
func treeName(src string) string {
	var n string
	if loc, err := client.ParseLocation(src); err == nil && strings.Contains(src, "://") {
		switch {
		case loc.Path != "/":
			n = path.Base(loc.Path)
		case loc.Tree != "":
			n = loc.Tree
		default:
			n, _, _ = strings.Cut(loc.Addr, ":")
		}
	} else if abs, err := filepath.Abs(src); err == nil {
		n = filepath.Base(abs)
	}
	return n
}

func runDump(args []string) int {
	c := dumpCommand()
	var opts commonFlags
	fs := newFlagSet(c)
	opts.register(fs)
	var excl strList
	fs.Var(&excl, "exclude", "a find predicate `PRED` for entries to leave out (repeatable), e.g. 'name=.git'")
	storeFlag := fs.String("store", "", "the store directory `DIR` (default $ZX_DUMP, else ~/.local/share/zx/dump)")
	name := fs.String("name", "", "the tree's name `TREE` in the store (default: the last element of SRC)")
	force := fs.Bool("force", false, "dump into a tree that holds dumps of another source")
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 1 {
		return usageError(c, "want one source: a zx:// location or a local directory")
	}
	s := newSession(c.name, opts)
	dir, err := storeDir(*storeFlag)
	if err != nil {
		s.errorf("%v", err)
		return s.close(exitUsage)
	}
	tree := *name
	if tree == "" {
		tree = treeName(rest[0])
	}
	if !dump.ValidTreeName(tree) {
		s.errorf("%q is not a good tree name (letters, digits, . _ - + : , and not starting with a dot): give --name TREE", tree)
		return s.close(exitUsage)
	}
	if _, err := dump.ExcludePred(excl); err != nil {
		s.errorf("bad --exclude: %v", err)
		return s.close(exitUsage)
	}
	src, err := s.openSide(rest[0], true)
	if err != nil {
		return s.close(s.sideFailed(err))
	}
	defer src.close()
	st, err := dump.OpenStore(dir)
	if err != nil {
		s.errorf("opening the store: %v", err)
		return s.close(exitFail)
	}
	var prog *progress
	if !opts.json {
		prog = newProgress(0)
	}
	warned := 0
	stats, err := st.Dump(s.ctx, src.t, src.root, dump.Options{
		Tree:     tree,
		Source:   src.desc,
		Force:    *force,
		Exclude:  excl,
		Progress: prog.add,
		Total:    prog.grow,
		Warn: func(err error) {
			warned++
			s.errorf("%v (left out)", err)
		},
	})
	prog.finish()
	if err != nil {
		if errors.Is(err, dump.ErrNoSnapshot) {
			s.errorf("%v", err)
			return s.close(exitFail)
		}
		return s.close(s.fail(err))
	}
	if opts.json {
		s.emit(stats)
	} else {
		s.printf("%s: %d files, %d dirs, %s; read %d files (%s), %d unchanged; stored %d new blobs (%s) in %.1fs\n",
			stats.Snapshot, stats.Files, stats.Dirs, fmtBytes(stats.Bytes), stats.Read, fmtBytes(stats.ReadBytes),
			stats.Reused, stats.NewBlobs, fmtBytes(stats.NewBytes), stats.Seconds)
	}
	if stats.Errors > 0 || warned > 0 {
		return s.close(exitFail)
	}
	return s.close(exitOK)
}
