package ctl_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/ctl"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/mount"
	"github.com/zxfs/zx/server"
)

// stack is a server over a local directory, a client with a cache, and
// a FUSE mount of the cache: five layers with control files.
type stack struct {
	disk string // the directory the server exports
	addr string // the server's address
	conn *client.Conn
	c    *cache.Cache
	mnt  string
}

func canMount(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("!!! SKIPPING FUSE TESTS: /dev/fuse is missing: " + err.Error() + " !!!")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil && os.Getuid() != 0 {
		t.Skip("!!! SKIPPING FUSE TESTS: fusermount3 is missing and we are not root !!!")
	}
}

func serve(t *testing.T, tr zx.Tree) string {
	t.Helper()
	srv, err := server.New(map[string]zx.Tree{"main": tr}, "main", server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return l.Addr().String()
}

func newStack(t *testing.T, withMount bool) *stack {
	t.Helper()
	return newStackOver(t, t.TempDir(), lfs.Options{}, withMount)
}

// newStackOver is newStack exporting dir.
func newStackOver(t *testing.T, dir string, opts lfs.Options, withMount bool) *stack {
	t.Helper()
	if withMount {
		canMount(t)
	}
	s := &stack{disk: dir}
	fs, err := lfs.New(s.disk, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	s.addr = serve(t, fs)
	s.conn, err = client.Dial(context.Background(), s.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.conn.Close() })
	s.c = cache.New(s.conn.Tree(""), cache.Options{})
	t.Cleanup(func() { s.c.Close() })
	if !withMount {
		return s
	}
	s.mnt = t.TempDir()
	m, err := mount.Mount(s.mnt, s.c, mount.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	abort := abortFile(s.mnt)
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		// A connection that outlived its unmount (detached lazily,
		// being busy) is aborted: it must not hang the test binary at
		// exit, flushing to a server that is gone.
		if abort != nil {
			abort.Write([]byte("1"))
			abort.Close()
		}
	})
	return s
}

// abortFile opens the abort file of the FUSE connection mounted on dir,
// at mount time, so that the cleanup aborts this connection and no later
// one with its number; nil if fusectl is not there.
func abortFile(dir string) *os.File {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil
	}
	const ctl = "/sys/fs/fuse/connections"
	if b, _ := os.ReadFile("/proc/self/mounts"); !strings.Contains(string(b), " "+ctl+" ") {
		if unix.Mount("fusectl", ctl, "fusectl", 0, "") != nil {
			return nil
		}
	}
	f, err := os.OpenFile(ctl+"/"+strconv.Itoa(int(unix.Minor(st.Dev)))+"/abort", os.O_WRONLY, 0)
	if err != nil {
		return nil
	}
	return f
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %q: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func kinds(secs []ctl.Section) []string {
	var ks []string
	for _, s := range secs {
		ks = append(ks, s.Kind)
	}
	return ks
}

