package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/proto"
	"github.com/zxfs/zx/server"
	"github.com/zxfs/zx/subtree"
)

// callbackCounts reads the server's "callbacks" status line.
func callbackCounts(t *testing.T, srv *server.Server) (watches, lagging, breaks, waits, lagged int) {
	t.Helper()
	for _, l := range srv.Status(context.Background()).Lines {
		if strings.HasPrefix(l, "callbacks ") {
			if _, err := fmt.Sscanf(l, "callbacks watches %d lagging %d breaks %d waits %d lagged %d", &watches, &lagging, &breaks, &waits, &lagged); err != nil {
				t.Fatalf("status line %q: %v", l, err)
			}
			return
		}
	}
	t.Fatal("no callbacks line in the server's status")
	return
}

// ackedWatch starts an acknowledged watch of / on c and waits for Ready.
func ackedWatch(t *testing.T, c *client.Conn) <-chan zx.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ec := c.Tree("").WatchAcked(ctx, "/")
	if ev := <-ec; ev.Err != nil || ev.Kind != zx.Ready {
		t.Fatalf("watch: %+v", ev)
	}
	return ec
}

// numbered waits for the next notice carrying Ack whose path is p, and
// returns it; notices without Ack (the tree's own) are skipped.
func numbered(t *testing.T, ec <-chan zx.Event, p string) zx.Event {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ec:
			if !ok || ev.Err != nil {
				t.Fatalf("watch ended: %v", ev.Err)
			}
			if ev.Ack != nil && (ev.Dir.Path() == p || p == "") {
				return ev
			}
			if ev.Ack != nil {
				ev.Ack()
			}
		case <-timeout:
			t.Fatalf("no acknowledged notice for %q", p)
		}
	}
}

// A write's reply waits for another connection's acknowledged watch:
// while B holds its acknowledgement, A's put is applied (A's later stat
// of the file is answered and sees it) but not answered; once B
// acknowledges, it is. The bound is 30 s, not 250 ms: under load the
// test's own stat could take longer, and the reply would then be sent
// because the bound passed, not because B acknowledged.
func TestCallbackHoldsReply(t *testing.T) {
	ctx := context.Background()
	cfg := server.Config{CallbackWait: 30 * time.Second}
	server.SetMinCallbackWait(&cfg, 30*time.Second)
	srv, addr := serve(t, memfs.New(), cfg)
	a, b := dial(t, addr), dial(t, addr)
	bw := ackedWatch(t, b)
	ta := a.Tree("")
	for i, op := range []string{"create", "rewrite", "wstat", "allocate", "move", "remove"} {
		done := make(chan error, 1)
		var notice string
		switch op {
		case "create", "rewrite":
			rc := ta.Put(ctx, "/f", zx.Dir{zx.AType: "-"}, 0, strings.NewReader(op))
			go func() { done <- (<-rc).Err }()
			notice = "/f"
		case "wstat":
			rc := ta.Wstat(ctx, "/f", zx.Dir{zx.AMode: "0600"})
			go func() { done <- (<-rc).Err }()
			notice = "/f"
		case "allocate":
			rc := ta.Allocate(ctx, "/f", zx.AllocPunchHole|zx.AllocKeepSize, 0, 2)
			go func() { done <- (<-rc).Err }()
			notice = "/f"
		case "move":
			ec := ta.Move(ctx, "/f", "/g")
			go func() { done <- <-ec }()
			notice = "/g"
		case "remove":
			ec := ta.Remove(ctx, "/g")
			go func() { done <- <-ec }()
			notice = "/g"
		}
		ev := numbered(t, bw, notice)
		// A stat issued after the write is ordered after it: once its
		// reply is in, the write was applied, and a reply sent
		// without waiting would have been sent before it.
		if _, err := zx.Stat(ctx, ta, "/"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			t.Fatalf("%s: replied (%v) before the other client acknowledged its notice", op, err)
		default:
		}
		ev.Ack()
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if _, _, breaks, waits, lagged := callbackCounts(t, srv); waits != i+1 || lagged != 0 || breaks < i+1 {
			t.Fatalf("after %s: breaks %d waits %d lagged %d", op, breaks, waits, lagged)
		}
	}
}

