package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/dump"
	"github.com/zxfs/zx/lfs"
)

func histCommand() command {
	return command{
		name:    "hist",
		args:    "[--store DIR] [--name TREE] [--json] [--diff VERSION | --restore VERSION [--to DEST]] PATH",
		summary: "list, diff or restore the past versions of a file from the dump",
		help: "Hist lists the versions of PATH (a zx:// location or a local path, as dumped by zx dump) " +
			"across the snapshots of the store: one row where it first appears and one each time its " +
			"type, mode or contents changed: VERSION (the snapshot, YYYY/MMDD[.N]), the time of the dump, " +
			"type, mode, size and the first 16 digits of the SHA-256 (\"absent\" where it disappeared). " +
			"The tree is the one whose recorded source holds PATH; with --name TREE, PATH may also be a " +
			"path inside that tree. VERSION is a snapshot name or -N, the Nth version back (-1 the " +
			"latest). --diff VERSION prints a unified diff from that version to the current file, read " +
			"through the protocol. --restore VERSION writes that version back to PATH, or to DEST " +
			"(a location or local path), through the protocol: a file with its mode and mtime, a " +
			"directory with everything below it. See docs/dump.md.",
		example: "zx hist --diff -2 zx://server/@src/proj/main.go",
		run:     runHist,
	}
}

// histTarget is the tree and path of the store a PATH argument names,
// and where its live version is.
type histTarget struct {
	tree string // in the store
	rel  string // path in the dumped tree
	live string // location or local path of the live entry ("" unknown)
}

// canon returns the canonical form of a location or local path, as dump
// records sources.
func (s *session) canon(arg string) (string, error) {
	if strings.Contains(arg, "://") {
		loc, err := s.parse(arg)
		if err != nil {
			return "", err
		}
		return loc.String(), nil
	}
	return filepath.Abs(arg)
}

// under returns p relative to src as a tree path ("/" for src itself),
// or false.
func under(p, src string) (string, bool) {
	src = strings.TrimSuffix(src, "/")
	if p == src {
		return "/", true
	}
	if rest, ok := strings.CutPrefix(p, src+"/"); ok {
		return "/" + rest, true
	}
	return "", false
}

// join joins a tree path to a source.
func joinSource(src, rel string) string {
	if rel == "/" {
		return src
	}
	if strings.Contains(src, "://") {
		return strings.TrimSuffix(src, "/") + rel
	}
	return filepath.Join(src, filepath.FromSlash(rel))
}

func (s *session) histTarget(st *dump.Store, name, arg string) (histTarget, error) {
	p, err := s.canon(arg)
	if err != nil {
		return histTarget{}, err
	}
	var trees []string
	if name != "" {
		trees = []string{name}
	} else if trees, err = st.Trees(); err != nil {
		return histTarget{}, err
	}
	var best histTarget
	bestLen := -1
	for _, tr := range trees {
		snaps, err := st.Snapshots(tr)
		if err != nil {
			return histTarget{}, err
		}
		if len(snaps) == 0 {
			if name != "" {
				return histTarget{}, fmt.Errorf("%w of tree %s in %s", dump.ErrNoSnapshot, tr, st.Dir())
			}
			continue
		}
		hdr, err := st.ReadHeader(tr, snaps[len(snaps)-1])
		if err != nil {
			return histTarget{}, err
		}
		if rel, ok := under(p, hdr.Source); ok && len(hdr.Source) > bestLen {
			best, bestLen = histTarget{tree: tr, rel: rel, live: p}, len(hdr.Source)
			continue
		}
		if name != "" && strings.HasPrefix(arg, "/") {
			// A path inside the named tree.
			rel, err := zx.CleanPath(arg)
			if err != nil {
				return histTarget{}, err
			}
			live := ""
			if hdr.Source != "" {
				live = joinSource(hdr.Source, rel)
			}
			return histTarget{tree: tr, rel: rel, live: live}, nil
		}
	}
	if bestLen < 0 {
		if name != "" {
			return histTarget{}, fmt.Errorf("%s is not in tree %s of the store %s", arg, name, st.Dir())
		}
		return histTarget{}, fmt.Errorf("no tree in the store %s was dumped from a source that holds %s (give --name TREE, or --store DIR)", st.Dir(), p)
	}
	return best, nil
}

