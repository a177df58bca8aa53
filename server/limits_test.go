package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
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

// serve starts a server for tr with cfg on loopback; it is closed when the
// test ends.
func serve(t *testing.T, tr zx.Tree, cfg server.Config) (*server.Server, string) {
	t.Helper()
	srv, err := server.New(map[string]zx.Tree{"main": tr}, "main", cfg)
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
		// Every request and connection gave back what it counted.
		if u := srv.Memory().Used(); u != 0 {
			t.Errorf("server still counts %d bytes of memory after it closed", u)
		}
	})
	return srv, l.Addr().String()
}

func dial(t *testing.T, addr string) *client.Conn {
	t.Helper()
	c, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// eventually waits up to 10s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMaxConns(t *testing.T) {
	ctx := context.Background()
	srv, addr := serve(t, memfs.New(), server.Config{MaxConns: 2})
	c1, c2 := dial(t, addr), dial(t, addr)
	for _, c := range []*client.Conn{c1, c2} {
		if _, err := zx.Stat(ctx, c.Tree(""), "/"); err != nil {
			t.Fatal(err)
		}
	}
	c3 := dial(t, addr)
	_, err := zx.Stat(ctx, c3.Tree(""), "/")
	if !errors.Is(err, zx.ErrLimit) || !strings.Contains(err.Error(), "too many connections (limit 2)") {
		t.Fatalf("third connection: %v, want a clear connection limit", err)
	}
	if n := srv.NumConns(); n != 2 {
		t.Errorf("serving %d connections, want 2", n)
	}
	// A place freed is a place taken.
	c1.Close()
	eventually(t, "the server to drop a closed connection", func() bool { return srv.NumConns() == 1 })
	c4 := dial(t, addr)
	if _, err := zx.Stat(ctx, c4.Tree(""), "/"); err != nil {
		t.Fatalf("after a connection closed: %v", err)
	}
}

func TestConnectionFlood(t *testing.T) {
	// Far more connections than allowed, at once: each refused one is told
	// why, the server keeps serving the ones it took, and nothing leaks.
	ctx := context.Background()
	srv, addr := serve(t, memfs.New(), server.Config{MaxConns: 8})
	keep := dial(t, addr)
	var refused, served int
	errc := make(chan error)
	for range 100 {
		go func() {
			c, err := client.Dial(ctx, addr, client.Options{})
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			_, err = zx.Stat(ctx, c.Tree(""), "/")
			errc <- err
		}()
	}
	for range 100 {
		switch err := <-errc; {
		case err == nil:
			served++
		case errors.Is(err, zx.ErrLimit):
			refused++
		default:
			t.Errorf("flooding connection: %v", err)
		}
	}
	t.Logf("%d served, %d refused", served, refused)
	if refused == 0 || served == 0 {
		t.Errorf("%d served and %d refused, want some of each", served, refused)
	}
	if _, err := zx.Stat(ctx, keep.Tree(""), "/"); err != nil {
		t.Errorf("established connection after the flood: %v", err)
	}
	eventually(t, "flood connections to end", func() bool { return srv.NumConns() == 1 })
}

