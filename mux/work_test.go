package mux

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zxfs/zx/proto"
)

// settle waits until n stops changing for a while, and returns it.
func settle(n *atomic.Int64) int64 {
	last := n.Load()
	for {
		time.Sleep(100 * time.Millisecond)
		now := n.Load()
		if now == last {
			return now
		}
		last = now
	}
}

func TestTakePacedByCredit(t *testing.T) {
	// A get as the server serves one: the tree takes memory for a chunk
	// before it reads it (Take), the server holds it (Hold) and sends it
	// (SendHeld). A client that reads nothing stops the reading once the
	// window it granted is used: at most one chunk is read that cannot be
	// sent. When it reads, the rest comes, whole, and every byte counted
	// is given back.
	const chunk = 128 << 10
	const chunks = 16
	b := NewBudget(64 << 20)
	var read atomic.Int64
	cli, _ := pair2(t, Config{MaxPreGrant: -1}, Config{Budget: b}, func(st *Stream) {
		ctx := st.Context()
		defer st.Release()
		for i := range chunks {
			if err := st.Take(ctx, chunk); err != nil {
				t.Errorf("Take: %v", err)
				return
			}
			data := bytes.Repeat([]byte{byte(i)}, chunk)
			read.Add(1)
			st.Give(chunk) // handed over, as lfs does
			if err := st.Hold(ctx, chunk); err != nil {
				t.Errorf("Hold: %v", err)
				return
			}
			if err := st.SendHeld(ctx, proto.FData, data, i == chunks-1); err != nil {
				t.Errorf("SendHeld: %v", err)
				return
			}
		}
	})
	ctx := context.Background()
	st, err := cli.Open(ctx, []byte("get"), 0)
	if err != nil {
		t.Fatal(err)
	}
	window := proto.InitialStreamWindow / chunk
	if n := settle(&read); n > int64(window+1) {
		t.Errorf("with a window of %d chunks and nothing read, the server read %d chunks", window, n)
	}
	if u := b.Used(); u > chunk {
		t.Errorf("with nothing read, the server holds %d bytes, more than the one chunk it could not send", u)
	}
	var got []byte
	for {
		m, err := st.Recv(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Data...)
		if m.End {
			break
		}
	}
	for i := range chunks {
		if !bytes.Equal(got[i*chunk:(i+1)*chunk], bytes.Repeat([]byte{byte(i)}, chunk)) {
			t.Fatalf("chunk %d is wrong", i)
		}
	}
	if len(got) != chunks*chunk {
		t.Fatalf("got %d bytes, want %d", len(got), chunks*chunk)
	}
	eventually(t, func() bool { return b.Used() == 0 })
}

func TestAdmitBounded(t *testing.T) {
	// Requests admitted hold at most a quarter of the connection's buffer
	// bound; the next waits until one is done, and none is refused.
	const limit = 1 << 20
	const cost = 64 << 10
	var mu sync.Mutex
	admitted, most := 0, 0
	release := make(chan struct{})
	cli, _ := pair(t, Config{MaxBuffer: limit}, func(st *Stream) {
		ctx := st.Context()
		if err := st.Admit(ctx, cost); err != nil {
			t.Errorf("Admit: %v", err)
			return
		}
		mu.Lock()
		admitted++
		most = max(most, admitted)
		mu.Unlock()
		<-release
		mu.Lock()
		admitted--
		mu.Unlock()
		st.Release()
		st.Send(ctx, proto.FData, nil, true)
	})
	ctx := context.Background()
	var sts []*Stream
	for range 10 {
		st, err := cli.Open(ctx, []byte("req"), 0)
		if err != nil {
			t.Fatal(err)
		}
		sts = append(sts, st)
	}
	eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return admitted == limit/4/cost })
	time.Sleep(100 * time.Millisecond)
	close(release)
	for _, st := range sts {
		if err := st.Drain(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if most != limit/4/cost {
		t.Errorf("%d requests admitted at once, want %d", most, limit/4/cost)
	}
}

// eventually waits up to 10s for cond.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
