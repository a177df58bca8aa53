package mux

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/proto"
	"github.com/zxfs/zx/wan"
)

// The tests' connections: every test that needs one gets it here, over
// real loopback TCP (through the WAN emulator when it asks for a link).

// dial listens on loopback, dials it (through the WAN emulator if link is
// not nil) and returns the dialling socket and a Server with cfg on the
// accepted end. Both are closed when the test ends.
func dial(t *testing.T, cfg Config, link *wan.Config) (net.Conn, *Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	addr := l.Addr().String()
	if link != nil {
		p, err := wan.Listen("127.0.0.1:0", addr, *link)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		addr = p.Addr()
	}
	sc := make(chan *Conn, 1)
	go func() {
		nc, err := l.Accept()
		if err != nil {
			sc <- nil
			return
		}
		sc <- Server(nc, cfg)
	}()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := <-sc
	if srv == nil {
		nc.Close()
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { nc.Close(); srv.Close() })
	return nc, srv
}

// pair returns a client and server connected over loopback TCP, with the
// server running handle for every stream.
func pair(t *testing.T, cfg Config, handle func(*Stream)) (*Conn, *Conn) {
	t.Helper()
	return pairWith(t, cfg, cfg, nil, handle)
}

// pair2 is pair with different configurations for client and server.
func pair2(t *testing.T, ccfg, scfg Config, handle func(*Stream)) (*Conn, *Conn) {
	t.Helper()
	return pairWith(t, ccfg, scfg, nil, handle)
}

// pairWith is pair2 through the WAN emulator if link is not nil.
func pairWith(t *testing.T, ccfg, scfg Config, link *wan.Config, handle func(*Stream)) (*Conn, *Conn) {
	t.Helper()
	nc, srv := dial(t, scfg, link)
	cli := Client(nc, ccfg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			st, err := srv.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); handle(st) }()
		}
	}()
	t.Cleanup(func() {
		cli.Close()
		srv.Close()
		wg.Wait()
	})
	return cli, srv
}

// rawServer returns a Server with cfg and the raw socket of its peer,
// which has sent its hello: the test speaks frames on it.
func rawServer(t *testing.T, cfg Config) (net.Conn, *Conn) {
	t.Helper()
	nc, srv := dial(t, cfg, nil)
	hello := proto.AppendFrame(nil, proto.Header{Type: proto.FHello}, proto.AppendHello(nil, &proto.Hello{Version: 1}))
	if _, err := nc.Write(hello); err != nil {
		t.Fatal(err)
	}
	return nc, srv
}

// goaway reads frames from nc until a goaway, and returns its error.
func goaway(t *testing.T, nc net.Conn) *zx.Error {
	t.Helper()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var hdr [proto.HeaderSize]byte
	for {
		h, p, err := proto.ReadFrame(nc, hdr[:])
		if err != nil {
			t.Fatalf("no goaway before %v", err)
		}
		if h.Type == proto.FGoaway {
			e, err := proto.ParseError(p)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
	}
}

// ended waits up to d for c to end and returns why it ended; the test
// fails if it does not end in time.
func ended(t *testing.T, c *Conn, d time.Duration, what string) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(d):
		t.Fatal(what)
		return nil
	}
}

// refused sends frames, after a hello, to a fresh server with cfg, and
// returns the error of the goaway the server answers with; the test fails
// unless the server then ends the connection.
func refused(t *testing.T, cfg Config, frames []byte) *zx.Error {
	t.Helper()
	nc, srv := rawServer(t, cfg)
	nc.Write(frames)
	e := goaway(t, nc)
	ended(t, srv, 5*time.Second, "server kept the connection")
	return e
}
