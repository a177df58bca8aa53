package mount_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/mount"
	"github.com/zxfs/zx/wan"
)

// wbEnv is a mount of a server over a local directory (so tests can look
// at the server's disk), through a WAN emulator the test can stall.
type wbEnv struct {
	srvDir string // the server's disk
	addr   string // the server, directly
	proxy  *wan.Proxy
	conn   *client.Conn
	c      *cache.Cache
	m      *mount.FS
	dir    string

	unmounted bool // by the test
}

type wbSetup struct {
	srvDir    string // default: a new temporary directory
	addr      string // default: a new server over srvDir
	copts     cache.Options
	opts      mount.Options
	noProxy   bool
	reconnect bool // the client dials again when the connection is lost
	// how long the client tries to dial again; default 5s
	reconnectWait time.Duration
}

func wbMount(t *testing.T, s wbSetup) *wbEnv {
	t.Helper()
	canMount(t)
	e := &wbEnv{srvDir: s.srvDir, addr: s.addr}
	if e.srvDir == "" {
		e.srvDir = t.TempDir()
	}
	if e.addr == "" {
		tr, err := lfs.New(e.srvDir, lfs.Options{})
		must(t, err)
		e.addr = serve(t, tr)
	}
	addr := e.addr
	if !s.noProxy {
		p, err := wan.Listen("127.0.0.1:0", e.addr, wan.Config{})
		must(t, err)
		t.Cleanup(func() { p.Close() })
		e.proxy, addr = p, p.Addr()
	}
	if s.reconnectWait == 0 {
		s.reconnectWait = 5 * time.Second
	}
	conn, err := client.Dial(context.Background(), addr, client.Options{Reconnect: s.reconnect, ReconnectWait: s.reconnectWait})
	must(t, err)
	t.Cleanup(func() { conn.Close() })
	e.conn = conn
	c, err := cache.Open(conn.Tree(""), s.copts)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	e.c = c
	if wb := c.WriteBack(); wb != nil && wb.Leftover() > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := wb.Replay(ctx)
		cancel()
		must(t, err)
	}
	e.dir = t.TempDir()
	if s.opts.Timeout == 0 {
		s.opts.Timeout = 10 * time.Second
	}
	m, err := mount.Mount(e.dir, c, s.opts)
	must(t, err)
	abort := abortFile(t, e.dir)
	t.Cleanup(func() {
		// A connection that outlives its unmount (detached lazily,
		// being busy) is aborted, as mnt's are: it must not hang the
		// test binary at exit.
		defer abortConn(abort)
		if e.unmounted {
			return
		}
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	e.m = m
	return e
}

func (e *wbEnv) p(name string) string { return filepath.Join(e.dir, name) }

func (e *wbEnv) server(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.srvDir, name))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestCloseToOpen: in the default mode, once close() returned the
// server's disk has the data.
func TestCloseToOpen(t *testing.T) {
	e := wbMount(t, wbSetup{noProxy: true})
	for i, data := range []string{"first version", "second, longer version", "3"} {
		must(t, os.WriteFile(e.p("f"), []byte(data), 0o644))
		if got := e.server(t, "f"); got != data {
			t.Fatalf("write %d: the server has %q after close, want %q", i, got, data)
		}
	}
	// An in-place write (no truncation) too.
	f, err := os.OpenFile(e.p("f"), os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("X"), 0)
	must(t, err)
	must(t, f.Close())
	if got := e.server(t, "f"); got != "X" {
		t.Fatalf("the server has %q after an in-place write, want %q", got, "X")
	}
}

