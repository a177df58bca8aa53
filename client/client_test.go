package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/proto"
	"github.com/zxfs/zx/server"
	"github.com/zxfs/zx/wan"
	"github.com/zxfs/zx/zxtest"
)

// serve starts a server for tr on loopback and returns its address. The
// server is shut down when the test ends.
func serve(t testing.TB, tr zx.Tree) string {
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
	t.Cleanup(func() {
		srv.Close()
		<-done
	})
	return l.Addr().String()
}

// lag puts a WAN emulator in front of addr.
func lag(t testing.TB, addr string, rtt time.Duration) string {
	t.Helper()
	p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{RTT: rtt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p.Addr()
}

func dial(t testing.TB, addr string) *client.Conn {
	t.Helper()
	c, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestConformanceOverNetwork(t *testing.T) {
	zxtest.TestTree(t, func(t *testing.T) zx.Tree {
		return dial(t, serve(t, memfs.New())).Tree("")
	}, zxtest.Options{})
}

// TestConformanceOverNetworkToDisk runs the suite through the whole stack:
// client, TCP, server, local disk.
func TestConformanceOverNetworkToDisk(t *testing.T) {
	zxtest.TestTree(t, func(t *testing.T) zx.Tree {
		fs, err := lfs.New(t.TempDir(), lfs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fs.Close() })
		return dial(t, serve(t, fs)).Tree("")
	}, zxtest.Options{})
}

// mkBig makes a tree of ndirs directories of nfiles files each.
func mkBig(t testing.TB, tr zx.Tree, ndirs, nfiles int) {
	t.Helper()
	ctx := context.Background()
	var rcs []<-chan zx.Reply
	for d := range ndirs {
		dir := fmt.Sprintf("/d%03d", d)
		rcs = append(rcs, tr.Put(ctx, dir, zx.Dir{zx.AType: zx.TypeDir}, 0, nil))
		for f := range nfiles {
			name := fmt.Sprintf("%s/f%03d.c", dir, f)
			if f%2 == 1 {
				name = fmt.Sprintf("%s/f%03d.o", dir, f)
			}
			rcs = append(rcs, tr.Put(ctx, name, zx.Dir{zx.AType: zx.TypeFile}, 0, bytes.NewReader([]byte(name))))
		}
	}
	for _, rc := range rcs {
		if r := <-rc; r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

// TestFindRoundTrips checks the point of the protocol: walking a tree of
// thousands of entries, and removing a thousand of them, costs a constant
// number of round trips at 50 ms, not one per entry.
func TestFindRoundTrips(t *testing.T) {
	fs := memfs.New()
	mkBig(t, fs, 40, 50) // 2,040 entries
	c := dial(t, lag(t, serve(t, fs), 50*time.Millisecond))
	tr := c.Tree("")
	ctx := context.Background()

	before := c.Stats().RoundTrips
	n := 0
	for it := range tr.Find(ctx, "/", zx.FindOpts{}) {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
		n++
	}
	if n != 2041 {
		t.Fatalf("find gave %d entries, want 2041", n)
	}
	if rt := c.Stats().RoundTrips - before; rt != 1 {
		t.Fatalf("find of %d entries took %d round trips, want 1", n, rt)
	}

	// The paper's idiom: remove every *.o while the find streams.
	before = c.Stats().RoundTrips
	var errcs []<-chan error
	for it := range tr.Find(ctx, "/", zx.FindOpts{Pred: "~*.o"}) {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
		errcs = append(errcs, tr.Remove(ctx, it.Dir.Path()))
	}
	for _, ec := range errcs {
		if err := <-ec; err != nil {
			t.Fatal(err)
		}
	}
	if len(errcs) != 1000 {
		t.Fatalf("removed %d files, want 1000", len(errcs))
	}
	if rt := c.Stats().RoundTrips - before; rt > 3 {
		t.Fatalf("find and 1,000 removes took %d round trips, want at most 3", rt)
	}
	left := 0
	for it := range tr.Find(ctx, "/", zx.FindOpts{Pred: "~*.o"}) {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
		left++
	}
	if left != 0 {
		t.Fatalf("%d .o files left", left)
	}
}

// slowReader yields n bytes, then blocks until release is closed.
type slowReader struct {
	n       int
	release chan struct{}
}

func (r *slowReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		<-r.release
		return 0, errors.New("writer vanished")
	}
	m := min(len(p), r.n)
	for i := range m {
		p[i] = 'x'
	}
	r.n -= m
	return m, nil
}

// TestClientVanishesMidPut cuts the connection in the middle of a put: the
// file must keep its old contents, with nothing half-written under its name,
// in memory and on disk (where the put's temporary must go too).
func TestClientVanishesMidPut(t *testing.T) {
	t.Run("memfs", func(t *testing.T) { vanishMidPut(t, memfs.New(), "") })
	t.Run("lfs", func(t *testing.T) {
		dir := t.TempDir()
		fs, err := lfs.New(dir, lfs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fs.Close() })
		vanishMidPut(t, fs, dir)
	})
}

// vanishMidPut puts into fs (over the directory disk if not "") from a
// client that vanishes in the middle of the data.
func vanishMidPut(t *testing.T, fs zx.Tree, disk string) {
	ctx := context.Background()
	if _, err := zx.WriteFile(ctx, fs, "/f", nil, []byte("old")); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, fs)
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &slowReader{n: 1 << 20, release: make(chan struct{})}
	defer close(r.release)
	rc := c.Tree("").Put(ctx, "/f", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, r)
	// Wait until the server has taken some data (counted before
	// compression), then vanish.
	deadline := time.Now().Add(10 * time.Second)
	for st := c.Stats(); st.BytesOut+st.SavedOut < 1<<20 && time.Now().Before(deadline); st = c.Stats() {
		time.Sleep(5 * time.Millisecond)
	}
	if st := c.Stats(); st.BytesOut+st.SavedOut < 1<<20 {
		t.Fatalf("the put sent only %d bytes", st.BytesOut+st.SavedOut)
	}
	c.Close()
	if r := <-rc; r.Err == nil {
		t.Fatal("put over a closed connection succeeded")
	}
	// The server notices, aborts the put, and the old file stays.
	for time.Now().Before(deadline) {
		data, err := zx.ReadFile(ctx, fs, "/f")
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != "old" {
			t.Fatalf("after an interrupted put the file holds %d bytes, want the old contents", len(data))
		}
		ents, err := zx.ReadDir(ctx, fs, "/")
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 1 {
			t.Fatalf("root has %d entries after an interrupted put, want 1", len(ents))
		}
		// On disk the put's temporary goes once the server has aborted
		// the put.
		var names []string
		if disk != "" {
			des, err := os.ReadDir(disk)
			if err != nil {
				t.Fatal(err)
			}
			for _, de := range des {
				names = append(names, de.Name())
			}
			if b, err := os.ReadFile(filepath.Join(disk, "f")); err != nil || string(b) != "old" {
				t.Fatalf("on disk after an interrupted put: %q, %v", b, err)
			}
		}
		// Once the server has dropped the connection, a new client sees
		// the same.
		c2 := dial(t, addr)
		if d, err := zx.Stat(ctx, c2.Tree(""), "/f"); err == nil && d.Size() == 3 && len(names) <= 1 {
			return
		}
		c2.Close()
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("server did not settle after the client vanished")
}

// TestStatDuringBulk: a small request is answered while a large transfer
// on the same connection is under way, not after it.
func TestStatDuringBulk(t *testing.T) {
	fs := memfs.New()
	ctx := context.Background()
	const size = 1 << 30
	if r := <-fs.Put(ctx, "/big", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: fmt.Sprint(size)}, 0, nil); r.Err != nil {
		t.Fatal(r.Err)
	}
	c := dial(t, serve(t, fs))
	tr := c.Tree("")
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var got int64
	items := tr.Get(gctx, "/big", 0, -1)
	for it := range items {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
		got += int64(len(it.Data))
		if got >= 8<<20 {
			break
		}
	}
	// The transfer is in full flow; a stat must not wait for it.
	statc := tr.Stat(ctx, "/big")
	for {
		select {
		case r := <-statc:
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if got > size/2 {
				t.Fatalf("stat answered only after %d of %d bytes", got, size)
			}
			cancel()
			for range items {
			}
			return
		case it, ok := <-items:
			if !ok {
				t.Fatal("transfer ended before the stat was answered")
			}
			got += int64(len(it.Data))
		}
	}
}

