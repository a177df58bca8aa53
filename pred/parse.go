package pred

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// nodeKind is the kind of a node of a parsed predicate.
type nodeKind uint8

const (
	nTrue nodeKind = iota
	nFalse
	nPrune
	nNot
	nAnd
	nOr
	nCmp
)

// node is a node of a parsed predicate. Nodes are never modified after
// Parse returns.
type node struct {
	kind nodeKind
	kids []*node // operands of nNot (one), nAnd and nOr (two or more)
	cmp  cmp     // for nCmp
}

// Precedences, for formatting.
const (
	precOr = iota + 1
	precAnd
	precNot
)

// typeLetters are the entry types that may stand alone for type=X.
const typeLetters = "d-lpscb"

// parser is a recursive descent parser over the tokens of a predicate.
type parser struct {
	src  string
	toks []token
	i    int
	now  time.Time
	nest int // depth of parentheses and negations
}

// maxNest bounds the nesting of parentheses and negations, so that a
// predicate from the network cannot exhaust the stack.
const maxNest = 1000

// enter notes one more level of nesting at t.
func (p *parser) enter(t *token) error {
	p.nest++
	if p.nest > maxNest {
		return p.errAt(t, "predicate nested too deeply")
	}
	return nil
}

func (p *parser) peek() *token { return &p.toks[p.i] }

// peek2 returns the token after the next one.
func (p *parser) peek2() *token {
	if p.i+1 < len(p.toks) {
		return &p.toks[p.i+1]
	}
	return &p.toks[len(p.toks)-1]
}

func (p *parser) next() *token {
	t := &p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) errAt(t *token, format string, args ...any) error {
	return &SyntaxError{Pred: p.src, Col: t.pos + 1, Msg: fmt.Sprintf(format, args...)}
}

// prev returns the token before the next one, or nil.
func (p *parser) prev() *token {
	if p.i == 0 {
		return nil
	}
	return &p.toks[p.i-1]
}

func (p *parser) parse() (*node, error) {
	if p.peek().kind == tEOF {
		return &node{kind: nTrue}, nil
	}
	n, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		if t.kind == tRParen {
			return nil, p.errAt(t, `unbalanced ")"`)
		}
		return nil, p.errAt(t, `unexpected %s; missing "&" or "|"?`, t.quote())
	}
	return n, nil
}

func (p *parser) isKeyword(t *token, kw string) bool {
	return t.kind == tWord && t.val == kw && p.peek2().kind != tCmp
}

func (p *parser) parseOr() (*node, error) {
	n, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	var kids []*node
	for t := p.peek(); t.kind == tOr || p.isKeyword(t, "or"); t = p.peek() {
		p.next()
		m, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		if kids == nil {
			kids = flatten(kids, n, nOr)
		}
		kids = flatten(kids, m, nOr)
	}
	if kids == nil {
		return n, nil
	}
	return &node{kind: nOr, kids: kids}, nil
}

func (p *parser) parseAnd() (*node, error) {
	n, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	var kids []*node
	for t := p.peek(); t.kind == tAnd || p.isKeyword(t, "and"); t = p.peek() {
		p.next()
		m, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		if kids == nil {
			kids = flatten(kids, n, nAnd)
		}
		kids = flatten(kids, m, nAnd)
	}
	if kids == nil {
		return n, nil
	}
	return &node{kind: nAnd, kids: kids}, nil
}

// flatten appends n to kids, or its operands if it is itself of kind k.
func flatten(kids []*node, n *node, k nodeKind) []*node {
	if n.kind == k {
		return append(kids, n.kids...)
	}
	return append(kids, n)
}

func (p *parser) parseUnary() (*node, error) {
	if t := p.peek(); t.kind == tNot || p.isKeyword(t, "not") {
		p.next()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		n, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		p.nest--
		return &node{kind: nNot, kids: []*node{n}}, nil
	}
	return p.parsePrimary()
}

func (p *parser) parsePrimary() (*node, error) {
	t := p.peek()
	switch t.kind {
	case tEOF:
		if pt := p.prev(); pt != nil {
			return nil, p.errAt(t, "expected expression after %s", pt.quote())
		}
		return nil, p.errAt(t, "expected expression")
	case tLParen:
		p.next()
		if err := p.enter(t); err != nil {
			return nil, err
		}
		defer func() { p.nest-- }()
		if p.peek().kind == tRParen {
			return nil, p.errAt(p.peek(), `expected expression after "("`)
		}
		n, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		switch c := p.peek(); c.kind {
		case tRParen:
			p.next()
			return n, nil
		case tEOF:
			return nil, p.errAt(t, `unbalanced "(": missing ")"`)
		default:
			return nil, p.errAt(c, `unexpected %s; missing "&", "|" or ")"?`, c.quote())
		}
	case tCmp:
		// Short forms: ~GLOB, ~~RE, !~GLOB, !~~RE compare the name.
		switch t.op {
		case opGlob, opRegexp, opNoGlob, opNoRegexp:
			p.next()
			return p.parseValue("name", t)
		}
		return nil, p.errAt(t, "missing attribute before %s", t.quote())
	case tWord, tString:
		if p.peek2().kind == tCmp {
			p.next()
			return p.parseValue(t.val, p.next())
		}
		if t.kind == tWord {
			switch t.val {
			case "true":
				p.next()
				return &node{kind: nTrue}, nil
			case "false":
				p.next()
				return &node{kind: nFalse}, nil
			case "prune":
				p.next()
				return &node{kind: nPrune}, nil
			case "and", "or":
				return nil, p.errAt(t, "unexpected %s", t.quote())
			}
			if len(t.val) == 1 && strings.Contains(typeLetters, t.val) {
				p.next()
				return p.compile(t, "type", opEq, t.val)
			}
		}
		after := p.peek2()
		if t.kind == tWord && strings.ContainsAny(t.val, "*?[") {
			return nil, p.errAt(after, "expected operator after attribute %s (to match names, write ~%s)", t.quote(), t.val)
		}
		return nil, p.errAt(after, "expected operator after attribute %s", t.quote())
	}
	if t.kind == tRParen {
		return nil, p.errAt(t, `unbalanced ")"`)
	}
	return nil, p.errAt(t, "unexpected %s", t.quote())
}

