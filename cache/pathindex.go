package cache

import "github.com/zxfs/zx"

// pathIndex is a set of clean paths that can list the members at and
// below a path without scanning them all: drop of one path, for each
// of the thousands of removes of an rm -rf, used to scan every cached
// entry (quadratic in the size of the tree). It links each member to
// its parent, through directories that are not members themselves.
type pathIndex struct {
	in   map[string]bool
	kids map[string]map[string]bool // dir → members, or dirs with members, right below it
}

func newPathIndex() pathIndex {
	return pathIndex{in: map[string]bool{}, kids: map[string]map[string]bool{}}
}

func (x *pathIndex) add(p string) {
	if x.in[p] {
		return
	}
	x.in[p] = true
	for p != "/" {
		par := zx.Parent(p)
		if par == p {
			return
		}
		s := x.kids[par]
		if s == nil {
			s = map[string]bool{}
			x.kids[par] = s
		}
		if s[p] {
			return
		}
		s[p] = true
		p = par
	}
}

func (x *pathIndex) remove(p string) {
	if !x.in[p] {
		return
	}
	delete(x.in, p)
	for p != "/" && !x.in[p] && len(x.kids[p]) == 0 {
		delete(x.kids, p)
		par := zx.Parent(p)
		if par == p {
			return
		}
		delete(x.kids[par], p)
		p = par
	}
	if len(x.kids[p]) == 0 {
		delete(x.kids, p)
	}
}

func (x *pathIndex) clear() {
	clear(x.in)
	clear(x.kids)
}

// below returns the members at p and below it.
func (x *pathIndex) below(p string) []string {
	var out []string
	var walk func(string)
	walk = func(q string) {
		if x.in[q] {
			out = append(out, q)
		}
		for k := range x.kids[q] {
			walk(k)
		}
	}
	walk(p)
	return out
}