// TestStackStatus reads the control file of a mount with cat, and checks
// every layer's section.
func TestStackStatus(t *testing.T) {
	s := newStack(t, true)
	if err := os.WriteFile(filepath.Join(s.mnt, "f"), []byte("hello"), 0644); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if b, err := os.ReadFile(filepath.Join(s.mnt, "f")); err != nil || string(b) != "hello" {
			t.Fatalf("read f: %q %v", b, err)
		}
	}
	text := run(t, "cat", filepath.Join(s.mnt, "Ctl"))
	secs := ctl.Parse([]byte(text))
	if got, want := kinds(secs), []string{"mount", "cache", "client", "server", "lfs"}; !slices.Equal(got, want) {
		t.Fatalf("sections %v, want %v; text:\n%s", got, want, text)
	}
	byKind := map[string]ctl.Section{}
	for _, sec := range secs {
		byKind[sec.Kind] = sec
		if sec.Get("debug") == nil || sec.Get("debug")[0] != "off" {
			t.Errorf("%s: no \"debug off\" line:\n%s", sec.Title(), text)
		}
	}
	if a := byKind["mount"].Addr; a != s.mnt {
		t.Errorf("mount section's address %q, want %q", a, s.mnt)
	}
	for _, k := range []string{"handles", "dirty", "writeback", "coherence"} {
		if byKind["mount"].Get(k) == nil {
			t.Errorf("mount section has no %q line:\n%s", k, text)
		}
	}
	cs := byKind["cache"]
	for _, k := range []string{"entries", "hits", "data", "dirty", "writeback", "coherence"} {
		if cs.Get(k) == nil {
			t.Errorf("cache section has no %q line:\n%s", k, text)
		}
	}
	if e := cs.Get("entries"); e == nil || e[0] == "0" {
		t.Errorf("cache holds no entries after reading f:\n%s", text)
	}
	if cs.Get("coherence")[0] != "watch" {
		t.Errorf("cache is not watching:\n%s", text)
	}
	cl := byKind["client"]
	if cl.Addr != "zx://"+s.addr+"/" {
		t.Errorf("client address %q, want zx://%s/", cl.Addr, s.addr)
	}
	for _, k := range []string{"rtt", "roundtrips", "requests", "bytes", "since"} {
		if cl.Get(k) == nil {
			t.Errorf("client section has no %q line:\n%s", k, text)
		}
	}
	if r := strings.Join(cl.Get("requests"), " "); !strings.Contains(r, " put ") || !strings.Contains(r, "watch 1") {
		t.Errorf("client requests %q: want puts and watch 1", r)
	}
	sv := byKind["server"]
	if sv.Addr != s.addr {
		t.Errorf("server address %q, want %s", sv.Addr, s.addr)
	}
	users := 0
	for _, l := range sv.Lines {
		if strings.HasPrefix(l, "user ") {
			users++
			f := strings.Fields(l)
			if len(f) < 6 || f[3] != "since" || f[5] != "rtt" {
				t.Errorf("bad user line %q", l)
			}
		}
	}
	if users != 1 {
		t.Errorf("%d user lines, want 1:\n%s", users, text)
	}
	if r := strings.Join(sv.Get("requests"), " "); !strings.Contains(r, " put ") || !strings.Contains(r, "watch 1") {
		t.Errorf("server requests %q: want puts and watch 1", r)
	}
	if b := sv.Get("bytes"); len(b) != 4 || b[1] == "0" || b[3] == "0" {
		t.Errorf("server bytes %q", b)
	}
	if byKind["lfs"].Addr != filepath.Base(s.disk) {
		t.Errorf("lfs address %q, want the directory's base name", byKind["lfs"].Addr)
	}

	// grep works, as on any file.
	if out := run(t, "grep", "^user ", filepath.Join(s.mnt, "Ctl")); !strings.Contains(out, "user - 127.0.0.1:") {
		t.Errorf("grep user: %q", out)
	}

	// Hidden: not listed, not found from the root; found when asked for.
	ents, err := os.ReadDir(s.mnt)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() == ctl.Name {
			t.Errorf("Ctl listed in the mount's root")
		}
	}
	ctx := context.Background()
	for _, tr := range []zx.Tree{s.c, s.conn.Tree("")} {
		n := 0
		for it := range tr.(zx.Finder).Find(ctx, "/", zx.FindOpts{}) {
			if it.Err != nil {
				t.Fatal(it.Err)
			}
			if it.Dir.Path() == ctl.Path {
				t.Errorf("find / lists /Ctl")
			}
			n++
		}
		if n != 2 {
			t.Errorf("find / found %d entries, want 2 (/ and /f)", n)
		}
		var found []string
		for it := range tr.(zx.Finder).Find(ctx, ctl.Path, zx.FindOpts{Pred: "type=C"}) {
			if it.Err != nil {
				t.Fatal(it.Err)
			}
			found = append(found, it.Dir.Path())
		}
		if !slices.Equal(found, []string{ctl.Path}) {
			t.Errorf("find /Ctl type=C: %v", found)
		}
	}
	// Never cached: two reads through the cache see different counts.
	a, err := zx.ReadFile(ctx, s.c, ctl.Path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := zx.ReadFile(ctx, s.c, ctl.Path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		t.Errorf("two reads of /Ctl through the cache are equal: cached?")
	}
	// A stat of it says what it is.
	d, err := zx.Stat(ctx, s.c, ctl.Path)
	if err != nil || d.Type() != zx.TypeCtl || d.Size() != 0 {
		t.Errorf("stat /Ctl: %v %v", d, err)
	}
	if st, err := os.Stat(filepath.Join(s.mnt, "Ctl")); err != nil || !st.Mode().IsRegular() || st.Size() != 0 {
		t.Errorf("stat Ctl on the mount: %v %v", st, err)
	}
}

