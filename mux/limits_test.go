package mux

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/proto"
)

// putStream opens a stream and sends n bytes of data on it, without
// ending it.
func putStream(t *testing.T, cli *Conn, n int) *Stream {
	t.Helper()
	ctx := context.Background()
	st, err := cli.Open(ctx, []byte("put"), WithData)
	if err != nil {
		t.Fatal(err)
	}
	// A stream the server refuses ends early: its reply says why.
	if err := st.Send(ctx, proto.FData, make([]byte, n), false); err != nil && err != ErrPeerEnded {
		t.Fatal(err)
	}
	return st
}

// finalErr reads st to its end and returns the error it ended with.
func finalErr(t *testing.T, st *Stream) *zx.Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		m, err := st.Recv(ctx)
		if err == io.EOF {
			t.Fatal("stream ended without an error")
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if m.Type == proto.FErr && m.End {
			e, err := proto.ParseError(m.Data)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
	}
}

func TestConnBufferLimit(t *testing.T) {
	// The server's application never reads put data: the connection
	// buffers up to MaxBuffer, and the stream that would exceed it fails
	// with a limit error the client sees; the others are untouched.
	block := make(chan struct{})
	defer close(block)
	const limit = 1 << 20
	cli, srv := pair(t, Config{MaxBuffer: limit}, func(st *Stream) { <-block })
	var sts []*Stream
	for i := range 4 {
		sts = append(sts, putStream(t, cli, 250<<10))
		// One at a time, so that the fifth is the one over the limit.
		deadline := time.Now().Add(5 * time.Second)
		for in, _ := srv.Buffered(); in < int64(i+1)*250<<10 && time.Now().Before(deadline); in, _ = srv.Buffered() {
			time.Sleep(time.Millisecond)
		}
	}
	over := putStream(t, cli, 250<<10)
	e := finalErr(t, over)
	if e.Kind != zx.ErrLimit || !strings.Contains(e.Msg, "connection buffer full") {
		t.Fatalf("stream over the limit ended with %v (kind %d), want a connection-buffer limit", e, e.Kind)
	}
	if in, _ := srv.Buffered(); in > limit || in < 4*250<<10 {
		t.Errorf("server buffers %d bytes in, want the 4 streams' %d, at most %d", in, 4*250<<10, limit)
	}
	for _, st := range sts {
		if st.GotEnd() {
			t.Error("a stream within the limit was ended")
		}
	}
	if srv.Err() != nil || cli.Err() != nil {
		t.Errorf("connection ended: %v %v", srv.Err(), cli.Err())
	}
}

func TestBudgetShared(t *testing.T) {
	// Two connections share a 1 MiB budget: together they hold no more.
	block := make(chan struct{})
	defer close(block)
	b := NewBudget(1 << 20)
	cfg := Config{Budget: b}
	cli1, _ := pair2(t, Config{}, cfg, func(st *Stream) { <-block })
	cli2, _ := pair2(t, Config{}, cfg, func(st *Stream) { <-block })
	for range 2 {
		putStream(t, cli1, 250<<10)
		putStream(t, cli2, 250<<10)
	}
	// Let those arrive, then overflow from either connection.
	deadline := time.Now().Add(5 * time.Second)
	for b.Used() < 4*250<<10 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	e := finalErr(t, putStream(t, cli2, 250<<10))
	if e.Kind != zx.ErrLimit || !strings.Contains(e.Msg, "server buffers full") {
		t.Fatalf("stream over the budget ended with %v, want a server limit", e)
	}
	if b.Peak() > b.Limit() {
		t.Errorf("budget peaked at %d, over its limit %d", b.Peak(), b.Limit())
	}
}