// A watch that never acknowledges does not hang the writer: the put is
// answered after the bound, and the watch lags (later writes do not wait
// for it) until it has acknowledged what it was sent.
func TestCallbackLagging(t *testing.T) {
	ctx := context.Background()
	srv, addr := serve(t, memfs.New(), server.Config{})
	a, b := dial(t, addr), dial(t, addr)
	bw := ackedWatch(t, b)
	ta := a.Tree("")
	if _, err := zx.WriteFile(ctx, ta, "/f", zx.Dir{zx.AType: "-"}, []byte("1")); err != nil {
		t.Fatal(err)
	}
	first := numbered(t, bw, "/f") // not acknowledged in time
	if _, lagging, _, waits, lagged := callbackCounts(t, srv); lagging != 1 || lagged != 1 || waits != 1 {
		t.Fatalf("lagging %d lagged %d waits %d, want 1 1 1", lagging, lagged, waits)
	}
	// Lagging: the next write does not wait.
	if _, err := zx.WriteFile(ctx, ta, "/f", zx.Dir{zx.AType: "-"}, []byte("2")); err != nil {
		t.Fatal(err)
	}
	second := numbered(t, bw, "/f") // sent, numbered, but not waited for
	if _, _, _, waits, lagged := callbackCounts(t, srv); waits != 1 || lagged != 1 {
		t.Fatalf("while lagging: waits %d lagged %d, want 1 1", waits, lagged)
	}
	// Acknowledging what it was sent when it lagged ends it: writes
	// wait again.
	first.Ack()
	eventually(t, "the watch to stop lagging", func() bool {
		_, lagging, _, _, _ := callbackCounts(t, srv)
		return lagging == 0
	})
	second.Ack()
	rc := ta.Put(ctx, "/f", zx.Dir{zx.AType: "-"}, 0, strings.NewReader("3"))
	numbered(t, bw, "/f").Ack()
	if r := <-rc; r.Err != nil {
		t.Fatal(r.Err)
	}
	if _, _, _, waits, lagged := callbackCounts(t, srv); waits != 2 || lagged != 1 {
		t.Fatalf("after catching up: waits %d lagged %d, want 2 1", waits, lagged)
	}
}

// A watch that does not read its notices at all has them replaced by one
// Overflow once its queue is full (the server's memory is bounded), and
// lags until it acknowledges that Overflow.
func TestCallbackQueueOverflow(t *testing.T) {
	ctx := context.Background()
	srv, addr := serve(t, memfs.New(), server.Config{})
	a, b := dial(t, addr), dial(t, addr)
	bw := ackedWatch(t, b) // not read until the end
	ta := a.Tree("")
	// Removealls of missing paths: each is reported (a removeall may
	// have removed part), the tree says nothing, and they cost little.
	const n = 20000 // beyond what the stream's window and the queue hold
	var ecs []<-chan error
	for i := range n {
		ecs = append(ecs, ta.RemoveAll(ctx, fmt.Sprintf("/missing%d", i)))
	}
	for _, ec := range ecs {
		<-ec
	}
	if _, lagging, breaks, _, lagged := callbackCounts(t, srv); lagging != 1 || lagged != 1 || breaks != n {
		t.Fatalf("lagging %d lagged %d breaks %d, want 1 1 %d", lagging, lagged, breaks, n)
	}
	got := 0
	for {
		ev := numbered(t, bw, "")
		if ev.Kind == zx.Overflow {
			if got >= n {
				t.Fatalf("%d notices before the overflow, want fewer than %d", got, n)
			}
			ev.Ack()
			break
		}
		got++
		ev.Ack()
	}
	eventually(t, "the watch to stop lagging", func() bool {
		_, lagging, _, _, _ := callbackCounts(t, srv)
		return lagging == 0
	})
}