// TestMalformedClientLeavesOthersServed sends garbage on one connection
// while another client works: the bad connection is told why (a goaway or
// an error reply with a parseable error of the expected kind) or, when it
// vanishes in the middle of a frame, closed; it never hangs the server,
// and the good client is served after each.
func TestMalformedClientLeavesOthersServed(t *testing.T) {
	fs := memfs.New()
	addr := serve(t, fs)
	good := dial(t, addr)
	ctx := context.Background()
	hello := func() []byte {
		return proto.AppendFrame(nil, proto.Header{Type: proto.FHello}, proto.AppendHello(nil, &proto.Hello{Version: 1}))
	}
	for _, tc := range []struct {
		name string
		junk []byte
		want zx.Kind // the kind of the error the server answers; 0: it just closes
	}{
		{"not zx", []byte("GET / HTTP/1.0\r\n\r\n"), zx.ErrProtocol},
		{"oversized frame after a valid hello", func() []byte {
			var h [proto.HeaderSize]byte
			proto.PutHeader(h[:], proto.Header{Type: proto.FReq, Stream: 1, Len: 1 << 30})
			return append(hello(), h[:]...)
		}(), zx.ErrTooBig},
		{"a request that does not decode", proto.AppendFrame(hello(), proto.Header{Type: proto.FReq, Stream: 1, Flags: proto.FlagEnd}, []byte{proto.OpStat, 200}), zx.ErrProtocol},
		{"a batch of entries, which a server does not take", func() []byte {
			b := proto.AppendFrame(nil, proto.Header{Type: proto.FHello}, proto.AppendHello(nil, &proto.Hello{Version: 1, Features: []string{proto.FeatureDirs}}))
			// A put that creates /f, so that it waits for its data (one
			// of an existing file, /f not being there, could answer "not
			// found" before the server has read the DIRS frame).
			b = proto.AppendFrame(b, proto.Header{Type: proto.FReq, Stream: 1}, proto.AppendRequest(nil, &proto.Request{Op: proto.OpPut, Path: "/f", Dir: zx.Dir{zx.AType: zx.TypeFile}}))
			return proto.AppendFrame(b, proto.Header{Type: proto.FDirs, Stream: 1}, []byte{3, 0})
		}(), zx.ErrProtocol},
		{"a compressed batch of entries (a bomb), which a server does not take", func() []byte {
			b := proto.AppendFrame(nil, proto.Header{Type: proto.FHello}, proto.AppendHello(nil, &proto.Hello{Version: 1, Features: []string{proto.FeatureDirs, proto.FeatureZstd}}))
			b = proto.AppendFrame(b, proto.Header{Type: proto.FReq, Stream: 1}, proto.AppendRequest(nil, &proto.Request{Op: proto.OpPut, Path: "/f", Dir: zx.Dir{zx.AType: zx.TypeFile}}))
			return proto.AppendFrame(b, proto.Header{Type: proto.FDirs, Flags: proto.FlagZstd, Stream: 1}, zstdBomb(t))
		}(), zx.ErrProtocol},
		{"a compressed bomb as a put's data", func() []byte {
			b := proto.AppendFrame(nil, proto.Header{Type: proto.FHello}, proto.AppendHello(nil, &proto.Hello{Version: 1, Features: []string{proto.FeatureDirs, proto.FeatureZstd}}))
			b = proto.AppendFrame(b, proto.Header{Type: proto.FReq, Stream: 1}, proto.AppendRequest(nil, &proto.Request{Op: proto.OpPut, Path: "/f", Dir: zx.Dir{zx.AType: zx.TypeFile}}))
			return proto.AppendFrame(b, proto.Header{Type: proto.FData, Flags: proto.FlagZstd, Stream: 1}, zstdBomb(t))
		}(), zx.ErrProtocol},
		{"compression flag on an entry (DIR)", proto.AppendFrame(hello(), proto.Header{Type: proto.FDir, Flags: proto.FlagZstd, Stream: 1}, []byte{0}), zx.ErrProtocol},
		{"truncated frame, then the client vanishes", func() []byte {
			f := proto.AppendFrame(nil, proto.Header{Type: proto.FReq, Stream: 1}, proto.AppendRequest(nil, &proto.Request{Op: proto.OpStat, Path: "/"}))
			return append(hello(), f[:len(f)-3]...)
		}(), 0},
	} {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(tc.junk); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.want == 0 {
			// The server waits for the rest of the frame; the end of
			// the client's side in the middle of it must end the
			// connection.
			nc.(*net.TCPConn).CloseWrite()
		}
		// The deadline only turns a server that hangs on us into a
		// failure.
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		var hdr [proto.HeaderSize]byte
		var got *zx.Error
		for {
			h, p, err := proto.ReadFrame(nc, hdr[:])
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("%s: the server neither answered nor closed the connection", tc.name)
			}
			if err != nil {
				break
			}
			if h.Type == proto.FGoaway || h.Type == proto.FErr {
				e, perr := proto.ParseError(p)
				if perr != nil {
					t.Fatalf("%s: bad error payload: %v", tc.name, perr)
				}
				got = e
				if h.Type == proto.FErr {
					break
				}
			}
		}
		nc.Close()
		switch {
		case tc.want == 0 && got != nil:
			t.Errorf("%s: the server answered %v", tc.name, got)
		case tc.want != 0 && got == nil:
			t.Errorf("%s: the server closed without saying why (want an error of kind %v)", tc.name, tc.want)
		case tc.want != 0 && got.Kind != tc.want:
			t.Errorf("%s: the server answered %v, want an error of kind %v", tc.name, got, tc.want)
		}
		if _, err := zx.Stat(ctx, good.Tree(""), "/"); err != nil {
			t.Fatalf("good client after %s: %v", tc.name, err)
		}
	}
}

