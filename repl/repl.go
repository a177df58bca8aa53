// Package repl keeps two zx trees in sync, both ways: the library behind
// `zx repl`.
//
// Sync learns the state of each tree with one Find (all attributes), and
// compares each entry with what the State recorded at the end of the last
// sync: an entry that differs from its record changed on that side since.
// A change on one side only is applied to the other; changes on both sides
// to the same path are a conflict, resolved without losing either version
// (see below). Only the differences travel: the files to copy from a side
// are read with FindGet (one request per batch of paths, with a predicate
// naming them), each written to the other side with one Put that creates or
// truncates, sets the mode and mtime and carries the data, atomically; all
// requests are issued without waiting for replies (directories first,
// removals last and deepest first), so a sync costs a few round trips
// however many files it moves.
//
// # Conflicts
//
// Both versions are always kept:
//
//   - edited on both sides (or created on both with different contents, or
//     changed to different kinds of entry): the newer version (by mtime; a
//     directory always wins over a file or link) keeps the path, and the
//     other is renamed on its side to PATH.conflict-SIDE-YYYYMMDD-HHMMSS and
//     copied under that name to the other side;
//   - edited on one side, removed on the other: the edit is kept (copied
//     back) and reported;
//   - a directory removed on one side while the other changed or created
//     entries below it: the changed entries, and the directories leading to
//     them, are kept (recreated) and reported; the unchanged ones go.
//
// Files created on both sides with the same contents are not a conflict:
// Sync compares their contents (SHA-256 of both, read with FindGet) when
// size and mtime do not already say they are the same.
//
// # Renames
//
// A file removed at one path and created at another on the same side, with
// the same size, mtime and mode (a rename keeps them), is moved on the other
// side instead of being copied again, when the other side still has the old
// version unchanged and nothing at the new path. Other renames cost a copy
// and a removal.
//
// # Interruption
//
// The state records a path only once its change was applied on both sides,
// and it is saved atomically at the end of a run and periodically during
// it. Puts that create or truncate are atomic in zx trees, so an
// interrupted run leaves each file either old or new; the next run redoes
// only what was not recorded, and a copy that was done but not recorded
// shows as the same change on both sides (same size and mtime, or the same
// contents), not as a conflict.
package repl

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/pred"
)

// StateDir is the directory, at the root of a tree, where `zx repl` keeps
// its state by default. It is never synced.
const StateDir = "/.zx-repl"

// Side names, as used in actions and conflict names.
var sideNames = [2]string{"a", "b"}

// Options configure a Sync.
type Options struct {
	// DryRun plans the sync and reports the actions without changing
	// either tree or the state. (It reads file contents when it must
	// compare them to tell a conflict.)
	DryRun bool

	// Exclude is a predicate (see package pred) for entries not to sync,
	// on either side; an excluded directory is excluded with everything
	// below it. StateDir is always excluded.
	Exclude string

	// SaveEvery is how often the state is saved during a run (default
	// 5s); it is saved at the end in any case. Only states with a file
	// are saved (LoadState).
	SaveEvery time.Duration

	// Log, if set, is called for each action when it is done (or fails),
	// or when it is planned if DryRun is set. Calls are serialised.
	Log func(Action)

	// Total, if set, is called once with the number of file bytes the
	// sync will copy; Bytes is called as they are written.
	Total func(n int64)
	Bytes func(n int64)

	// Now returns the time used in conflict names (default time.Now).
	Now func() time.Time
}

// An Action is one thing a sync does, or found.
type Action struct {
	Op      string `json:"op"`             // copy, remove, move, attr, conflict, error
	From    string `json:"from,omitempty"` // side the version comes from: a or b
	To      string `json:"to,omitempty"`   // side changed
	Path    string `json:"path"`
	NewPath string `json:"newPath,omitempty"` // move: new path; conflict: where the other version went
	Type    string `json:"type,omitempty"`    // entry type copied: -, d, l
	Size    int64  `json:"size,omitempty"`    // bytes copied
	Msg     string `json:"msg,omitempty"`     // conflict: what happened
	Err     string `json:"err,omitempty"`     // why the action failed
}

// String formats the action as `zx repl` prints it:
//
//	copy a→b PATH
//	remove b PATH
//	move b OLD NEW
//	attr a→b PATH
//	conflict PATH: MESSAGE
//
// followed by ": error: ERR" when it failed.
func (a Action) String() string {
	var s string
	switch a.Op {
	case "copy", "attr":
		s = fmt.Sprintf("%s %s→%s %s", a.Op, a.From, a.To, a.Path)
	case "remove":
		s = fmt.Sprintf("remove %s %s", a.To, a.Path)
	case "move":
		s = fmt.Sprintf("move %s %s %s", a.To, a.Path, a.NewPath)
	case "conflict":
		s = fmt.Sprintf("conflict %s: %s", a.Path, a.Msg)
	default:
		s = fmt.Sprintf("%s %s", a.Op, a.Path)
		if a.Msg != "" {
			s += ": " + a.Msg
		}
	}
	if a.Err != "" {
		s += ": error: " + a.Err
	}
	return s
}

