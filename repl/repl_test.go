package repl

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/memfs"
)

var ctx = context.Background()

// base is the mtime of the files the tests write, plus a second per write.
var base = time.Date(2024, 3, 1, 12, 0, 0, 123456789, time.UTC)

type fixture struct {
	t     *testing.T
	a, b  zx.Tree
	st    *State
	tick  int
	adir  string // lfs side a's directory, if any
	clock time.Time
}

func newLFS(t *testing.T) (zx.Tree, string) {
	dir := t.TempDir()
	fs, err := lfs.New(dir, lfs.Options{NoXattrs: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	return fs, dir
}

// kinds are the pairs of trees every two-way test runs on.
// lfs-net: side b is a client of a real server over a local directory.
var kinds = []string{"mem-mem", "lfs-mem", "lfs-lfs", "lfs-net"}

func newFixture(t *testing.T, kind string) *fixture {
	f := &fixture{t: t, clock: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)}
	switch kind {
	case "mem-mem":
		f.a, f.b = memfs.New(), memfs.New()
	case "lfs-mem":
		f.a, f.adir = newLFS(t)
		f.b = memfs.New()
	case "lfs-lfs":
		f.a, f.adir = newLFS(t)
		f.b, _ = newLFS(t)
	case "lfs-net":
		f.a, f.adir = newLFS(t)
		f.b = newNet(t)
	}
	if f.adir != "" {
		st, err := LoadState(filepath.Join(f.adir, ".zx-repl", "STATE.json"))
		if err != nil {
			t.Fatal(err)
		}
		f.st = st
	} else {
		f.st = NewState()
	}
	return f
}

func (f *fixture) tree(side string) zx.Tree {
	if side == "a" {
		return f.a
	}
	return f.b
}

// write creates or replaces a file with a fresh mtime.
func (f *fixture) write(side, p, data string) {
	f.t.Helper()
	f.tick++
	f.mkparents(side, p)
	d := zx.Dir{zx.AMode: "0644"}
	d.SetTime(zx.AMtime, base.Add(time.Duration(f.tick)*time.Second))
	if _, err := zx.WriteFile(ctx, f.tree(side), p, d, []byte(data)); err != nil {
		f.t.Fatalf("write %s %s: %v", side, p, err)
	}
}

func (f *fixture) mkparents(side, p string) {
	f.t.Helper()
	var ps []string
	for d := zx.Parent(p); d != "/"; d = zx.Parent(d) {
		ps = append(ps, d)
	}
	for i := len(ps) - 1; i >= 0; i-- {
		r := <-f.tree(side).Put(ctx, ps[i], zx.Dir{zx.AType: zx.TypeDir, zx.AMode: "0755"}, 0, nil)
		if r.Err != nil {
			f.t.Fatalf("mkdir %s %s: %v", side, ps[i], r.Err)
		}
	}
}

func (f *fixture) mkdir(side, p string) {
	f.t.Helper()
	f.mkparents(side, p+"/x")
}

func (f *fixture) link(side, p, target string) {
	f.t.Helper()
	f.mkparents(side, p)
	if r := <-f.tree(side).Put(ctx, p, zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: target}, 0, nil); r.Err != nil {
		f.t.Fatalf("link %s %s: %v", side, p, r.Err)
	}
}

func (f *fixture) chmod(side, p, mode string) {
	f.t.Helper()
	if _, err := zx.Wstat(ctx, f.tree(side), p, zx.Dir{zx.AMode: mode}); err != nil {
		f.t.Fatalf("chmod %s %s: %v", side, p, err)
	}
}

func (f *fixture) rm(side, p string) {
	f.t.Helper()
	if err := <-f.tree(side).RemoveAll(ctx, p); err != nil {
		f.t.Fatalf("rm %s %s: %v", side, p, err)
	}
}

func (f *fixture) mv(side, from, to string) {
	f.t.Helper()
	f.mkparents(side, to)
	if err := <-f.tree(side).Move(ctx, from, to); err != nil {
		f.t.Fatalf("mv %s %s %s: %v", side, from, to, err)
	}
}