// A pipelined burst from A is applied in order and answered in full while
// B acknowledges as it goes; A's own watch is never waited for. The
// bound is 30 s, not 250 ms (4 round trips on loopback are less): every
// wait is to be met, and load from sibling test binaries once delayed an
// acknowledgement past 250 ms (lagged 1).
func TestCallbackPipelined(t *testing.T) {
	ctx := context.Background()
	cfg := server.Config{CallbackWait: 30 * time.Second}
	server.SetMinCallbackWait(&cfg, 30*time.Second)
	srv, addr := serve(t, memfs.New(), cfg)
	a, b := dial(t, addr), dial(t, addr)
	ackedWatch(t, a) // A's own: never acknowledged, never waited for
	bw := ackedWatch(t, b)
	go func() {
		for ev := range bw {
			if ev.Ack != nil {
				ev.Ack()
			}
		}
	}()
	ta := a.Tree("")
	const n = 200
	var puts []<-chan zx.Reply
	var rms []<-chan error
	for i := range n {
		p := fmt.Sprintf("/f%03d", i)
		puts = append(puts, ta.Put(ctx, p, zx.Dir{zx.AType: "-"}, 0, strings.NewReader(p)))
		if i%2 == 0 {
			rms = append(rms, ta.Remove(ctx, p)) // after its put, pipelined
		}
	}
	for i, rc := range puts {
		if r := <-rc; r.Err != nil {
			t.Fatalf("put %d: %v", i, r.Err)
		}
	}
	for i, ec := range rms {
		if err := <-ec; err != nil {
			t.Fatalf("remove %d: %v", i, err)
		}
	}
	ds, err := zx.ReadDir(ctx, ta, "/")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != n/2 {
		t.Fatalf("%d files left, want %d", len(ds), n/2)
	}
	for _, d := range ds {
		var i int
		fmt.Sscanf(d.Name(), "f%d", &i)
		if i%2 == 0 {
			t.Fatalf("%s was removed after its put, but is there", d.Name())
		}
	}
	if _, _, breaks, waits, lagged := callbackCounts(t, srv); breaks != n+n/2 || waits != n+n/2 || lagged != 0 {
		t.Fatalf("breaks %d waits %d lagged %d, want %d %d 0", breaks, waits, lagged, n+n/2, n+n/2)
	}
}

