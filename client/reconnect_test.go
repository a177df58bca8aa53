package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/proto"
	"github.com/zxfs/zx/server"
	"github.com/zxfs/zx/wan"
)

// faulty serves tr behind a WAN emulator with cfg, and returns a
// reconnecting client through it and the emulator.
func faulty(t *testing.T, tr zx.Tree, cfg wan.Config) (*client.Conn, *wan.Proxy) {
	t.Helper()
	p, err := wan.Listen("127.0.0.1:0", serve(t, tr), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := client.Dial(context.Background(), p.Addr(), client.Options{Reconnect: true, ReconnectWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, p
}

// waitSent waits until c has written n bytes (before compression) to its
// connection since its counters read before: what a test then cuts is on
// the link, not still queued in the client.
func waitSent(t *testing.T, c *client.Conn, before mux.Stats, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := c.Stats()
		if sent := st.BytesOut + st.SavedOut - before.BytesOut - before.SavedOut; sent >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client did not send %d bytes within 10s", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// pattern is n random bytes: incompressible, so that cuts after a byte
// count come where the test expects them.
func pattern(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(n)}).Read(b)
	return b
}

func TestReconnectAfterCut(t *testing.T) {
	ctx := context.Background()
	c, p := faulty(t, memfs.New(), wan.Config{})
	tr := c.Tree("")
	if _, err := zx.WriteFile(ctx, tr, "/f", nil, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	// The next request finds the connection gone, dials again and goes on.
	got, err := zx.ReadFile(ctx, tr, "/f")
	if err != nil || string(got) != "hello" {
		t.Fatalf("after a cut: %q, %v", got, err)
	}
	if n := c.Reconnects(); n != 1 {
		t.Errorf("reconnected %d times, want 1", n)
	}
	// A ping in flight at a cut is sent again.
	p.Stall(-1)
	before := c.Stats()
	pc := make(chan error, 1)
	go func() {
		_, err := c.Ping(ctx)
		pc <- err
	}()
	waitSent(t, c, before, proto.HeaderSize+16) // the ping is in the stalled link
	p.Cut()
	p.Resume()
	if err := <-pc; err != nil {
		t.Errorf("ping across a cut: %v", err)
	}
	if c.Err() != nil {
		t.Errorf("Err = %v while usable", c.Err())
	}
}

func TestReconnectServerRestart(t *testing.T) {
	// The server goes away and comes back on the same address: a request
	// made meanwhile waits for it (with backoff) and succeeds.
	ctx := context.Background()
	tr := memfs.New()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	start := func(l net.Listener) *server.Server {
		srv, err := server.New(map[string]zx.Tree{"main": tr}, "main", server.Config{})
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() }) // also when the test fails first
		return srv
	}
	srv := start(l)
	c, err := client.Dial(ctx, addr, client.Options{Reconnect: true, ReconnectWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := zx.WriteFile(ctx, c.Tree(""), "/f", nil, []byte("v1")); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	done := make(chan error, 1)
	go func() {
		_, err := zx.Stat(ctx, c.Tree(""), "/f")
		done <- err
	}()
	time.Sleep(200 * time.Millisecond) // the stat waits for the server
	l2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := start(l2)
	defer srv2.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stat across a restart: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("stat did not resume after the server came back")
	}
}

func TestReconnectGivesUp(t *testing.T) {
	ctx := context.Background()
	srv, err := server.New(map[string]zx.Tree{"main": memfs.New()}, "main", server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() }) // also when the test fails first
	c, err := client.Dial(ctx, l.Addr().String(), client.Options{Reconnect: true, ReconnectWait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := zx.Stat(ctx, c.Tree(""), "/"); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	_, err = zx.Stat(ctx, c.Tree(""), "/")
	if !errors.Is(err, zx.ErrIO) || !strings.Contains(err.Error(), "not re-established within 300ms") {
		t.Fatalf("stat with the server gone: %v, want a clear error", err)
	}
}

func TestResumeGet(t *testing.T) {
	// Every connection is cut after 1.5 MiB towards the client: a 5 MiB get
	// resumes at its offset each time and gets every byte once.
	ctx := context.Background()
	tr := memfs.New()
	data := pattern(5 << 20)
	if _, err := zx.WriteFile(ctx, tr, "/big", nil, data); err != nil {
		t.Fatal(err)
	}
	c, p := faulty(t, tr, wan.Config{CutAfter: 3 << 19})
	got, err := zx.ReadFile(ctx, c.Tree(""), "/big")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("resumed get: %d bytes, different from the %d written", len(got), len(data))
	}
	if n := c.Reconnects(); n < 3 {
		t.Errorf("reconnected %d times for 5 MiB cut every 1.5 MiB", n)
	}
	t.Logf("%d reconnections, %d cuts", c.Reconnects(), p.Stats().Cuts)
}

// changer is a tree whose file changes as soon as a get of it begins, once
// a stat of it has been answered: a get resumed after a cut finds it
// changed since the stat sent before the first attempt.
type changer struct {
	zx.Tree
	path   string
	data   []byte
	stated chan struct{}
	once   sync.Once
	change sync.Once
}

func (t *changer) Stat(ctx context.Context, path string) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	c <- <-t.Tree.Stat(ctx, path)
	if path == t.path {
		t.once.Do(func() { close(t.stated) })
	}
	return c
}

func (t *changer) Get(ctx context.Context, path string, off, count int64) <-chan zx.Item {
	if path == t.path {
		t.change.Do(func() {
			select {
			case <-t.stated:
			case <-ctx.Done():
				return
			}
			zx.WriteFile(ctx, t.Tree, path, nil, t.data)
		})
	}
	return t.Tree.Get(ctx, path, off, count)
}

func TestResumeGetChanged(t *testing.T) {
	// The file changes while the connection is down: the get says so
	// rather than splice two versions. The change comes when the server
	// begins the first get, after the stat the client sends before it;
	// every connection is cut after 1 MiB towards the client, in the
	// middle of the 4 MiB (both versions are incompressible).
	ctx := context.Background()
	mem := memfs.New()
	if _, err := zx.WriteFile(ctx, mem, "/big", nil, pattern(4<<20)); err != nil {
		t.Fatal(err)
	}
	tr := &changer{Tree: mem, path: "/big", data: pattern(4<<20 + 1)[:4<<20], stated: make(chan struct{})}
	c, p := faulty(t, tr, wan.Config{CutAfter: 1 << 20})
	var n int
	for it := range c.Tree("").Get(ctx, "/big", 0, -1) {
		if it.Err != nil {
			if !strings.Contains(it.Err.Error(), "changed") {
				t.Fatalf("get: %v, want an error saying the file changed", it.Err)
			}
			if p.Stats().Cuts == 0 {
				t.Error("no connection was cut")
			}
			return
		}
		n += len(it.Data)
	}
	t.Fatalf("get of a file changed during a reconnection ended without error after %d bytes", n)
}

func TestResumeGetChangedCancels(t *testing.T) {
	// A get that cannot resume safely (the file changed while the
	// connection was down) cancels the stream it was resumed on. Else the
	// server goes on with that get until the client gives no more credit,
	// and holds the file meanwhile: lfs orders a put of a file after a get
	// of it, so the next put of the file waited for ever (seen as a round
	// of cmd/zx's TestFaults that never ended).
	ctx := context.Background()
	fs, err := lfs.New(t.TempDir(), lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	if _, err := zx.WriteFile(ctx, fs, "/big", nil, pattern(4<<20)); err != nil {
		t.Fatal(err)
	}
	tr := &changer{Tree: fs, path: "/big", data: pattern(4<<20 + 1)[:4<<20], stated: make(chan struct{})}
	c, p := faulty(t, tr, wan.Config{})
	var n int
	var gerr error
	for it := range c.Tree("").Get(ctx, "/big", 0, -1) {
		if it.Err != nil {
			gerr = it.Err
			continue
		}
		if n == 0 {
			p.Cut() // the get resumes on a new connection, which stays
		}
		n += len(it.Data)
	}
	if gerr == nil || !strings.Contains(gerr.Error(), "changed") {
		t.Fatalf("get: %v after %d bytes, want an error saying the file changed", gerr, n)
	}
	if c.Reconnects() != 1 {
		t.Fatalf("%d reconnections, want 1", c.Reconnects())
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := zx.WriteFile(pctx, c.Tree(""), "/big", nil, []byte("after")); err != nil {
		t.Fatalf("put of the file after its get could not resume: %v (the server still holds it for the abandoned get)", err)
	}
}

func TestResumeFind(t *testing.T) {
	// A find cut in the middle is replayed; the caller sees each entry once.
	ctx := context.Background()
	tr := memfs.New()
	for i := range 20 {
		if _, err := zx.Mkdir(ctx, tr, fmt.Sprintf("/d%02d", i), 0755); err != nil {
			t.Fatal(err)
		}
		for j := range 50 {
			if _, err := zx.WriteFile(ctx, tr, fmt.Sprintf("/d%02d/f%02d", i, j), nil, pattern(100)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, op := range []string{"find", "findget"} {
		t.Run(op, func(t *testing.T) {
			// Paced (about 100 KB of entries, and as much data for
			// findget, at 256 KB/s) so that most of the reply is still on
			// the link at each cut: without it the whole reply may be in
			// the client's buffers already, and nothing is resumed.
			c, p := faulty(t, tr, wan.Config{Rate: 256 << 10})
			find := c.Tree("").Find
			if op == "findget" {
				find = c.Tree("").FindGet
			}
			seen := map[string]int{}
			var data int
			for it := range find(ctx, "/", zx.FindOpts{}) {
				if it.Err != nil {
					t.Fatal(it.Err)
				}
				if it.Dir != nil {
					seen[it.Dir.Path()]++
					if n := len(seen); n == 300 || n == 700 {
						p.Cut() // find is replayed, and skips what it gave
					}
				}
				data += len(it.Data)
			}
			if len(seen) != 1+20+20*50 {
				t.Errorf("%d entries, want %d", len(seen), 1+20+20*50)
			}
			for p, n := range seen {
				if n != 1 {
					t.Errorf("%s seen %d times", p, n)
				}
			}
			if op == "findget" && data != 20*50*100 {
				t.Errorf("%d bytes of data, want %d", data, 20*50*100)
			}
			if p.Stats().Cuts == 0 {
				t.Error("no connection was cut")
			}
			if c.Reconnects() == 0 {
				t.Error("no reconnection: the find was not resumed")
			}
			t.Logf("%s: %d reconnections", op, c.Reconnects())
		})
	}
}

func TestPutRetried(t *testing.T) {
	// A whole-file put from a seekable reader is sent again from the start
	// after a cut; the file ends up whole.
	ctx := context.Background()
	tr := memfs.New()
	c, p := faulty(t, tr, wan.Config{})
	data := pattern(4 << 20)
	p.SetConfig(wan.Config{CutAfter: 1 << 20})
	go func() {
		// One cut; the retry goes through.
		for p.Stats().Cuts == 0 {
			time.Sleep(time.Millisecond)
		}
		p.SetConfig(wan.Config{})
	}()
	r := <-c.Tree("").Put(ctx, "/f", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, bytes.NewReader(data))
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	p.SetConfig(wan.Config{})
	got, err := zx.ReadFile(ctx, tr, "/f")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after a retried put: %d bytes (%v), want the %d written", len(got), err, len(data))
	}
	if p.Stats().Cuts == 0 {
		t.Error("no connection was cut")
	}
}

func TestPutNotRetried(t *testing.T) {
	// A put whose data cannot be read again is reported, and the file is
	// the old one or the new one, never a mix (lfs puts replace files
	// atomically).
	ctx := context.Background()
	fs, err := lfs.New(t.TempDir(), lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	old := pattern(3 << 20)
	if _, err := zx.WriteFile(ctx, fs, "/f", nil, old); err != nil {
		t.Fatal(err)
	}
	c, p := faulty(t, fs, wan.Config{})
	p.SetConfig(wan.Config{CutAfter: 1 << 20})
	nw := pattern(3<<20 + 1)
	r := <-c.Tree("").Put(ctx, "/f", zx.Dir{zx.ASize: "0"}, 0, io.MultiReader(bytes.NewReader(nw)))
	p.SetConfig(wan.Config{})
	if r.Err == nil || !strings.Contains(r.Err.Error(), "cannot be sent again") {
		t.Fatalf("put cut short: %v, want an error saying it could not be retried", r.Err)
	}
	got, err := zx.ReadFile(ctx, c.Tree(""), "/f")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, old) && !bytes.Equal(got, nw) {
		t.Fatalf("file is neither old nor new after an interrupted put (%d bytes)", len(got))
	}
}

func TestRemoveOutcomeUnknown(t *testing.T) {
	ctx := context.Background()
	tr := memfs.New()
	c, p := faulty(t, tr, wan.Config{})
	if _, err := zx.WriteFile(ctx, c.Tree(""), "/f", nil, []byte("x")); err != nil {
		t.Fatal(err)
	}
	p.Stall(-1)
	before := c.Stats()
	ec := c.Tree("").Remove(ctx, "/f")
	waitSent(t, c, before, proto.HeaderSize+1) // the request is in the stalled link
	p.Cut()
	p.Resume()
	err := <-ec
	if !errors.Is(err, zx.ErrIO) || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("remove in flight at a cut: %v, want an unknown-outcome error", err)
	}
	// The connection is back for what follows.
	if _, err := zx.Stat(ctx, c.Tree(""), "/"); err != nil {
		t.Fatal(err)
	}
}

func TestWatchResubscribes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := memfs.New()
	c, p := faulty(t, tr, wan.Config{})
	evs := c.Tree("").Watch(ctx, "/")
	if ev := <-evs; ev.Kind != zx.Ready {
		t.Fatalf("first event %v", ev)
	}
	p.Cut()
	ev := <-evs
	if ev.Err != nil || ev.Kind != zx.Overflow {
		t.Fatalf("after a cut: %+v, want an overflow", ev)
	}
	if _, err := zx.WriteFile(ctx, tr, "/new", nil, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for ev := range evs {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
		if ev.Dir.Path() == "/new" {
			return
		}
	}
	t.Fatal("watch ended")
}

func TestNoReconnectByDefault(t *testing.T) {
	ctx := context.Background()
	p, err := wan.Listen("127.0.0.1:0", serve(t, memfs.New()), wan.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p.Addr())
	if _, err := zx.Stat(ctx, c.Tree(""), "/"); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	<-c.Done()
	if _, err := zx.Stat(ctx, c.Tree(""), "/"); !errors.Is(err, zx.ErrIO) {
		t.Fatalf("stat on a lost connection without Reconnect: %v", err)
	}
}

func TestReplayKeepsOrder(t *testing.T) {
	// Writes of one file in flight at a cut are replayed in the order they
	// were issued, before anything issued after: the last one wins, as it
	// would have without the cut.
	ctx := context.Background()
	tr := memfs.New()
	c, p := faulty(t, tr, wan.Config{})
	ct := c.Tree("")
	if _, err := zx.Stat(ctx, ct, "/"); err != nil {
		t.Fatal(err)
	}
	p.Stall(-1)
	before := c.Stats()
	var rcs []<-chan zx.Reply
	for v := range 10 {
		data := bytes.Repeat([]byte{byte('a' + v)}, 100<<10)
		rcs = append(rcs, ct.Put(ctx, "/f", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, bytes.NewReader(data)))
	}
	waitSent(t, c, before, 100<<10) // requests and some data in the stalled link
	p.Cut()
	p.Resume()
	after := ct.Stat(ctx, "/f") // issued after the cut: must see the last put
	for i, rc := range rcs {
		if r := <-rc; r.Err != nil {
			t.Fatalf("put %d: %v", i, r.Err)
		}
	}
	r := <-after
	if r.Err != nil || r.Dir[zx.ASize] != fmt.Sprint(100<<10) {
		t.Fatalf("stat after the puts: %v %v", r.Dir, r.Err)
	}
	got, err := zx.ReadFile(ctx, tr, "/f")
	if err != nil || len(got) != 100<<10 || got[0] != 'a'+9 || got[len(got)-1] != 'a'+9 {
		t.Fatalf("after replayed puts the file holds %q... (%d bytes, %v), want the last put", got[:min(len(got), 8)], len(got), err)
	}
	if c.Reconnects() != 1 {
		t.Errorf("%d reconnections, want 1", c.Reconnects())
	}
}

func TestResumeListing(t *testing.T) {
	// A directory's listing cut in the middle, several times, resumes
	// after the entries received (counted in batches as one by one); the
	// caller sees each entry once, in order. So does a find.
	ctx := context.Background()
	dir := t.TempDir()
	const n = 3000
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d", i)), nil, 0644); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := lfs.New(dir, lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	c, p := faulty(t, fs, wan.Config{CutAfter: 150 << 10})
	i := 0
	for it := range c.Tree("").Get(ctx, "/", 0, -1) {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
		if want := fmt.Sprintf("/f%05d", i); it.Dir.Path() != want {
			t.Fatalf("entry %d is %s, want %s", i, it.Dir.Path(), want)
		}
		i++
	}
	if i != n {
		t.Fatalf("%d entries, want %d", i, n)
	}
	if p.Stats().Cuts < 2 {
		t.Errorf("%d cuts, want several", p.Stats().Cuts)
	}
	t.Logf("listing: %d reconnections, %d cuts", c.Reconnects(), p.Stats().Cuts)
	// The same for a find, which is replayed from the start and skips
	// what it gave: cut it in the middle on a connection that is not cut
	// every 150 KiB (a replayed find would meet the same cut every time).
	c, p = faulty(t, fs, wan.Config{})
	i = -1 // the root comes first
	for it := range c.Tree("").Find(ctx, "/", zx.FindOpts{}) {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
		if i == 1000 || i == 2000 {
			p.Cut()
		}
		want := fmt.Sprintf("/f%05d", i)
		if i < 0 {
			want = "/"
		}
		if it.Dir.Path() != want {
			t.Fatalf("find: entry %d is %s, want %s", i, it.Dir.Path(), want)
		}
		i++
	}
	if i != n {
		t.Fatalf("find: %d entries, want %d", i, n)
	}
	t.Logf("find: %d reconnections, %d cuts", c.Reconnects(), p.Stats().Cuts)
}

// An acknowledged watch carried over a lost connection numbers afresh on
// the new stream, and its acknowledgements still release other clients'
// writes.
func TestWatchAckedResubscribes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := server.New(map[string]zx.Tree{"main": memfs.New()}, "main", server.Config{CallbackWait: 30 * time.Second})
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
	p, err := wan.Listen("127.0.0.1:0", l.Addr().String(), wan.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := client.Dial(ctx, p.Addr(), client.Options{Reconnect: true, ReconnectWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := dial(t, l.Addr().String())
	evs := c.Tree("").WatchAcked(ctx, "/")
	if ev := <-evs; ev.Kind != zx.Ready {
		t.Fatalf("first event %v", ev)
	}
	// write puts p through w; the watch must acknowledge its notice
	// before the put is answered (a missed one is counted as lagged).
	write := func(path string) {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		defer wcancel()
		rc := w.Tree("").Put(wctx, path, zx.Dir{zx.AType: "-"}, 0, strings.NewReader(path))
		for ev := range evs {
			if ev.Err != nil {
				t.Fatal(ev.Err)
			}
			if ev.Ack != nil {
				ev.Ack()
				if ev.Dir.Path() == path {
					break
				}
			}
		}
		if r := <-rc; r.Err != nil {
			t.Fatalf("put %s: %v", path, r.Err)
		}
	}
	write("/a")
	p.Cut()
	for ev := range evs {
		if ev.Err != nil {
			t.Fatal(ev.Err)
		}
		if ev.Kind == zx.Overflow {
			break
		}
		if ev.Ack != nil || ev.Dir.Path() != "/a" {
			t.Fatalf("after a cut: %+v, want the tree's notice of /a, then an overflow", ev)
		}
	}
	write("/b")
	write("/c")
	for _, l := range srv.Status(ctx).Lines {
		if strings.HasPrefix(l, "callbacks ") {
			if !strings.HasSuffix(l, " waits 3 lagged 0") {
				t.Fatalf("server: %s; want 3 writes that waited for the watch, none lagged", l)
			}
			return
		}
	}
	t.Fatal("no callbacks line in the server's status")
}

// A request whose stream was sent again by another request's redial
// before its own goroutine saw the loss goes on with the new stream: here
// a watch whose consumer is slow (its goroutine holds a notice, not
// reading) while a stat redials.
func TestResumeAfterOthersRedial(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := memfs.New()
	c, p := faulty(t, tr, wan.Config{})
	evs := c.Tree("").Watch(ctx, "/")
	if ev := <-evs; ev.Kind != zx.Ready {
		t.Fatalf("first event %v", ev)
	}
	before := c.Stats().BytesIn
	if _, err := zx.WriteFile(ctx, tr, "/a", nil, []byte("a")); err != nil {
		t.Fatal(err)
	}
	// Once the notice of /a is in, the watch's goroutine holds it (we do
	// not take it) and does not see the loss; a stat redials meanwhile.
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().BytesIn == before {
		if time.Now().After(deadline) {
			t.Fatal("the notice of /a did not arrive")
		}
		time.Sleep(time.Millisecond)
	}
	p.Cut()
	if _, err := zx.Stat(ctx, c.Tree(""), "/"); err != nil {
		t.Fatal(err)
	}
	if c.Reconnects() != 1 {
		t.Fatalf("%d reconnections, want 1", c.Reconnects())
	}
	if ev := <-evs; ev.Err != nil || ev.Dir.Path() != "/a" {
		t.Fatalf("held notice: %+v", ev)
	}
	if ev := <-evs; ev.Err != nil || ev.Kind != zx.Overflow {
		t.Fatalf("after the redial: %+v, want the watch carried over (an overflow)", ev)
	}
}

// TestFailFastWhileDown: with the link down (its connection cut, the one
// dialed again stalled), a request made with zx.WithFailFast fails at once
// with ErrIO instead of waiting for the connection; when the link comes
// back, the redial it started completes and a watch resumes with an
// Overflow.
func TestFailFastWhileDown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := memfs.New()
	c, p := faulty(t, tr, wan.Config{})
	evs := c.Tree("").Watch(ctx, "/")
	if ev := <-evs; ev.Kind != zx.Ready {
		t.Fatalf("first event %v", ev)
	}
	p.Stall(-1)
	p.Cut()
	// A request that waits for the connection, bounded: by its end the
	// client has seen the loss and dialed a connection that is stalled.
	sctx, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := zx.Stat(sctx, c.Tree(""), "/"); err == nil {
		t.Fatal("stat answered with the link down")
	}
	scancel()
	done := make(chan error, 1)
	go func() {
		_, err := zx.WriteFile(zx.WithFailFast(ctx), c.Tree(""), "/f", nil, []byte("x"))
		done <- err
	}()
	select {
	case err := <-done:
		if zx.KindOf(err) != zx.ErrIO {
			t.Fatalf("fail-fast put with the link down: %v, want ErrIO", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("fail-fast put waited for the connection")
	}
	if c.Reconnects() != 0 {
		t.Fatalf("%d reconnects with the link down", c.Reconnects())
	}
	p.Resume()
	select {
	case ev := <-evs:
		if ev.Err != nil || ev.Kind != zx.Overflow {
			t.Fatalf("after the link came back: %+v, want an overflow", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no overflow 5s after the link came back")
	}
	if c.Reconnects() != 1 {
		t.Fatalf("%d reconnects, want 1", c.Reconnects())
	}
	if _, err := zx.WriteFile(zx.WithFailFast(ctx), c.Tree(""), "/f", nil, []byte("x")); err != nil {
		t.Fatalf("fail-fast put with the link up: %v", err)
	}
}