func runHist(args []string) int {
	c := histCommand()
	var opts commonFlags
	fs := newFlagSet(c)
	opts.register(fs)
	storeFlag := fs.String("store", "", "the store directory `DIR` (default $ZX_DUMP, else ~/.local/share/zx/dump)")
	name := fs.String("name", "", "the tree `TREE` in the store (default: the one whose source holds PATH)")
	diff := fs.String("diff", "", "print a unified diff from `VERSION` (YYYY/MMDD[.N] or -N) to the current file")
	restore := fs.String("restore", "", "write `VERSION` (YYYY/MMDD[.N] or -N) back to PATH, or to --to DEST")
	to := fs.String("to", "", "with --restore: where to write the version: `DEST`, a location or local path")
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 1 {
		return usageError(c, "want one PATH")
	}
	if *diff != "" && *restore != "" {
		return usageError(c, "--diff and --restore do not go together")
	}
	if *to != "" && *restore == "" {
		return usageError(c, "--to goes with --restore")
	}
	s := newSession(c.name, opts)
	dir, err := storeDir(*storeFlag)
	if err != nil {
		s.errorf("%v", err)
		return s.close(exitUsage)
	}
	if _, err := os.Stat(filepath.Join(dir, "snap")); err != nil {
		s.errorf("no dump store at %s (give --store DIR, or set $ZX_DUMP)", dir)
		return s.close(exitFail)
	}
	st, err := dump.OpenStore(dir)
	if err != nil {
		s.errorf("opening the store: %v", err)
		return s.close(exitFail)
	}
	tg, err := s.histTarget(st, *name, rest[0])
	if err != nil {
		s.errorf("%v", err)
		return s.close(exitFail)
	}
	switch {
	case *diff != "":
		return s.close(s.histDiff(st, tg, *diff))
	case *restore != "":
		dest := *to
		if dest == "" {
			dest = tg.live
		}
		if dest == "" {
			s.errorf("the tree records no source: say where to restore with --to DEST")
			return s.close(exitUsage)
		}
		return s.close(s.histRestore(st, tg, *restore, dest))
	}
	vs, err := st.History(tg.tree, tg.rel)
	if err != nil {
		s.errorf("%v", err)
		return s.close(exitFail)
	}
	if len(vs) == 0 {
		s.errorf("%s is in no snapshot of tree %s", tg.rel, tg.tree)
		return s.close(exitFail)
	}
	for _, v := range vs {
		if opts.json {
			m := map[string]any{"version": v.Snapshot, "time": v.Time}
			if v.Dir == nil {
				m["absent"] = true
			}
			for k, val := range v.Dir {
				m[k] = val
			}
			s.emit(m)
			continue
		}
		when := v.Time.Local().Format("2006-01-02 15:04")
		if v.Dir == nil {
			s.printf("%-12s %s  absent\n", v.Snapshot, when)
			continue
		}
		h := v.Dir[dump.AHash]
		if len(h) > 16 {
			h = h[:16]
		}
		size := v.Dir[zx.ASize]
		if v.Dir.IsDir() || size == "" {
			size = "-"
		}
		s.printf("%-12s %s  %s %s %11s %s\n", v.Snapshot, when, v.Dir.Type(), v.Dir[zx.AMode], size, h)
	}
	return s.close(exitOK)
}

// readLive reads the live file at a location or local path; a missing
// file reads as nothing.
func (s *session) readLive(live string) ([]byte, bool, error) {
	if !strings.Contains(live, "://") {
		b, err := os.ReadFile(live)
		if os.IsNotExist(err) {
			return nil, false, nil
		}
		return b, err == nil, err
	}
	loc, err := s.parse(live)
	if err != nil {
		return nil, false, err
	}
	t, err := s.tree(loc)
	if err != nil {
		return nil, false, err
	}
	var b bytes.Buffer
	if _, err := zx.Copy(&b, t.Get(s.ctx, loc.Path, 0, -1)); err != nil {
		if zx.KindOf(err) == zx.ErrNotExist {
			return nil, false, nil
		}
		return nil, false, err
	}
	return b.Bytes(), true, nil
}

func (s *session) histDiff(st *dump.Store, tg histTarget, which string) int {
	v, err := st.Pick(tg.tree, tg.rel, which)
	if err != nil {
		s.errorf("%v", err)
		return exitFail
	}
	if v.Dir.Type() != zx.TypeFile {
		s.errorf("%s is not a file in %s (type %s): --diff compares files only", tg.rel, v.Snapshot, v.Dir.Type())
		return exitFail
	}
	old, err := st.ReadBlob(v.Dir[dump.AHash])
	if err != nil {
		s.errorf("%v", err)
		return exitFail
	}
	if tg.live == "" {
		s.errorf("the tree records no source to compare with")
		return exitFail
	}
	cur, exists, err := s.readLive(tg.live)
	if err != nil {
		return s.fail(err)
	}
	bName := tg.live
	if !exists {
		bName = "/dev/null"
	}
	s.printf("%s", dump.Unified(tg.tree+"/"+v.Snapshot+tg.rel, bName, old, cur))
	return exitOK
}

func (s *session) histRestore(st *dump.Store, tg histTarget, which, dest string) int {
	v, err := st.Pick(tg.tree, tg.rel, which)
	if err != nil {
		s.errorf("%v", err)
		return exitFail
	}
	var (
		t    zx.Tree
		dp   string
		desc = dest
	)
	if strings.Contains(dest, "://") {
		loc, err := s.parse(dest)
		if err != nil {
			s.errorf("%v", err)
			return exitUsage
		}
		ct, err := s.tree(loc)
		if err != nil {
			return s.fail(err)
		}
		t, dp = ct, loc.Path
	} else {
		abs, err := filepath.Abs(dest)
		if err != nil {
			s.errorf("%v", err)
			return exitUsage
		}
		if abs == "/" {
			s.errorf("will not restore over /")
			return exitUsage
		}
		ft, err := lfs.New(filepath.Dir(abs), lfs.Options{})
		if err != nil {
			s.errorf("%v", err)
			return exitFail
		}
		defer ft.Close()
		t, dp = ft, "/"+filepath.Base(abs)
	}
	rs, err := st.Restore(s.ctx, tg.tree, v.Snapshot, tg.rel, t, dp)
	if err != nil {
		return s.fail(err)
	}
	if s.opts.json {
		s.emit(map[string]any{"version": v.Snapshot, "to": desc, "files": rs.Files, "dirs": rs.Dirs, "links": rs.Links, "bytes": rs.Bytes})
	} else {
		s.printf("restored %s%s from %s to %s: %d files (%s), %d dirs, %d links\n", tg.tree, tg.rel, v.Snapshot, desc, rs.Files, fmtBytes(rs.Bytes), rs.Dirs, rs.Links)
	}
	return exitOK
}
