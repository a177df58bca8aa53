package lfs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
)

func newFS(t *testing.T, opts Options) (*FS, string) {
	t.Helper()
	dir := t.TempDir()
	f, err := New(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, dir
}

func put(t *testing.T, f *FS, p string, d zx.Dir, data string) zx.Dir {
	t.Helper()
	var r io.Reader
	if data != "" {
		r = strings.NewReader(data)
	}
	rep := <-f.Put(t.Context(), p, d, 0, r)
	if rep.Err != nil {
		t.Fatalf("put %s: %v", p, rep.Err)
	}
	return rep.Dir
}

func TestBasic(t *testing.T) {
	f, dir := newFS(t, Options{})
	ctx := t.Context()
	d := put(t, f, "/a", zx.Dir{zx.AType: zx.TypeDir, zx.AMode: "0750"}, "")
	if d.Mode() != 0750 || d.Type() != zx.TypeDir || d.Name() != "a" || d.Path() != "/a" {
		t.Fatalf("mkdir: %v", d)
	}
	mt := int64(1234567890123456789)
	d = put(t, f, "/a/f", zx.Dir{zx.AType: zx.TypeFile, zx.AMode: "04755", zx.AMtime: itoa(mt), "color": "red", "Up": "x"}, "hello")
	if d.Size() != 5 || d.Mode() != 04755 || d.Int(zx.AMtime) != mt || d["color"] != "red" || d["Up"] != "" {
		t.Fatalf("put: %v", d)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a/f")); string(b) != "hello" {
		t.Fatalf("disk has %q", b)
	}
	if b, err := zx.ReadFile(ctx, f, "/a/f"); err != nil || string(b) != "hello" {
		t.Fatalf("get: %q %v", b, err)
	}
	// Truncating put keeps mode and attributes.
	d = put(t, f, "/a/f", zx.Dir{zx.ASize: "0"}, "bye")
	if d.Size() != 3 || d.Mode() != 04755 || d["color"] != "red" {
		t.Fatalf("replace: %v", d)
	}
	// In place, at an offset, and appending.
	rep := <-f.Put(ctx, "/a/f", nil, 1, strings.NewReader("E"))
	if rep.Err != nil {
		t.Fatal(rep.Err)
	}
	rep = <-f.Put(ctx, "/a/f", nil, -1, strings.NewReader("!!"))
	if rep.Err != nil || rep.Dir.Size() != 5 {
		t.Fatal(rep.Err, rep.Dir)
	}
	if b, _ := zx.ReadFile(ctx, f, "/a/f"); string(b) != "bEe!!" {
		t.Fatalf("get: %q", b)
	}
	if b, _ := zx.Copy(io.Discard, f.Get(ctx, "/a/f", 1, 2)); b != 2 {
		t.Fatalf("ranged get: %d", b)
	}
	// Wstat.
	d, err := zx.Wstat(ctx, f, "/a/f", zx.Dir{"color": "", zx.ASize: "2", zx.AAtime: "5", zx.AMtime: "7"})
	if err != nil || d["color"] != "" || d.Size() != 2 || d.Int(zx.AAtime) != 5 || d.Int(zx.AMtime) != 7 {
		t.Fatalf("wstat: %v %v", d, err)
	}
	if _, err := zx.Wstat(ctx, f, "/a/f", zx.Dir{zx.AType: "d"}); !errors.Is(err, zx.ErrInvalid) {
		t.Fatalf("wstat type: %v", err)
	}
	// Symlink, acted on itself.
	d = put(t, f, "/a/l", zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: "f", zx.AMtime: "11"}, "")
	if d.Type() != zx.TypeLink || d[zx.ATarget] != "f" || d.Int(zx.AMtime) != 11 {
		t.Fatalf("link: %v", d)
	}
	if _, err := zx.ReadFile(ctx, f, "/a/l"); !errors.Is(err, zx.ErrInvalid) {
		t.Fatalf("get of link: %v", err)
	}
	if d, err := zx.Wstat(ctx, f, "/a/l", zx.Dir{zx.AMtime: "13"}); err != nil || d.Int(zx.AMtime) != 13 {
		t.Fatalf("wstat link: %v %v", d, err)
	}
	// Fifo.
	d = put(t, f, "/a/p", zx.Dir{zx.AType: zx.TypeFifo, zx.AMode: "0640"}, "")
	if d.Type() != zx.TypeFifo || d.Mode() != 0640 {
		t.Fatalf("fifo: %v", d)
	}
	if os.Getuid() == 0 {
		d = put(t, f, "/a/c", zx.Dir{zx.AType: zx.TypeCharDev, zx.ARdev: itoa(int64(unix.Mkdev(1, 3)))}, "")
		if d.Type() != zx.TypeCharDev || d.Int(zx.ARdev) != int64(unix.Mkdev(1, 3)) {
			t.Fatalf("dev: %v", d)
		}
		d, err = zx.Wstat(ctx, f, "/a/f", zx.Dir{zx.AUid: "4242", zx.AGid: "4343"})
		if err != nil || d[zx.AUid] != "4242" || d[zx.AGid] != "4343" {
			t.Fatalf("chown: %v %v", d, err)
		}
	}
	ds, err := zx.ReadDir(ctx, f, "/a")
	var names []string
	for _, d := range ds {
		names = append(names, d.Name())
	}
	want := "f l p"
	if os.Getuid() == 0 {
		want = "c f l p"
	}
	if err != nil || strings.Join(names, " ") != want {
		t.Fatalf("readdir: %v %v", names, err)
	}
	if err := <-f.Move(ctx, "/a/f", "/g"); err != nil {
		t.Fatal(err)
	}
	if err := <-f.Remove(ctx, "/a"); !errors.Is(err, zx.ErrNotEmpty) {
		t.Fatalf("remove non-empty: %v", err)
	}
	if err := <-f.RemoveAll(ctx, "/a"); err != nil {
		t.Fatal(err)
	}
	if err := <-f.Remove(ctx, "/g"); err != nil {
		t.Fatal(err)
	}
	if _, err := zx.Stat(ctx, f, "/g"); !errors.Is(err, zx.ErrNotExist) {
		t.Fatalf("stat removed: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
	d, err = zx.Stat(ctx, f, "/")
	if err != nil || d.Name() != "/" || d.Path() != "/" || !d.IsDir() {
		t.Fatalf("stat /: %v %v", d, err)
	}
}

func TestReadOnly(t *testing.T) {
	f, dir := newFS(t, Options{ReadOnly: true})
	os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0644)
	ctx := t.Context()
	for what, err := range map[string]error{
		"put":       (<-f.Put(ctx, "/y", zx.Dir{zx.AType: "-"}, 0, nil)).Err,
		"wstat":     (<-f.Wstat(ctx, "/x", zx.Dir{zx.AMode: "0600"})).Err,
		"move":      <-f.Move(ctx, "/x", "/z"),
		"remove":    <-f.Remove(ctx, "/x"),
		"removeall": <-f.RemoveAll(ctx, "/x"),
	} {
		if !errors.Is(err, zx.ErrReadOnly) {
			t.Errorf("%s: %v, want read-only", what, err)
		}
	}
	if b, err := zx.ReadFile(ctx, f, "/x"); err != nil || string(b) != "x" {
		t.Fatalf("read: %q %v", b, err)
	}
}

// TestHostilePaths checks that no path reaches outside the root, and that
// errors do not reveal the host path.
func TestHostilePaths(t *testing.T) {
	f, dir := newFS(t, Options{})
	ctx := t.Context()
	if err := os.WriteFile(filepath.Join(dir, "ok"), []byte("ok"), 0644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"../etc/passwd", "/../etc/passwd", "/a/../../etc/passwd", "..", "/x\x00y",
		"/" + strings.Repeat("a", 300), strings.Repeat("/abc", 1100),
		"/" + TempPrefix + "cafe", "/ok/" + TempPrefix + "x",
	} {
		if _, err := zx.Stat(ctx, f, p); err == nil {
			t.Errorf("stat %q: no error", p)
		} else if strings.Contains(err.Error(), dir) {
			t.Errorf("stat %q: error reveals the root: %v", p, err)
		}
		if _, err := zx.WriteFile(ctx, f, p, nil, []byte("x")); err == nil {
			t.Errorf("put %q: no error", p)
		}
	}
	// Absolute-looking paths are inside the tree.
	if _, err := zx.Stat(ctx, f, "/etc/passwd"); !errors.Is(err, zx.ErrNotExist) {
		t.Errorf("stat /etc/passwd: %v", err)
	}
	_, err := zx.Stat(ctx, f, "/nonexistent/x")
	if err == nil || strings.Contains(err.Error(), dir) {
		t.Errorf("error reveals root: %v", err)
	}
}

// TestSymlinkEscape checks that links pointing out of the tree give no
// access, whether named last or crossed.
func TestSymlinkEscape(t *testing.T) {
	f, dir := newFS(t, Options{})
	ctx := t.Context()
	out := t.TempDir()
	secret := filepath.Join(out, "passwd")
	// The links must be there, or every check below passes for nothing.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(secret, []byte("secret"), 0644))
	must(os.Symlink(out, filepath.Join(dir, "link")))
	must(os.Symlink(secret, filepath.Join(dir, "flink")))
	must(os.Symlink("../"+filepath.Base(out)+"/passwd", filepath.Join(dir, "rlink")))
	must(os.Mkdir(filepath.Join(dir, "in"), 0755))
	must(os.Symlink("in", filepath.Join(dir, "inlink")))

	for _, p := range []string{"/link/passwd", "/flink", "/rlink", "/inlink/x"} {
		if b, err := zx.ReadFile(ctx, f, p); err == nil {
			t.Errorf("read %s: %q", p, b)
		}
		if _, err := zx.WriteFile(ctx, f, p, nil, []byte("pwned")); err == nil && p != "/flink" && p != "/rlink" {
			t.Errorf("write %s: no error", p)
		}
		rep := <-f.Put(ctx, p, nil, 0, strings.NewReader("pwned"))
		if rep.Err == nil {
			t.Errorf("put in place %s: no error", p)
		}
		if _, err := zx.Wstat(ctx, f, p, zx.Dir{zx.AMode: "0777"}); err == nil && p != "/flink" && p != "/rlink" {
			t.Errorf("wstat %s: no error", p)
		}
		if _, err := zx.Wstat(ctx, f, p, zx.Dir{zx.ASize: "0"}); err == nil {
			t.Errorf("truncate %s: no error", p)
		}
		if _, err := zx.Mkdir(ctx, f, p+"/d", 0755); err == nil {
			t.Errorf("mkdir under %s: no error", p)
		}
		if err := <-f.Remove(ctx, p+"/passwd"); err == nil {
			t.Errorf("remove under %s: no error", p)
		}
		if _, err := zx.ReadDir(ctx, f, p); err == nil {
			t.Errorf("readdir %s: no error", p)
		}
	}
	if _, err := zx.ReadFile(ctx, f, "/link/passwd"); !errors.Is(err, zx.ErrNotDir) {
		t.Errorf("read through link: %v, want not a directory", err)
	}
	// Writing a whole file over a link replaces the link, not its target.
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Fatalf("outside file changed: %q", b)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Fatalf("outside dir changed: %v", ents)
	}
	var st unix.Stat_t
	unix.Stat(secret, &st)
	if st.Mode&0777 != 0644 {
		t.Fatalf("outside mode changed: %o", st.Mode)
	}
	d, err := zx.Stat(ctx, f, "/link")
	if err != nil || d.Type() != zx.TypeLink || d[zx.ATarget] != out {
		t.Fatalf("stat link: %v %v", d, err)
	}
	// Remove of a link removes the link.
	if err := <-f.Remove(ctx, "/link"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(secret); err != nil {
		t.Fatal(err)
	}
	// Moving a file onto a crossing path fails.
	if _, err := zx.WriteFile(ctx, f, "/m", nil, []byte("m")); err != nil {
		t.Fatal(err)
	}
	must(os.Symlink(out, filepath.Join(dir, "link2")))
	if err := <-f.Move(ctx, "/m", "/link2/m"); err == nil {
		t.Fatal("move through link: no error")
	}
	if _, err := os.Stat(filepath.Join(out, "m")); err == nil {
		t.Fatal("file moved out")
	}
}

// errReader fails after sending some data.
type errReader struct{ n int }

func (r *errReader) Read(b []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("client went away")
	}
	n := min(len(b), r.n)
	for i := range b[:n] {
		b[i] = 'x'
	}
	r.n -= n
	return n, nil
}

