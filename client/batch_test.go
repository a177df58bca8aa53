package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/proto"
)

// scripted is a tree whose Find sends, in order, what its test puts on
// items, and ends when the test closes it. Everything else is memfs's.
type scripted struct {
	*memfs.FS
	items chan zx.Item
}

func (s *scripted) Find(ctx context.Context, path string, o zx.FindOpts) <-chan zx.Item {
	c := make(chan zx.Item)
	go func() {
		defer close(c)
		for it := range s.items {
			select {
			case c <- it:
			case <-ctx.Done():
				return
			}
		}
	}()
	return c
}

func (s *scripted) FindGet(ctx context.Context, path string, o zx.FindOpts) <-chan zx.Item {
	return s.Find(ctx, path, o)
}

func entry(i int) zx.Dir {
	return zx.Dir{zx.APath: fmt.Sprintf("/f%04d", i), zx.AName: fmt.Sprintf("f%04d", i), zx.AType: "-", zx.ASize: "0"}
}

// A batch never holds an entry waiting for more: each entry a find has
// ready reaches the client while the walk is still going, and stalled.
func TestBatchesDoNotHoldEntries(t *testing.T) {
	tr := &scripted{FS: memfs.New(), items: make(chan zx.Item)}
	c := dial(t, serve(t, tr))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ic := c.Tree("").Find(ctx, "/", zx.FindOpts{})
	n := 0
	for round := range 20 {
		// Up to 50 entries at once, then the walk stalls until the
		// client has had every one of them.
		k := round*7%50 + 1
		for range k {
			tr.items <- zx.Item{Dir: entry(n)}
			n++
		}
		for i := n - k; i < n; i++ {
			select {
			case it := <-ic:
				if it.Err != nil || it.Dir.Path() != entry(i).Path() {
					t.Fatalf("entry %d: %v %v", i, it.Dir, it.Err)
				}
			case <-ctx.Done():
				t.Fatalf("entry %d of a stalled walk never arrived", i)
			}
		}
	}
	close(tr.items)
	if it, ok := <-ic; ok {
		t.Fatalf("after the end: %v %v", it.Dir, it.Err)
	}
}

// Entries, per-entry errors, data and the final error keep their order
// and their meaning when entries travel in batches.
func TestBatchesKeepOrderAndErrors(t *testing.T) {
	var script []zx.Item
	n := 0
	add := func(k int) {
		for range k {
			script = append(script, zx.Item{Dir: entry(n)})
			n++
		}
	}
	add(300)
	script = append(script, zx.Item{Dir: zx.Dir{zx.APath: "/locked", zx.AName: "locked"}, Err: zx.E(zx.ErrPermission, "find", "/locked", "permission denied")})
	add(1)
	script = append(script, zx.Item{Data: []byte("some data")})
	add(1000)
	script = append(script, zx.Item{Dir: zx.Dir{zx.APath: "/f9999", zx.AName: "f9999", "big": strings.Repeat("x", 40<<10)}})
	add(5)
	script = append(script, zx.Item{Err: zx.E(zx.ErrIO, "find", "/", "disk on fire")})
	tr := &scripted{FS: memfs.New(), items: make(chan zx.Item, len(script))}
	for _, it := range script {
		tr.items <- it
	}
	close(tr.items)
	c := dial(t, serve(t, tr))
	i := 0
	for it := range c.Tree("").FindGet(context.Background(), "/", zx.FindOpts{}) {
		if i >= len(script) {
			t.Fatalf("item %d beyond the %d sent: %v %v", i, len(script), it.Dir, it.Err)
		}
		want := script[i]
		switch {
		case want.Err != nil && want.Dir != nil:
			if !errors.Is(it.Err, zx.ErrPermission) || it.Dir.Path() != want.Dir.Path() {
				t.Fatalf("item %d: %v %v, want the error about %s", i, it.Dir, it.Err, want.Dir.Path())
			}
		case want.Err != nil:
			if !errors.Is(it.Err, zx.ErrIO) || !strings.Contains(it.Err.Error(), "disk on fire") || it.Dir != nil {
				t.Fatalf("item %d: %v %v, want the final error", i, it.Dir, it.Err)
			}
		case want.Data != nil:
			if string(it.Data) != string(want.Data) || it.Err != nil {
				t.Fatalf("item %d: %q %v, want data", i, it.Data, it.Err)
			}
		default:
			if it.Err != nil || it.Dir.Path() != want.Dir.Path() || len(it.Dir) != len(want.Dir) || it.Dir["big"] != want.Dir["big"] {
				t.Fatalf("item %d: %v %v, want %s", i, it.Dir.Path(), it.Err, want.Dir.Path())
			}
		}
		i++
	}
	if i != len(script) {
		t.Fatalf("%d items, want %d", i, len(script))
	}
}