// TestWriteBack: with write-back, close returns while the link is
// stalled (the server does not have the data yet), and fsync of the
// mount point (zx sync) waits until it has it.
func TestWriteBack(t *testing.T) {
	journal := t.TempDir()
	e := wbMount(t, wbSetup{copts: cache.Options{Journal: journal}, opts: mount.Options{WriteBack: true}})
	f, err := os.Create(e.p("a"))
	must(t, err)
	_, err = f.Write([]byte("written back"))
	must(t, err)
	must(t, e.m.Sync(context.Background())) // the create (pipelined) is on the server
	if got := e.server(t, "a"); got != "" {
		t.Fatalf("after the create the server has %q", got)
	}
	e.proxy.Stall(2 * time.Second)
	must(t, f.Close())
	if got := e.server(t, "a"); got != "" {
		t.Fatalf("the server has %q while the link is stalled", got)
	}
	if n := e.c.WriteBack().Stats().Pending; n != 1 {
		t.Fatalf("%d records pending, want 1", n)
	}
	if recs, err := cache.JournalPending(journal); len(recs) != 1 {
		t.Fatalf("journal holds %v (%v), want one record", recs, err)
	}
	// stat after close does not wait for the data either.
	fi, err := os.Stat(e.p("a"))
	must(t, err)
	if fi.Size() != int64(len("written back")) {
		t.Fatalf("size %d after close", fi.Size())
	}
	if got := e.server(t, "a"); got != "" {
		t.Fatalf("the server has %q while the link is stalled", got)
	}

	// zx sync: fsync of the mount point waits for everything.
	d, err := os.Open(e.dir)
	must(t, err)
	defer d.Close()
	must(t, unix.Fsync(int(d.Fd())))
	if got := e.server(t, "a"); got != "written back" {
		t.Fatalf("after sync the server has %q", got)
	}
	if recs, err := cache.JournalPending(journal); len(recs) != 0 || err != nil {
		t.Fatalf("journal holds %v (%v) after sync", recs, err)
	}
	if got := readFile(t, e.p("a")); got != "written back" {
		t.Fatalf("read back %q", got)
	}

	// fsync of the file itself waits too.
	f, err = os.OpenFile(e.p("a"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write([]byte(", twice"))
	must(t, err)
	e.proxy.Stall(time.Second)
	must(t, f.Sync())
	if got := e.server(t, "a"); got != "written back, twice" {
		t.Fatalf("after fsync the server has %q", got)
	}
	must(t, f.Close())

	// echo sync > Ctl waits too, and Ctl shows the queue.
	must(t, os.WriteFile(e.p("b"), nil, 0o644)) // creating waits for the server
	must(t, e.m.Sync(context.Background()))
	e.proxy.Stall(time.Second)
	must(t, os.WriteFile(e.p("b"), []byte("through Ctl"), 0o644))
	if ctl := readFile(t, e.p("Ctl")); !strings.Contains(ctl, "writeback 1 ") {
		t.Errorf("Ctl does not show one record in flight:\n%s", ctl)
	}
	must(t, os.WriteFile(e.p("Ctl"), []byte("sync\n"), 0))
	if got := e.server(t, "b"); got != "through Ctl" {
		t.Fatalf("after echo sync > Ctl the server has %q", got)
	}
}

// TestWriteBackCrash: a client that dies with written-back data not yet
// on the server loses nothing: the next mount replays the journal.
func TestWriteBackCrash(t *testing.T) {
	journal := t.TempDir()
	srvDir := t.TempDir()
	tr, err := lfs.New(srvDir, lfs.Options{})
	must(t, err)
	addr := serve(t, tr)

	t.Run("crash", func(t *testing.T) {
		e := wbMount(t, wbSetup{srvDir: srvDir, addr: addr, copts: cache.Options{Journal: journal}, opts: mount.Options{WriteBack: true}})
		must(t, os.WriteFile(e.p("whole"), []byte("old"), 0o644))
		must(t, os.WriteFile(e.p("extent"), []byte("0123456789"), 0o644))
		must(t, e.m.Sync(context.Background()))
		e.proxy.Stall(time.Minute)
		// Rewritten whole, and written in place, while nothing reaches
		// the server.
		must(t, os.WriteFile(e.p("whole"), []byte("new contents"), 0o644))
		f, err := os.OpenFile(e.p("extent"), os.O_WRONLY, 0)
		must(t, err)
		_, err = f.WriteAt([]byte("abc"), 3)
		must(t, err)
		must(t, f.Close())
		if got := e.server(t, "whole") + "," + e.server(t, "extent"); got != "old,0123456789" {
			t.Fatalf("the server has %s while the link is stalled", got)
		}
		// The crash: the connection dies with the data unsent.
		e.proxy.Close()
		if recs, err := cache.JournalPending(journal); len(recs) != 2 {
			t.Fatalf("journal holds %v (%v), want two records", recs, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := e.m.Sync(ctx); err == nil {
			t.Fatal("sync succeeded with the server unreachable")
		}
	})
	if got := readServer(t, srvDir, "whole") + "," + readServer(t, srvDir, "extent"); got != "old,0123456789" {
		t.Fatalf("the server has %s after the crash", got)
	}
	// A torn record (a crash while journaling, before close returned) and
	// a corrupted one, as an earlier version's journal (one file per
	// record) may hold, are not replayed.
	must(t, os.WriteFile(filepath.Join(journal, "tmp-123"), []byte("zxjournal 1\n{"), 0o600))
	must(t, os.WriteFile(filepath.Join(journal, "00000000000000000099.rec"), []byte("zxjournal 1\n{\"seq\":99,\"path\":\"/whole\",\"ops\":[{\"off\":0,\"len\":3,\"whole\":true}],\"datalen\":3,\"sum\":\"00\"}\nBAD"), 0o600))

	e := wbMount(t, wbSetup{srvDir: srvDir, addr: addr, copts: cache.Options{Journal: journal}, opts: mount.Options{WriteBack: true}, noProxy: true})
	if got := readServer(t, srvDir, "whole") + "," + readServer(t, srvDir, "extent"); got != "new contents,012abc6789" {
		t.Fatalf("after replay the server has %s", got)
	}
	if got := readFile(t, e.p("extent")); got != "012abc6789" {
		t.Fatalf("read %q through the mount", got)
	}
	if recs, err := cache.JournalPending(journal); len(recs) != 0 || err != nil {
		t.Fatalf("journal holds %v (%v) after replay", recs, err)
	}
	if tmp, _ := filepath.Glob(filepath.Join(journal, "tmp-*")); len(tmp) != 0 {
		t.Fatalf("temporary left in the journal: %v", tmp)
	}
	if bad, _ := filepath.Glob(filepath.Join(journal, "bad", "*.rec")); len(bad) != 1 {
		t.Fatalf("bad/ holds %v, want the corrupted record", bad)
	}
	if st := e.c.WriteBack().Stats(); st.Replayed != 2 || st.Pending != 0 {
		t.Fatalf("stats after replay: %+v", st)
	}
}

func readServer(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestStalledServer: with the server unreachable (a stalled link), calls
// fail within the mount's timeout instead of hanging, and unmounting works.
func TestStalledServer(t *testing.T) {
	e := wbMount(t, wbSetup{copts: cache.Options{NoPrefetch: true}, opts: mount.Options{Timeout: time.Second}})
	must(t, os.Mkdir(e.p("d"), 0o755))
	must(t, os.WriteFile(e.p("f"), []byte("x"), 0o644))
	e.proxy.Stall(time.Minute)
	e.c.Flush() // nothing cached: a lookup must ask the server
	done := make(chan error, 1)
	go func() {
		_, err := os.Stat(e.p("never-seen")) // not cached: asks the server
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.ETIMEDOUT) && !errors.Is(err, syscall.EIO) {
			t.Fatalf("stat with the server stalled: %v, want ETIMEDOUT or EIO", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stat with the server stalled did not return within 10s (timeout 1s)")
	}
	e.unmounted = true
	must(t, e.m.Unmount())
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), " "+e.dir+" ") {
		t.Fatal("still mounted")
	}
}

// TestReconnect: the connection is cut; the client dials again, the mount
// carries on, and everything cached is revalidated (notices were missed
// meanwhile); data written back while cut reaches the server.
func TestReconnect(t *testing.T) {
	e := wbMount(t, wbSetup{reconnect: true, copts: cache.Options{Journal: t.TempDir()}, opts: mount.Options{WriteBack: true, Timeout: 5 * time.Second}})
	must(t, os.WriteFile(e.p("f"), []byte("one"), 0o644))
	must(t, os.WriteFile(e.p("g"), nil, 0o644))
	must(t, e.m.Sync(context.Background()))
	if got := readFile(t, e.p("f")); got != "one" {
		t.Fatalf("read %q", got)
	}
	inv := e.c.Stats().Invalidations
	// The link goes down: the connection is cut, and the one the client
	// dials at once is stalled until the changes below are made, so that
	// they are made while no watch can see them.
	e.proxy.Stall(-1)
	e.proxy.Cut()
	// Changed on the server while the link is down: no notice reaches us.
	must(t, os.WriteFile(filepath.Join(e.srvDir, "f"), []byte("two, changed while cut"), 0o644))
	// Written through the mount while the link is down: close returns
	// once the data is journaled, without waiting for the link (had it
	// waited for the redial to give up, the watch would be lost, not
	// resumed, and no Overflow would come).
	must(t, os.WriteFile(e.p("g"), []byte("written while cut"), 0o644))
	// And opened again, with its data still in the journal, to append.
	a, err := os.OpenFile(e.p("g"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = a.Write([]byte(", appended"))
	must(t, err)
	must(t, a.Close())
	if st := e.c.WriteBack().Stats(); st.Pending != 2 || e.conn.Reconnects() != 0 {
		t.Fatalf("with the link down: write-back %+v, %d reconnects; want 2 records pending, none", st, e.conn.Reconnects())
	}
	if got := e.server(t, "g"); got != "" {
		t.Fatalf("with the link down the server has %q", got)
	}
	e.proxy.Resume()
	deadline := time.Now().Add(10 * time.Second)
	for e.conn.Reconnects() == 0 || e.c.Stats().Invalidations == inv {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnection and revalidation after 10s: %d reconnects, stats %+v", e.conn.Reconnects(), e.c.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := readFile(t, e.p("f")); got != "two, changed while cut" {
		t.Fatalf("after reconnecting the mount shows %q", got)
	}
	must(t, e.m.Sync(context.Background()))
	if got := e.server(t, "g"); got != "written while cut, appended" {
		t.Fatalf("after reconnecting and syncing the server has %q", got)
	}
}

// TestLinkDownLonger: the link is down (cut, the connection dialed again
// stalled) for longer than the client tries to reconnect. The client
// gives up, its watch fails, the cache drops what it cached; when the link
// comes back the next request dials again, the cache watches again, the
// mount shows what changed meanwhile, and what was written back while
// down reaches the server.
func TestLinkDownLonger(t *testing.T) {
	e := wbMount(t, wbSetup{reconnect: true, reconnectWait: time.Second, copts: cache.Options{Journal: t.TempDir()}, opts: mount.Options{WriteBack: true, Timeout: 5 * time.Second}})
	must(t, os.WriteFile(e.p("f"), []byte("one"), 0o644))
	must(t, os.WriteFile(e.p("g"), nil, 0o644))
	must(t, e.m.Sync(context.Background()))
	if got := readFile(t, e.p("f")); got != "one" {
		t.Fatalf("read %q", got)
	}
	e.proxy.Stall(-1)
	e.proxy.Cut()
	must(t, os.WriteFile(filepath.Join(e.srvDir, "f"), []byte("two, changed while down"), 0o644))
	must(t, os.WriteFile(e.p("g"), []byte("written while down"), 0o644))
	// The client gives up after ReconnectWait: the watch fails.
	waitFor(t, "the watch fails with the link down", func() bool { return !e.c.Watching() })
	if e.conn.Reconnects() != 0 {
		t.Fatalf("%d reconnects with the link down", e.conn.Reconnects())
	}
	e.proxy.Resume()
	waitFor(t, "the watch is back after the link", func() bool { return e.c.Watching() })
	if got := readFile(t, e.p("f")); got != "two, changed while down" {
		t.Fatalf("after the link came back the mount shows %q", got)
	}
	must(t, e.m.Sync(context.Background()))
	if got := e.server(t, "g"); got != "written while down" {
		t.Fatalf("after the link came back and a sync the server has %q", got)
	}
	if n := e.conn.Reconnects(); n != 1 {
		t.Fatalf("%d reconnects, want 1", n)
	}
}
