// Package pred implements the predicates of zx find requests: boolean
// expressions over the attributes of directory entries, evaluated by the
// tree that walks itself (see zx.Finder), and a generic walker for trees
// that do not.
//
// A predicate compares attributes with values and combines comparisons:
//
//	type=d & name!=.git
//	~*.go | ~*.s                 (name~*.go | name~*.s)
//	size>10M & mtime>-1h
//	name=.git & prune | type=-   (files outside .git directories)
//	path~~'^/src/.*_test\.go$'
//	depth<=2 & !(uid=0 | mode>=04000)
//
// The operators are = != < <= > >= (numeric for sizes, ids, modes, times and
// depths; byte-wise otherwise), ~ and !~ (glob, as path.Match), and ~~ and !~~
// (regular expression, RE2, unanchored). Comparisons combine with ! (not),
// & (and) and | (or), in that order of precedence, and parentheses. The
// pseudo-attribute depth is the depth of the entry in the walk; the term
// prune is false and stops the walk from descending below the entry. A lone
// type letter (d, -, l, p, s, c, b) stands for type=X, and ~GLOB and ~~RE
// alone compare the name.
//
// See docs/predicates.md for the grammar and the exact semantics.
package pred

import (
	"strconv"
	"strings"
	"time"

	"github.com/zxfs/zx"
)

// Pred is a parsed predicate. Safe for concurrent use.
type Pred struct {
	root *node // nil matches everything
}

// SyntaxError points at the offending column (1-based, in bytes).
type SyntaxError struct {
	Pred string // the predicate
	Col  int    // column of the offending token
	Msg  string
}

func (e *SyntaxError) Error() string {
	return "pred: col " + strconv.Itoa(e.Col) + ": " + e.Msg
}

// Is makes errors.Is(err, zx.ErrInvalid) true for syntax errors.
func (e *SyntaxError) Is(t error) bool { return t == zx.ErrInvalid }

// As sets a *zx.Kind target to zx.ErrInvalid, so that zx.KindOf classifies
// syntax errors as invalid arguments (also when they cross the wire).
func (e *SyntaxError) As(target any) bool {
	if k, ok := target.(*zx.Kind); ok {
		*k = zx.ErrInvalid
		return true
	}
	return false
}

// now is the clock for relative times; tests replace it.
var now = time.Now

// Parse parses a predicate. "" and "true" match everything. Errors are
// *SyntaxError.
func Parse(s string) (*Pred, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{src: s, toks: toks, now: now()}
	root, err := p.parse()
	if err != nil {
		return nil, err
	}
	if root.kind == nTrue {
		root = nil
	}
	return &Pred{root: root}, nil
}

// Match evaluates p on entry d, at the given depth (0 for the root of the
// walk as given by depth0). prune reports that the walk must not descend
// below d. A nil Pred matches everything.
func (p *Pred) Match(d zx.Dir, depth int) (match, prune bool) {
	if p == nil || p.root == nil {
		return true, false
	}
	match = p.root.eval(d, d[zx.APath], depth, &prune)
	return match, prune
}

// MatchPath is Match for an entry whose path, as the predicate sees it,
// is path rather than d's own: for a walk that rewrites paths, which must
// not copy each entry to evaluate it.
func (p *Pred) MatchPath(d zx.Dir, path string, depth int) (match, prune bool) {
	return p.match(d, path, depth)
}

// match is Match with the path of the entry given apart, so that a walk
// can evaluate rewritten paths without copying the entry.
func (p *Pred) match(d zx.Dir, path string, depth int) (match, prune bool) {
	if p == nil || p.root == nil {
		return true, false
	}
	match = p.root.eval(d, path, depth, &prune)
	return match, prune
}

// String returns p in canonical form: comparisons written in full
// (attr op value), values quoted only where needed, ! & | for the boolean
// operators, and parentheses only where needed. Parsing it yields an
// equivalent predicate with the same canonical form.
func (p *Pred) String() string {
	if p == nil || p.root == nil {
		return "true"
	}
	var b strings.Builder
	p.root.format(&b, precOr)
	return b.String()
}
