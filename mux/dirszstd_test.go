package mux

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/proto"
	"github.com/zxfs/zx/wan"
)

// genEntries returns n entries like those of a find over a source tree:
// every system attribute, paths in a few directories.
func genEntries(n int) []zx.Dir {
	ds := make([]zx.Dir, n)
	for i := range ds {
		name := fmt.Sprintf("file%05d.go", i)
		ds[i] = zx.Dir{
			"name": name, "path": fmt.Sprintf("/src/pkg%03d/%s", i/100, name),
			"type": "-", "size": fmt.Sprint(1000 + i*37%50000), "mode": "0644",
			"mtime": fmt.Sprint(1763986321123456789 + int64(i)*7919), "atime": "1763986321123456789", "ctime": "1763986321123456789",
			"uid": "1000", "gid": "1000", "ino": fmt.Sprint(4000000 + i), "nlink": "1",
		}
	}
	return ds
}

// batches cuts ds into DIRS payloads of at most 16 KiB, as the server does.
func batches(ds []zx.Dir) [][]byte {
	var ps [][]byte
	b := proto.DirBatch{Max: 16 << 10}
	for _, d := range ds {
		if !b.Add(d) {
			ps = append(ps, b.Payload())
			b.Add(d)
		}
	}
	return append(ps, b.Payload())
}

// sendBatches returns a handler that sends ps as DIRS messages, then the
// end; it first measures the round trip pings times: the policy needs 3
// samples to call a link under 10 ms far, and on a loaded machine the
// least of a few on loopback may take a millisecond.
func sendBatches(ps [][]byte, pings int) func(*Stream) {
	return func(st *Stream) {
		ctx := st.Context()
		for range pings {
			if _, err := st.Conn().Ping(ctx); err != nil {
				return
			}
		}
		for _, p := range ps {
			if err := st.Send(ctx, proto.FDirs, p, false); err != nil {
				return
			}
		}
		st.CloseSend(ctx)
	}
}

