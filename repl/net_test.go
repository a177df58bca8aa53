package repl

import (
	"net"
	"strings"
	"testing"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/server"
)

// newNet returns a client tree of a real server, over TCP, exporting a
// new local directory.
func newNet(t *testing.T) zx.Tree {
	t.Helper()
	fs, _ := newLFS(t)
	srv, err := server.New(map[string]zx.Tree{"main": fs}, "main", server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	c, err := client.Dial(ctx, l.Addr().String(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); srv.Close(); <-done })
	return c.Tree("")
}

// TestRenameConflicts: renames against edits, removals and other renames
// of the same file keep every version.
func TestRenameConflicts(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t, kind)
			f.write("a", "/renedit", "v0\n")
			f.write("a", "/renren", "v0\n")
			f.write("a", "/rendel", "v0\n")
			f.write("a", "/dir/x", "v0\n")
			f.inSync()

			f.mv("a", "/renedit", "/renamed-by-a")    // rename on a ...
			f.write("b", "/renedit", "b's edit\n")    // ... edit on b
			f.mv("a", "/renren", "/renren-a")         // rename on a ...
			f.mv("b", "/renren", "/renren-b")         // ... and on b, elsewhere
			f.mv("a", "/rendel", "/rendel-moved")     // rename on a ...
			f.rm("b", "/rendel")                      // ... removed on b
			f.mv("a", "/dir", "/dir-renamed")         // a directory renamed on a ...
			f.write("b", "/dir/x", "b's edit of x\n") // ... a file in it edited on b

			rep := f.sync()
			if rep.Errors != 0 {
				t.Fatalf("errors:\n%s", actions(rep))
			}
			f.equal()
			for _, c := range []struct{ path, data string }{
				{"/renamed-by-a", "v0\n"},
				{"/renedit", "b's edit\n"}, // the edit is kept where it was
				{"/renren-a", "v0\n"},
				{"/renren-b", "v0\n"},
				{"/rendel-moved", "v0\n"},
				{"/dir-renamed/x", "v0\n"},
				{"/dir/x", "b's edit of x\n"},
			} {
				for _, s := range []string{"a", "b"} {
					if got := f.read(s, c.path); got != c.data {
						t.Errorf("%s on %s: %q, want %q", c.path, s, got, c.data)
					}
				}
			}
			for _, p := range []string{"/renren", "/rendel"} {
				if f.exists("a", p) || f.exists("b", p) {
					t.Errorf("%s is still there", p)
				}
			}
			// The edits against removals (the old names) are reported.
			got := strings.Join(conflictsAt(rep), " ")
			for _, p := range []string{"/renedit", "/dir"} {
				if !strings.Contains(got, p) {
					t.Errorf("no conflict reported at %s: %v\n%s", p, got, actions(rep))
				}
			}
			if rep := f.inSync(); len(rep.Actions) != 0 {
				t.Fatalf("sync after the conflicts did something:\n%s", actions(rep))
			}
		})
	}
}
