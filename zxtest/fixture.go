package zxtest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zxfs/zx"
)

// specLine is one parsed line of a tree description.
type specLine struct {
	path string
	typ  string // zx type
	data string // file contents or link target
}

func parseSpec(s string) (specLine, error) {
	var l specLine
	switch {
	case strings.HasSuffix(s, "/") && !strings.ContainsAny(s, ":#") && !strings.Contains(s, "->"):
		l = specLine{path: strings.TrimSuffix(s, "/"), typ: zx.TypeDir}
	case strings.Contains(s, ":"):
		p, data, _ := strings.Cut(s, ":")
		l = specLine{path: p, typ: zx.TypeFile, data: data}
	case strings.Contains(s, "->"):
		p, target, _ := strings.Cut(s, "->")
		l = specLine{path: p, typ: zx.TypeLink, data: target}
	case strings.Contains(s, "#"):
		p, typ, _ := strings.Cut(s, "#")
		l = specLine{path: p, typ: typ}
	default:
		l = specLine{path: s, typ: zx.TypeFile}
	}
	p, err := zx.CleanPath(l.path)
	if err != nil || !strings.HasPrefix(l.path, "/") {
		return l, fmt.Errorf("bad tree line %q", s)
	}
	l.path = p
	return l, nil
}

func (l specLine) String() string {
	switch l.typ {
	case zx.TypeDir:
		if l.path == "/" {
			return "/"
		}
		return l.path + "/"
	case zx.TypeFile:
		return l.path + ":" + l.data
	case zx.TypeLink:
		return l.path + "->" + l.data
	}
	return l.path + "#" + l.typ
}

// normSpec parses spec and adds the directories it implies.
func normSpec(spec []string) ([]specLine, error) {
	var ls []specLine
	seen := map[string]bool{"/": true}
	for _, s := range spec {
		l, err := parseSpec(s)
		if err != nil {
			return nil, err
		}
		var parents []string
		for p := zx.Parent(l.path); !seen[p]; p = zx.Parent(p) {
			parents = append(parents, p)
			seen[p] = true
		}
		for _, p := range slices.Backward(parents) {
			ls = append(ls, specLine{path: p, typ: zx.TypeDir})
		}
		if l.path != "/" {
			seen[l.path] = true
			ls = append(ls, l)
		}
	}
	return ls, nil
}

// MkTree populates tr as spec describes (see the package doc), creating
// missing parent directories. Files are created or truncated, directories
// created if missing. The requests are pipelined: MkTree waits for their
// replies only after it has issued them all, which relies on the tree's
// ordering. It fails the test on any error.
func MkTree(t testing.TB, tr zx.Tree, spec ...string) {
	t.Helper()
	ls, err := normSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cs := make([]<-chan zx.Reply, len(ls))
	for i, l := range ls {
		switch l.typ {
		case zx.TypeDir:
			cs[i] = tr.Put(ctx, l.path, zx.Dir{zx.AType: zx.TypeDir}, 0, nil)
		case zx.TypeFile:
			d := zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}
			cs[i] = tr.Put(ctx, l.path, d, 0, strings.NewReader(l.data))
		case zx.TypeLink:
			cs[i] = tr.Put(ctx, l.path, zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: l.data}, 0, nil)
		default:
			cs[i] = tr.Put(ctx, l.path, zx.Dir{zx.AType: l.typ}, 0, nil)
		}
	}
	for i, c := range cs {
		if r := <-c; r.Err != nil {
			t.Fatalf("mktree %s: %v", ls[i], r.Err)
		}
	}
}

