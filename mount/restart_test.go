package mount_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/server"
)

// restartable is a server over a directory on a fixed address that the
// test can stop and start again: a new server and a new lfs over the same
// disk, as after a restart of zx serve.
type restartable struct {
	t    *testing.T
	dir  string
	addr string
	srv  *server.Server
	fs   *lfs.FS
	done chan struct{}
}

func (r *restartable) start() {
	r.t.Helper()
	fs, err := lfs.New(r.dir, lfs.Options{})
	must(r.t, err)
	srv, err := server.New(map[string]zx.Tree{"main": fs}, "main", server.Config{})
	must(r.t, err)
	addr := r.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		fs.Close()
		r.t.Fatal(err)
	}
	r.addr = l.Addr().String()
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	r.srv, r.fs, r.done = srv, fs, done
}

func (r *restartable) stop() {
	if r.srv == nil {
		return
	}
	r.srv.Close()
	<-r.done
	r.fs.Close()
	r.srv = nil
}

// TestServerRestart: the server goes away and a new one comes up on the
// same address over the same disk; the mount reconnects and carries on:
// it shows what changed on the disk meanwhile, and what is written through
// it reaches the new server.
func TestServerRestart(t *testing.T) {
	canMount(t)
	r := &restartable{t: t, dir: t.TempDir()}
	r.start()
	t.Cleanup(r.stop)
	e := wbMount(t, wbSetup{srvDir: r.dir, addr: r.addr, noProxy: true, reconnect: true})
	must(t, os.WriteFile(e.p("f"), []byte("one"), 0o644))
	if got := readFile(t, e.p("f")); got != "one" {
		t.Fatalf("read %q", got)
	}
	if got := e.server(t, "f"); got != "one" {
		t.Fatalf("the server has %q after close", got)
	}
	inv := e.c.Stats().Invalidations

	r.stop()
	// Changed on the disk while no server runs: no notice can reach us.
	must(t, os.WriteFile(filepath.Join(r.dir, "f"), []byte("two, changed while down"), 0o644))
	r.start()

	// The client finds its connection gone, dials the new server and
	// revalidates what it cached.
	deadline := time.Now().Add(10 * time.Second)
	for e.conn.Reconnects() == 0 || e.c.Stats().Invalidations == inv {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnection and revalidation 10 s after the restart: %d reconnects, stats %+v", e.conn.Reconnects(), e.c.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := readFile(t, e.p("f")); got != "two, changed while down" {
		t.Fatalf("after the restart the mount shows %q", got)
	}
	must(t, os.WriteFile(e.p("g"), []byte("after the restart"), 0o644))
	if got := e.server(t, "g"); got != "after the restart" {
		t.Fatalf("after the restart the server has %q for a file written and closed", got)
	}
	ents, err := os.ReadDir(e.dir)
	must(t, err)
	if len(ents) != 2 || ents[0].Name() != "f" || ents[1].Name() != "g" {
		t.Fatalf("after the restart the mount lists %v, want f and g", ents)
	}
}