// Report sums up a sync.
type Report struct {
	Actions   []Action // in the order they completed
	Copied    int      // entries copied (files, directories, links)
	Bytes     int64    // file bytes copied
	Removed   int
	Moved     int
	Attrs     int // attribute-only updates
	Conflicts int
	Errors    int // actions that failed
}

// InSync reports whether the sync ended with no conflict and no error.
func (r *Report) InSync() bool { return r.Conflicts == 0 && r.Errors == 0 }

// Sync makes trees a and b equal, both ways, given the state recorded at
// the end of the last sync (an empty State for the first one), and updates
// the state. Each tree should implement zx.Finder (all trees of this
// module do); without it, Sync walks it with Stat and Get and reads files
// with one Get each.
//
// It returns an error only when it cannot sync at all (a bad predicate, a
// failed Find, a state that cannot be saved); failures of single actions
// and conflicts are in the report.
func Sync(ctx context.Context, a, b zx.Tree, state *State, opts Options) (*Report, error) {
	if opts.SaveEvery <= 0 {
		opts.SaveEvery = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	excl, err := excludePred(opts.Exclude)
	if err != nil {
		return nil, err
	}
	r := &run{opts: opts, state: state, rep: &Report{}}
	r.trees[0] = &side{id: 0, t: a}
	r.trees[1] = &side{id: 1, t: b}

	// 1. One find per side, at once.
	errs := make(chan error, 2)
	for _, s := range r.trees {
		go func() { errs <- s.scan(ctx, excl) }()
	}
	for range 2 {
		if e := <-errs; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return nil, err
	}
	for _, s := range r.trees {
		for _, e := range s.bad {
			r.log(Action{Op: "error", Path: e.path, Msg: "side " + sideNames[s.id] + ": cannot read, left alone", Err: e.err.Error()}, true)
		}
	}

	// 2. Decide what to do with every path.
	r.plan()

	// 3. Compare the contents of files changed on both sides that may
	// be equal.
	if len(r.compare) > 0 {
		r.compareContents(ctx)
	}

	// 4. Do it.
	if err := r.execute(ctx); err != nil {
		return r.rep, err
	}
	return r.rep, nil
}

// excludePred returns the find predicate that lists every entry but the
// excluded ones, pruning excluded directories.
func excludePred(user string) (string, error) {
	x := "path=" + quote(StateDir)
	if strings.TrimSpace(user) != "" {
		if _, err := pred.Parse(user); err != nil {
			return "", zx.Errorf("exclude", "", err)
		}
		x += " | (" + user + ")"
	}
	s := "(" + x + ") & prune | !(" + x + ")"
	if _, err := pred.Parse(s); err != nil {
		return "", zx.Errorf("exclude", "", err)
	}
	return s, nil
}

// quote quotes s as a predicate value.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

type badPath struct {
	path string
	err  error
}

// A side is one of the two trees and what its find found.
type side struct {
	id  int
	t   zx.Tree
	cur map[string]*Entry
	bad []badPath // entries that could not be read
}

func (s *side) name() string { return sideNames[s.id] }

// scan finds every entry of the tree.
func (s *side) scan(ctx context.Context, excl string) error {
	s.cur = map[string]*Entry{}
	for it := range pred.Find(ctx, s.t, "/", zx.FindOpts{Pred: excl}) {
		if it.Err != nil {
			if it.Dir != nil && it.Dir.Path() != "" {
				s.bad = append(s.bad, badPath{it.Dir.Path(), it.Err})
				continue
			}
			return fmt.Errorf("side %s: %w", s.name(), it.Err)
		}
		p := it.Dir.Path()
		if p == "/" || p == "" {
			continue
		}
		if e := entryOf(it.Dir); e != nil {
			s.cur[p] = e
		}
	}
	if err := ctx.Err(); err != nil {
		return zx.Errorf("find", "/", err)
	}
	return nil
}

// unreadable reports whether p is at or below a path that could not be read.
func (s *side) unreadable(p string) bool {
	for _, b := range s.bad {
		if zx.HasPrefix(p, b.path) {
			return true
		}
	}
	return false
}

// sortedPaths returns the keys of m, sorted: a directory before what is in
// it.
func sortedPaths[V any](m map[string]V) []string {
	ps := make([]string, 0, len(m))
	for p := range m {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}
