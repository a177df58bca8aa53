package dump

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// apply applies a unified diff made by Unified to a, checking each
// context and deleted line.
func apply(t *testing.T, a, diff string) string {
	t.Helper()
	if diff == "" {
		return a
	}
	al := splitLines([]byte(a))
	dl := strings.SplitAfter(diff, "\n")
	var out []string
	ai := 0
	for i := 2; i < len(dl) && dl[i] != ""; i++ {
		l := dl[i]
		if !strings.HasPrefix(l, "@@ -") {
			t.Fatalf("expected a hunk header, got %q in\n%s", l, diff)
		}
		f := strings.Fields(l)
		start, _, _ := strings.Cut(f[1][1:], ",")
		s, _ := strconv.Atoi(start)
		if !strings.Contains(f[1], ",0") {
			s--
		}
		if s < ai {
			t.Fatalf("hunks overlap in\n%s", diff)
		}
		out = append(out, al[ai:s]...)
		ai = s
		for i+1 < len(dl) && dl[i+1] != "" && !strings.HasPrefix(dl[i+1], "@@") {
			i++
			l := dl[i]
			text := l[1:]
			if i+1 < len(dl) && strings.HasPrefix(dl[i+1], `\ No newline`) {
				text = strings.TrimSuffix(text, "\n")
				i++
			}
			switch l[0] {
			case ' ', '-':
				if ai >= len(al) || al[ai] != text {
					t.Fatalf("line %d: %q does not match %q in\n%s", ai+1, text, al[min(ai, len(al)-1)], diff)
				}
				if l[0] == ' ' {
					out = append(out, text)
				}
				ai++
			case '+':
				out = append(out, text)
			default:
				t.Fatalf("bad line %q", l)
			}
		}
	}
	return strings.Join(append(out, al[ai:]...), "")
}

// lcs is the length of the longest common subsequence of lines.
func lcs(a, b []string) int {
	prev := make([]int, len(b)+1)
	for i := range a {
		cur := make([]int, len(b)+1)
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(cur[j], prev[j+1])
			}
		}
		prev = cur
	}
	return prev[len(b)]
}

func TestUnifiedGolden(t *testing.T) {
	a := "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\ntwelve\n"
	b := "one\n2\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\ntwelve\nthirteen"
	want := `--- a
+++ b
@@ -1,5 +1,5 @@
 one
-two
+2
 three
 four
 five
@@ -10,3 +10,4 @@
 ten
 eleven
 twelve
+thirteen
\ No newline at end of file
`
	if got := Unified("a", "b", []byte(a), []byte(b)); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := Unified("a", "b", nil, []byte("x\n")); got != "--- a\n+++ b\n@@ -0,0 +1 @@\n+x\n" {
		t.Errorf("diff from empty: %q", got)
	}
	if got := Unified("a", "b", []byte("x\n"), nil); got != "--- a\n+++ b\n@@ -1 +0,0 @@\n-x\n" {
		t.Errorf("diff to empty: %q", got)
	}
	if got := Unified("a", "b", []byte("x\n"), []byte("x\n")); got != "" {
		t.Errorf("diff of equal contents: %q", got)
	}
	if got := Unified("a", "b", []byte("x\x00"), []byte("y")); got != "Binary files a and b differ\n" {
		t.Errorf("binary: %q", got)
	}
}

// TestUnifiedRandom checks on random edits that the diff applies and is
// minimal, and, where GNU diff and patch are installed, that patch
// accepts it.
func TestUnifiedRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	words := []string{"a\n", "b\n", "c\n", "d\n", "e\n", "f"}
	gen := func(n int) string {
		var s strings.Builder
		for range n {
			s.WriteString(words[r.IntN(len(words)-1)])
		}
		if r.IntN(4) == 0 {
			s.WriteString("f")
		}
		return s.String()
	}
	patch, err := exec.LookPath("patch")
	if err != nil {
		t.Log("!!! no patch(1): the check that GNU patch accepts the diffs is SKIPPED (.ci/run installs it on CI) !!!")
	}
	dir := t.TempDir()
	for i := range 300 {
		a, b := gen(r.IntN(40)), gen(r.IntN(40))
		if i%2 == 0 { // small edits of a
			al := splitLines([]byte(a))
			for range r.IntN(4) {
				if len(al) > 0 {
					j := r.IntN(len(al))
					al = append(al[:j], append([]string{words[r.IntN(5)]}, al[j:]...)...)
					if !strings.HasSuffix(al[j], "\n") {
						al[j] += "\n"
					}
				}
			}
			b = strings.Join(al, "")
		}
		d := Unified("a", "b", []byte(a), []byte(b))
		if got := apply(t, a, d); got != b {
			t.Fatalf("diff does not turn\n%q into\n%q:\n%s", a, b, d)
		}
		al, bl := splitLines([]byte(a)), splitLines([]byte(b))
		changes := 0
		for _, l := range strings.Split(d, "\n") {
			if strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++") || strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "---") {
				changes++
			}
		}
		if want := len(al) + len(bl) - 2*lcs(al, bl); changes != want {
			t.Fatalf("diff of\n%q and\n%q has %d changes, want %d:\n%s", a, b, changes, want, d)
		}
		if patch != "" && i < 40 && d != "" {
			f := filepath.Join(dir, "f")
			if err := os.WriteFile(f, []byte(a), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(patch, "-s", "-f", f)
			cmd.Stdin = strings.NewReader(d)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("patch: %v: %s\n%s", err, out, d)
			}
			if got, _ := os.ReadFile(f); string(got) != b {
				t.Fatalf("patch made %q, want %q", got, b)
			}
		}
	}
}

func TestUnifiedLarge(t *testing.T) {
	// Past maxEdits the diff is not minimal but still right.
	var a, b strings.Builder
	for i := range 3 * maxEdits {
		a.WriteString(strconv.Itoa(i) + "\n")
		b.WriteString(strconv.Itoa(i) + "x\n")
	}
	d := Unified("a", "b", []byte(a.String()), []byte(b.String()))
	if got := apply(t, a.String(), d); got != b.String() {
		t.Fatal("large diff does not apply")
	}
}
