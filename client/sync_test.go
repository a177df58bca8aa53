package client_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/server"
)

// syncLog records the Syncs an lfs carried out.
type syncLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *syncLog) add(p string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		p += " failed: " + err.Error()
	}
	l.paths = append(l.paths, p)
}

func (l *syncLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.paths...)
}

// serveSyncing serves an lfs over a temporary directory whose Syncs are
// logged, through a link of rtt, with the server configured by cfg.
func serveSyncing(t *testing.T, rtt time.Duration, cfg server.Config) (*client.Conn, *syncLog, string) {
	t.Helper()
	dir := t.TempDir()
	log := &syncLog{}
	fs, err := lfs.New(dir, lfs.Options{OnSync: log.add})
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
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	addr := l.Addr().String()
	if rtt > 0 {
		addr = lag(t, addr, rtt)
	}
	return dial(t, addr), log, dir
}

// TestSyncPipelined: a put and the Sync issued right after it, without
// waiting, cost one round trip together, and the server syncs the file
// after the put has written it.
func TestSyncPipelined(t *testing.T) {
	c, log, _ := serveSyncing(t, 100*time.Millisecond, server.Config{})
	tr := c.Tree("")
	ctx := context.Background()
	if ok, err := c.SyncsInOrder(ctx); err != nil || !ok {
		t.Fatalf("SyncsInOrder = %v, %v; want true", ok, err)
	}
	before := c.Stats().RoundTrips
	pc := tr.Put(ctx, "/f", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, bytes.NewReader([]byte("data")))
	sc := zx.Sync(ctx, tr, "/f")
	if r := <-pc; r.Err != nil {
		t.Fatal(r.Err)
	}
	if err := <-sc; err != nil {
		t.Fatal(err)
	}
	if rt := c.Stats().RoundTrips - before; rt != 1 {
		t.Errorf("put + sync took %d round trips, want 1", rt)
	}
	if got := log.get(); len(got) != 1 || got[0] != "/f" {
		t.Errorf("server synced %q, want [/f]", got)
	}
	// A directory, the root (syncfs), and what does not exist.
	if _, err := zx.Mkdir(ctx, tr, "/d", 0755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/d", "/"} {
		if err := <-tr.Sync(ctx, p); err != nil {
			t.Errorf("Sync(%s): %v", p, err)
		}
	}
	if err := <-tr.Sync(ctx, "/nothing"); !errors.Is(err, zx.ErrNotExist) {
		t.Errorf("Sync(/nothing) = %v, want ErrNotExist", err)
	}
	if got := log.get(); len(got) != 4 || got[1] != "/d" || got[2] != "/" {
		t.Errorf("server synced %q, want [/f /d / /nothing failed...]", got)
	}
}

// TestSyncOldServer: a server that does not offer the sync request is
// never sent one; Sync waits for the writes on its path (a stat) and then
// has the server sync its whole file system (/Ctl sync).
func TestSyncOldServer(t *testing.T) {
	c, log, _ := serveSyncing(t, 0, server.Config{NoSync: true})
	tr := c.Tree("")
	ctx := context.Background()
	if ok, err := c.SyncsInOrder(ctx); err != nil || ok {
		t.Fatalf("SyncsInOrder = %v, %v; want false", ok, err)
	}
	pc := tr.Put(ctx, "/f", zx.Dir{zx.AType: zx.TypeFile}, 0, bytes.NewReader([]byte("data")))
	if err := <-tr.Sync(ctx, "/f"); err != nil {
		t.Fatal(err)
	}
	if r := <-pc; r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := log.get(); len(got) != 1 || got[0] != "/" {
		t.Errorf("server synced %q, want [/] (its control file's syncfs)", got)
	}
	if err := <-tr.Sync(ctx, "/nothing"); !errors.Is(err, zx.ErrNotExist) {
		t.Errorf("Sync(/nothing) = %v, want ErrNotExist", err)
	}
	// Had the client sent the sync request, this server would have
	// answered it as an unknown request, and Sync would have failed.
}
