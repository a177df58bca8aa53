package mux

import (
	"context"
	"testing"
	"time"

	"github.com/zxfs/zx/proto"
	"github.com/zxfs/zx/wan"
)

// TestWindowGrowsToBDP sends through 20 ms of emulated latency: a window
// fixed at its initial 256 KiB would cap the stream at 12.5 MiB/s; the
// receiver must notice and grow it, without any configuration.
// Compression is off: the test data compresses so well that the
// connection window would never limit the sender.
func TestWindowGrowsToBDP(t *testing.T) {
	off := Config{Compression: CompressOff}
	cli, _ := pairWith(t, off, off, &wan.Config{RTT: 20 * time.Millisecond}, sender)

	ctx := context.Background()
	if _, err := cli.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	const n = 96 << 20
	st, err := cli.Open(ctx, request(n, 64<<10), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := readAll(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	check(t, b, n)
	st.rmu.Lock()
	win := st.recvWin
	st.rmu.Unlock()
	cli.mu.Lock()
	cwin := cli.recvWin
	cli.mu.Unlock()
	t.Logf("stream window grew to %d KiB, connection window to %d KiB", win>>10, cwin>>10)
	if win < 16*proto.InitialStreamWindow {
		t.Fatalf("stream window is %d bytes after %d MiB at 20 ms: it did not grow toward the bandwidth-delay product", win, n>>20)
	}
	if cwin <= proto.InitialConnWindow {
		t.Fatalf("connection window did not grow: %d bytes", cwin)
	}
}
