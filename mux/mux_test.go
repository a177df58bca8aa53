package mux

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/proto"
)

// request is a test request: the server sends n bytes in chunks of size c.
func request(n, c int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(n))
	return binary.LittleEndian.AppendUint64(b, uint64(c))
}

func sender(st *Stream) {
	req := st.Request()
	n := int(binary.LittleEndian.Uint64(req))
	c := int(binary.LittleEndian.Uint64(req[8:]))
	ctx := st.Context()
	for i := 0; i < n; i += c {
		m := min(c, n-i)
		b := make([]byte, m)
		for j := range b {
			b[j] = byte(i + j)
		}
		if err := st.Send(ctx, proto.FData, b, false); err != nil {
			return
		}
	}
	st.Send(ctx, proto.FData, nil, true)
}

func readAll(ctx context.Context, st *Stream) ([]byte, error) {
	var buf bytes.Buffer
	for {
		m, err := st.Recv(ctx)
		if err == io.EOF {
			return buf.Bytes(), nil
		}
		if err != nil {
			return buf.Bytes(), err
		}
		buf.Write(m.Data)
	}
}

func check(t *testing.T, b []byte, n int) {
	t.Helper()
	if len(b) != n {
		t.Fatalf("got %d bytes, want %d", len(b), n)
	}
	for i := range b {
		if b[i] != byte(i) {
			t.Fatalf("byte %d is %d, want %d", i, b[i], byte(i))
		}
	}
}

