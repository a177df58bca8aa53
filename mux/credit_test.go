package mux

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/zxfs/zx/proto"
)

// gatedConn is a socket whose writes wait while its gate is shut: the
// writer of the connection above it stops, and what is sent meanwhile
// stays queued in mux.
type gatedConn struct {
	net.Conn
	open chan struct{} // closed when the gate opens
}

func (g *gatedConn) Write(b []byte) (int, error) {
	<-g.open
	return g.Conn.Write(b)
}

// creditBalance returns what the client has granted the server's replies
// on the connection and not been sent, and the server's connection send
// credit. Once no frame and no window update is in flight they are equal;
// credit the server took for bytes the client never receives, and never
// gave back, makes the server's the smaller.
func creditBalance(cli, srv *Conn) (granted, credit int64) {
	cli.mu.Lock()
	granted = int64(cli.recvWin - cli.recvConsumed)
	cli.mu.Unlock()
	srv.mu.Lock()
	credit = srv.sendCredit
	srv.mu.Unlock()
	return granted, credit
}

// TestCancelledFramesReturnCredit is the regression test of "a stream's
// dropped frames give their connection credit back": a server whose
// replies sit in its send queue, holding the whole connection window, has
// their streams cancelled, and drops those frames unsent. The client
// never receives them, so it never returns their credit: the server must
// take it back itself, or the connection loses it for good (a get then
// hangs with both ends idle once no frame fits).
//
// It is checked by accounting, not time: once nothing is in flight, the
// server's connection send credit equals the window the client granted
// less what it has received and not yet given back; and a reply larger
// than the connection window then arrives whole.
func TestCancelledFramesReturnCredit(t *testing.T) {
	const (
		streams = proto.InitialConnWindow / proto.InitialStreamWindow // fill the connection window
		chunk   = 64 << 10
		chunks  = proto.InitialStreamWindow / chunk // fill each stream's window
	)
	off := Config{Compression: CompressOff, MaxPreGrant: -1}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	nc, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	snc, err := l.Accept()
	if err != nil {
		nc.Close()
		t.Fatal(err)
	}
	gate := &gatedConn{Conn: snc, open: make(chan struct{})}
	var openGate sync.Once
	opened := func() { openGate.Do(func() { close(gate.open) }) }
	srv := Server(gate, off)
	cli := Client(nc, off)

	// Each handler sends its stream's window (so the streams together
	// take the connection's), reports, then sends on until its stream
	// ends; a probe stream gets its reply whole.
	var filled, quit sync.WaitGroup
	filled.Add(streams)
	quit.Add(streams)
	var hwg sync.WaitGroup
	hwg.Add(1)
	go func() {
		defer hwg.Done()
		for i := 0; ; i++ {
			st, err := srv.Accept()
			if err != nil {
				return
			}
			hwg.Add(1)
			if i >= streams {
				go func() { defer hwg.Done(); sender(st) }()
				continue
			}
			go func() {
				defer hwg.Done()
				defer quit.Done()
				ctx := st.Context()
				for n := 0; ; n++ {
					if n == chunks {
						filled.Done()
					}
					if err := st.Send(ctx, proto.FData, make([]byte, chunk), false); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		opened()
		cli.Close()
		srv.Close()
		hwg.Wait()
	})

	ctx, cancel := context.WithCancel(context.Background())
	var sts []*Stream
	for range streams {
		st, err := cli.Open(ctx, []byte("fill"), 0)
		if err != nil {
			t.Fatal(err)
		}
		sts = append(sts, st)
	}
	filled.Wait()
	if _, credit := creditBalance(cli, srv); credit != 0 {
		t.Fatalf("with %d streams' windows queued the server holds %d bytes of connection credit, want 0", streams, credit)
	}
	// Cancel them all while their frames wait: the server drops them.
	cancel()
	quit.Wait()
	for _, st := range sts {
		st.Recv(context.Background()) // ended: returns at once
	}
	opened()

	// Two pings: after the second, every window update the client sent
	// for frames the writer had already taken has reached the server.
	for range 2 {
		if _, err := cli.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if granted, credit := creditBalance(cli, srv); credit != granted {
		t.Errorf("after cancelling streams with queued frames: server's connection credit %d, client granted %d: %d bytes lost",
			credit, granted, granted-credit)
	}

	// The connection still moves a reply larger than its window. The
	// deadline only turns a hang into a failure.
	hang, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	const n = 4 * proto.InitialConnWindow
	st, err := cli.Open(hang, request(n, chunk), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readAll(hang, st)
	if err != nil {
		t.Fatalf("a %d-byte reply after the cancels: %v after %d bytes (the connection lost its credit)", n, err, len(b))
	}
	check(t, b, n)
	for range 2 {
		if _, err := cli.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if granted, credit := creditBalance(cli, srv); credit != granted {
		t.Errorf("after a whole reply: server's connection credit %d, client granted %d", credit, granted)
	}
}
