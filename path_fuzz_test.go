package zx

import (
	"strings"
	"testing"
)

// FuzzCleanPath checks the rules every tree relies on to keep requests
// inside its root: a path CleanPath accepts is canonical (absolute, no
// empty, "." or ".." elements, no trailing slash, no NUL, within the
// limits), cleaning it again changes nothing, and the prefix helpers agree
// with it.
func FuzzCleanPath(f *testing.F) {
	for _, s := range []string{
		"", "/", "a", "/a/b", "a//b/", "/./a/./", "..", "/a/../b", "../../etc/passwd",
		"/a/..", "a/...", "/\x00", "/a\x00b", strings.Repeat("x", MaxName+1),
		strings.Repeat("/abc", 1100), "//", "/a/b/.", ".../..",
	} {
		f.Add(s, "/a")
	}
	f.Fuzz(func(t *testing.T, p, prefix string) {
		c, err := CleanPath(p)
		// The fast path for clean paths agrees with the slow one.
		if sc, serr := cleanPath(p); sc != c || (serr == nil) != (err == nil) {
			t.Fatalf("CleanPath(%q) = %q, %v; the slow path says %q, %v", p, c, err, sc, serr)
		}
		if isClean(p) != (err == nil && c == p) {
			t.Fatalf("isClean(%q) = %v, but CleanPath says %q, %v", p, isClean(p), c, err)
		}
		if err != nil {
			if c != "" {
				t.Fatalf("CleanPath(%q) = %q with error %v", p, c, err)
			}
			if k := KindOf(err); k != ErrInvalid && k != ErrNameTooLong {
				t.Fatalf("CleanPath(%q): error of kind %v: %v", p, KindOf(err), err)
			}
			return
		}
		if !strings.HasPrefix(c, "/") || strings.Contains(c, "//") || strings.IndexByte(c, 0) >= 0 ||
			(c != "/" && strings.HasSuffix(c, "/")) || len(c) > MaxPath {
			t.Fatalf("CleanPath(%q) = %q: not canonical", p, c)
		}
		for _, el := range Elems(c) {
			if el == "" || el == "." || el == ".." || len(el) > MaxName {
				t.Fatalf("CleanPath(%q) = %q: element %q", p, c, el)
			}
		}
		if c2, err := CleanPath(c); err != nil || c2 != c {
			t.Fatalf("CleanPath(CleanPath(%q)) = %q, %v; want %q", p, c2, err, c)
		}
		if Depth(c) != len(Elems(c)) || !HasPrefix(c, "/") || !HasPrefix(c, c) {
			t.Fatalf("prefix helpers disagree on %q", c)
		}
		pc, err := CleanPath(prefix)
		if err != nil {
			return
		}
		if HasPrefix(c, pc) {
			if !Overlaps(c, pc) || !strings.HasPrefix(c, strings.TrimSuffix(pc, "/")) {
				t.Fatalf("HasPrefix(%q, %q) but the strings disagree", c, pc)
			}
			// Moving the subtree to another root keeps the path under it.
			r := Reprefix(c, pc, "/moved")
			if !HasPrefix(r, "/moved") {
				t.Fatalf("Reprefix(%q, %q, /moved) = %q", c, pc, r)
			}
		}
	})
}