// zstdBomb returns a zstd frame of 16 MiB of zeros: a few hundred bytes
// that a receiver must refuse to decompress (a frame holds 64 KiB).
func zstdBomb(t *testing.T) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(make([]byte, 16<<20), nil)
}

func TestUnknownTree(t *testing.T) {
	c := dial(t, serve(t, memfs.New()))
	ctx := context.Background()
	if _, err := c.Attach(ctx, "nosuch"); !errors.Is(err, zx.ErrNotExist) {
		t.Fatalf("attach to a missing tree = %v, want ErrNotExist", err)
	}
	if _, err := c.Attach(ctx, ""); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownDrains(t *testing.T) {
	fs := memfs.New()
	srv, err := server.New(map[string]zx.Tree{"main": fs}, "main", server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	c := dial(t, l.Addr().String())
	ctx := context.Background()
	pr, pw := io.Pipe()
	rc := c.Tree("").Put(ctx, "/f", zx.Dir{zx.AType: zx.TypeFile}, 0, pr)
	pw.Write([]byte("hello, "))
	// Wait until the server has taken the request (its request counts,
	// as its /Ctl shows them): the shutdown then finds it in flight.
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(srv.Status(ctx).Lines, func(l string) bool {
		return strings.HasPrefix(l, "requests ") && strings.Contains(l, " put 1 ")
	}) {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not take the put within 10s: %v", srv.Status(ctx).Lines)
		}
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var serr error
	go func() {
		defer wg.Done()
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		serr = srv.Shutdown(sctx)
	}()
	pw.Write([]byte("world"))
	pw.Close()
	r := <-rc
	if r.Err != nil {
		t.Fatalf("put in flight during shutdown: %v (kind %d)", r.Err, zx.KindOf(r.Err))
	}
	wg.Wait()
	if serr != nil {
		t.Fatalf("shutdown: %v", serr)
	}
	data, _ := zx.ReadFile(ctx, fs, "/f")
	if string(data) != "hello, world" {
		t.Fatalf("file holds %q", data)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("connection still up after shutdown")
	}
}

func TestParseLocation(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want client.Location
		bad  bool
	}{
		{in: "zx://host/a/b", want: client.Location{Addr: "host:5640", Path: "/a/b"}},
		{in: "zx://host:99/", want: client.Location{Addr: "host:99", Path: "/"}},
		{in: "zx://host", want: client.Location{Addr: "host:5640", Path: "/"}},
		{in: "zx://[::1]:7/x", want: client.Location{Addr: "[::1]:7", Path: "/x"}},
		{in: "zx://h/@home/u/x", want: client.Location{Addr: "h:5640", Tree: "home", Path: "/u/x"}},
		{in: "zx://h/@home", want: client.Location{Addr: "h:5640", Tree: "home", Path: "/"}},
		{in: "zx://h/a/../../etc", bad: true},
		{in: "http://h/a", bad: true},
		{in: "zx:///a", bad: true},
	} {
		got, err := client.ParseLocation(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%s: no error", tc.in)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// TestManyClients has 32 clients, each on its own connection, write and
// read back their own files and list the shared directory at once.
func TestManyClients(t *testing.T) {
	fs, err := lfs.New(t.TempDir(), lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	addr := serve(t, fs)
	ctx := context.Background()
	const nclients, nfiles = 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, nclients)
	for i := range nclients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.Dial(ctx, addr, client.Options{})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			tr := c.Tree("")
			var rcs []<-chan zx.Reply
			for j := range nfiles {
				data := bytes.Repeat([]byte(fmt.Sprintf("c%d f%d;", i, j)), 100*(j+1))
				rcs = append(rcs, tr.Put(ctx, fmt.Sprintf("/c%02d-f%02d", i, j), zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, bytes.NewReader(data)))
			}
			for _, rc := range rcs {
				if r := <-rc; r.Err != nil {
					errs <- r.Err
					return
				}
			}
			for j := range nfiles {
				want := bytes.Repeat([]byte(fmt.Sprintf("c%d f%d;", i, j)), 100*(j+1))
				got, err := zx.ReadFile(ctx, tr, fmt.Sprintf("/c%02d-f%02d", i, j))
				if err != nil || !bytes.Equal(got, want) {
					errs <- fmt.Errorf("client %d file %d: %d bytes, %v", i, j, len(got), err)
					return
				}
			}
			if _, err := zx.ReadDir(ctx, tr, "/"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ents, err := zx.ReadDir(ctx, fs, "/")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != nclients*nfiles {
		t.Fatalf("%d files on disk, want %d", len(ents), nclients*nfiles)
	}
}

// TestOversizedRequest: a request whose message does not fit in a frame
// (a Wstat or a Put with attributes beyond the frame limit) fails with a
// clear error of kind ErrTooBig before anything is sent, nothing changes
// on the server, and the connection goes on serving.
func TestOversizedRequest(t *testing.T) {
	fs := memfs.New()
	ctx := context.Background()
	if _, err := zx.WriteFile(ctx, fs, "/f", nil, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	c := dial(t, serve(t, fs))
	tr := c.Tree("")
	huge := zx.Dir{"user.big": strings.Repeat("x", proto.MaxPayload)}
	if _, err := zx.Wstat(ctx, tr, "/f", huge); !errors.Is(err, zx.ErrTooBig) || !strings.Contains(err.Error(), "too long") {
		t.Errorf("wstat with a %d-byte attribute: %v, want an error of kind ErrTooBig", proto.MaxPayload, err)
	}
	d := huge.Clone()
	d[zx.AType] = zx.TypeFile
	if r := <-tr.Put(ctx, "/g", d, 0, strings.NewReader("data")); !errors.Is(r.Err, zx.ErrTooBig) {
		t.Errorf("put with a %d-byte attribute: %v, want an error of kind ErrTooBig", proto.MaxPayload, r.Err)
	}
	if _, err := zx.Stat(ctx, fs, "/g"); !errors.Is(err, zx.ErrNotExist) {
		t.Errorf("the refused put made /g: %v", err)
	}
	if d, err := zx.Stat(ctx, fs, "/f"); err != nil || d["user.big"] != "" {
		t.Errorf("after the refused wstat /f is %v, %v", d, err)
	}
	if b, err := zx.ReadFile(ctx, tr, "/f"); err != nil || string(b) != "kept" {
		t.Fatalf("the connection after the oversized requests: %q, %v", b, err)
	}
}

// TestOversizedReply: an entry whose attributes do not fit in a frame
// (set on the tree directly; no client could send them) is answered with
// a clear error of kind ErrTooBig by every request that returns it, not
// left unanswered, and the connection goes on serving.
func TestOversizedReply(t *testing.T) {
	fs := memfs.New()
	ctx := context.Background()
	if _, err := zx.WriteFile(ctx, fs, "/f", nil, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := zx.Wstat(ctx, fs, "/f", zx.Dir{"user.big": strings.Repeat("x", proto.MaxPayload)}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, serve(t, fs))
	tr := c.Tree("")
	// The deadline only turns a request left unanswered into a failure.
	hang, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := zx.Stat(hang, tr, "/f"); !errors.Is(err, zx.ErrTooBig) {
		t.Errorf("stat of an entry too large for a frame: %v, want an error of kind ErrTooBig", err)
	}
	if _, err := zx.Wstat(hang, tr, "/f", zx.Dir{zx.AMode: "0600"}); !errors.Is(err, zx.ErrTooBig) {
		t.Errorf("wstat replying with an entry too large for a frame: %v, want an error of kind ErrTooBig", err)
	}
	if _, err := zx.ReadDir(hang, tr, "/"); !errors.Is(err, zx.ErrTooBig) {
		t.Errorf("readdir with an entry too large for a frame: %v, want an error of kind ErrTooBig", err)
	}
	if b, err := zx.ReadFile(hang, tr, "/f"); err != nil || string(b) != "kept" {
		t.Fatalf("read of the file after: %q, %v", b, err)
	}
}
