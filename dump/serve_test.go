package dump

import (
	"errors"
	"net"
	"testing"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/server"
)

// TestServed reads a dump through a zx server, as zx serve would export
// it (trees["dump"] = dumpFS).
func TestServed(t *testing.T) {
	ctx := t.Context()
	tr := memfs.New()
	put(t, tr, "/f", "served\n", 0o640)
	dir := t.TempDir()
	st, err := OpenStore(dir)
	must(t, err)
	s1, err := st.Dump(ctx, tr, "/", Options{Tree: "t", Now: day(5, 1)})
	must(t, err)
	dfs, err := Open(dir)
	must(t, err)
	srv, err := server.New(map[string]zx.Tree{"main": memfs.New(), "dump": dfs}, "main", server.Config{})
	must(t, err)
	a, b := net.Pipe()
	go srv.ServeConn(a)
	c := client.NewConn(b, client.Options{})
	defer c.Close()
	ct := c.Tree("dump")
	data, err := zx.ReadFile(ctx, ct, "/"+s1.Snapshot+"/f")
	if err != nil || string(data) != "served\n" {
		t.Fatalf("read through the server: %q, %v", data, err)
	}
	want := capture(t, tr, "")
	got := 0
	for it := range ct.FindGet(ctx, "/"+s1.Snapshot, zx.FindOpts{}) {
		must(t, it.Err)
		if it.Dir != nil {
			got++
			if p := it.Dir.Path(); p == "/"+s1.Snapshot+"/f" && it.Dir[zx.AMode] != want["/f"].d[zx.AMode] {
				t.Errorf("mode through the server: %v", it.Dir)
			}
		}
	}
	if got != len(want) {
		t.Errorf("findget through the server: %d entries, want %d", got, len(want))
	}
	if _, err := zx.WriteFile(ctx, ct, "/"+s1.Snapshot+"/f", nil, []byte("x")); !errors.Is(err, zx.ErrReadOnly) {
		t.Errorf("write through the server: %v", err)
	}
}