// Clients that do not offer the dirs feature (those before it) get one DIR
// message per entry; those that do get the same entries in fewer, batched
// messages. Both for a find and for a directory's listing.
func TestBatchesOnlyForClientsThatTakeThem(t *testing.T) {
	ctx := context.Background()
	tr := memfs.New()
	if _, err := zx.Mkdir(ctx, tr, "/d", 0755); err != nil {
		t.Fatal(err)
	}
	const nfiles = 2000
	for i := range nfiles {
		if _, err := zx.WriteFile(ctx, tr, fmt.Sprintf("/d/f%04d", i), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	addr := serve(t, tr)
	for _, req := range []*proto.Request{
		{Op: proto.OpFind, Path: "/"},
		{Op: proto.OpFindGet, Path: "/"},
		{Op: proto.OpGet, Path: "/d", Count: -1},
	} {
		var lists [2][]string
		for i, features := range [][]string{nil, {proto.FeatureDirs}} {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			mc := mux.Client(nc, mux.Config{Features: features})
			st, err := mc.Open(ctx, proto.AppendRequest(nil, req), 0)
			if err != nil {
				t.Fatal(err)
			}
			msgs := 0
			for {
				m, err := st.Recv(ctx)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				var ds []zx.Dir
				switch m.Type {
				case proto.FDir:
					d, err := proto.ParseDir(m.Data)
					if err != nil {
						t.Fatal(err)
					}
					ds = []zx.Dir{d}
				case proto.FDirs:
					if features == nil {
						t.Fatalf("%s: a DIRS message to a client that did not offer dirs", proto.OpName(req.Op))
					}
					if ds, err = proto.ParseDirs(m.Data); err != nil {
						t.Fatal(err)
					}
				case proto.FData:
					if len(m.Data) > 0 {
						t.Fatalf("data for an empty file")
					}
					continue
				default:
					t.Fatalf("message type %d", m.Type)
				}
				msgs++
				for _, d := range ds {
					lists[i] = append(lists[i], d.Path())
				}
			}
			mc.Close()
			want := nfiles + 2 // / and /d
			if req.Op == proto.OpGet {
				want = nfiles
			}
			if len(lists[i]) != want {
				t.Fatalf("%s with features %v: %d entries, want %d", proto.OpName(req.Op), features, len(lists[i]), want)
			}
			if features == nil && msgs != want {
				t.Fatalf("%s to an old client: %d messages for %d entries", proto.OpName(req.Op), msgs, want)
			}
			if features != nil && msgs > want/20 {
				t.Errorf("%s: %d messages for %d entries: hardly batched", proto.OpName(req.Op), msgs, want)
			}
			t.Logf("%s with features %v: %d entries in %d messages", proto.OpName(req.Op), features, len(lists[i]), msgs)
		}
		if strings.Join(lists[0], "\n") != strings.Join(lists[1], "\n") {
			t.Fatalf("%s: batched entries differ from unbatched ones", proto.OpName(req.Op))
		}
	}
}

// fakeServer accepts one connection on a loopback listener, with cfg, and
// answers each request with what reply says; it returns the address.
func fakeServer(t *testing.T, cfg mux.Config, reply func(req *proto.Request, st *mux.Stream)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var mc *mux.Conn
	go func() {
		defer close(done)
		nc, err := l.Accept()
		if err != nil {
			return
		}
		mc = mux.Server(nc, cfg)
		for {
			st, err := mc.Accept()
			if err != nil {
				return
			}
			req, err := proto.ParseRequest(st.Request())
			if err != nil {
				st.Send(st.Context(), proto.FErr, proto.AppendError(nil, err), true)
				continue
			}
			go reply(req, st)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		if mc != nil {
			mc.Close()
		}
		<-done
	})
	return l.Addr().String()
}

// A malformed batch from a server fails the request that got it with an
// error that says what is wrong, and the connection goes on serving the
// others; so does one that came compressed (the server compressing every
// batch it can: those over 1 KiB), which decompressed well and then did
// not parse.
func TestMalformedBatchFromServer(t *testing.T) {
	t.Run("raw", func(t *testing.T) { malformedBatches(t, mux.CompressAuto) }) // loopback: raw
	t.Run("compressed", func(t *testing.T) { malformedBatches(t, mux.CompressAlways) })
}

func malformedBatches(t *testing.T, mode mux.Compression) {
	// Entries large enough for their batches to be compressed.
	pad := strings.Repeat("padding ", 100)
	e := func(d zx.Dir) []byte { d["pad"] = pad; return proto.AppendDir(nil, d) }
	uv := func(n uint64) []byte { return fmt.Appendf(nil, "%c", rune(n)) } // n < 128
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	bad := map[string][]byte{
		"/count-high": cat(uv(3), e(zx.Dir{"path": "/a"}), e(zx.Dir{"path": "/b"})),
		"/count-low":  cat(uv(1), e(zx.Dir{"path": "/a"}), e(zx.Dir{"path": "/b"})),
		"/truncated":  cat(uv(2), e(zx.Dir{"path": "/a"}), uv(1), uv(4), []byte("pa")),
		"/empty":      uv(0),
	}
	good := proto.AppendDirs(nil, []zx.Dir{{"path": "/a", "pad": pad}, {"path": "/b", "pad": pad}})
	addr := fakeServer(t, mux.Config{Compression: mode}, func(req *proto.Request, st *mux.Stream) {
		ctx := st.Context()
		switch req.Op {
		case proto.OpStat:
			st.Send(ctx, proto.FDir, proto.AppendDir(nil, zx.Dir{"path": req.Path, "name": "x", "type": "d"}), true)
		case proto.OpFind:
			st.Send(ctx, proto.FDirs, good, false)
			if b, ok := bad[req.Path]; ok {
				st.Send(ctx, proto.FDirs, b, false)
			}
			st.Send(ctx, proto.FDirs, good, false)
			st.Send(ctx, proto.FData, nil, true)
		}
	})
	c := dial(t, addr)
	ctx := context.Background()
	for path := range bad {
		var got []string
		var ferr error
		for it := range c.Tree("").Find(ctx, path, zx.FindOpts{}) {
			if it.Err != nil {
				ferr = it.Err
				continue
			}
			got = append(got, it.Dir.Path())
		}
		if !errors.Is(ferr, zx.ErrProtocol) || !strings.Contains(ferr.Error(), "batch") {
			t.Errorf("%s: error %v, want a protocol error about the batch", path, ferr)
		}
		if strings.Join(got, " ") != "/a /b" {
			t.Errorf("%s: entries %v, want those of the good batch before it only", path, got)
		}
		t.Logf("%s: %v", path, ferr)
		if _, err := zx.Stat(ctx, c.Tree(""), "/ok"); err != nil {
			t.Fatalf("after a malformed batch: %v", err)
		}
	}
	// And a well-formed find on the same connection still works.
	n := 0
	for it := range c.Tree("").Find(ctx, "/fine", zx.FindOpts{}) {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
		n++
	}
	if n != 4 {
		t.Fatalf("%d entries, want 4", n)
	}
	if saved := c.Stats().SavedIn; (saved > 0) != (mode == mux.CompressAlways) {
		t.Fatalf("compression saved %d bytes, with mode %d", saved, mode)
	}
}