// recvEntries reads a reply of DIRS messages and returns its entries.
func recvEntries(t *testing.T, cli *Conn) []zx.Dir {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := cli.Open(ctx, []byte("find"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var ds []zx.Dir
	for {
		m, err := st.Recv(ctx)
		if err == io.EOF {
			return ds
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Type != proto.FDirs {
			continue
		}
		b, err := proto.ParseDirs(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, b...)
	}
}

func sameEntries(t *testing.T, got, want []zx.Dir) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d", len(got), len(want))
	}
	for i := range want {
		if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
			t.Fatalf("entry %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// Entry batches are compressed like file data, and arrive intact: the
// same entries, with the bytes saved counted alike on both sides.
func TestCompressDirs(t *testing.T) {
	ds := genEntries(3000)
	ps := batches(ds)
	var raw int64
	for _, p := range ps {
		raw += int64(len(p))
	}
	cli, srv := pair2(t, Config{Features: []string{proto.FeatureDirs}}, Config{Compression: CompressAlways}, sendBatches(ps, 0))
	sameEntries(t, recvEntries(t, cli), ds)
	ss, cs := srv.Stats(), cli.Stats()
	t.Logf("%d entries in %d batches: %d bytes raw, %d on the wire", len(ds), len(ps), raw, cs.BytesIn)
	if ss.SavedOut == 0 || ss.SavedOut != cs.SavedIn {
		t.Errorf("saved %d bytes out, %d in: want equal and more than 0", ss.SavedOut, cs.SavedIn)
	}
	// Every batch but the last is over 1 KiB, and such entries compress
	// to well under a third (measured: a seventh).
	if cs.BytesIn > raw/3 {
		t.Errorf("%d bytes on the wire for %d bytes of entries", cs.BytesIn, raw)
	}
}

// By default (CompressAuto) batches are compressed on a link that is not
// local once its round trip is known, and never on loopback, where they
// would only cost CPU.
func TestCompressDirsAuto(t *testing.T) {
	ds := genEntries(2000)
	ps := batches(ds)
	ccfg := Config{Features: []string{proto.FeatureDirs}}
	t.Run("loopback", func(t *testing.T) {
		cli, srv := pair2(t, ccfg, Config{}, sendBatches(ps, 10))
		sameEntries(t, recvEntries(t, cli), ds)
		if s := srv.Stats().SavedOut; s != 0 || srv.ztries.Load() != 0 {
			t.Errorf("on loopback %d compression attempts saved %d bytes: want none", srv.ztries.Load(), s)
		}
	})
	t.Run("wan", func(t *testing.T) {
		cli, srv := pairWith(t, ccfg, Config{}, &wan.Config{RTT: 4 * time.Millisecond}, sendBatches(ps, 10))
		sameEntries(t, recvEntries(t, cli), ds)
		if n, tries := int64(len(ps)), srv.ztries.Load(); tries != n-1 && tries != n {
			t.Errorf("%d compression attempts for %d batches, want one per batch over 1 KiB", tries, n)
		}
		if s := srv.Stats().SavedOut; s == 0 || s != cli.Stats().SavedIn {
			t.Errorf("over a 4 ms link, saved %d bytes out, %d in", s, cli.Stats().SavedIn)
		}
	})
	t.Run("peer without zstd", func(t *testing.T) {
		cli, srv := pairWith(t, Config{Features: []string{proto.FeatureDirs}, Compression: CompressOff}, Config{Compression: CompressAlways}, nil, sendBatches(ps, 10))
		sameEntries(t, recvEntries(t, cli), ds)
		if srv.ztries.Load() != 0 {
			t.Errorf("%d compression attempts toward a peer without zstd", srv.ztries.Load())
		}
	})
}

// rawClient returns a Client with cfg and the raw socket of its peer,
// which has sent its hello (offering zstd): the test plays the server
// with frames on it.
func rawClient(t *testing.T, cfg Config) (net.Conn, *Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ac := make(chan net.Conn, 1)
	go func() {
		nc, _ := l.Accept()
		ac <- nc
	}()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cli := Client(nc, cfg)
	raw := <-ac
	if raw == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { raw.Close(); cli.Close() })
	hello := proto.AppendFrame(nil, proto.Header{Type: proto.FHello}, proto.AppendHello(nil, &proto.Hello{Version: 1, Features: []string{proto.FeatureZstd}}))
	if _, err := raw.Write(hello); err != nil {
		t.Fatal(err)
	}
	return raw, cli
}

// Hostile compressed batches from a server end the client's connection
// with a protocol error, which its requests get and the server is told;
// the client never holds more than a frame's worth of one. A stream's
// credit counts the decompressed bytes: compressed batches beyond the
// window are an overrun.
func TestCompressDirsHostile(t *testing.T) {
	bomb := zstdFrame(t, make([]byte, 16<<20))
	big := batches(genEntries(2000)) // 16 KiB batches
	var overrun []byte
	for _, p := range big[:proto.InitialStreamWindow/(16<<10)+2] {
		z := zstdFrame(t, p)
		overrun = proto.AppendFrame(overrun, proto.Header{Type: proto.FDirs, Flags: proto.FlagZstd, Stream: 1}, z)
	}
	if len(overrun) > proto.InitialStreamWindow/2 {
		t.Fatalf("%d compressed bytes for an overrun: too many to prove the window counts decompressed bytes", len(overrun))
	}
	dirsFrame := func(p []byte) []byte {
		return proto.AppendFrame(nil, proto.Header{Type: proto.FDirs, Flags: proto.FlagZstd, Stream: 1}, p)
	}
	for _, tc := range []struct {
		name   string
		cfg    Config
		frames []byte
		msg    string
	}{
		{"bomb", Config{}, dirsFrame(bomb), "exceeds the limit of 65536 bytes"},
		{"one byte over", Config{}, dirsFrame(zstdFrame(t, make([]byte, proto.MaxPayload+1))), "exceeds the limit of 65536 bytes"},
		{"garbage", Config{}, dirsFrame([]byte("this is not zstd at all")), "bad compressed payload"},
		{"empty", Config{}, dirsFrame(nil), "empty compressed payload"},
		{"zstd not offered", Config{Compression: CompressOff}, dirsFrame(zstdFrame(t, big[0])), "did not offer zstd"},
		{"beyond the stream's window, decompressed", Config{}, overrun, "overran a stream's window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			cfg.Features = []string{proto.FeatureDirs}
			raw, cli := rawClient(t, cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			st, err := cli.Open(ctx, []byte("find"), 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Write(tc.frames); err != nil {
				t.Fatal(err)
			}
			if e := goaway(t, raw); e.Kind != zx.ErrProtocol || !strings.Contains(e.Msg, tc.msg) {
				t.Fatalf("goaway %v (kind %d), want a protocol error saying %q", e, e.Kind, tc.msg)
			}
			err = ended(t, cli, 5*time.Second, "client kept the connection")
			if zx.KindOf(err) != zx.ErrProtocol {
				t.Fatalf("connection ended with %v, want a protocol error", err)
			}
			for {
				_, err := st.Recv(ctx)
				if err == nil {
					continue // batches delivered before the bad one
				}
				if zx.KindOf(err) != zx.ErrProtocol {
					t.Fatalf("the request got %v, want the protocol error", err)
				}
				break
			}
		})
	}
}