func (f *fixture) read(side, p string) string {
	f.t.Helper()
	b, err := zx.ReadFile(ctx, f.tree(side), p)
	if err != nil {
		f.t.Fatalf("read %s %s: %v", side, p, err)
	}
	return string(b)
}

func (f *fixture) exists(side, p string) bool {
	_, err := zx.Stat(ctx, f.tree(side), p)
	return err == nil
}

func (f *fixture) opts() Options {
	return Options{Now: func() time.Time { return f.clock }}
}

// sync runs a sync and checks that it returned no error.
func (f *fixture) sync() *Report {
	f.t.Helper()
	return f.syncWith(f.a, f.b, f.opts())
}

func (f *fixture) syncWith(a, b zx.Tree, o Options) *Report {
	f.t.Helper()
	rep, err := Sync(ctx, a, b, f.st, o)
	if err != nil {
		f.t.Fatalf("sync: %v", err)
	}
	return rep
}

// inSync runs a sync, wants no conflict or error, and checks the trees.
func (f *fixture) inSync() *Report {
	f.t.Helper()
	rep := f.sync()
	if !rep.InSync() {
		f.t.Fatalf("sync: %d conflicts, %d errors:\n%s", rep.Conflicts, rep.Errors, actions(rep))
	}
	f.equal()
	return rep
}

func actions(rep *Report) string {
	var b strings.Builder
	for _, a := range rep.Actions {
		b.WriteString("\t" + a.String() + "\n")
	}
	return b.String()
}

// snapshot describes every entry of a tree but the state directory:
// type, mode, and for files size, mtime and a hash of the bytes, for links
// target and mtime.
func snapshot(t *testing.T, tr zx.Tree) map[string]string {
	t.Helper()
	excl, _ := excludePred("")
	m := map[string]string{}
	for it := range tr.(zx.Finder).Find(ctx, "/", zx.FindOpts{Pred: excl}) {
		if it.Err != nil {
			t.Fatalf("find: %v", it.Err)
		}
		d := it.Dir
		p := d.Path()
		if p == "/" {
			continue
		}
		switch d.Type() {
		case zx.TypeDir:
			m[p] = "d " + d[zx.AMode]
		case zx.TypeLink:
			m[p] = "l " + d[zx.ATarget] + " " + d[zx.AMtime]
		default:
			b, err := zx.ReadFile(ctx, tr, p)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.Sum256(b)
			m[p] = fmt.Sprintf("- %s %d %s %s", d[zx.AMode], d.Size(), d[zx.AMtime], hex.EncodeToString(h[:8]))
		}
	}
	return m
}

// equal checks that both trees hold the same entries: bytes, modes,
// mtimes (nanoseconds), link targets.
func (f *fixture) equal() {
	f.t.Helper()
	sa, sb := snapshot(f.t, f.a), snapshot(f.t, f.b)
	var diffs []string
	for p, v := range sa {
		if sb[p] != v {
			diffs = append(diffs, fmt.Sprintf("%s: a has %q, b %q", p, v, sb[p]))
		}
	}
	for p, v := range sb {
		if _, ok := sa[p]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: a has nothing, b %q", p, v))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		f.t.Fatalf("trees differ:\n\t%s", strings.Join(diffs, "\n\t"))
	}
}

func count(rep *Report, op string) int {
	n := 0
	for _, a := range rep.Actions {
		if a.Op == op && a.Err == "" {
			n++
		}
	}
	return n
}

func conflictsAt(rep *Report) []string {
	var ps []string
	for _, a := range rep.Actions {
		if a.Op == "conflict" {
			ps = append(ps, a.Path)
		}
	}
	sort.Strings(ps)
	return ps
}