// TestStackPass sets the debug flag of each layer in turn with pass.
func TestStackPass(t *testing.T) {
	s := newStack(t, true)
	ctlf := filepath.Join(s.mnt, "Ctl")
	layers := []string{"mount", "cache", "client", "server", "lfs"}
	for i, layer := range layers {
		cmd := strings.Repeat("pass ", i) + "debug on"
		run(t, "sh", "-c", "echo "+cmd+" > "+ctlf)
		secs := ctl.Parse([]byte(run(t, "cat", ctlf)))
		for j, sec := range secs {
			want := "off"
			if j == i {
				want = "on"
			}
			if got := sec.Get("debug"); len(got) != 1 || got[0] != want {
				t.Errorf("after %q: %s debug %v, want %s", cmd, sec.Kind, got, want)
			}
		}
		run(t, "sh", "-c", "echo "+strings.Repeat("pass ", i)+"debug off > "+ctlf)
		if t.Failed() {
			t.Fatalf("passing to %s failed", layer)
		}
	}
	// Below the bottom there is nothing: the write fails, and says why.
	cmd := strings.Repeat("pass ", len(layers)) + "debug on"
	out, err := exec.Command("sh", "-c", "echo "+cmd+" > "+ctlf).CombinedOutput()
	if err == nil {
		t.Errorf("%q succeeded: %s", cmd, out)
	}
	// An unknown command fails too, at any layer, and the error comes
	// back over the network.
	ctx := context.Background()
	r := <-s.conn.Tree("").Put(ctx, ctl.Path, zx.Dir{}, 0, strings.NewReader("pass frobnicate\n"))
	if r.Err == nil || zx.KindOf(r.Err) != zx.ErrInvalid || !strings.Contains(r.Err.Error(), "server: unknown command") {
		t.Errorf("pass frobnicate: %v", r.Err)
	}
	// Several lines in one write run in order.
	if err := write(ctx, s.c, []byte("debug on\npass pass debug on\n")); err != nil {
		t.Fatal(err)
	}
	secs := ctl.Parse([]byte(run(t, "cat", ctlf)))
	for _, sec := range secs {
		want := sec.Kind == "cache" || sec.Kind == "server"
		if got := sec.Get("debug")[0] == "on"; got != want {
			t.Errorf("%s debug on: %v, want %v", sec.Kind, got, want)
		}
	}
}

