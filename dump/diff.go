package dump

import (
	"bytes"
	"fmt"
	"strings"
)

// The standard library has no exported diff (internal/diff is
// internal), so here is a small one: Myers' O(ND) algorithm on lines,
// with the common prefix and suffix trimmed first, and a fallback to
// "replace everything" when the difference is huge.

// maxEdits bounds the edit distance searched for (memory is quadratic
// in it); beyond it the diff replaces the whole changed middle.
const maxEdits = 4000

// IsBinary reports whether data looks binary (has a NUL byte early on).
func IsBinary(data []byte) bool {
	return bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0
}

// splitLines splits data into lines, each with its "\n" (the last one
// may lack it).
func splitLines(data []byte) []string {
	var ls []string
	s := string(data)
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			ls = append(ls, s)
			break
		}
		ls = append(ls, s[:i+1])
		s = s[i+1:]
	}
	return ls
}

type opKind byte

const (
	opEq  opKind = ' '
	opDel opKind = '-'
	opIns opKind = '+'
)

type edit struct {
	kind opKind
	line string
}

// edits returns a shortest edit script from a to b (or, past maxEdits, a
// correct but longer one).
func edits(a, b []string) []edit {
	var pre, suf []edit
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		pre = append(pre, edit{opEq, a[0]})
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		suf = append(suf, edit{opEq, a[len(a)-1]})
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	mid := myers(a, b)
	for i := len(suf) - 1; i >= 0; i-- {
		mid = append(mid, suf[i])
	}
	return append(pre, mid...)
}

func myers(a, b []string) []edit {
	n, m := len(a), len(b)
	if n == 0 || m == 0 {
		return replaceAll(a, b)
	}
	max := n + m
	v := make([]int, 2*max+2)
	off := max + 1
	var trace [][]int // trace[d][k+d]: v after round d
	for d := 0; d <= max; d++ {
		if d > maxEdits {
			return replaceAll(a, b)
		}
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
				return backtrack(a, b, trace)
			}
		}
		trace = append(trace, append([]int(nil), v[off-d:off+d+1]...))
	}
	return replaceAll(a, b) // not reached
}

func backtrack(a, b []string, trace [][]int) []edit {
	x, y := len(a), len(b)
	var rev []edit
	for d := len(trace) - 1; d > 0; d-- {
		pv := trace[d-1] // index k+(d-1)
		at := func(k int) int { return pv[k+d-1] }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		// The diagonal after the move.
		sx, sy := px, py
		if pk == k+1 {
			sy++ // moved down: b[py] inserted
		} else {
			sx++ // moved right: a[px] deleted
		}
		for x > sx && y > sy {
			x--
			y--
			rev = append(rev, edit{opEq, a[x]})
		}
		if pk == k+1 {
			rev = append(rev, edit{opIns, b[py]})
		} else {
			rev = append(rev, edit{opDel, a[px]})
		}
		x, y = px, py
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, edit{opEq, a[x]})
	}
	es := make([]edit, len(rev))
	for i, e := range rev {
		es[len(rev)-1-i] = e
	}
	return es
}

func replaceAll(a, b []string) []edit {
	es := make([]edit, 0, len(a)+len(b))
	for _, l := range a {
		es = append(es, edit{opDel, l})
	}
	for _, l := range b {
		es = append(es, edit{opIns, l})
	}
	return es
}

// Unified returns the unified diff (as diff -u prints it, with three
// lines of context) that turns a into b, with the headers "--- aName"
// and "+++ bName", or "" if they are equal. Binary contents give a
// one-line notice instead.
func Unified(aName, bName string, a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	if IsBinary(a) || IsBinary(b) {
		return fmt.Sprintf("Binary files %s and %s differ\n", aName, bName)
	}
	const ctx = 3
	es := edits(splitLines(a), splitLines(b))
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	// ai, bi: lines of a and b before es[i].
	ai := make([]int, len(es)+1)
	bi := make([]int, len(es)+1)
	for i, e := range es {
		ai[i+1], bi[i+1] = ai[i], bi[i]
		if e.kind != opIns {
			ai[i+1]++
		}
		if e.kind != opDel {
			bi[i+1]++
		}
	}
	for i := 0; i < len(es); {
		if es[i].kind == opEq {
			i++
			continue
		}
		// A hunk from ctx lines before the change to ctx lines after
		// the last change that is at most 2*ctx equal lines from the
		// one before it.
		start := max(i-ctx, 0)
		end := i
		for j := i; j < len(es); j++ {
			if es[j].kind != opEq {
				end = j + 1
			} else if j-end >= 2*ctx {
				break
			}
		}
		end = min(end+ctx, len(es))
		na, nb := ai[end]-ai[start], bi[end]-bi[start]
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(ai[start], na), hunkRange(bi[start], nb))
		for _, e := range es[start:end] {
			out.WriteByte(byte(e.kind))
			out.WriteString(e.line)
			if !strings.HasSuffix(e.line, "\n") {
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = end
	}
	return out.String()
}

// hunkRange formats the range of a hunk, as diff -u does: the first
// line and the count, the count left out when 1, and for an empty range
// the line before it.
func hunkRange(before, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", before)
	case 1:
		return fmt.Sprintf("%d", before+1)
	}
	return fmt.Sprintf("%d,%d", before+1, n)
}
