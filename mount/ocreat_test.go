package mount_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/mount"
	"github.com/zxfs/zx/wan"
)

// TestCreateExisting: open(O_CREAT) of a name the mount believes is free
// (no watch, within the coherency window) that another writer made on
// the server meanwhile does what open(2) says against the server's file:
// without O_TRUNC it opens it unchanged (it was truncated: data lost),
// with its size, so reads and O_APPEND writes see its contents;
// O_EXCL fails with EEXIST; O_TRUNC truncates. With and without
// write-back.
func TestCreateExisting(t *testing.T) {
	for _, wb := range []bool{false, true} {
		t.Run(fmt.Sprintf("writeback=%v", wb), func(t *testing.T) {
			s := wbSetup{copts: cache.Options{NoWatch: true, Coherency: time.Hour}}
			if wb {
				s.copts.Journal, s.opts = t.TempDir(), mount.Options{WriteBack: true}
			}
			e := wbMount(t, s)
			ctx := context.Background()
			must(t, os.WriteFile(e.p("first"), nil, 0o644)) // a first change, waited for
			must(t, e.m.Sync(ctx))
			if _, err := os.ReadDir(e.dir); err != nil {
				t.Fatal(err)
			}
			e.proxy.SetConfig(wan.Config{RTT: 20 * time.Millisecond})
			names := []string{"keep", "append", "overwrite", "excl", "trunc"}
			for _, name := range names {
				// Written on the server itself, unseen by the mount.
				must(t, os.WriteFile(filepath.Join(e.srvDir, name), []byte("precious"), 0o644))
				if _, err := os.Stat(e.p(name)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("the mount sees %s (%v): the test needs it believed free", name, err)
				}
			}
			sync := func() {
				t.Helper()
				if wb {
					must(t, e.m.Sync(ctx))
				}
			}

			// O_CREAT alone: opened as it is, with its size, in one
			// round trip (the create and a stat behind it).
			rt := e.conn.Stats().RoundTrips
			f, err := os.OpenFile(e.p("keep"), os.O_CREATE|os.O_RDWR, 0o600)
			must(t, err)
			if n := e.conn.Stats().RoundTrips - rt; n != 1 {
				t.Errorf("O_CREAT of an existing file took %d round trips, want 1", n)
			}
			fi, err := f.Stat()
			must(t, err)
			b, err := io.ReadAll(f)
			must(t, err)
			must(t, f.Close())
			if fi.Size() != 8 || string(b) != "precious" {
				t.Errorf("O_CREAT of an existing file: size %d, read %q; want 8, %q", fi.Size(), b, "precious")
			}
			if fi.Mode().Perm() != 0o644 {
				t.Errorf("O_CREAT of an existing file: mode %v, want its own 0644", fi.Mode())
			}
			sync()
			if got := e.server(t, "keep"); got != "precious" {
				t.Errorf("O_CREAT of an existing file left the server's %q", got)
			}

			// O_CREAT|O_APPEND: writes after the contents.
			f, err = os.OpenFile(e.p("append"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			must(t, err)
			_, err = f.Write([]byte("+more"))
			must(t, err)
			must(t, f.Close())
			sync()
			if got := e.server(t, "append"); got != "precious+more" {
				t.Errorf("O_CREAT|O_APPEND: the server has %q, want %q", got, "precious+more")
			}
			if got := readFile(t, e.p("append")); got != "precious+more" {
				t.Errorf("O_CREAT|O_APPEND: the mount reads %q, want %q", got, "precious+more")
			}

			// O_CREAT, writing at the start: in place.
			f, err = os.OpenFile(e.p("overwrite"), os.O_CREATE|os.O_WRONLY, 0o644)
			must(t, err)
			_, err = f.Write([]byte("PR"))
			must(t, err)
			must(t, f.Close())
			sync()
			if got := e.server(t, "overwrite"); got != "PRecious" {
				t.Errorf("O_CREAT and a write at 0: the server has %q, want %q", got, "PRecious")
			}

			// O_CREAT|O_EXCL: EEXIST, nothing changed.
			_, err = os.OpenFile(e.p("excl"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if !errors.Is(err, syscall.EEXIST) {
				t.Errorf("O_CREAT|O_EXCL of an existing file: %v, want EEXIST", err)
			}
			sync()
			if got := e.server(t, "excl"); got != "precious" {
				t.Errorf("O_CREAT|O_EXCL left the server's %q", got)
			}

			// O_CREAT|O_TRUNC: truncated.
			f, err = os.OpenFile(e.p("trunc"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
			must(t, err)
			_, err = f.Write([]byte("new"))
			must(t, err)
			must(t, f.Close())
			sync()
			if got := e.server(t, "trunc"); got != "new" {
				t.Errorf("O_CREAT|O_TRUNC: the server has %q, want %q", got, "new")
			}
			if got := readFile(t, e.p("trunc")); got != "new" {
				t.Errorf("O_CREAT|O_TRUNC: the mount reads %q, want %q", got, "new")
			}
			if n := e.m.Surprises(); n != 0 {
				t.Errorf("%d surprises", n)
			}
		})
	}
}

// TestCreateRoundTrips: creating new files costs what it did, with a
// watch: with O_EXCL (tar, cp, git) or O_TRUNC (shells, compilers) the
// create is answered at once and close waits for the data; O_CREAT alone
// (O_APPEND logs) waits for its create, which must not replace a file
// that is there. Without a watch an exclusive create waits too (the
// cache's "free" is a guess, and open(2) must say EEXIST); O_TRUNC does
// not, as it truncates a file that is there anyway.
func TestCreateRoundTrips(t *testing.T) {
	const files = 4
	cases := []struct {
		name  string
		flags int
		watch bool
		want  int // round trips per file, close included
	}{
		{"excl", os.O_EXCL, true, 1},
		{"trunc", os.O_TRUNC, true, 1},
		{"plain", 0, true, 2},
		{"excl-nowatch", os.O_EXCL, false, 2},
		{"trunc-nowatch", os.O_TRUNC, false, 1},
		{"plain-nowatch", 0, false, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := wbSetup{}
			if !c.watch {
				s.copts = cache.Options{NoWatch: true, Coherency: time.Hour}
			}
			e := wbMount(t, s)
			must(t, os.Mkdir(e.p("d"), 0o755)) // a first change, waited for
			must(t, e.m.Sync(context.Background()))
			if _, err := os.ReadDir(e.p("d")); err != nil {
				t.Fatal(err)
			}
			e.proxy.SetConfig(wan.Config{RTT: 100 * time.Millisecond})
			rt := e.conn.Stats().RoundTrips
			for i := range files {
				f, err := os.OpenFile(e.p(fmt.Sprintf("d/f%d", i)), os.O_CREATE|os.O_WRONLY|c.flags, 0o644)
				must(t, err)
				_, err = f.Write([]byte("data"))
				must(t, err)
				must(t, f.Close())
			}
			n := e.conn.Stats().RoundTrips - rt
			t.Logf("%d new files, flags %s, at 100 ms RTT: %d round trips", files, c.name, n)
			if want := int64(c.want * files); n > want {
				t.Errorf("took %d round trips, want at most %d", n, want)
			}
			must(t, e.m.Sync(context.Background()))
			for i := range files {
				if got := e.server(t, fmt.Sprintf("d/f%d", i)); got != "data" {
					t.Errorf("f%d on the server: %q", i, got)
				}
			}
		})
	}
}