// Dump describes the entries below path in tr (not path itself) as lines
// that MkTree takes, depth first, a directory before its contents, names
// sorted.
func Dump(ctx context.Context, tr zx.Tree, path string) ([]string, error) {
	var out []string
	ds, err := zx.ReadDir(ctx, tr, path)
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		l := specLine{path: d.Path(), typ: d.Type()}
		switch d.Type() {
		case zx.TypeFile:
			b, err := zx.ReadFile(ctx, tr, d.Path())
			if err != nil {
				return out, err
			}
			l.data = string(b)
		case zx.TypeLink:
			l.data = d[zx.ATarget]
		}
		out = append(out, l.String())
		if d.IsDir() {
			sub, err := Dump(ctx, tr, d.Path())
			out = append(out, sub...)
			if err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// CheckTree fails the test unless the entries below path in tr are
// exactly those spec describes (with the directories it implies), with
// the same contents.
func CheckTree(t testing.TB, tr zx.Tree, path string, spec ...string) {
	t.Helper()
	ls, err := normSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range ls {
		if l.path != path {
			want = append(want, l.String())
		}
	}
	got, err := Dump(context.Background(), tr, path)
	if err != nil {
		t.Fatalf("dump %s: %v", path, err)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("tree at %s:\n\t%s\nwant:\n\t%s", path, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
}

// Diff describes the differences between two entries, one line per
// attribute, or returns "" if they are equal. Attributes named in ignore
// are not compared.
func Diff(want, got zx.Dir, ignore ...string) string {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var names []string
	for k := range keys {
		if !slices.Contains(ignore, k) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	for _, k := range names {
		w, wok := want[k]
		g, gok := got[k]
		switch {
		case wok && !gok:
			fmt.Fprintf(&b, "%s: missing, want %q\n", k, w)
		case !wok && gok:
			fmt.Fprintf(&b, "%s: %q, want none\n", k, g)
		case w != g:
			fmt.Fprintf(&b, "%s: %q, want %q\n", k, g, w)
		}
	}
	return b.String()
}

// Equal reports whether two entries are equal, but for the attributes in
// ignore.
func Equal(a, b zx.Dir, ignore ...string) bool { return Diff(a, b, ignore...) == "" }

// DiffTrees compares the subtrees at path in a and b, entries (but for
// the attributes in ignore) and file contents, and describes each
// difference. It is meant for layers that must present the tree below
// them: a cache, a network client.
func DiffTrees(ctx context.Context, a, b zx.Tree, path string, ignore ...string) ([]string, error) {
	da, err := zx.Stat(ctx, a, path)
	if err != nil {
		return nil, err
	}
	db, err := zx.Stat(ctx, b, path)
	if err != nil {
		return nil, err
	}
	var diffs []string
	if d := Diff(da, db, ignore...); d != "" {
		diffs = append(diffs, path+":\n"+d)
	}
	switch {
	case da.Type() != db.Type():
		return diffs, nil
	case da.Type() == zx.TypeFile:
		ba, err := zx.ReadFile(ctx, a, path)
		if err != nil {
			return diffs, err
		}
		bb, err := zx.ReadFile(ctx, b, path)
		if err != nil {
			return diffs, err
		}
		if !bytes.Equal(ba, bb) {
			diffs = append(diffs, fmt.Sprintf("%s: contents differ (%d and %d bytes)", path, len(ba), len(bb)))
		}
	case da.IsDir():
		ea, err := zx.ReadDir(ctx, a, path)
		if err != nil {
			return diffs, err
		}
		eb, err := zx.ReadDir(ctx, b, path)
		if err != nil {
			return diffs, err
		}
		inB := map[string]bool{}
		for _, d := range eb {
			inB[d.Name()] = true
		}
		for _, d := range ea {
			if !inB[d.Name()] {
				diffs = append(diffs, d.Path()+": only in the first tree")
				continue
			}
			delete(inB, d.Name())
			sub, err := DiffTrees(ctx, a, b, d.Path(), ignore...)
			diffs = append(diffs, sub...)
			if err != nil {
				return diffs, err
			}
		}
		for _, d := range eb {
			if inB[d.Name()] {
				diffs = append(diffs, d.Path()+": only in the second tree")
			}
		}
	}
	return diffs, nil
}