func noTemps(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if d != nil && strings.HasPrefix(d.Name(), TempPrefix) {
			t.Errorf("temporary left behind: %s", p)
		}
		return nil
	})
}

// TestAtomicReplace checks that a Put that fails midway leaves the old
// contents and no temporary.
func TestAtomicReplace(t *testing.T) {
	f, dir := newFS(t, Options{})
	ctx := t.Context()
	zx.WriteFile(ctx, f, "/f", zx.Dir{"keep": "me"}, []byte("old contents"))
	rep := <-f.Put(ctx, "/f", zx.Dir{zx.ASize: "0"}, 0, &errReader{n: 300 << 10})
	if rep.Err == nil {
		t.Fatal("put with failing reader: no error")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "old contents" {
		t.Fatalf("file is %.20q", b)
	}
	rep = <-f.Put(ctx, "/new", zx.Dir{zx.AType: zx.TypeFile}, 0, &errReader{n: 10})
	if rep.Err == nil {
		t.Fatal("create with failing reader: no error")
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err == nil {
		t.Fatal("failed create left a file")
	}
	// Cancelled midway, with a reader that blocks.
	pr, pw := io.Pipe()
	cctx, cancel := context.WithCancel(ctx)
	c := f.Put(cctx, "/f", zx.Dir{zx.ASize: "0"}, 0, pr)
	pw.Write([]byte("partial"))
	cancel()
	if rep := <-c; !errors.Is(rep.Err, zx.ErrCanceled) {
		t.Fatalf("cancelled put: %v", rep.Err)
	}
	pw.Close()
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "old contents" {
		t.Fatalf("file is %.20q", b)
	}
	noTemps(t, dir)
	d, _ := zx.Stat(ctx, f, "/f")
	if d["keep"] != "me" {
		t.Fatalf("attrs lost: %v", d)
	}
	// Temporaries on disk are not listed.
	os.WriteFile(filepath.Join(dir, TempPrefix+"zzz"), nil, 0644)
	ds, _ := zx.ReadDir(ctx, f, "/")
	if len(ds) != 1 {
		t.Fatalf("listing: %v", ds)
	}
}

func TestBigSparse(t *testing.T) {
	f, dir := newFS(t, Options{})
	ctx := t.Context()
	const off = 5 << 30
	d := put(t, f, "/big", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: itoa(off)}, "")
	if d.Size() != off {
		t.Fatalf("size %d", d.Size())
	}
	rep := <-f.Put(ctx, "/big", nil, off, strings.NewReader("tail"))
	if rep.Err != nil || rep.Dir.Size() != off+4 {
		t.Fatal(rep.Err, rep.Dir)
	}
	var st unix.Stat_t
	unix.Stat(filepath.Join(dir, "big"), &st)
	if st.Blocks*512 > 1<<20 {
		t.Fatalf("not sparse: %d blocks", st.Blocks)
	}
	var buf bytes.Buffer
	if _, err := zx.Copy(&buf, f.Get(ctx, "/big", off-2, 10)); err != nil || buf.String() != "\x00\x00tail" {
		t.Fatalf("get past 4 GiB: %q %v", buf.String(), err)
	}
	d, err := zx.Wstat(ctx, f, "/big", zx.Dir{zx.ASize: itoa(6 << 30)})
	if err != nil || d.Size() != 6<<30 {
		t.Fatal(d, err)
	}
}

// TestExclRace checks that of racing exclusive creates exactly one wins,
// also from two trees over one directory (no shared request order).
func TestExclRace(t *testing.T) {
	dir := t.TempDir()
	var fss []*FS
	for range 2 {
		f, err := New(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fss = append(fss, f)
	}
	for round := range 50 {
		p := "/f" + itoa(int64(round))
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				d := zx.Dir{zx.AType: zx.TypeFile, zx.AExcl: "y"}
				rep := <-fss[i%2].Put(t.Context(), p, d, 0, strings.NewReader("writer "+itoa(int64(i))))
				errs[i] = rep.Err
			})
		}
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, zx.ErrExist):
				t.Fatalf("excl put: %v", err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners", round, wins)
		}
	}
	noTemps(t, dir)
}

