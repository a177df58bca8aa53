package pred

import (
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/zxfs/zx"
)

// attrKind says where a comparison finds its attribute.
type attrKind uint8

const (
	aOther attrKind = iota // in the entry
	aPath                  // the (rewritten) path
	aDepth                 // the depth of the walk
)

// valKind says how a comparison compares.
type valKind uint8

const (
	vString valKind = iota // byte-wise
	vAuto                  // numeric if the entry's value is a decimal integer, else byte-wise
	vInt                   // numeric, decimal; false (true for !=) if the entry's isn't
	vOctal                 // numeric, octal (mode)
	vGlob                  // path.Match
	vRegexp                // regexp
)

// cmp is a comparison, compiled.
type cmp struct {
	attr  string
	akind attrKind
	op    cmpOp
	val   string // the value as written (unquoted)
	vkind valKind
	n     int64 // val as a number, for vAuto, vInt, vOctal
	glob  glob
	re    *regexp.Regexp
}

// eval evaluates n on entry d, whose path is path, at depth depth. It sets
// *prune when it evaluates a prune term. It does not allocate.
func (n *node) eval(d zx.Dir, path string, depth int, prune *bool) bool {
	switch n.kind {
	case nCmp:
		return n.cmp.eval(d, path, depth)
	case nAnd:
		for _, k := range n.kids {
			if !k.eval(d, path, depth, prune) {
				return false
			}
		}
		return true
	case nOr:
		for _, k := range n.kids {
			if k.eval(d, path, depth, prune) {
				return true
			}
		}
		return false
	case nNot:
		return !n.kids[0].eval(d, path, depth, prune)
	case nTrue:
		return true
	case nPrune:
		*prune = true
	}
	return false
}

func (c *cmp) eval(d zx.Dir, path string, depth int) bool {
	var s string
	switch c.akind {
	case aPath:
		s = path
	case aDepth:
		if c.vkind == vInt {
			return c.op.ints(int64(depth), c.n)
		}
		s = strconv.Itoa(depth)
	default:
		s = d[c.attr]
	}
	switch c.vkind {
	case vGlob:
		return c.glob.match(s) == (c.op == opGlob)
	case vRegexp:
		return c.re.MatchString(s) == (c.op == opRegexp)
	case vInt:
		n, ok := parseDec(s)
		if !ok {
			return c.op == opNe
		}
		return c.op.ints(n, c.n)
	case vOctal:
		n, ok := parseOct(s)
		if !ok {
			return c.op == opNe
		}
		return c.op.ints(n, c.n)
	case vAuto:
		if n, ok := parseDec(s); ok {
			return c.op.ints(n, c.n)
		}
	}
	return c.op.strings(s, c.val)
}

func (op cmpOp) ints(a, b int64) bool {
	switch op {
	case opEq:
		return a == b
	case opNe:
		return a != b
	case opLt:
		return a < b
	case opLe:
		return a <= b
	case opGt:
		return a > b
	case opGe:
		return a >= b
	}
	return false
}

func (op cmpOp) strings(a, b string) bool {
	switch op {
	case opEq:
		return a == b
	case opNe:
		return a != b
	case opLt:
		return a < b
	case opLe:
		return a <= b
	case opGt:
		return a > b
	case opGe:
		return a >= b
	}
	return false
}

// globKind selects a fast path for common glob patterns.
type globKind uint8

const (
	gMatch    globKind = iota // path.Match
	gLiteral                  // no metacharacters
	gStar                     // *
	gPrefix                   // lit*
	gSuffix                   // *lit
	gContains                 // *lit*, lit without /
)

// glob is a compiled glob pattern with path.Match semantics: * and ?
// never match a slash.
type glob struct {
	kind globKind
	pat  string
	lit  string
}

