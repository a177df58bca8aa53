package dump

import (
	"bytes"
	"net"
	"testing"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/server"
)

// newNet returns a client tree of a real server, over TCP, exporting a
// new local directory.
func newNet(t *testing.T) zx.Tree {
	t.Helper()
	fs, err := lfs.New(t.TempDir(), lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
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
	c, err := client.Dial(t.Context(), l.Addr().String(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); srv.Close(); <-done; fs.Close() })
	return c.Tree("")
}

// TestRestore dumps a tree, changes it, dumps it again, and restores the
// first version: a whole directory elsewhere, and one file in place. What
// is restored is what was dumped: bytes, modes, mtimes, links.
func TestRestore(t *testing.T) {
	for _, tc := range trees {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			tr := tc.new(t)
			st, err := OpenStore(t.TempDir())
			must(t, err)
			mkdir(t, tr, "/proj")
			mkdir(t, tr, "/proj/sub")
			put(t, tr, "/proj/a.txt", "alpha\n", 0o640)
			put(t, tr, "/proj/sub/big", string(randBytes(400<<10, 7)), 0o755)
			put(t, tr, "/proj/sub/empty", "", 0o600)
			if r := <-tr.Put(ctx, "/proj/link", zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: "a.txt"}, 0, nil); r.Err != nil {
				t.Fatal(r.Err)
			}
			before := capture(t, tr, "")
			s1, err := st.Dump(ctx, tr, "/", Options{Tree: "t", Now: day(1, 1)})
			must(t, err)
			put(t, tr, "/proj/a.txt", "alpha, edited\n", 0o600)
			must(t, <-tr.RemoveAll(ctx, "/proj/sub"))
			_, err = st.Dump(ctx, tr, "/", Options{Tree: "t", Now: day(2, 1)})
			must(t, err)

			name := s1.Snapshot[len("t/"):]
			rs, err := st.Restore(ctx, "t", name, "/proj", tr, "/restored")
			must(t, err)
			if rs.Files != 3 || rs.Dirs != 2 || rs.Links != 1 || rs.Bytes != 400<<10+6 {
				t.Errorf("restore stats %+v", rs)
			}
			after := capture(t, tr, "")
			for p, e := range before {
				if !zx.HasPrefix(p, "/proj") {
					continue
				}
				q := zx.Reprefix(p, "/proj", "/restored")
				g, ok := after[q]
				if !ok {
					t.Errorf("%s not restored", q)
					continue
				}
				for _, k := range []string{zx.AType, zx.AMode, zx.ASize, zx.ATarget, zx.AMtime} {
					if e.d[k] != g.d[k] {
						t.Errorf("%s: %s %q, want %q", q, k, g.d[k], e.d[k])
					}
				}
				if !bytes.Equal(e.data, g.data) {
					t.Errorf("%s: %d bytes differ from the %d dumped", q, len(g.data), len(e.data))
				}
			}
			// One file, in place, by -N.
			_, err = st.Restore(ctx, "t", mustPick(t, st, "/proj/a.txt", "-2"), "/proj/a.txt", tr, "/proj/a.txt")
			must(t, err)
			d, err := zx.Stat(ctx, tr, "/proj/a.txt")
			must(t, err)
			data, err := zx.ReadFile(ctx, tr, "/proj/a.txt")
			must(t, err)
			if string(data) != "alpha\n" || d[zx.AMode] != "0640" || d[zx.AMtime] != before["/proj/a.txt"].d[zx.AMtime] {
				t.Errorf("restored in place: %q %v", data, d)
			}
			// A path in no snapshot fails and writes nothing.
			if _, err := st.Restore(ctx, "t", name, "/nope", tr, "/nope"); zx.KindOf(err) != zx.ErrNotExist {
				t.Errorf("restore of a missing path: %v", err)
			}
			if _, err := zx.Stat(ctx, tr, "/nope"); zx.KindOf(err) != zx.ErrNotExist {
				t.Errorf("the failed restore created /nope: %v", err)
			}
		})
	}
}

func mustPick(t *testing.T, st *Store, p, which string) string {
	t.Helper()
	v, err := st.Pick("t", p, which)
	must(t, err)
	return v.Snapshot
}
