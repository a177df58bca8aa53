package mount_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/mount"
	"github.com/zxfs/zx/server"
)

// syncLog records what an lfs synced: "PATH" for a Sync (or "/" for its
// control file's sync), with "=CONTENTS" for a regular file as it was on
// the server's disk at that moment, or " failed: ERR".
type syncLog struct {
	disk string
	mu   sync.Mutex
	l    []string
}

func (s *syncLog) add(p string, err error) {
	e := p
	if err != nil {
		e += " failed: " + err.Error()
	} else if b, rerr := os.ReadFile(filepath.Join(s.disk, p)); rerr == nil {
		e += "=" + string(b)
	}
	s.mu.Lock()
	s.l = append(s.l, e)
	s.mu.Unlock()
}

// since returns what was synced after the first n records, and the count.
func (s *syncLog) since(n int) ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.l[n:]), len(s.l)
}

// serveSyncLogged serves an lfs over disk (a new directory if ""), with
// its Syncs logged, by a server configured by cfg.
func serveSyncLogged(t *testing.T, disk string, cfg server.Config) (string, *syncLog) {
	t.Helper()
	if disk == "" {
		disk = t.TempDir()
	}
	log := &syncLog{disk: disk}
	fs, err := lfs.New(disk, lfs.Options{OnSync: log.add})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	srv, err := server.New(map[string]zx.Tree{"main": fs}, "main", cfg)
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
	return l.Addr().String(), log
}

