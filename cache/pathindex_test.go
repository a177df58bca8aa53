package cache

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/zxfs/zx"
)

// TestPathIndex checks below against a scan of every member with
// zx.HasPrefix (what drop did before the index) over random adds and
// removes, members with and without their parents.
func TestPathIndex(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	names := []string{"a", "b", "ab", "a.b"}
	randPath := func() string {
		p := ""
		for range 1 + r.Intn(4) {
			p += "/" + names[r.Intn(len(names))]
		}
		return p
	}
	x := newPathIndex()
	set := map[string]bool{}
	for i := range 5000 {
		p := randPath()
		switch r.Intn(3) {
		case 0, 1:
			x.add(p)
			set[p] = true
		case 2:
			x.remove(p)
			delete(set, p)
		}
		q := randPath()
		if i%7 == 0 {
			q = "/"
		}
		got := x.below(q)
		var want []string
		for s := range set {
			if zx.HasPrefix(s, q) {
				want = append(want, s)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: below(%q) = %q, want %q", i, q, got, want)
		}
	}
	for s := range set {
		x.remove(s)
	}
	if len(x.in) != 0 || len(x.kids) != 0 {
		t.Fatalf("empty index keeps %d members, %d dirs: %v", len(x.in), len(x.kids), x.kids)
	}
}
