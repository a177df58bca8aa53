package pred

import (
	"testing"

	"github.com/zxfs/zx"
)

// FuzzParse checks that Parse never panics, that the canonical form of a
// parsed predicate parses to the same canonical form, and that Match does
// not panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "d", "~*.go", "name=.git & prune | type=-", `path~~"^/a/(b|c)"`,
		"size>10M & mtime>-1h", "!(uid=0 | mode>=04000) and depth<=2", `x= or "a b"!~'*'`,
	} {
		f.Add(s)
	}
	d := zx.Dir{"path": "/a/b.go", "name": "b.go", "type": "-", "size": "100",
		"mode": "0644", "mtime": "1700000000000000000", "x": "1"}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			if _, ok := err.(*SyntaxError); !ok {
				t.Fatalf("Parse(%q): error %T %v is not a *SyntaxError", s, err, err)
			}
			return
		}
		c := p.String()
		p2, err := Parse(c)
		if err != nil {
			t.Fatalf("Parse(%q) = %q, which does not parse: %v", s, c, err)
		}
		if c2 := p2.String(); c2 != c {
			t.Fatalf("Parse(%q) = %q, which parses as %q", s, c, c2)
		}
		m1, pr1 := p.Match(d, 1)
		m2, pr2 := p2.Match(d, 1)
		if m1 != m2 || pr1 != pr2 {
			t.Fatalf("%q and its canonical form %q disagree on %v", s, c, d)
		}
	})
}