// TestStackSync writes through the mount without closing the file (the
// mount holds the data in the open handle), and checks that writing
// "sync" to Ctl returns only once the server's disk has it. It reads and
// writes Ctl from the test's own process, as cat and echo would: a
// command started while the file is open would flush it (fork and exec
// close a copy of the descriptor), and the test would prove nothing.
func TestStackSync(t *testing.T) {
	s := newStack(t, true)
	ctlf := filepath.Join(s.mnt, "Ctl")
	f, err := os.Create(filepath.Join(s.mnt, "held"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := bytes.Repeat([]byte("zx sync\n"), 1000)
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(s.disk, "held")
	if b, _ := os.ReadFile(disk); bytes.Equal(b, data) {
		t.Fatal("the data reached the disk before close or sync: the test proves nothing")
	}
	status := func() ctl.Section {
		b, err := os.ReadFile(ctlf)
		if err != nil {
			t.Fatal(err)
		}
		return ctl.Parse(b)[0]
	}
	sec := status()
	if sec.Get("writeback")[0] != "1" || sec.Get("dirty")[0] != "8000" {
		t.Errorf("mount status before sync: want writeback 1, dirty 8000: %v", sec.Lines)
	}
	if err := os.WriteFile(ctlf, []byte("sync\n"), 0644); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(disk); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("after sync the disk holds %d bytes (%v), want %d", len(b), err, len(data))
	}
	sec = status()
	if sec.Get("writeback")[0] != "0" || sec.Get("dirty")[0] != "0" {
		t.Errorf("mount status after sync: want writeback 0, dirty 0: %v", sec.Lines)
	}
	// And from the shell, as a user would.
	run(t, "sh", "-c", "echo sync > "+ctlf)
}

// TestNoControlBelow checks a layer over a tree without a control file
// (memfs): its status ends with its own section, sync succeeds, pass
// fails, and nothing named Ctl is created in the tree below.
func TestNoControlBelow(t *testing.T) {
	ctx := context.Background()
	mt := memfs.New()
	c := cache.New(mt, cache.Options{})
	defer c.Close()
	text, err := zx.ReadFile(ctx, c, ctl.Path)
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(ctl.Parse(text)); !slices.Equal(got, []string{"cache"}) {
		t.Errorf("sections %v, want [cache]:\n%s", got, text)
	}
	if err := write(ctx, c, []byte("sync\n")); err != nil {
		t.Errorf("sync over memfs: %v", err)
	}
	if err := write(ctx, c, []byte("pass debug on\n")); err == nil {
		t.Errorf("pass over memfs succeeded")
	}
	if _, err := zx.Stat(ctx, mt, ctl.Path); zx.KindOf(err) != zx.ErrNotExist {
		t.Errorf("memfs has a /Ctl after the commands: %v", err)
	}
}

// TestMissingTree checks that the control file of a tree the server does
// not have is an error, read or written, through the client and through a
// cache over it: never a status with the layers below left out, nor a
// sync that says all is flushed.
func TestMissingTree(t *testing.T) {
	ctx := context.Background()
	s := newStack(t, false)
	nc := s.conn.Tree("nosuchtree")
	// No watch: New would wait WatchTimeout for one on a missing tree.
	c := cache.New(nc, cache.Options{NoWatch: true})
	defer c.Close()
	for _, tr := range []zx.Tree{nc, c} {
		if b, err := zx.ReadFile(ctx, tr, ctl.Path); zx.KindOf(err) != zx.ErrNotExist || !strings.Contains(err.Error(), "no tree named nosuchtree") {
			t.Errorf("%T: read: %v\n%s", tr, err, b)
		}
		if err := write(ctx, tr, []byte("sync\n")); zx.KindOf(err) != zx.ErrNotExist || !strings.Contains(err.Error(), "no tree named nosuchtree") {
			t.Errorf("%T: sync: %v", tr, err)
		}
	}
}

// write writes commands to the control file of t.
func write(ctx context.Context, t zx.Tree, cmds []byte) error {
	_, err := zx.WriteFile(ctx, t, ctl.Path, nil, cmds)
	return err
}

// TestZeroLengthFiles reads files that say they are empty but are not
// (procfs, exported read-only) through the mount: they are read with
// direct I/O to their end and never cached, so a file that changes at
// every read reads differently each time.
func TestZeroLengthFiles(t *testing.T) {
	const dir = "/proc/sys/kernel"
	if b, err := os.ReadFile(dir + "/random/uuid"); err != nil || len(b) == 0 {
		t.Skip("!!! SKIPPING: no " + dir + "/random/uuid to read !!!")
	}
	s := newStackOver(t, dir, lfs.Options{ReadOnly: true, NoXattrs: true}, true)
	st, err := os.Stat(filepath.Join(s.mnt, "ostype"))
	if err != nil || st.Size() != 0 {
		t.Fatalf("ostype on the mount: %v %v (want size 0)", st, err)
	}
	want, err := os.ReadFile(dir + "/ostype")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if got := run(t, "cat", filepath.Join(s.mnt, "ostype")); got != string(want) {
			t.Errorf("cat ostype on the mount: %q, want %q", got, want)
		}
	}
	a := run(t, "cat", filepath.Join(s.mnt, "random/uuid"))
	b := run(t, "cat", filepath.Join(s.mnt, "random/uuid"))
	if len(a) != 37 || a == b {
		t.Errorf("two reads of random/uuid: %q and %q: want two different uuids", a, b)
	}
}