func TestTwoWay(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind)
			f.write("a", "/src/main.go", "package main\n")
			f.write("a", "/src/util/util.go", "package util\n")
			f.write("a", "/doc/README", "read me\n")
			f.write("a", "/doc/old.txt", "old\n")
			f.write("a", "/big.bin", strings.Repeat("0123456789abcdef", 300<<10/16))
			f.chmod("a", "/src/main.go", "0755")
			f.link("a", "/latest", "doc/README")
			f.mkdir("a", "/empty")
			f.write("b", "/fromb/notes.txt", "b's notes\n")
			f.write("b", "/fromb/deep/er/x", "x\n")

			rep := f.inSync()
			if got := count(rep, "copy"); got != 15 {
				t.Errorf("first sync copied %d entries, want 15:\n%s", got, actions(rep))
			}
			if rep.Bytes != int64(len("package main\n")+len("package util\n")+len("read me\n")+len("old\n")+300<<10+len("b's notes\n")+len("x\n")) {
				t.Errorf("first sync copied %d bytes", rep.Bytes)
			}
			if rep := f.inSync(); len(rep.Actions) != 0 {
				t.Fatalf("second sync did something:\n%s", actions(rep))
			}

			// Changes on both sides.
			f.write("a", "/src/new.go", "package main // new\n")          // create on a
			f.write("a", "/src/main.go", "package main\n\nfunc main()\n") // edit on a
			f.mv("a", "/doc/README", "/doc/README.md")                    // rename on a
			f.rm("a", "/doc/old.txt")                                     // delete on a
			f.chmod("a", "/src/util/util.go", "0600")                     // chmod on a
			f.write("b", "/fromb/more.txt", "more\n")                     // create on b
			f.write("b", "/big.bin", "now small\n")                       // edit on b
			f.mv("b", "/fromb/deep", "/fromb/shallow")                    // rename a directory on b
			f.rm("b", "/empty")                                           // delete a directory on b
			f.rm("b", "/latest")                                          // relink on b
			f.link("b", "/latest", "doc/README.md")
			rep = f.inSync()
			if got := count(rep, "move"); got != 2 {
				t.Errorf("moved %d files, want 2 (README and x):\n%s", got, actions(rep))
			}
			if got := count(rep, "attr"); got != 1 {
				t.Errorf("%d attribute updates, want 1 (util.go's mode):\n%s", got, actions(rep))
			}
			if rep.Bytes != int64(len("package main // new\n")+len("package main\n\nfunc main()\n")+len("more\n")+len("now small\n")) {
				t.Errorf("copied %d bytes:\n%s", rep.Bytes, actions(rep))
			}
			for _, p := range []string{"/doc/old.txt", "/doc/README", "/empty", "/fromb/deep"} {
				if f.exists("a", p) || f.exists("b", p) {
					t.Errorf("%s still there", p)
				}
			}
			if rep := f.inSync(); len(rep.Actions) != 0 {
				t.Fatalf("sync after sync did something:\n%s", actions(rep))
			}
		})
	}
}

// TestSameContents: two copies made apart (different mtimes) sync without
// conflicts or copies; the older side takes the newer side's attributes.
func TestSameContents(t *testing.T) {
	f := newFixture(t, "lfs-mem")
	f.write("a", "/x", "same\n")
	f.write("b", "/x", "same\n")
	f.write("b", "/y", "same size\n")
	f.write("a", "/y", "SAME SIZE\n")
	rep := f.sync()
	if got := conflictsAt(rep); len(got) != 1 || got[0] != "/y" {
		t.Fatalf("conflicts at %v, want /y:\n%s", got, actions(rep))
	}
	if count(rep, "attr") != 1 || rep.Bytes != 2*int64(len("same size\n")) {
		t.Errorf("want one attribute update, and /y's two versions copied:\n%s", actions(rep))
	}
	f.equal()
	rec := f.st.Entries["/x"]
	if rec == nil || rec.A.SHA256 == "" || rec.A.SHA256 != rec.B.SHA256 {
		t.Errorf("state for /x: %+v", rec)
	}
}