// checkSynced runs f and checks that the server synced exactly want
// meanwhile, and that f waited for rts round trips (-1: any number).
func checkSynced(t *testing.T, e *env, log *syncLog, what string, rts int64, want []string, f func() error) {
	t.Helper()
	_, n := log.since(0)
	before := e.conn.Stats().RoundTrips
	if err := f(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	got, _ := log.since(n)
	if !slices.Equal(got, want) {
		t.Errorf("%s: the server synced %q, want %q", what, got, want)
	}
	if rt := e.conn.Stats().RoundTrips - before; rts >= 0 && rt != rts {
		t.Errorf("%s: %d round trips, want %d", what, rt, rts)
	}
}

func fsyncPath(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// TestFsyncDurable: fsync on the mount has the server fsync the file on
// its disk, after the data is written, for a new file, an in-place write
// and a renamed file; fsync of a directory syncs the directory; fsync of
// the mount point (zx sync) and "sync" to the mount's Ctl sync the whole
// export. In the default mode the sync goes right behind the writes: an
// fsync that sends data costs 1 round trip, as one that sends none.
func TestFsyncDurable(t *testing.T) {
	addr, log := serveSyncLogged(t, "", server.Config{})
	e := mnt(t, setup{addr: addr, rtt: 50 * time.Millisecond})
	p := filepath.Join(e.dir, "new")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("one"); err != nil {
		t.Fatal(err)
	}
	checkSynced(t, e, log, "fsync of a new file", 1, []string{"/new=one"}, f.Sync)
	checkSynced(t, e, log, "fdatasync with nothing to send", 1, []string{"/new=one"}, func() error { return syscall.Fdatasync(int(f.Fd())) })
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	f, err = os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("X"), 1); err != nil {
		t.Fatal(err)
	}
	checkSynced(t, e, log, "fsync of an in-place write", 1, []string{"/new=oXe"}, f.Sync)
	f.Close()

	q := filepath.Join(e.dir, "renamed")
	if err := os.Rename(p, q); err != nil {
		t.Fatal(err)
	}
	checkSynced(t, e, log, "fsync of a renamed file", -1, []string{"/renamed=oXe"}, func() error { return fsyncPath(q) })

	if err := os.Mkdir(filepath.Join(e.dir, "d"), 0755); err != nil {
		t.Fatal(err)
	}
	checkSynced(t, e, log, "fsync of a directory", -1, []string{"/d"}, func() error { return fsyncPath(filepath.Join(e.dir, "d")) })
	checkSynced(t, e, log, "fsync of the mount point (zx sync)", 1, []string{"/"}, func() error { return fsyncPath(e.dir) })
	checkSynced(t, e, log, "sync to the mount's Ctl", -1, []string{"/"}, func() error {
		return os.WriteFile(filepath.Join(e.dir, "Ctl"), []byte("sync\n"), 0)
	})
}

// TestFsyncDurableWriteBack: with write-back, fsync waits for everything
// written before it, and then the server syncs the file; zx sync syncs the
// export after the journal is through.
func TestFsyncDurableWriteBack(t *testing.T) {
	addr, log := serveSyncLogged(t, "", server.Config{})
	e := mnt(t, setup{addr: addr, copts: cache.Options{Journal: t.TempDir()}, opts: mount.Options{WriteBack: true}})
	a, b := filepath.Join(e.dir, "a"), filepath.Join(e.dir, "b")
	if err := os.WriteFile(a, []byte("aaa"), 0644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(b)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("bbb"); err != nil {
		t.Fatal(err)
	}
	checkSynced(t, e, log, "fsync with write-back", -1, []string{"/b=bbb"}, f.Sync)
	if got, err := os.ReadFile(filepath.Join(log.disk, "a")); err != nil || string(got) != "aaa" {
		t.Errorf("after fsync of b, a on the server = %q, %v; want aaa (written before)", got, err)
	}
	if err := os.WriteFile(a, []byte("AAAA"), 0644); err != nil {
		t.Fatal(err)
	}
	checkSynced(t, e, log, "zx sync with write-back", -1, []string{"/"}, func() error { return fsyncPath(e.dir) })
	if got, err := os.ReadFile(filepath.Join(log.disk, "a")); err != nil || string(got) != "AAAA" {
		t.Errorf("after zx sync, a on the server = %q, %v; want AAAA", got, err)
	}
}

// TestFsyncOldServer: a server without the sync request gets the old
// behaviour: fsync still works, and the server syncs its whole file
// system through its control file, after the data.
func TestFsyncOldServer(t *testing.T) {
	addr, log := serveSyncLogged(t, "", server.Config{NoSync: true})
	e := mnt(t, setup{addr: addr})
	f, err := os.Create(filepath.Join(e.dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("data"); err != nil {
		t.Fatal(err)
	}
	checkSynced(t, e, log, "fsync on an old server", -1, []string{"/"}, func() error {
		if err := f.Sync(); err != nil {
			return err
		}
		// The syncfs came after the data: it is on the server's disk.
		if got, err := os.ReadFile(filepath.Join(log.disk, "f")); err != nil || string(got) != "data" {
			return errors.New("the server has " + string(got) + ", not data")
		}
		return nil
	})
	checkSynced(t, e, log, "zx sync on an old server", -1, []string{"/"}, func() error { return fsyncPath(e.dir) })
}

// failNode is a node of a loopback FUSE file system whose fsync fails
// for names starting with "bad" (EIO) or "full" (ENOSPC): a disk that
// cannot make data durable, under the server.
type failNode struct{ *fusefs.LoopbackNode }

var _ = (fusefs.NodeFsyncer)((*failNode)(nil))

func (n *failNode) Fsync(ctx context.Context, f fusefs.FileHandle, flags uint32) syscall.Errno {
	name := filepath.Base(n.Path(nil))
	switch {
	case strings.HasPrefix(name, "bad"):
		return syscall.EIO
	case strings.HasPrefix(name, "full"):
		return syscall.ENOSPC
	}
	if fs, ok := f.(fusefs.FileFsyncer); ok {
		return fs.Fsync(ctx, flags)
	}
	return 0
}

// TestFsyncError: when the server's disk cannot make a file durable, the
// error reaches the caller of fsync on the mount (EIO, ENOSPC); close
// without fsync does not ask for it, and succeeds.
func TestFsyncError(t *testing.T) {
	canMount(t)
	backing, disk := t.TempDir(), t.TempDir()
	root := &fusefs.LoopbackRoot{Path: backing}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		t.Fatal(err)
	}
	root.Dev = st.Dev
	root.NewNode = func(r *fusefs.LoopbackRoot, _ *fusefs.Inode, _ string, _ *syscall.Stat_t) fusefs.InodeEmbedder {
		return &failNode{&fusefs.LoopbackNode{RootData: r}}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	srv, err := fusefs.Mount(disk, root.RootNode, &fusefs.Options{MountOptions: fuse.MountOptions{FsName: "zxfail"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount of the failing disk: %v", err)
		}
	})
	addr, log := serveSyncLogged(t, disk, server.Config{})
	e := mnt(t, setup{addr: addr})
	for _, c := range []struct {
		name string
		want syscall.Errno
	}{{"bad", syscall.EIO}, {"full", syscall.ENOSPC}, {"good", 0}} {
		p := filepath.Join(e.dir, c.name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString("data"); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); !errors.Is(err, c.want) && !(c.want == 0 && err == nil) {
			t.Errorf("fsync of %s = %v, want %v", c.name, err, c.want)
		}
		if err := f.Close(); err != nil {
			t.Errorf("close of %s: %v", c.name, err)
		}
		if got, err := os.ReadFile(filepath.Join(backing, c.name)); err != nil || string(got) != "data" {
			t.Errorf("%s on the server's disk = %q, %v; want data", c.name, got, err)
		}
	}
	got, _ := log.since(0)
	if len(got) != 3 || !strings.HasPrefix(got[0], "/bad failed") || !strings.HasPrefix(got[1], "/full failed") || got[2] != "/good=data" {
		t.Errorf("the server synced %q, want /bad and /full failing, /good", got)
	}
}