// A watch that does not ask for acknowledgements (Watch, or a peer that
// does not offer the feature, even with its stream left open) gets the
// notices it always got, none numbered, and nobody waits for it.
func TestCallbackOldPeer(t *testing.T) {
	ctx := context.Background()
	srv, addr := serve(t, memfs.New(), server.Config{CallbackWait: 30 * time.Second})
	a, b := dial(t, addr), dial(t, addr)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	plain := b.Tree("").Watch(wctx, "/")
	if ev := <-plain; ev.Kind != zx.Ready {
		t.Fatalf("watch: %+v", ev)
	}

	// A version 1 peer: no watchack feature in its hello.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	old := mux.Client(nc, mux.Config{Compression: mux.CompressOff})
	defer old.Close()
	st, err := old.Open(ctx, proto.AppendRequest(nil, &proto.Request{Op: proto.OpWatch, Path: "/"}), mux.WithData|mux.Uncounted)
	if err != nil {
		t.Fatal(err)
	}
	oldEvent := func() *proto.Event {
		t.Helper()
		m, err := st.Recv(ctx)
		if err != nil || m.Type != proto.FEvent {
			t.Fatalf("old peer's watch: %v %v", m.Type, err)
		}
		ev, err := proto.ParseEvent(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	if ev := oldEvent(); ev.Kind != uint8(zx.Ready) {
		t.Fatalf("old peer's first notice %d, want ready", ev.Kind)
	}

	if _, err := zx.WriteFile(ctx, a.Tree(""), "/f", zx.Dir{zx.AType: "-"}, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if ev := oldEvent(); ev.Seq != 0 || ev.Dir.Path() != "/f" {
		t.Fatalf("old peer got %+v, want the tree's notice of /f, unnumbered", ev)
	}
	if ev := <-plain; ev.Ack != nil || ev.Dir.Path() != "/f" {
		t.Fatalf("plain watch got %+v, want the tree's notice of /f, without Ack", ev)
	}
	if watches, _, breaks, waits, _ := callbackCounts(t, srv); watches != 0 || breaks != 0 || waits != 0 {
		t.Fatalf("watches %d breaks %d waits %d, want none", watches, breaks, waits)
	}
}

// A notice whose entry does not fit in a frame carries only the path: the
// other client's watch is not failed by it, and still drops the file.
func TestCallbackOversizedEntry(t *testing.T) {
	ctx := context.Background()
	fs := memfs.New()
	if _, err := zx.WriteFile(ctx, fs, "/f", nil, []byte("kept")); err != nil {
		t.Fatal(err)
	}
	if _, err := zx.Wstat(ctx, fs, "/f", zx.Dir{"user.big": strings.Repeat("x", proto.MaxPayload)}); err != nil {
		t.Fatal(err)
	}
	_, addr := serve(t, fs, server.Config{CallbackWait: 30 * time.Second})
	a, b := dial(t, addr), dial(t, addr)
	bw := ackedWatch(t, b)
	wc := a.Tree("").Wstat(ctx, "/f", zx.Dir{zx.AMode: "0600"})
	ev := numbered(t, bw, "/f")
	if len(ev.Dir) != 2 || ev.Dir[zx.AName] != "f" {
		t.Errorf("notice of the oversized entry: %v, want its path and name", ev.Dir)
	}
	ev.Ack()
	if r := <-wc; !errors.Is(r.Err, zx.ErrTooBig) {
		t.Fatalf("wstat: %v, want ErrTooBig", r.Err)
	}
	// The watch goes on.
	rc := a.Tree("").Put(ctx, "/g", zx.Dir{zx.AType: "-"}, 0, strings.NewReader("g"))
	numbered(t, bw, "/g").Ack()
	if r := <-rc; r.Err != nil {
		t.Fatal(r.Err)
	}
}

// A client that asks for acknowledged notices from a server that does not
// offer them (an older one) gets version 1 notices, none with Ack, and
// nobody waits: its watch works as Watch.
func TestCallbackOldServer(t *testing.T) {
	ctx := context.Background()
	srv, addr := serve(t, memfs.New(), server.Config{NoWatchAck: true})
	a, b := dial(t, addr), dial(t, addr)
	bw := ackedWatch(t, b)
	for i := range 3 {
		if _, err := zx.WriteFile(ctx, a.Tree(""), "/f", nil, []byte{byte('0' + i)}); err != nil {
			t.Fatal(err)
		}
		ev := <-bw
		if ev.Err != nil || ev.Dir.Path() != "/f" || ev.Ack != nil {
			t.Fatalf("notice %d: %+v, want the tree's notice of /f without Ack", i, ev)
		}
	}
	if watches, _, breaks, waits, _ := callbackCounts(t, srv); watches != 0 || breaks != 0 || waits != 0 {
		t.Fatalf("watches %d breaks %d waits %d, want none", watches, breaks, waits)
	}
}

// A watch of a subtree (here through package subtree, as zx mount of a
// directory watches) gets numbered notices only for changes that concern
// it, in its own terms: a move across its edge is a create or a remove,
// the removal of a directory above it removes it; Ack passes through.
func TestCallbackSubtreeWatch(t *testing.T) {
	ctx := context.Background()
	fs := memfs.New()
	for _, d := range []string{"/d", "/d/e", "/x"} {
		if _, err := zx.Mkdir(ctx, fs, d, 0755); err != nil {
			t.Fatal(err)
		}
	}
	srv, addr := serve(t, fs, server.Config{CallbackWait: 30 * time.Second})
	a, b := dial(t, addr), dial(t, addr)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := subtree.New(b.Tree(""), "/d/e").(zx.AckWatcher)
	bw := sub.WatchAcked(wctx, "/")
	if ev := <-bw; ev.Kind != zx.Ready {
		t.Fatalf("watch: %+v", ev)
	}
	ta := a.Tree("")
	steps := []struct {
		what string
		do   func() error
		kind zx.EventKind
		path string // in the subtree; "" for none
	}{
		{"create in it", func() error { _, err := zx.WriteFile(ctx, ta, "/d/e/f", nil, []byte("f")); return err }, zx.Created, "/f"},
		{"create outside", func() error { _, err := zx.WriteFile(ctx, ta, "/x/f", nil, []byte("f")); return err }, 0, ""},
		{"move out", func() error { return <-ta.Move(ctx, "/d/e/f", "/x/g") }, zx.Removed, "/f"},
		{"move in", func() error { return <-ta.Move(ctx, "/x/g", "/d/e/h") }, zx.Created, "/h"},
		{"remove above", func() error { return <-ta.RemoveAll(ctx, "/d") }, zx.Removed, "/"},
	}
	for _, s := range steps {
		_, _, breaks0, _, _ := callbackCounts(t, srv)
		done := make(chan error, 1)
		go func() { done <- s.do() }()
		if s.path == "" {
			if err := <-done; err != nil {
				t.Fatalf("%s: %v", s.what, err)
			}
			if _, _, breaks, _, _ := callbackCounts(t, srv); breaks != breaks0 {
				t.Fatalf("%s: %d notices for the subtree's watch, want none", s.what, breaks-breaks0)
			}
			continue
		}
		ev := numbered(t, bw, s.path)
		if ev.Kind != s.kind {
			t.Fatalf("%s: notice %v of %s, want %v", s.what, ev.Kind, ev.Dir.Path(), s.kind)
		}
		select {
		case err := <-done:
			t.Fatalf("%s: answered (%v) before the acknowledgement", s.what, err)
		default:
		}
		ev.Ack()
		if err := <-done; err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
	}
}

// Bad acknowledgements (of a notice never sent, undecodable, not DATA)
// end the watch with a protocol error; the connection goes on.
func TestCallbackBadAck(t *testing.T) {
	ctx := context.Background()
	_, addr := serve(t, memfs.New(), server.Config{})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	mc := mux.Client(nc, mux.Config{Features: []string{proto.FeatureWatchAck}})
	defer mc.Close()
	for _, bad := range []struct {
		what string
		typ  uint8
		msg  []byte
	}{
		{"ack of a notice not sent", proto.FData, proto.AppendAck(nil, 5)},
		{"ack 0", proto.FData, []byte{0}},
		{"trailing bytes", proto.FData, []byte{1, 1}},
		{"a dir", proto.FDir, proto.AppendDir(nil, zx.Dir{"path": "/"})},
	} {
		st, err := mc.Open(ctx, proto.AppendRequest(nil, &proto.Request{Op: proto.OpWatch, Path: "/"}), mux.WithData|mux.Uncounted)
		if err != nil {
			t.Fatal(err)
		}
		if m, err := st.Recv(ctx); err != nil || m.Type != proto.FEvent {
			t.Fatalf("%s: first message %v %v, want ready", bad.what, m.Type, err)
		}
		if err := st.Send(ctx, bad.typ, bad.msg, false); err != nil {
			t.Fatal(err)
		}
		m, err := st.Recv(ctx)
		if err != nil || m.Type != proto.FErr || !m.End {
			t.Fatalf("%s: got %v %v, want an error that ends the watch", bad.what, m.Type, err)
		}
		if e, _ := proto.ParseError(m.Data); !errors.Is(e, zx.ErrProtocol) {
			t.Fatalf("%s: %v, want a protocol error", bad.what, e)
		}
	}
	// The connection goes on.
	st, err := mc.Open(ctx, proto.AppendRequest(nil, &proto.Request{Op: proto.OpStat, Path: "/"}), 0)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := st.Recv(ctx); err != nil || m.Type != proto.FDir {
		t.Fatalf("stat after: %v %v", m.Type, err)
	}
}
