package mux

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/zxfs/zx/proto"
	"github.com/zxfs/zx/wan"
)

// learnLink sends n bytes from the server through cli, so that the client
// learns the link's bandwidth-delay product, and returns the server's
// stream-credit stalls the transfer took.
func learnLink(t *testing.T, cli, srv *Conn, n int) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := cli.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	s0 := srv.streamStalls.Load()
	st, err := cli.Open(ctx, request(n, 64<<10), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readAll(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	check(t, b, n)
	return srv.streamStalls.Load() - s0
}

// TestPreGrantSkipsDoubling: over 50 ms of emulated latency, once a
// stream's window had to grow, a later reply of 4 MiB comes without the
// server waiting a round trip for stream credit, where a receiver that does not
// grant ahead makes it wait a round trip per doubling of the window.
func TestPreGrantSkipsDoubling(t *testing.T) {
	const reply = 4 << 20
	for _, tc := range []struct {
		name     string
		preGrant int
	}{{"pregrant", 0}, {"off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			ccfg := Config{Compression: CompressOff, MaxPreGrant: tc.preGrant}
			scfg := Config{Compression: CompressOff}
			cli, srv := pairWith(t, ccfg, scfg, &wan.Config{RTT: 50 * time.Millisecond}, sender)
			cold := learnLink(t, cli, srv, 16<<20)
			if cold == 0 {
				t.Fatal("a 16 MiB reply on a new connection never waited for stream credit: the stall counter counts nothing")
			}
			learned := cli.learned.Load()
			t.Logf("cold 16 MiB reply: %d stalls; learned window %d KiB", cold, learned>>10)
			if learned < reply {
				t.Fatalf("after 16 MiB at 50 ms the client learned a window of only %d bytes", learned)
			}

			ctx := context.Background()
			s0 := srv.streamStalls.Load()
			st, err := cli.Open(ctx, request(reply, 64<<10), 0)
			if err != nil {
				t.Fatal(err)
			}
			b, err := readAll(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			check(t, b, reply)
			stalls := srv.streamStalls.Load() - s0
			t.Logf("warm 4 MiB reply: %d stalls", stalls)
			if tc.preGrant < 0 {
				if stalls < 2 {
					t.Fatalf("without pre-grants a 4 MiB reply waited %d times for credit: the test shows nothing", stalls)
				}
				return
			}
			// The grant follows the request in the same segment; only a
			// handler that runs through the initial window before the
			// read loop takes the grant may wait for it, once, briefly.
			if stalls > 1 {
				t.Fatalf("4 MiB reply after the link was learned: the server waited %d times for stream credit, want 0 (at most 1)", stalls)
			}
			cli.mu.Lock()
			left := cli.pregranted
			cli.mu.Unlock()
			if left != 0 {
				t.Fatalf("%d bytes of pre-granted credit still held after every stream ended", left)
			}
		})
	}
}

// TestPreGrantBounded: 100 requests at once on a learned link do not each
// get a large window; pre-granted credit stays within MaxPreGrant (each
// stream within a quarter of it), every reply arrives whole, and the
// allowance is whole again once they are read.
func TestPreGrantBounded(t *testing.T) {
	const maxPre = 16 << 20
	ccfg := Config{Compression: CompressOff, MaxPreGrant: maxPre}
	scfg := Config{Compression: CompressOff}
	cli, srv := pairWith(t, ccfg, scfg, &wan.Config{RTT: 50 * time.Millisecond}, sender)
	learnLink(t, cli, srv, 16<<20)
	if l := cli.learned.Load(); l < maxPre/4 {
		t.Fatalf("learned window %d bytes: too small for the test", l)
	}

	ctx := context.Background()
	const n, size = 100, 512 << 10
	sts := make([]*Stream, n)
	var granted, wins, big int
	for i := range sts {
		st, err := cli.Open(ctx, request(size, 64<<10), 0)
		if err != nil {
			t.Fatal(err)
		}
		sts[i] = st
		cli.mu.Lock()
		granted += st.pregrant
		if st.pregrant > maxPre/4 {
			t.Errorf("stream %d pre-granted %d bytes, more than a quarter of %d", i, st.pregrant, maxPre)
		}
		if st.pregrant > 0 {
			big++
		}
		held := cli.pregranted
		cli.mu.Unlock()
		if held > maxPre {
			t.Fatalf("after %d streams, %d bytes pre-granted, more than %d", i+1, held, maxPre)
		}
		st.rmu.Lock()
		wins += st.recvWin
		st.rmu.Unlock()
	}
	t.Logf("%d of %d streams pre-granted, %d KiB in all; windows %d KiB in all", big, n, granted>>10, wins>>10)
	if big == 0 {
		t.Fatal("no stream got credit ahead of need on a learned link")
	}
	if big > 8 {
		t.Fatalf("%d streams got credit ahead of need: the allowance does not bound them", big)
	}
	if max := n*proto.InitialStreamWindow + maxPre; wins > max {
		t.Fatalf("windows granted %d bytes in all, more than %d", wins, max)
	}
	// Read them all at once: streams without a grant stall until read.
	errs := make(chan error, n)
	for _, st := range sts {
		go func() {
			b, err := readAll(ctx, st)
			if err == nil && len(b) != size {
				err = fmt.Errorf("got %d bytes, want %d", len(b), size)
			}
			errs <- err
		}()
	}
	for range sts {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	cli.mu.Lock()
	left := cli.pregranted
	cli.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d bytes of pre-granted credit still held after every stream was read", left)
	}
	// A cancelled stream gives its grant back too.
	st, err := cli.Open(ctx, request(size, 64<<10), 0)
	if err != nil {
		t.Fatal(err)
	}
	cli.mu.Lock()
	got := st.pregrant
	cli.mu.Unlock()
	if got == 0 {
		t.Fatal("the allowance was not given back: a new stream gets no credit ahead")
	}
	st.Cancel(nil)
	cli.mu.Lock()
	left = cli.pregranted
	cli.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d bytes of pre-granted credit held after a cancel", left)
	}
}