func TestConflicts(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind)
			f.write("a", "/editedit", "v0\n")
			f.write("a", "/editdel", "v0\n")
			f.write("a", "/deledit", "v0\n")
			f.write("a", "/typechange", "v0\n")
			f.write("a", "/gone/keep/file", "v0\n")
			f.write("a", "/gone/other", "v0\n")
			f.write("a", "/gone/keep/other", "v0\n")
			f.write("a", "/tofile/x", "v0\n")
			f.inSync()

			f.write("a", "/editedit", "a's edit\n")
			f.write("b", "/editedit", "b's edit, newer\n")
			f.write("a", "/editdel", "a's edit\n")
			f.rm("b", "/editdel")
			f.rm("a", "/deledit")
			f.write("b", "/deledit", "b's edit\n")
			f.write("a", "/createcreate", "a's\n")
			f.write("b", "/createcreate", "b's!\n")
			f.rm("a", "/typechange")
			f.write("a", "/typechange/inside", "a made a directory\n")
			f.write("b", "/typechange", "b's edit\n")
			f.rm("a", "/gone")
			f.write("b", "/gone/keep/file", "b's edit\n")
			f.write("b", "/gone/new", "b's new file\n")
			f.rm("b", "/tofile")
			f.write("b", "/tofile", "b turned a directory into a file\n")
			f.write("a", "/tofile/y", "a created a file in it\n")

			rep := f.sync()
			want := []string{"/createcreate", "/deledit", "/editdel", "/editedit", "/gone", "/gone/keep/file", "/tofile", "/typechange"}
			if got := conflictsAt(rep); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("conflicts at %v, want %v:\n%s", got, want, actions(rep))
			}
			if rep.Errors != 0 {
				t.Errorf("errors:\n%s", actions(rep))
			}
			f.equal()
			suffix := ".conflict-%s-20240506-070809"
			for _, c := range []struct{ path, data string }{
				{"/editedit", "b's edit, newer\n"},
				{"/editedit" + fmt.Sprintf(suffix, "a"), "a's edit\n"},
				{"/editdel", "a's edit\n"},
				{"/deledit", "b's edit\n"},
				{"/createcreate", "b's!\n"},
				{"/createcreate" + fmt.Sprintf(suffix, "a"), "a's\n"},
				{"/typechange/inside", "a made a directory\n"},
				{"/typechange" + fmt.Sprintf(suffix, "b"), "b's edit\n"},
				{"/gone/keep/file", "b's edit\n"},
				{"/gone/new", "b's new file\n"},
				{"/tofile/y", "a created a file in it\n"},
				{"/tofile" + fmt.Sprintf(suffix, "b"), "b turned a directory into a file\n"},
			} {
				for _, s := range []string{"a", "b"} {
					if got := f.read(s, c.path); got != c.data {
						t.Errorf("%s on %s: %q, want %q", c.path, s, got, c.data)
					}
				}
			}
			for _, p := range []string{"/gone/other", "/gone/keep/other", "/tofile/x"} {
				if f.exists("a", p) || f.exists("b", p) {
					t.Errorf("%s: removed on one side and unchanged on the other, still there", p)
				}
			}
			if rep := f.inSync(); len(rep.Actions) != 0 {
				t.Fatalf("sync after the conflicts did something:\n%s", actions(rep))
			}
		})
	}
}

// flaky wraps a tree and fails every Put after the first n, or cancels the
// sync's context instead.
type flaky struct {
	zx.Tree
	n      int64
	puts   atomic.Int64
	cancel func()
	finds  atomic.Int64
}

func (t *flaky) Put(ctx context.Context, p string, d zx.Dir, off int64, r io.Reader) <-chan zx.Reply {
	if t.puts.Add(1) > t.n {
		if t.cancel != nil {
			t.cancel()
		} else {
			c := make(chan zx.Reply, 1)
			c <- zx.Reply{Err: zx.E(zx.ErrIO, "put", p, "injected failure")}
			return c
		}
	}
	return t.Tree.Put(ctx, p, d, off, r)
}

func (t *flaky) Find(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	return t.Tree.(zx.Finder).Find(ctx, p, o)
}