func compileGlob(pat string) (glob, error) {
	if _, err := path.Match(pat, ""); err != nil {
		return glob{}, err
	}
	meta := func(s string) bool { return strings.ContainsAny(s, `*?[\`) }
	g := glob{kind: gMatch, pat: pat}
	n := len(pat)
	switch {
	case !meta(pat):
		g.kind, g.lit = gLiteral, pat
	case pat == "*":
		g.kind = gStar
	case n >= 2 && pat[0] == '*' && pat[n-1] == '*' && !meta(pat[1:n-1]) && !strings.Contains(pat[1:n-1], "/"):
		g.kind, g.lit = gContains, pat[1:n-1]
	case pat[0] == '*' && !meta(pat[1:]):
		g.kind, g.lit = gSuffix, pat[1:]
	case pat[n-1] == '*' && !meta(pat[:n-1]):
		g.kind, g.lit = gPrefix, pat[:n-1]
	}
	return g, nil
}

func (g *glob) match(s string) bool {
	switch g.kind {
	case gLiteral:
		return s == g.lit
	case gStar:
		return strings.IndexByte(s, '/') < 0
	case gPrefix:
		return strings.HasPrefix(s, g.lit) && strings.IndexByte(s[len(g.lit):], '/') < 0
	case gSuffix:
		return strings.HasSuffix(s, g.lit) && strings.IndexByte(s[:len(s)-len(g.lit)], '/') < 0
	case gContains:
		return strings.IndexByte(s, '/') < 0 && strings.Contains(s, g.lit)
	}
	ok, _ := path.Match(g.pat, s)
	return ok
}

// parseDec parses a decimal integer with an optional sign, without
// allocating.
func parseDec(s string) (int64, bool) {
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
		if n > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// parseOct parses an octal number, without allocating.
func parseOct(s string) (int64, bool) {
	if s == "" || len(s) > 21 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '7' {
			return 0, false
		}
		n = n*8 + int64(c-'0')
	}
	return n, true
}

// parseSize parses a size: a decimal integer with an optional unit k or K
// (1024), M, G or T, optionally followed by B.
func parseSize(s string) (int64, bool) {
	s = strings.TrimSuffix(s, "B")
	mult := int64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'k', 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	n, ok := parseDec(s)
	if !ok || n > (1<<63-1)/mult || n < -(1<<63-1)/mult {
		return 0, false
	}
	return n * mult, true
}

// parseTime parses a time value as nanoseconds since the epoch: an
// integer (nanoseconds), a relative time before now (-1h, -30m, -2d,
// -1d12h), an RFC 3339 time or a 2006-01-02 date (UTC). It returns an
// explanation when s is none of these.
func parseTime(s string, now time.Time) (int64, string) {
	if n, ok := parseDec(s); ok {
		return n, ""
	}
	if len(s) > 1 && s[0] == '-' {
		d, ok := parseRel(s[1:])
		if !ok {
			return 0, "want -N followed by s, m, h, d or w"
		}
		return now.Add(-d).UnixNano(), ""
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t, err = time.Parse(time.DateOnly, s)
	}
	if err != nil {
		return 0, "want -1h, 2006-01-02, 2006-01-02T15:04:05Z or nanoseconds"
	}
	if y := t.Year(); y < 1678 || y > 2261 {
		return 0, "out of range"
	}
	return t.UnixNano(), ""
}

// parseRel parses a duration such as 1h, 30m, 2d or 1d12h: integers, each
// followed by a unit s, m, h, d (24h) or w (7d).
func parseRel(s string) (time.Duration, bool) {
	var total time.Duration
	for s != "" {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 0 || i == len(s) || i > 12 {
			return 0, false
		}
		n, _ := strconv.ParseInt(s[:i], 10, 64)
		var unit time.Duration
		switch s[i] {
		case 's':
			unit = time.Second
		case 'm':
			unit = time.Minute
		case 'h':
			unit = time.Hour
		case 'd':
			unit = 24 * time.Hour
		case 'w':
			unit = 7 * 24 * time.Hour
		default:
			return 0, false
		}
		if time.Duration(n) > (1<<63-1-total)/unit {
			return 0, false
		}
		total += time.Duration(n) * unit
		s = s[i+1:]
	}
	return total, true
}