func TestRequestRate(t *testing.T) {
	// 60 requests at 100/s in bursts of 10 take at least half a second:
	// the client is slowed, and every request succeeds.
	ctx := context.Background()
	_, addr := serve(t, memfs.New(), server.Config{RequestRate: 100, RequestBurst: 10})
	tr := dial(t, addr).Tree("")
	t0 := time.Now()
	var rcs []<-chan zx.Reply
	for range 60 {
		rcs = append(rcs, tr.Stat(ctx, "/"))
	}
	for _, rc := range rcs {
		if r := <-rc; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if el := time.Since(t0); el < 450*time.Millisecond {
		t.Errorf("60 requests at 100/s with bursts of 10 took %v, want at least 0.5s", el)
	}
}

func TestServerMemoryBound(t *testing.T) {
	// Puts whose data the server cannot take yet (they wait behind a put of
	// the same file that never ends) fill the server's budget; the one that
	// would exceed it fails with a clear limit error, the bound holds, and
	// everything is released after.
	ctx := context.Background()
	const limit = 4 << 20
	srv, addr := serve(t, memfs.New(), server.Config{MaxMemory: limit})
	tr := dial(t, addr).Tree("")
	pr, pw := io.Pipe()
	defer pw.Close()
	first := tr.Put(ctx, "/f", zx.Dir{zx.AType: zx.TypeFile}, 0, pr)
	pw.Write([]byte("x"))
	var rcs []<-chan zx.Reply
	var limited error
	for i := 0; i < 40 && limited == nil; i++ {
		rcs = append(rcs, tr.Put(ctx, "/f", zx.Dir{zx.AType: zx.TypeFile}, 0, bytes.NewReader(make([]byte, 250<<10))))
		time.Sleep(10 * time.Millisecond)
		for _, rc := range rcs {
			select {
			case r := <-rc:
				if !errors.Is(r.Err, zx.ErrLimit) {
					t.Fatalf("waiting put: %v", r.Err)
				}
				limited = r.Err
			default:
			}
		}
	}
	if limited == nil {
		t.Fatal("40 blocked puts of 250 KiB fit in a 4 MiB server budget")
	}
	t.Logf("refused: %v", limited)
	if !strings.Contains(limited.Error(), "server buffers full") {
		t.Errorf("error %q does not say which limit", limited)
	}
	if m := srv.Memory(); m.Peak() > limit {
		t.Errorf("server buffered %d bytes, over its %d limit", m.Peak(), limit)
	}
	pw.Close()
	if r := <-first; r.Err != nil {
		t.Fatal(r.Err)
	}
	// What is left is what the open connection costs.
	eventually(t, "buffers to drain", func() bool { return srv.Memory().Used() == server.ConnCost })
}

func TestStalledReaderDoesNotBlockOthers(t *testing.T) {
	// Client A gets a large file and stops reading; client B's put of the
	// same file must wait for A's get (requests on a path apply in order),
	// but not for ever: the server abandons A's reply after StallTimeout.
	ctx := context.Background()
	dir := t.TempDir()
	big := bytes.Repeat([]byte("0123456789abcdef"), 2<<20) // 32 MiB
	if err := os.WriteFile(filepath.Join(dir, "f"), big, 0644); err != nil {
		t.Fatal(err)
	}
	fs, err := lfs.New(dir, lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	_, addr := serve(t, fs, server.Config{Mux: mux.Config{StallTimeout: 300 * time.Millisecond}})
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := dial(t, addr).Tree("").Get(actx, "/f", 0, -1)
	<-items // the get is under way; now A stops reading
	b := dial(t, addr).Tree("")
	r := <-b.Put(ctx, "/f", zx.Dir{zx.ASize: "0"}, 0, strings.NewReader("new"))
	if r.Err != nil {
		t.Fatalf("B's put: %v", r.Err)
	}
	got, err := zx.ReadFile(ctx, b, "/f")
	if err != nil || string(got) != "new" {
		t.Fatalf("after B's put: %q, %v", got, err)
	}
	// A, reading again, finds its get abandoned, and says why.
	var last error
	for it := range items {
		if it.Err != nil {
			last = it.Err
		}
	}
	if !errors.Is(last, zx.ErrTimeout) {
		t.Errorf("A's stalled get ended with %v, want a timeout", last)
	}
}

func TestHalfOpenClosed(t *testing.T) {
	// A link that goes silent (a peer gone without a word): keepalive finds
	// it and the server closes the connection.
	srv, addr := serve(t, memfs.New(), server.Config{Mux: mux.Config{KeepAlive: 100 * time.Millisecond, Timeout: 300 * time.Millisecond}})
	p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{StallAfter: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dial(t, p.Addr())
	if _, err := zx.Stat(context.Background(), c.Tree(""), "/"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the server to close a half-open connection", func() bool { return srv.NumConns() == 0 })
}

func TestIdleClosed(t *testing.T) {
	srv, addr := serve(t, memfs.New(), server.Config{Mux: mux.Config{IdleTimeout: 200 * time.Millisecond}})
	c := dial(t, addr)
	if _, err := zx.Stat(context.Background(), c.Tree(""), "/"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("idle connection kept open")
	}
	if !errors.Is(c.Err(), zx.ErrTimeout) || !strings.Contains(c.Err().Error(), "idle") {
		t.Errorf("client told %v, want an idle timeout", c.Err())
	}
	eventually(t, "the server to drop it", func() bool { return srv.NumConns() == 0 })
}

func TestUnusedPutDataReleased(t *testing.T) {
	// Puts the server refuses before it takes their data (a path that
	// cannot be) leave nothing counted once answered: the data received
	// for them was counted for good before, and enough such puts would
	// have filled the server's memory for every client.
	fs, err := lfs.New(t.TempDir(), lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	srv, addr := serve(t, fs, server.Config{})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	mc := mux.Client(nc, mux.Config{})
	defer mc.Close()
	for range 20 {
		_, err := rawRequest(t, mc, &proto.Request{Op: proto.OpPut, Path: "/../x", Dir: zx.Dir{zx.AType: zx.TypeFile}}, make([]byte, 10<<10))
		if err == nil {
			t.Fatal("put of /../x succeeded")
		}
	}
	eventually(t, "the refused puts' data to be released", func() bool { return srv.Memory().Used() == server.ConnCost })
}