func TestManyStreams(t *testing.T) {
	cli, _ := pair(t, Config{}, sender)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		n := (i * 7919) % 300000
		st, err := cli.Open(ctx, request(n, 1000+i*37), 0)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := readAll(ctx, st)
			if err == nil && len(b) != n {
				err = fmt.Errorf("stream %d: got %d bytes, want %d", st.ID(), len(b), n)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := cli.Stats(); s.Streams != 200 || s.RoundTrips < 1 {
		t.Errorf("stats = %+v", s)
	}
}

func TestSlowReaderStallsOnlyItsStream(t *testing.T) {
	cli, _ := pair(t, Config{}, sender)
	ctx := context.Background()
	// Nobody reads this one: the server must stop at its window.
	stalled, err := cli.Open(ctx, request(64<<20, 64<<10), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		st, err := cli.Open(ctx, request(1<<20, 32<<10), 0)
		if err != nil {
			t.Fatal(err)
		}
		b, err := readAll(ctx, st)
		if err != nil {
			t.Fatalf("stream %d beside a stalled one: %v", i, err)
		}
		check(t, b, 1<<20)
	}
	stalled.rmu.Lock()
	held := stalled.rbytes
	stalled.rmu.Unlock()
	if held > proto.InitialStreamWindow {
		t.Fatalf("stalled stream holds %d bytes, more than its window", held)
	}
	// Reading it now gets all of it.
	b, err := readAll(ctx, stalled)
	if err != nil {
		t.Fatal(err)
	}
	check(t, b, 64<<20)
}

func TestCancelStopsServer(t *testing.T) {
	stopped := make(chan error, 1)
	cli, srv := pair(t, Config{}, func(st *Stream) {
		ctx := st.Context()
		for {
			if err := st.Send(ctx, proto.FData, make([]byte, 32<<10), false); err != nil {
				stopped <- err
				return
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	st, err := cli.Open(ctx, []byte("x"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := readAll(context.Background(), st); !errors.Is(err, zx.ErrCanceled) {
		t.Fatalf("after cancel, Recv = %v, want ErrCanceled", err)
	}
	select {
	case err := <-stopped:
		if err == nil {
			t.Fatal("server send did not fail")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server kept sending after cancel")
	}
	// The connection still works.
	if _, err := cli.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.mu.Lock()
	n := len(srv.streams)
	srv.mu.Unlock()
	if n != 0 {
		t.Errorf("server still has %d streams", n)
	}
}

func TestPutData(t *testing.T) {
	cli, _ := pair(t, Config{}, func(st *Stream) {
		ctx := st.Context()
		var n int
		for {
			m, err := st.Recv(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				return
			}
			n += len(m.Data)
		}
		st.Send(ctx, proto.FData, binary.LittleEndian.AppendUint64(nil, uint64(n)), true)
	})
	ctx := context.Background()
	st, err := cli.Open(ctx, []byte("put"), WithData)
	if err != nil {
		t.Fatal(err)
	}
	const total = 20 << 20
	for i := 0; i < total; i += 100 << 10 {
		if err := st.Send(ctx, proto.FData, make([]byte, min(100<<10, total-i)), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CloseSend(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := readAll(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint64(b); got != total {
		t.Fatalf("server got %d bytes, want %d", got, total)
	}
}

func TestRoundTripCount(t *testing.T) {
	// The server holds its replies until every pipelined request is open:
	// on a loaded machine the first reply could otherwise come back before
	// the last request is opened, and that request would rightly count as
	// a new round trip.
	opened := make(chan struct{})
	cli, _ := pair(t, Config{}, func(st *Stream) {
		<-opened
		sender(st)
	})
	ctx := context.Background()
	before := cli.Stats().RoundTrips
	// Pipelined: one round trip.
	var sts []*Stream
	for range 50 {
		st, err := cli.Open(ctx, request(10, 10), 0)
		if err != nil {
			t.Fatal(err)
		}
		sts = append(sts, st)
	}
	close(opened)
	for _, st := range sts {
		if _, err := readAll(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	// Sequential: one each.
	for range 5 {
		st, err := cli.Open(ctx, request(10, 10), 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if got := cli.Stats().RoundTrips - before; got != 6 {
		t.Fatalf("round trips = %d, want 6", got)
	}
}

func TestMalformedFrames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		kind  zx.Kind
	}{
		{"oversized", func() []byte {
			var b [proto.HeaderSize]byte
			proto.PutHeader(b[:], proto.Header{Type: proto.FData, Stream: 1, Len: proto.MaxPayload + 1})
			return b[:]
		}(), zx.ErrTooBig},
		{"unknown type", []byte{99, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, zx.ErrProtocol},
		{"reserved bits", []byte{proto.FData, 0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0}, zx.ErrProtocol},
		{"bad window", proto.AppendFrame(nil, proto.Header{Type: proto.FWindow, Stream: 1}, []byte{1}), zx.ErrProtocol},
		{"second hello", proto.AppendFrame(nil, proto.Header{Type: proto.FHello}, proto.AppendHello(nil, &proto.Hello{Version: 1})), zx.ErrProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if e := refused(t, Config{}, tc.frame); e.Kind != tc.kind {
				t.Fatalf("goaway %v (kind %d), want kind %d", e, e.Kind, tc.kind)
			}
		})
	}
}

// A request on stream 0 or on a stream in use is refused saying which.
func TestBadRequestStream(t *testing.T) {
	req := func(id uint32) []byte {
		return proto.AppendFrame(nil, proto.Header{Type: proto.FReq, Stream: id}, request(1, 1))
	}
	if e := refused(t, Config{}, req(0)); e.Kind != zx.ErrProtocol || !strings.Contains(e.Msg, "request on stream 0, which is the connection's") {
		t.Errorf("request on stream 0: goaway %q", e.Msg)
	}
	if e := refused(t, Config{}, append(req(1), req(1)...)); e.Kind != zx.ErrProtocol || !strings.Contains(e.Msg, "stream 1 opened twice") {
		t.Errorf("stream 1 twice: goaway %q", e.Msg)
	}
}

func TestNotAPeer(t *testing.T) {
	nc, _ := dial(t, Config{}, nil)
	nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	e := goaway(t, nc)
	if e.Kind != zx.ErrProtocol {
		t.Fatalf("goaway %v, want a protocol error", e)
	}
}

func TestDeadPeer(t *testing.T) {
	// The raw peer says hello and then nothing, not even to pings.
	_, srv := rawServer(t, Config{KeepAlive: 100 * time.Millisecond, Timeout: 300 * time.Millisecond})
	if err := ended(t, srv, 10*time.Second, "dead peer not detected"); !errors.Is(err, zx.ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
}

func TestConnectionLossEndsStreams(t *testing.T) {
	block := make(chan struct{})
	cli, srv := pair(t, Config{}, func(st *Stream) { <-block })
	defer close(block)
	st, err := cli.Open(context.Background(), []byte("x"), 0)
	if err != nil {
		t.Fatal(err)
	}
	srv.nc.Close()
	if _, err := st.Recv(context.Background()); !errors.Is(err, zx.ErrIO) {
		t.Fatalf("Recv after loss = %v, want ErrIO", err)
	}
}

func TestStreamLimit(t *testing.T) {
	block := make(chan struct{})
	cli, _ := pair(t, Config{MaxStreams: 64}, func(st *Stream) {
		<-block
		st.Send(st.Context(), proto.FData, nil, true)
	})
	ctx := context.Background()
	if _, err := cli.PeerHello(ctx); err != nil {
		t.Fatal(err)
	}
	var sts []*Stream
	for range 64 {
		st, err := cli.Open(ctx, []byte("x"), 0)
		if err != nil {
			t.Fatal(err)
		}
		sts = append(sts, st)
	}
	// The 65th waits for a slot rather than being refused.
	tctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := cli.Open(tctx, []byte("x"), 0); !errors.Is(err, zx.ErrTimeout) && !errors.Is(err, zx.ErrCanceled) {
		t.Fatalf("open beyond the limit = %v, want it to wait", err)
	}
	close(block)
	for _, st := range sts {
		if _, err := readAll(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	st, err := cli.Open(ctx, []byte("x"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(ctx, st); err != nil {
		t.Fatal(err)
	}
}