// parseValue parses the value after operator op and compiles the
// comparison of attr with it.
func (p *parser) parseValue(attr string, op *token) (*node, error) {
	v := p.peek()
	switch {
	case v.kind == tWord && (v.val == "and" || v.val == "or") && (op.op == opEq || op.op == opNe) && startsTerm(p.peek2()):
		// In "x= and y=1", and is the operator: x has no value.
		return p.compile(v, attr, op.op, "")
	case v.kind == tWord || v.kind == tString:
		p.next()
		return p.compile(v, attr, op.op, v.val)
	case op.op == opEq || op.op == opNe:
		// attr= tests for a missing (or empty) attribute.
		return p.compile(v, attr, op.op, "")
	}
	return nil, p.errAt(v, "expected value after %s", op.quote())
}

// startsTerm reports whether t may start a term other than a comparison
// operator (which would follow an attribute).
func startsTerm(t *token) bool {
	switch t.kind {
	case tWord, tString, tLParen, tNot:
		return true
	}
	return false
}

// compile builds a comparison node, converting the value for the
// attribute and operator. t is the value's token, for errors.
func (p *parser) compile(t *token, attr string, op cmpOp, val string) (*node, error) {
	c := cmp{attr: attr, op: op, val: val}
	switch attr {
	case "path":
		c.akind = aPath
	case "depth":
		c.akind = aDepth
	}
	switch op {
	case opGlob, opNoGlob:
		g, err := compileGlob(val)
		if err != nil {
			return nil, p.errAt(t, "bad glob pattern %q", val)
		}
		c.vkind, c.glob = vGlob, g
	case opRegexp, opNoRegexp:
		re, err := regexp.Compile(val)
		if err != nil {
			return nil, p.errAt(t, "bad regular expression: %s", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
		}
		c.vkind, c.re = vRegexp, re
	default:
		if err := p.compileValue(t, &c); err != nil {
			return nil, err
		}
	}
	return &node{kind: nCmp, cmp: c}, nil
}

// compileValue sets the kind and numeric value of an ordered comparison.
func (p *parser) compileValue(t *token, c *cmp) error {
	if c.val == "" && (c.op == opEq || c.op == opNe) {
		c.vkind = vString // attr= tests for a missing attribute
		return nil
	}
	var ok bool
	switch c.attr {
	case "name", "path", "type", "target":
		c.vkind = vString
		return nil
	case "size":
		c.n, ok = parseSize(c.val)
		if !ok {
			return p.errAt(t, "bad size value %q (want an integer with an optional unit k, K, M, G, T)", c.val)
		}
		c.vkind = vInt
	case "depth", "uid", "gid", "ino", "nlink":
		c.n, ok = parseDec(c.val)
		if !ok {
			return p.errAt(t, "bad %s value %q (want an integer)", c.attr, c.val)
		}
		c.vkind = vInt
	case "mode":
		c.n, ok = parseOct(c.val)
		if !ok {
			return p.errAt(t, "bad mode value %q (want an octal number)", c.val)
		}
		c.vkind = vOctal
	case "mtime", "atime", "ctime":
		var err string
		c.n, err = parseTime(c.val, p.now)
		if err != "" {
			return p.errAt(t, "bad time value %q (%s)", c.val, err)
		}
		c.vkind = vInt
	default:
		if c.n, ok = parseDec(c.val); ok {
			c.vkind = vAuto
		} else {
			c.vkind = vString
		}
	}
	return nil
}

// format writes n in canonical form, parenthesised if its precedence is
// lower than prec.
func (n *node) format(b *strings.Builder, prec int) {
	switch n.kind {
	case nTrue:
		b.WriteString("true")
	case nFalse:
		b.WriteString("false")
	case nPrune:
		b.WriteString("prune")
	case nNot:
		b.WriteByte('!')
		n.kids[0].format(b, precNot)
	case nAnd, nOr:
		sep, my := " & ", precAnd
		if n.kind == nOr {
			sep, my = " | ", precOr
		}
		if prec > my {
			b.WriteByte('(')
		}
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(sep)
			}
			k.format(b, my+1)
		}
		if prec > my {
			b.WriteByte(')')
		}
	case nCmp:
		b.WriteString(quoteValue(n.cmp.attr))
		b.WriteString(n.cmp.op.String())
		b.WriteString(quoteValue(n.cmp.val))
	}
}
