package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/subtree"
)

// A side is a tree named on the command line: a zx:// location or a
// local directory (served in-process by lfs), for commands that work on
// whole trees (repl, dump).
type side struct {
	t     zx.Tree
	root  string // path of the tree's root in t (the location's path)
	desc  string // zx://HOST:PORT/PATH, or the absolute directory
	local string // the directory, for a local side
	close func()
}

// openSide opens arg as a side. For a zx:// location the tree is the
// subtree at its path (root "/"); whole reports the location's tree
// instead, with root set to its path.
func (s *session) openSide(arg string, whole bool) (*side, error) {
	if strings.Contains(arg, "://") {
		loc, err := s.parse(arg)
		if err != nil {
			return nil, err
		}
		t, err := s.tree(loc)
		if err != nil {
			return nil, &connectError{err}
		}
		sd := &side{t: subtree.New(t, loc.Path), root: "/", desc: loc.String(), close: func() {}}
		if whole {
			sd.t, sd.root = t, loc.Path
		}
		return sd, nil
	}
	abs, err := filepath.Abs(arg)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", arg)
	}
	t, err := lfs.New(abs, lfs.Options{})
	if err != nil {
		return nil, err
	}
	return &side{t: t, root: "/", desc: abs, local: abs, close: func() { t.Close() }}, nil
}

// connectError is a failure to reach a side's server: not bad usage.
type connectError struct{ err error }

func (e *connectError) Error() string { return e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// sideFailed reports a failure to open a side, and returns the exit code:
// 1 if its server could not be reached, 2 for a bad argument.
func (s *session) sideFailed(err error) int {
	var ce *connectError
	if errors.As(err, &ce) {
		return s.fail(ce.err)
	}
	s.errorf("%v", err)
	return exitUsage
}