func (t *flaky) FindGet(ctx context.Context, p string, o zx.FindOpts) <-chan zx.Item {
	t.finds.Add(1)
	return t.Tree.(zx.Finder).FindGet(ctx, p, o)
}

func TestInterrupted(t *testing.T) {
	for _, how := range []string{"fail", "cancel", "forget"} {
		t.Run(how, func(t *testing.T) {
			f := newFixture(t, "lfs-mem")
			for i := range 40 {
				f.write("a", fmt.Sprintf("/d%d/f%02d", i%4, i), strings.Repeat(fmt.Sprint(i), 1000*i))
				f.write("b", fmt.Sprintf("/e%d/g%02d", i%3, i), strings.Repeat(fmt.Sprint(i), 999*i))
			}
			f.inSync()
			for i := range 40 {
				if i%3 == 0 {
					f.write("a", fmt.Sprintf("/d%d/f%02d", i%4, i), "edited on a")
					f.write("b", fmt.Sprintf("/e%d/g%02d", i%3, i), "edited on b")
				}
				if i%5 == 0 {
					f.write("a", fmt.Sprintf("/new/a%02d", i), "new on a")
					f.write("b", fmt.Sprintf("/new/b%02d", i), "new on b")
				}
			}
			f.rm("a", "/d3")
			f.rm("b", "/e2")
			before := f.st
			for round := 0; ; round++ {
				if round > 30 {
					t.Fatal("not in sync after 30 interrupted runs")
				}
				ictx, cancel := context.WithCancel(ctx)
				fa := &flaky{Tree: f.a, n: 3}
				fb := &flaky{Tree: f.b, n: 4}
				if how == "cancel" {
					fa.cancel, fb.cancel = cancel, cancel
					fa.n, fb.n = 8, 9
				}
				if how == "forget" {
					// The copies are done but the state is not saved: a
					// crash before any save.
					f.st = cloneState(before)
					fa.n, fb.n = 1<<40, 5
				}
				rep, err := Sync(ictx, fa, fb, f.st, f.opts())
				cancel()
				if err != nil {
					t.Fatalf("round %d: %v", round, err)
				}
				if rep.Conflicts > 0 {
					t.Fatalf("round %d: spurious conflicts:\n%s", round, actions(rep))
				}
				t.Logf("round %d: %d copied, %d errors", round, rep.Copied, rep.Errors)
				if rep.InSync() {
					if round == 0 {
						t.Fatalf("the first run was not interrupted")
					}
					break
				}
				if how == "forget" {
					f.st = cloneState(before)
					rep = f.sync()
					if !rep.InSync() {
						t.Fatalf("after a run whose state was lost:\n%s", actions(rep))
					}
					break
				}
				// Reload the state as saved, as a new run does.
				if st, err := LoadState(f.st.File()); err != nil {
					t.Fatal(err)
				} else {
					f.st = st
				}
			}
			f.equal()
			if rep := f.inSync(); len(rep.Actions) != 0 {
				t.Fatalf("sync after sync did something:\n%s", actions(rep))
			}
		})
	}
}

func cloneState(s *State) *State {
	c := NewState()
	c.file = s.file
	for p, r := range s.snapshot() {
		c.Entries[p] = r
	}
	return c
}

