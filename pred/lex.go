package pred

import (
	"strconv"
	"strings"
)

// tokKind is the kind of a token.
type tokKind uint8

const (
	tEOF    tokKind = iota
	tWord           // bare word
	tString         // quoted string
	tLParen         // (
	tRParen         // )
	tAnd            // & &&
	tOr             // | ||
	tNot            // !
	tCmp            // a comparison operator
)

// cmpOp is a comparison operator.
type cmpOp uint8

const (
	opEq       cmpOp = iota // =
	opNe                    // !=
	opLt                    // <
	opLe                    // <=
	opGt                    // >
	opGe                    // >=
	opGlob                  // ~
	opRegexp                // ~~
	opNoGlob                // !~
	opNoRegexp              // !~~
)

var opNames = [...]string{
	opEq:       "=",
	opNe:       "!=",
	opLt:       "<",
	opLe:       "<=",
	opGt:       ">",
	opGe:       ">=",
	opGlob:     "~",
	opRegexp:   "~~",
	opNoGlob:   "!~",
	opNoRegexp: "!~~",
}

func (op cmpOp) String() string { return opNames[op] }

// token is a lexical token.
type token struct {
	kind tokKind
	pos  int    // byte offset in the source
	src  string // source text
	val  string // the word, or the quoted string's value
	op   cmpOp  // for tCmp
}

// quote returns the token as shown in error messages.
func (t *token) quote() string {
	if t.kind == tEOF {
		return "end of predicate"
	}
	s := t.src
	if len(s) > 24 {
		s = s[:24] + "..."
	}
	return strconv.Quote(s)
}

func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '\v', '\f':
		return true
	}
	return false
}

// isWordByte reports whether c may appear in a bare word.
func isWordByte(c byte) bool {
	if isSpace(c) {
		return false
	}
	switch c {
	case '(', ')', '&', '|', '!', '=', '<', '>', '~', '"', '\'':
		return false
	}
	return true
}

// lex splits s into tokens, ending with a tEOF token.
func lex(s string) ([]token, error) {
	toks := make([]token, 0, 8)
	add := func(k tokKind, i, n int) int {
		toks = append(toks, token{kind: k, pos: i, src: s[i : i+n]})
		return i + n
	}
	addOp := func(op cmpOp, i int) int {
		n := len(opNames[op])
		toks = append(toks, token{kind: tCmp, pos: i, src: s[i : i+n], op: op})
		return i + n
	}
	at := func(i int) byte {
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case isSpace(c):
			i++
		case c == '(':
			i = add(tLParen, i, 1)
		case c == ')':
			i = add(tRParen, i, 1)
		case c == '&':
			if at(i+1) == '&' {
				i = add(tAnd, i, 2)
			} else {
				i = add(tAnd, i, 1)
			}
		case c == '|':
			if at(i+1) == '|' {
				i = add(tOr, i, 2)
			} else {
				i = add(tOr, i, 1)
			}
		case c == '!':
			switch {
			case at(i+1) == '=':
				i = addOp(opNe, i)
			case at(i+1) == '~' && at(i+2) == '~':
				i = addOp(opNoRegexp, i)
			case at(i+1) == '~':
				i = addOp(opNoGlob, i)
			default:
				i = add(tNot, i, 1)
			}
		case c == '=':
			i = addOp(opEq, i)
		case c == '<':
			if at(i+1) == '=' {
				i = addOp(opLe, i)
			} else {
				i = addOp(opLt, i)
			}
		case c == '>':
			if at(i+1) == '=' {
				i = addOp(opGe, i)
			} else {
				i = addOp(opGt, i)
			}
		case c == '~':
			if at(i+1) == '~' {
				i = addOp(opRegexp, i)
			} else {
				i = addOp(opGlob, i)
			}
		case c == '"':
			val, n, ok := unquoteDouble(s[i:])
			if !ok {
				return nil, &SyntaxError{Pred: s, Col: i + 1, Msg: "unterminated quoted string"}
			}
			toks = append(toks, token{kind: tString, pos: i, src: s[i : i+n], val: val})
			i += n
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, &SyntaxError{Pred: s, Col: i + 1, Msg: "unterminated quoted string"}
			}
			toks = append(toks, token{kind: tString, pos: i, src: s[i : i+j+2], val: s[i+1 : i+1+j]})
			i += j + 2
		default:
			j := i + 1
			for j < len(s) && isWordByte(s[j]) {
				j++
			}
			toks = append(toks, token{kind: tWord, pos: i, src: s[i:j], val: s[i:j]})
			i = j
		}
	}
	toks = append(toks, token{kind: tEOF, pos: len(s)})
	return toks, nil
}

// unquoteDouble scans the double-quoted string at the start of s. Within
// it, \" stands for " and \\ for \; a backslash before any other byte is
// kept. It returns the value and the length of the quoted string.
func unquoteDouble(s string) (val string, n int, ok bool) {
	var b []byte // nil until an escape is seen
	for j := 1; j < len(s); j++ {
		c := s[j]
		if c == '\\' && j+1 < len(s) && (s[j+1] == '\\' || s[j+1] == '"') {
			if b == nil {
				b = append(make([]byte, 0, len(s)), s[1:j]...)
			}
			b = append(b, s[j+1])
			j++
			continue
		}
		if c == '"' {
			if b == nil {
				return s[1:j], j + 1, true
			}
			return string(b), j + 1, true
		}
		if b != nil {
			b = append(b, c)
		}
	}
	return "", 0, false
}

// quoteValue returns s as a bare word if it can be one, or double-quoted.
func quoteValue(s string) string {
	bare := s != ""
	for i := 0; i < len(s) && bare; i++ {
		bare = isWordByte(s[i])
	}
	if bare {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}