// TestPreGrantUpload: the server grants a put's data ahead of need once
// an upload has shown it the link. The client's second put of 4 MiB then
// waits for stream credit at most once (for the grant itself, which comes
// a round trip after the request), where a server that does not grant
// ahead makes it wait a round trip per doubling of the window.
func TestPreGrantUpload(t *testing.T) {
	for _, tc := range []struct {
		name     string
		preGrant int
	}{{"pregrant", 0}, {"off", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			ccfg := Config{Compression: CompressOff}
			scfg := Config{Compression: CompressOff, MaxPreGrant: tc.preGrant}
			cli, srv := pairWith(t, ccfg, scfg, &wan.Config{RTT: 50 * time.Millisecond}, counter)
			ctx := context.Background()
			if _, err := cli.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			cold := putN(t, cli, 16<<20)
			t.Logf("cold 16 MiB put: %d stalls; server learned %d KiB", cold, srv.learned.Load()>>10)
			if cold == 0 {
				t.Fatal("a 16 MiB put on a new connection never waited for stream credit")
			}
			warm := putN(t, cli, 4<<20)
			t.Logf("warm 4 MiB put: %d stalls", warm)
			if tc.preGrant < 0 {
				if warm < 2 {
					t.Fatalf("without pre-grants a 4 MiB put waited %d times for credit: the test shows nothing", warm)
				}
				return
			}
			if warm > 1 {
				t.Fatalf("4 MiB put after the link was learned waited %d times for stream credit, want at most 1", warm)
			}
			srv.mu.Lock()
			left := srv.pregranted
			srv.mu.Unlock()
			if left != 0 {
				t.Fatalf("server holds %d bytes of pre-granted credit after every put ended", left)
			}
		})
	}
}

// counter reads a put's data and answers with its length.
func counter(st *Stream) {
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
}

// putN puts total bytes through cli and returns the stream-credit stalls
// the client's sending took.
func putN(t *testing.T, cli *Conn, total int) int64 {
	t.Helper()
	ctx := context.Background()
	s0 := cli.streamStalls.Load()
	st, err := cli.Open(ctx, []byte("put"), WithData)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < total; i += 64 << 10 {
		if err := st.Send(ctx, proto.FData, make([]byte, min(64<<10, total-i)), false); err != nil {
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
	if got := binary.LittleEndian.Uint64(b); got != uint64(total) {
		t.Fatalf("server got %d bytes, want %d", got, total)
	}
	return cli.streamStalls.Load() - s0
}
