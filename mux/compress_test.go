package mux

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/proto"
	"github.com/zxfs/zx/wan"
)

// textData returns n bytes of text-like data (words from a small
// vocabulary): zstd shrinks it about threefold.
func textData(n int, seed uint64) []byte {
	words := strings.Fields("func return if else for range var const type struct interface " +
		"err nil := = { } ( ) [ ] package import string int byte error context ctx t.Fatal")
	r := rand.New(rand.NewPCG(seed, 1))
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[r.IntN(len(words))])
		if r.IntN(8) == 0 {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
	}
	return b.Bytes()[:n]
}

func randomData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// sendAll returns a handler that sends data on every stream, in messages
// of 100,000 bytes (so frames are cut from messages).
func sendAll(data []byte) func(*Stream) {
	return func(st *Stream) {
		ctx := st.Context()
		for i := 0; i < len(data); i += 100_000 {
			if err := st.Send(ctx, proto.FData, data[i:min(i+100_000, len(data))], false); err != nil {
				return
			}
		}
		st.CloseSend(ctx)
	}
}

func fetch(t *testing.T, cli *Conn) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := cli.Open(ctx, []byte("get"), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readAll(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCompressText(t *testing.T) {
	data := textData(4<<20, 1)
	cli, srv := pairWith(t, Config{}, Config{Compression: CompressAlways}, nil, sendAll(data))
	if got := fetch(t, cli); !bytes.Equal(got, data) {
		t.Fatalf("received %d bytes that differ from the %d sent", len(got), len(data))
	}
	ss, cs := srv.Stats(), cli.Stats()
	t.Logf("sent %d bytes of text in %d bytes on the wire", len(data), cs.BytesIn)
	if ss.SavedOut < int64(len(data))/2 || ss.SavedOut != cs.SavedIn {
		t.Errorf("compression saved %d bytes out, %d in, of %d: want over half, equal", ss.SavedOut, cs.SavedIn, len(data))
	}
	if cs.BytesIn > int64(len(data))/2 {
		t.Errorf("%d bytes on the wire for %d of text", cs.BytesIn, len(data))
	}
}

// Random data is sent raw, and the sender soon stops trying.
func TestCompressRandomBacksOff(t *testing.T) {
	data := randomData(8<<20, 2) // 168 frames: messages of 100,000 bytes
	cli, srv := pairWith(t, Config{}, Config{Compression: CompressAlways}, nil, sendAll(data))
	if got := fetch(t, cli); !bytes.Equal(got, data) {
		t.Fatalf("received %d bytes that differ from the %d sent", len(got), len(data))
	}
	tries := srv.ztries.Load()
	t.Logf("%d compression attempts for 168 frames of random data", tries)
	if srv.Stats().SavedOut != 0 || cli.Stats().SavedIn != 0 {
		t.Errorf("random data was sent compressed: saved %d", srv.Stats().SavedOut)
	}
	// Attempts at frames 1, 4, 9, 18, 35, 68, 101, then every 33rd.
	if tries < 2 || tries > 10 {
		t.Errorf("%d compression attempts for 168 incompressible frames; want a few (backing off)", tries)
	}
}

// A stream that turns from random to text resumes compressing.
func TestCompressMixed(t *testing.T) {
	data := append(randomData(2<<20, 3), textData(6<<20, 4)...)
	cli, srv := pairWith(t, Config{}, Config{Compression: CompressAlways}, nil, sendAll(data))
	if got := fetch(t, cli); !bytes.Equal(got, data) {
		t.Fatalf("received %d bytes that differ from the %d sent", len(got), len(data))
	}
	if saved := srv.Stats().SavedOut; saved < 3<<20 {
		t.Errorf("compression saved only %d bytes of the 6 MiB of text after random data", saved)
	}
}

// A peer that does not offer zstd gets raw frames.
func TestCompressPeerWithout(t *testing.T) {
	data := textData(1<<20, 5)
	cli, srv := pairWith(t, Config{Compression: CompressOff}, Config{Compression: CompressAlways}, nil, sendAll(data))
	if got := fetch(t, cli); !bytes.Equal(got, data) {
		t.Fatalf("received %d bytes that differ from the %d sent", len(got), len(data))
	}
	if n := srv.ztries.Load(); n != 0 {
		t.Errorf("%d compression attempts toward a peer without zstd", n)
	}
	if cs := cli.Stats(); cs.BytesIn < int64(len(data)) {
		t.Errorf("%d bytes on the wire for %d sent raw", cs.BytesIn, len(data))
	}
}

// Over a slow link, the default (automatic) policy engages by itself, for
// uploads as well as downloads. How much it compresses depends on timing
// (the first tens of milliseconds of each transfer go raw while the link
// is measured, and a CPU-starved sender backs off), so this asserts only
// that it engaged; TestWorth checks the decisions, and
// docs/bench/compression.md the gains.
func TestCompressAutoSlowLink(t *testing.T) {
	data := textData(3<<20, 6)
	cli, srv := pairWith(t, Config{}, Config{}, &wan.Config{RTT: 10 * time.Millisecond, Rate: 10e6 / 8}, func(st *Stream) {
		ctx := st.Context()
		b, err := readAll(ctx, st)
		if err != nil {
			st.Cancel(err)
			return
		}
		sendAll(b)(st)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := cli.Open(ctx, []byte("echo"), WithData)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := 0; i < len(data); i += 100_000 {
			if st.Send(ctx, proto.FData, data[i:min(i+100_000, len(data))], false) != nil {
				return
			}
		}
		st.CloseSend(ctx)
	}()
	got, err := readAll(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("echoed %d bytes that differ from the %d sent", len(got), len(data))
	}
	cs, ss := cli.Stats(), srv.Stats()
	t.Logf("at 10 Mbit/s, compression saved %d bytes up and %d down of %d", cs.SavedOut, ss.SavedOut, len(data))
	if cs.SavedOut == 0 || ss.SavedOut == 0 || cs.SavedOut != ss.SavedIn || ss.SavedOut != cs.SavedIn {
		t.Errorf("compression did not engage both ways, or the two sides count differently: saved up %d/%d, down %d/%d",
			cs.SavedOut, ss.SavedIn, ss.SavedOut, cs.SavedIn)
	}
}

// zstdFrame compresses b as one zstd frame, outside the codec's limits.
func zstdFrame(t *testing.T, b []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}

// Hostile compressed frames end the connection with a clear protocol
// error, and the receiver never holds more than a frame's worth.
func TestCompressHostile(t *testing.T) {
	bomb := zstdFrame(t, make([]byte, 16<<20)) // 16 MiB of zeros in a few hundred bytes
	if len(bomb) > proto.MaxPayload {
		t.Fatalf("bomb of %d bytes", len(bomb))
	}
	just := zstdFrame(t, make([]byte, proto.MaxPayload+1))
	for _, tc := range []struct {
		name    string
		cfg     Config
		payload []byte
		msg     string
	}{
		{"bomb", Config{}, bomb, "exceeds the limit of 65536 bytes"},
		{"one byte over", Config{}, just, "exceeds the limit of 65536 bytes"},
		{"garbage", Config{}, []byte("this is not zstd at all"), "bad compressed payload"},
		{"empty", Config{}, nil, "empty compressed payload"},
		{"not offered", Config{Compression: CompressOff}, zstdFrame(t, []byte("hello")), "did not offer zstd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b []byte
			b = proto.AppendFrame(b, proto.Header{Type: proto.FReq, Stream: 1}, []byte("put"))
			b = proto.AppendFrame(b, proto.Header{Type: proto.FData, Flags: proto.FlagZstd, Stream: 1}, tc.payload)
			if e := refused(t, tc.cfg, b); e.Kind != zx.ErrProtocol || !strings.Contains(e.Msg, tc.msg) {
				t.Fatalf("goaway %v (kind %d), want a protocol error saying %q", e, e.Kind, tc.msg)
			}
		})
	}
}

func TestWorth(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name           string
		mode           Compression
		peer           bool
		n              int
		measured       bool
		rate, spare    float64
		minRTT, recent time.Duration
		want           bool
	}{
		{"slow link with a queue", CompressAuto, true, 64 << 10, true, 1.2e6, 0.9, 20 * ms, 200 * ms, true},
		{"peer without zstd", CompressAuto, false, 64 << 10, true, 1.2e6, 0.9, 20 * ms, 200 * ms, false},
		{"off", CompressOff, true, 64 << 10, true, 1.2e6, 0.9, 20 * ms, 200 * ms, false},
		{"small frame", CompressAuto, true, 500, true, 1.2e6, 0.9, 20 * ms, 200 * ms, false},
		{"not measured yet", CompressAuto, true, 64 << 10, false, 0, 0, 20 * ms, 200 * ms, false},
		{"loopback", CompressAuto, true, 64 << 10, true, 1.2e6, 0.9, ms / 10, 200 * ms, false},
		{"no queue: windows limit a long fat pipe", CompressAuto, true, 64 << 10, true, 12e6, 0.9, 20 * ms, 25 * ms, false},
		{"fast link", CompressAuto, true, 64 << 10, true, 60e6, 0.9, 20 * ms, 200 * ms, false},
		{"sender busy: no time to spare", CompressAuto, true, 64 << 10, true, 12e6, 0.05, 20 * ms, 200 * ms, false},
		{"always, even on loopback", CompressAlways, true, 64 << 10, false, 0, 0, ms / 10, ms / 10, true},
	} {
		z := compressor{mode: tc.mode, peerOK: tc.peer, measured: tc.measured, rate: tc.rate, spare: tc.spare, speed: 200e6}
		if got := z.worth(tc.n, false, tc.minRTT, tc.recent, 8); got != tc.want {
			t.Errorf("%s: worth = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Entry batches are compressed on any link that is not local, measured or
// not, queue or not: they compress well and cheaply (see the policy).
func TestWorthDirs(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name    string
		mode    Compression
		peer    bool
		n       int
		minRTT  time.Duration
		samples int
		want    bool
	}{
		{"WAN, from its first round trip", CompressAuto, true, 16 << 10, 20 * ms, 1, true},
		{"a LAN of 1 ms", CompressAuto, true, 16 << 10, ms, 3, true},
		{"2 ms, one sample: perhaps a loaded loopback", CompressAuto, true, 16 << 10, 2 * ms, 1, false},
		{"7 ms, one sample: a loopback's first ping can take that", CompressAuto, true, 16 << 10, 7 * ms, 1, false},
		{"10 ms, one sample", CompressAuto, true, 16 << 10, 10 * ms, 1, true},
		{"2 ms, two samples", CompressAuto, true, 16 << 10, 2 * ms, 2, false},
		{"2 ms, three samples", CompressAuto, true, 16 << 10, 2 * ms, 3, true},
		{"loopback", CompressAuto, true, 16 << 10, ms / 10, 3, false},
		{"RTT not known yet", CompressAuto, true, 16 << 10, 0, 0, false},
		{"peer without zstd", CompressAuto, false, 16 << 10, 20 * ms, 3, false},
		{"off", CompressOff, true, 16 << 10, 20 * ms, 3, false},
		{"small batch", CompressAuto, true, 1000, 20 * ms, 3, false},
		{"always, even on loopback", CompressAlways, true, 16 << 10, ms / 10, 3, true},
	} {
		z := compressor{mode: tc.mode, peerOK: tc.peer}
		if got := z.worth(tc.n, true, tc.minRTT, tc.minRTT, tc.samples); got != tc.want {
			t.Errorf("%s: worth = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	var b backoff
	var tried []int
	for i := 1; i <= 200; i++ {
		if b.try() {
			tried = append(tried, i)
			b.result(false)
		}
	}
	want := []int{1, 4, 9, 18, 35, 68, 101, 134, 167, 200}
	if len(tried) != len(want) {
		t.Fatalf("tried frames %v, want %v", tried, want)
	}
	for i := range want {
		if tried[i] != want[i] {
			t.Fatalf("tried frames %v, want %v", tried, want)
		}
	}
	for !b.try() {
	}
	b.result(true)
	if !b.try() || b.fails != 0 {
		t.Fatal("a success does not reset the backoff")
	}
}
