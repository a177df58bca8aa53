package mux

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/proto"
)

// FuzzServerFrames feeds the frames decoded from arbitrary bytes to a
// server connection's frame handling (what its read loop does with each
// frame, in order, until one is refused), with a handler that answers
// every request it is given. Whatever the frames, nothing panics, the
// connection closes, and once it has closed and its queued requests are
// taken, it holds no buffered bytes in its own accounting or in the
// server's shared budget: a hostile client leaks nothing.
func FuzzServerFrames(f *testing.F) {
	hello := proto.AppendFrame(nil, proto.Header{Type: proto.FHello}, proto.AppendHello(nil, &proto.Hello{Version: proto.Version}))
	req := proto.AppendRequest(nil, &proto.Request{Op: proto.OpStat, Path: "/"})
	frame := func(b []byte, typ, flags uint8, id uint32, p []byte) []byte {
		return proto.AppendFrame(b, proto.Header{Type: typ, Flags: flags, Stream: id}, p)
	}
	f.Add([]byte{})
	f.Add(hello)
	f.Add(frame(hello, proto.FReq, proto.FlagEnd, 1, req))
	f.Add(frame(frame(hello, proto.FReq, 0, 1, req), proto.FData, proto.FlagEnd, 1, []byte("data")))
	f.Add(frame(frame(frame(hello, proto.FReq, 0, 1, req), proto.FData, 0, 1, bytes.Repeat([]byte("x"), 1000)), proto.FCancel, 0, 1, nil))
	f.Add(frame(frame(hello, proto.FReq, proto.FlagEnd, 1, req), proto.FReq, proto.FlagEnd, 1, req))
	f.Add(frame(frame(hello, proto.FWindow, 0, 0, proto.AppendWindow(nil, 1<<30)), proto.FWindow, 0, 1, proto.AppendWindow(nil, 1<<30)))
	f.Add(frame(frame(hello, proto.FReq, 0, 3, req), proto.FData, 0, 3, bytes.Repeat([]byte("y"), proto.InitialStreamWindow/4)))
	f.Add(frame(hello, proto.FPing, 0, 0, make([]byte, 16)))
	f.Add(frame(hello, proto.FGoaway, 0, 0, proto.AppendError(nil, zx.E(zx.ErrIO, "", "", "bye"))))
	// A batch of entries, which a server does not offer to take.
	f.Add(frame(frame(hello, proto.FReq, 0, 1, req), proto.FDirs, 0, 1, proto.AppendDirs(nil, []zx.Dir{{"path": "/a"}})))
	// Compressed frames: a batch of entries (refused as above), and data
	// that decompresses to more than a frame.
	var codec proto.Codec
	zdirs, _ := codec.Compress(nil, proto.AppendDirs(nil, []zx.Dir{{"path": "/a"}, {"path": "/b"}}))
	f.Add(frame(frame(hello, proto.FReq, 0, 1, req), proto.FDirs, proto.FlagZstd, 1, zdirs))
	zbig, _ := codec.Compress(nil, make([]byte, proto.MaxPayload))
	f.Add(frame(frame(hello, proto.FReq, 0, 1, req), proto.FData, proto.FlagZstd, 1, append(zbig, zbig...)))
	f.Fuzz(func(t *testing.T, data []byte) {
		budget := NewBudget(4 << 20)
		a, b := net.Pipe()
		defer b.Close()
		// The peer's end reads whatever the server writes.
		go func() {
			buf := make([]byte, 64<<10)
			for {
				if _, err := b.Read(buf); err != nil {
					return
				}
			}
		}()
		c := Server(a, Config{KeepAlive: -1, MaxBuffer: 2 << 20, Budget: budget, MaxStreams: 64})
		// The handler answers with a reply and reads what the request
		// brings, as a server does, until its stream ends.
		accepted := make(chan struct{})
		go func() {
			defer close(accepted)
			for {
				st, err := c.Accept()
				if err != nil {
					return
				}
				go func() {
					ctx, cancel := context.WithTimeout(st.Context(), time.Second)
					defer cancel()
					st.Send(ctx, proto.FData, []byte("reply"), false)
					st.Drain(ctx)
					st.Send(ctx, proto.FData, nil, true)
				}()
			}
		}()
		r := bytes.NewReader(data)
		hdr := make([]byte, proto.HeaderSize)
		for first := true; ; first = false {
			h, p, err := proto.ReadFrame(r, hdr)
			if err != nil {
				break
			}
			if first && h.Type != proto.FHello {
				break // the read loop refuses it
			}
			if err := c.handle(h, p); err != nil {
				break
			}
		}
		done := make(chan struct{})
		go func() { c.Close(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("Close did not return")
		}
		<-accepted
		// Streams' goroutines let go of their buffers as they end.
		deadline := time.Now().Add(10 * time.Second)
		for {
			in, out := c.Buffered()
			if in == 0 && out == 0 && budget.Used() == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after Close the connection holds %d bytes in and %d out, the budget %d", in, out, budget.Used())
			}
			time.Sleep(time.Millisecond)
		}
	})
}