func TestOrder(t *testing.T) {
	f, _ := newFS(t, Options{})
	ctx := t.Context()
	// Pipelined create, write, rename, remove, without waiting.
	var cs []<-chan zx.Reply
	var ecs []<-chan error
	for i := range 20 {
		p := "/d" + itoa(int64(i))
		cs = append(cs, f.Put(ctx, p, zx.Dir{zx.AType: zx.TypeDir}, 0, nil))
		cs = append(cs, f.Put(ctx, p+"/f", zx.Dir{zx.AType: zx.TypeFile}, 0, strings.NewReader("a")))
		cs = append(cs, f.Put(ctx, p+"/f", nil, -1, strings.NewReader("b")))
		ecs = append(ecs, f.Move(ctx, p+"/f", p+"/g"))
		ecs = append(ecs, f.Remove(ctx, p+"/g"))
		ecs = append(ecs, f.Remove(ctx, p))
	}
	for _, c := range cs {
		if r := <-c; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for _, c := range ecs {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
}

// nextEvent returns the next notice for path p of a kind in kinds, skipping
// others.
func nextEvent(t *testing.T, c <-chan zx.Event, p string, kinds ...zx.EventKind) zx.Event {
	t.Helper()
	tm := time.NewTimer(5 * time.Second)
	defer tm.Stop()
	for {
		select {
		case ev, ok := <-c:
			if !ok {
				t.Fatalf("watch ended waiting for %v of %s", kinds, p)
			}
			if ev.Err != nil {
				t.Fatalf("watch: %v", ev.Err)
			}
			if ev.Dir.Path() != p {
				continue
			}
			for _, k := range kinds {
				if ev.Kind == k {
					return ev
				}
			}
		case <-tm.C:
			t.Fatalf("no %v notice for %s", kinds, p)
		}
	}
}

func TestWatchDisk(t *testing.T) {
	f, dir := newFS(t, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	os.Mkdir(filepath.Join(dir, "a"), 0755)
	c := f.Watch(ctx, "/")
	if ev := <-c; ev.Kind != zx.Ready {
		t.Fatalf("first event %v %v", ev.Kind, ev.Err)
	}
	// Direct changes on disk.
	os.WriteFile(filepath.Join(dir, "a/x"), []byte("1"), 0644)
	ev := nextEvent(t, c, "/a/x", zx.Created)
	ev = nextEvent(t, c, "/a/x", zx.Changed)
	if ev.Dir.Size() != 1 {
		t.Fatalf("changed: %v", ev.Dir)
	}
	os.WriteFile(filepath.Join(dir, "a/x"), []byte("22"), 0644)
	for ev.Dir.Size() != 2 {
		ev = nextEvent(t, c, "/a/x", zx.Changed)
	}
	// A new directory with contents made before its watch is in place.
	os.MkdirAll(filepath.Join(dir, "n/m/k"), 0755)
	os.WriteFile(filepath.Join(dir, "n/m/k/deep"), nil, 0644)
	nextEvent(t, c, "/n", zx.Created)
	nextEvent(t, c, "/n/m/k/deep", zx.Created)
	os.WriteFile(filepath.Join(dir, "n/m/k/later"), nil, 0644)
	nextEvent(t, c, "/n/m/k/later", zx.Created)
	// Renames.
	os.Rename(filepath.Join(dir, "a/x"), filepath.Join(dir, "n/y"))
	ev = nextEvent(t, c, "/n/y", zx.Moved)
	if ev.From != "/a/x" || ev.Dir.Size() != 2 {
		t.Fatalf("moved: %v from %s", ev.Dir, ev.From)
	}
	os.Rename(filepath.Join(dir, "n"), filepath.Join(dir, "a/n2"))
	nextEvent(t, c, "/a/n2", zx.Moved)
	os.WriteFile(filepath.Join(dir, "a/n2/m/k/again"), nil, 0644)
	nextEvent(t, c, "/a/n2/m/k/again", zx.Created)
	os.Remove(filepath.Join(dir, "a/n2/y"))
	nextEvent(t, c, "/a/n2/y", zx.Removed)
	// Changes through the tree: a replacing Put is one Changed, a new file
	// one Created, and temporaries never show.
	zx.WriteFile(ctx, f, "/a/w", nil, []byte("w"))
	ev = nextEvent(t, c, "/a/w", zx.Created, zx.Changed)
	if ev.Kind != zx.Created {
		t.Fatalf("new file: %v", ev.Kind)
	}
	zx.WriteFile(ctx, f, "/a/w", nil, []byte("ww"))
	ev = nextEvent(t, c, "/a/w", zx.Created, zx.Changed)
	if ev.Kind != zx.Changed || ev.Dir.Size() != 2 {
		t.Fatalf("replaced file: %v %v", ev.Kind, ev.Dir)
	}
	// Moved out of the tree: Removed.
	out := t.TempDir()
	os.Rename(filepath.Join(dir, "a/w"), filepath.Join(out, "w"))
	nextEvent(t, c, "/a/w", zx.Removed)
	cancel()
	for ev := range c {
		if strings.HasPrefix(ev.Dir.Name(), TempPrefix) {
			t.Fatalf("temporary reported: %v", ev.Dir)
		}
	}
}

func TestWatchEnds(t *testing.T) {
	f, dir := newFS(t, Options{})
	os.Mkdir(filepath.Join(dir, "a"), 0755)
	c := f.Watch(t.Context(), "/a")
	if ev := <-c; ev.Kind != zx.Ready {
		t.Fatal(ev)
	}
	os.Remove(filepath.Join(dir, "a"))
	var last zx.Event
	for ev := range c {
		last = ev
	}
	if !errors.Is(last.Err, zx.ErrNotExist) {
		t.Fatalf("last event %v", last)
	}
	// Close ends the rest.
	c = f.Watch(t.Context(), "/")
	<-c
	f.Close()
	for ev := range c {
		last = ev
	}
	if last.Err == nil {
		t.Fatal("no error at close")
	}
}

// TestWatchOverflow checks that a watcher that does not read gets Overflow
// and does not stop the others.
func TestWatchOverflow(t *testing.T) {
	f, dir := newFS(t, Options{})
	ctx := t.Context()
	slow := f.Watch(ctx, "/")
	fast := f.Watch(ctx, "/")
	<-slow
	<-fast
	n := watchBuf + 100
	last := "/f" + itoa(int64(n-1))
	done := make(chan bool)
	go func() {
		for ev := range fast {
			if ev.Kind == zx.Overflow {
				done <- false
				return
			}
			if ev.Kind == zx.Created && ev.Dir.Path() == last {
				done <- true
				return
			}
		}
	}()
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, "f"+itoa(int64(i))), nil, 0644); err != nil {
			t.Fatal(err)
		}
	}
	if !<-done {
		t.Fatal("a watcher that reads got Overflow")
	}
	// The slow watcher's notices were dropped long before the last (its
	// buffer holds watchBuf): it has the first watchBuf, then Overflow.
	seen := false
	for range watchBuf + 10 {
		ev := <-slow
		if ev.Kind == zx.Overflow {
			seen = true
			break
		}
	}
	if !seen {
		t.Fatal("no overflow")
	}
}