func TestDryRun(t *testing.T) {
	f := newFixture(t, "lfs-mem")
	f.write("a", "/x", "x")
	f.write("a", "/d/y", "y")
	f.inSync()
	f.write("a", "/x", "new x")
	f.write("b", "/x", "new x on b")
	f.write("b", "/z", "z")
	f.rm("a", "/d/y")
	f.mv("b", "/d", "/e")
	sa, sb := snapshot(t, f.a), snapshot(t, f.b)
	stateBefore, _ := os.ReadFile(f.st.File())
	o := f.opts()
	o.DryRun = true
	var lines []string
	o.Log = func(a Action) { lines = append(lines, a.String()) }
	rep := f.syncWith(f.a, f.b, o)
	if rep.Conflicts != 1 {
		t.Errorf("dry run: %d conflicts, want 1", rep.Conflicts)
	}
	want := []string{
		"conflict /x: changed on both sides: kept b's version (newer) at the path; a's version (file of 5 bytes, 2024-03-01T12:00:03.123456789Z) is now /x.conflict-a-20240506-070809 on both sides",
		"move a /x /x.conflict-a-20240506-070809",
		"copy b→a /e",
		"copy a→b /x.conflict-a-20240506-070809",
		"copy b→a /e/y",
		"copy b→a /x",
		"copy b→a /z",
		"remove a /d",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("dry run printed:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if !mapsEqual(sa, snapshot(t, f.a)) || !mapsEqual(sb, snapshot(t, f.b)) {
		t.Error("dry run changed a tree")
	}
	if after, _ := os.ReadFile(f.st.File()); !bytes.Equal(after, stateBefore) {
		t.Error("dry run changed the state file")
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestStateFileAndExclude(t *testing.T) {
	f := newFixture(t, "lfs-lfs")
	f.write("a", "/keep.c", "c")
	f.write("a", "/build/out.o", "o")
	f.write("a", "/x.o", "o")
	f.write("b", "/.zx-repl/other", "b's own state dir")
	o := f.opts()
	o.Exclude = "~*.o | path=/build"
	rep := f.syncWith(f.a, f.b, o)
	if !rep.InSync() || rep.Copied != 1 {
		t.Fatalf("sync:\n%s", actions(rep))
	}
	if f.exists("b", "/x.o") || f.exists("b", "/build") || f.exists("a", "/.zx-repl/other") {
		t.Error("excluded entries were synced")
	}
	st, err := LoadState(filepath.Join(f.adir, ".zx-repl", "STATE.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := st.Entries["/keep.c"]
	if r == nil || r.A.Size != 1 || r.B.Mtime != r.A.Mtime || r.A.SHA256 == "" || len(st.Entries) != 1 {
		t.Errorf("state file: %+v", st.Entries)
	}
	if _, err := excludePred("(bad"); err == nil {
		t.Error("bad exclusion predicate accepted")
	}
	if _, err := Sync(ctx, f.a, f.b, f.st, Options{Exclude: "(bad"}); err == nil {
		t.Error("sync with a bad exclusion predicate did not fail")
	}
}

// TestManyFiles copies files with long names: the FindGet predicates are
// split to fit in a request, and still one request per batch.
func TestManyFiles(t *testing.T) {
	f := newFixture(t, "mem-mem")
	long := strings.Repeat("n", 200)
	var ps []string
	for i := range 600 {
		p := fmt.Sprintf("/dir%d/%s-%04d", i%7, long, i)
		ps = append(ps, p)
		f.write("a", p, fmt.Sprint(i))
	}
	fa := &flaky{Tree: f.a, n: 1 << 40}
	rep := f.syncWith(fa, f.b, f.opts())
	if !rep.InSync() || rep.Copied != 607 {
		t.Fatalf("copied %d:\n%s", rep.Copied, actions(rep))
	}
	sort.Strings(ps)
	if n := int64(len(batches(ps))); fa.finds.Load() != n || n < 3 {
		t.Errorf("%d FindGets, %d batches", fa.finds.Load(), n)
	}
	for _, b := range batches(ps) {
		if len(b.pred) > maxPred+1024 {
			t.Errorf("predicate of %d bytes", len(b.pred))
		}
	}
	f.equal()
}

// plainTree hides a tree's Find and FindGet.
type plainTree struct{ zx.Tree }

func TestNotFinder(t *testing.T) {
	f := newFixture(t, "mem-mem")
	f.write("a", "/a/b", "bee")
	f.write("b", "/c", "sea")
	rep := f.syncWith(plainTree{f.a}, plainTree{f.b}, f.opts())
	if !rep.InSync() || rep.Copied != 3 {
		t.Fatalf("sync:\n%s", actions(rep))
	}
	f.equal()
}