func TestBufferReleased(t *testing.T) {
	// Consumed data, and data of streams that end, leave the accounts.
	b := NewBudget(64 << 20)
	cli, srv := pair2(t, Config{}, Config{Budget: b}, func(st *Stream) {
		ctx := st.Context()
		for {
			m, err := st.Recv(ctx)
			if err != nil || m.End {
				break
			}
		}
		st.Send(ctx, proto.FData, make([]byte, 100<<10), true)
	})
	ctx := context.Background()
	for range 20 {
		st := putStream(t, cli, 300<<10)
		if err := st.CloseSend(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.Used() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	in, out := srv.Buffered()
	if b.Used() != 0 || in != 0 || out != 0 {
		t.Errorf("after all streams ended: budget %d, server buffers in %d out %d; want 0", b.Used(), in, out)
	}
	if b.Peak() == 0 {
		t.Error("budget never counted anything")
	}
}

func TestStallTimeout(t *testing.T) {
	// A client that never reads its reply: the server gives up after
	// StallTimeout and says so, without credit.
	cfg := Config{StallTimeout: 200 * time.Millisecond}
	sent := make(chan error, 1)
	cli, _ := pair(t, cfg, func(st *Stream) {
		var err error
		for range 100 {
			if err = st.Send(st.Context(), proto.FData, make([]byte, 64<<10), false); err != nil {
				break
			}
		}
		sent <- err
	})
	st, err := cli.Open(context.Background(), []byte("get"), 0)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-sent:
		if !errors.Is(err, zx.ErrTimeout) {
			t.Fatalf("server send = %v, want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server still waiting for a client that does not read")
	}
	e := finalErr(t, st)
	if e.Kind != zx.ErrTimeout || !strings.Contains(e.Msg, "took no reply data") {
		t.Fatalf("client got %v, want a stall timeout", e)
	}
}

func TestWriteTimeout(t *testing.T) {
	// A peer that grants credit but stops reading the socket: the server
	// closes the connection once the socket takes nothing for WriteTimeout.
	nc, srv := rawServer(t, Config{WriteTimeout: 300 * time.Millisecond, StallTimeout: -1})
	go func() {
		for {
			st, err := srv.Accept()
			if err != nil {
				return
			}
			go func() {
				for st.Send(st.Context(), proto.FData, make([]byte, 64<<10), false) == nil {
				}
			}()
		}
	}()
	var b []byte
	b = proto.AppendFrame(b, proto.Header{Type: proto.FWindow}, proto.AppendWindow(nil, 1<<30))
	b = proto.AppendFrame(b, proto.Header{Type: proto.FReq, Flags: proto.FlagEnd, Stream: 1}, []byte("get"))
	b = proto.AppendFrame(b, proto.Header{Type: proto.FWindow, Stream: 1}, proto.AppendWindow(nil, 1<<30))
	if _, err := nc.Write(b); err != nil {
		t.Fatal(err)
	}
	nc.(*net.TCPConn).SetReadBuffer(64 << 10)
	if err := ended(t, srv, 20*time.Second, "server kept a connection whose peer does not read"); !errors.Is(err, zx.ErrTimeout) {
		t.Fatalf("server ended with %v, want a timeout", err)
	}
	if _, out := srv.Buffered(); out != 0 {
		t.Errorf("closed connection still accounts %d bytes out", out)
	}
}

func TestIdleTimeout(t *testing.T) {
	cli, srv := pair2(t, Config{}, Config{IdleTimeout: 200 * time.Millisecond}, func(st *Stream) {
		st.Send(st.Context(), proto.FData, nil, true)
	})
	// Busy for a while: not idle.
	ctx := context.Background()
	for range 5 {
		st, err := cli.Open(ctx, []byte("x"), 0)
		if err != nil {
			t.Fatal(err)
		}
		readAll(ctx, st)
		time.Sleep(60 * time.Millisecond)
	}
	if srv.Err() != nil {
		t.Fatalf("busy connection closed: %v", srv.Err())
	}
	if err := ended(t, cli, 5*time.Second, "idle connection not closed"); !errors.Is(err, zx.ErrTimeout) || !strings.Contains(err.Error(), "idle") {
		t.Fatalf("client conn ended with %v, want an idle timeout", err)
	}
}

func TestPingFloodBackpressure(t *testing.T) {
	// A peer that sends pings and never reads: the server stops reading
	// instead of queueing answers without bound.
	nc, srv := rawServer(t, Config{WriteTimeout: -1, KeepAlive: -1})
	nc.(*net.TCPConn).SetReadBuffer(16 << 10)
	ping := pingFrame(1, time.Now(), false)
	buf := make([]byte, 0, 1024*len(ping))
	for range 1024 {
		buf = append(buf, ping...)
	}
	nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
	var sent int
	for {
		n, err := nc.Write(buf)
		sent += n
		if err != nil {
			break
		}
	}
	srv.mu.Lock()
	queued := len(srv.ctrl)
	srv.mu.Unlock()
	t.Logf("sent %d pings before the server pushed back; %d answers queued", sent/len(ping), queued)
	if queued > maxCtrl+1 {
		t.Errorf("%d control frames queued, want at most %d", queued, maxCtrl)
	}
}