// TestEmptyKeepsInode: a Put that empties a file with no data (as a
// mount sends for open(O_TRUNC)) truncates it in place: the file keeps
// its inode, and a descriptor open on it writes to the file the name
// holds. One with data still replaces the file (atomically).
func TestEmptyKeepsInode(t *testing.T) {
	f, dir := newFS(t, Options{})
	ctx := t.Context()
	ino := func() uint64 {
		var st unix.Stat_t
		if err := unix.Stat(filepath.Join(dir, "f"), &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	put(t, f, "/f", zx.Dir{zx.AType: zx.TypeFile, zx.AMode: zx.FormatMode(0o640), "keep": "me"}, "old contents")
	ino0 := ino()
	fd, err := os.OpenFile(filepath.Join(dir, "f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	for _, data := range []io.Reader{&errReader{n: 0}, nil, strings.NewReader("")} {
		put(t, f, "/f", zx.Dir{}, "old contents") // in place
		rep := <-f.Put(ctx, "/f", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, data)
		if _, isErr := data.(*errReader); isErr {
			if rep.Err == nil {
				t.Fatal("put with a failing reader: no error")
			}
			if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "old contents" {
				t.Fatalf("after a failed put: %q", b)
			}
		} else if rep.Err != nil || rep.Dir.Size() != 0 {
			t.Fatalf("put %T: %v %v", data, rep.Dir, rep.Err)
		}
		if got := ino(); got != ino0 {
			t.Fatalf("put %T: inode %d, was %d", data, got, ino0)
		}
	}
	if _, err := fd.WriteAt([]byte("via fd"), 0); err != nil {
		t.Fatal(err)
	}
	d, err := zx.Stat(ctx, f, "/f")
	if err != nil || d["keep"] != "me" || d.Mode()&0o777 != 0o640 {
		t.Fatalf("attrs after emptying: %v %v", d, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "via fd" {
		t.Fatalf("file is %q", b)
	}
	put(t, f, "/f", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, "new")
	if ino() == ino0 {
		t.Fatal("a put of new contents did not replace the file")
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "new" {
		t.Fatalf("file is %q", b)
	}
	noTemps(t, dir)
}
