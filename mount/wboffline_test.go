package mount_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/mount"
)

// TestWriteBackOffline: with write-back, data written through the mount
// reads back at once, with its size, while the link is stalled and the
// data is still in the journal: reads, opens, stats and lookups of a file
// with pending records are answered from the journal's contents, without
// a request to the server. Files rewritten whole, written in place over
// cached contents, appended to, and created offline. With noWatch, the
// kernel keeps no entry or attribute (coherency window of 1 ns), so every
// access is a LOOKUP and a GETATTR for the mount to answer; and the
// cache is flushed, so nothing but the journal's contents can answer.
func TestWriteBackOffline(t *testing.T) {
	for _, tc := range []struct {
		name         string
		noWatch, cut bool
	}{{"watch", false, false}, {"nowatch", true, false}, {"cut", false, true}} {
		t.Run(tc.name, func(t *testing.T) { testWriteBackOffline(t, tc.noWatch, tc.cut) })
	}
}

// With cut, the link is not only stalled but its connection is then cut
// (the client dials again, and waits, the new connection stalled too),
// the records in flight.
func testWriteBackOffline(t *testing.T, noWatch, cut bool) {
	s := wbSetup{
		reconnect: true,
		// Longer than the test: the client does not give up (and the
		// cache drop what it has) while it runs.
		reconnectWait: time.Minute,
		copts:         cache.Options{Journal: t.TempDir(), NoWatch: noWatch},
		// The timeout is a hang guard only: a read that went to the
		// server would fail with ETIMEDOUT after it, and be counted.
		opts: mount.Options{WriteBack: true, Timeout: 5 * time.Second},
	}
	if noWatch {
		s.opts.Coherency = time.Nanosecond
	}
	e := wbMount(t, s)
	must(t, os.Mkdir(e.p("d"), 0o755))
	must(t, os.WriteFile(e.p("whole"), []byte("old"), 0o644))
	must(t, os.WriteFile(e.p("d/extent"), []byte("0123456789"), 0o644))
	must(t, e.m.Sync(context.Background()))
	if got := readFile(t, e.p("d/extent")); got != "0123456789" { // cached: what writes in place apply to
		t.Fatalf("read %q", got)
	}
	if _, err := os.ReadDir(e.p("d")); err != nil { // its listing cached
		t.Fatal(err)
	}

	e.proxy.Stall(-1)
	t.Cleanup(e.proxy.Resume)
	must(t, os.WriteFile(e.p("whole"), []byte("new contents"), 0o644))
	f, err := os.OpenFile(e.p("d/extent"), os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("abc"), 3)
	must(t, err)
	must(t, f.Close())
	f, err = os.OpenFile(e.p("d/extent"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write([]byte("+tail"))
	must(t, err)
	must(t, f.Close())
	must(t, os.WriteFile(e.p("created"), []byte("made offline"), 0o644))
	// truncate(2) and chmod by path, with no descriptor open: the
	// truncation is journaled behind the data, the chmod sent without
	// waiting; what the mount answers with follows both.
	must(t, os.Truncate(e.p("whole"), 3))
	must(t, os.Chmod(e.p("whole"), 0o600))
	if cut {
		// The link goes down with all that in flight. (Not before:
		// a create with the connection lost may wait for the server,
		// as the cache may then not know enough to make it without.)
		conns := e.proxy.Stats().Conns
		e.proxy.Cut()
		waitFor(t, "the client dials again", func() bool { return e.proxy.Stats().Conns > conns })
	}
	if st := e.c.WriteBack().Stats(); st.Pending != 7 {
		// whole, extent twice, created (its create, made without
		// waiting, and its data), the truncation and the chmod.
		t.Fatalf("write-back with the link stalled: %+v, want 7 records pending", st)
	}

	want := map[string]string{"whole": "new", "d/extent": "012abc6789+tail", "created": "made offline"}
	// Directories are answered from the cache only while it trusts
	// them: with a watch (not flushed), or within the coherency window
	// (1 s) without: the files below d and its listing are checked
	// only with a watch, and, flushed, only the files (the kernel keeps
	// d's entry).
	check := func(what string, flushed bool) {
		t.Helper()
		before := e.conn.Stats()
		for name, w := range want {
			if noWatch && strings.HasPrefix(name, "d/") {
				continue
			}
			fi, err := os.Stat(e.p(name))
			if err != nil {
				t.Fatalf("%s: stat %s: %v", what, name, err)
			}
			if fi.Size() != int64(len(w)) {
				t.Errorf("%s: stat %s: size %d, want %d", what, name, fi.Size(), len(w))
			}
			if name == "whole" && fi.Mode().Perm() != 0o600 {
				t.Errorf("%s: stat %s: mode %v, want 0600", what, name, fi.Mode())
			}
			b, err := os.ReadFile(e.p(name))
			if err != nil {
				t.Fatalf("%s: read %s: %v", what, name, err)
			}
			if string(b) != w {
				t.Errorf("%s: read %s: %q, want %q", what, name, b, w)
			}
			// ls -l FILE: lstat, and the xattrs ls asks for.
			if out, err := exec.Command("ls", "-l", e.p(name)).CombinedOutput(); err != nil {
				t.Errorf("%s: ls -l %s: %v\n%s", what, name, err, out)
			}
		}
		// ls -l of a directory whose files have data on its way (and
		// none created offline: see TestWriteBackOfflineRename).
		if !flushed && !noWatch {
			if out, err := exec.Command("ls", "-l", e.p("d")).CombinedOutput(); err != nil {
				t.Errorf("%s: ls -l d: %v\n%s", what, err, out)
			}
			es, err := os.ReadDir(e.p("d"))
			if err != nil {
				t.Fatalf("%s: readdir d: %v", what, err)
			}
			if len(es) != 1 {
				t.Errorf("%s: d lists %v", what, es)
			}
			for _, de := range es {
				fi, err := de.Info()
				if err != nil || fi.Size() != int64(len(want["d/"+de.Name()])) {
					t.Errorf("%s: d lists %s: %v, %v", what, de.Name(), fi, err)
				}
			}
		}
		after := e.conn.Stats()
		if n := after.Streams - before.Streams; n != 0 {
			t.Errorf("%s: %d requests sent to the server, want 0", what, n)
		}
		if n := after.RoundTrips - before.RoundTrips; n != 0 {
			t.Errorf("%s: %d round trips, want 0", what, n)
		}
	}
	check("after close", false)
	e.c.Flush() // the journal's contents answer, not cached data
	check("after the cache was flushed", true)
	for name := range want {
		if got := e.server(t, name); got == want[name] {
			t.Fatalf("the server has %s = %q with the link stalled", name, got)
		}
	}

	e.proxy.Resume()
	must(t, e.m.Sync(context.Background()))
	for name, w := range want {
		if got := e.server(t, name); got != w {
			t.Errorf("after the link came back and a sync the server has %s = %q, want %q", name, got, w)
		}
	}
	if st := e.c.WriteBack().Stats(); st.Pending != 0 {
		t.Errorf("write-back after sync: %+v", st)
	}
	// The chmod was sent without waiting: with the link cut, it may not
	// get through (not resent once it timed out), and is then reported
	// as a surprise, as any change the mount did not wait for.
	if fi, err := os.Stat(e.srvDir + "/whole"); err != nil || fi.Mode().Perm() != 0o600 && (!cut || e.m.Surprises() == 0) {
		t.Errorf("after sync the server has whole: %v, %v, %d surprises; want mode 0600", fi, err, e.m.Surprises())
	}
	// Nothing pending: close-to-open as before (the server is asked).
	must(t, os.WriteFile(e.p("whole"), []byte("changed on the server"), 0o644))
	must(t, e.m.Sync(context.Background()))
	must(t, os.WriteFile(e.srvDir+"/whole", []byte("by another"), 0o644))
	waitFor(t, "the server's change shows", func() bool { return readFile(t, e.p("whole")) == "by another" })
}

// TestWriteBackOfflineRename: a file created and written through a
// write-back mount while the link is stalled, then renamed, and its
// directory listed, still offline. The rename needs the server: it fails
// with ETIMEDOUT after the mount's timeout (1 s here: a hang guard), and
// the file keeps its name and its contents, read from the journal with
// no request. Listing the directory needs the server too (the cache does
// not list a directory with writes in flight below it): ETIMEDOUT, never
// a wrong listing. When the link is back, the data reaches the server
// under one name (the rename's request, timed out, may still be applied),
// and the mount shows the same.
func TestWriteBackOfflineRename(t *testing.T) {
	e := wbMount(t, wbSetup{reconnect: true, copts: cache.Options{Journal: t.TempDir()}, opts: mount.Options{WriteBack: true, Timeout: time.Second}})
	must(t, os.WriteFile(e.p("other"), []byte("x"), 0o644))
	must(t, e.m.Sync(context.Background()))
	e.proxy.Stall(-1)
	t.Cleanup(e.proxy.Resume)
	must(t, os.WriteFile(e.p("b"), []byte("made offline"), 0o644))

	err := os.Rename(e.p("b"), e.p("c"))
	if !errors.Is(err, syscall.ETIMEDOUT) && !errors.Is(err, syscall.EIO) {
		t.Fatalf("rename with the link stalled: %v, want ETIMEDOUT", err)
	}
	before := e.conn.Stats()
	if got := readFile(t, e.p("b")); got != "made offline" {
		t.Fatalf("after the failed rename b reads %q", got)
	}
	if _, err := os.Stat(e.p("c")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after the failed rename stat c: %v, want ENOENT", err)
	}
	if n := e.conn.Stats().Streams - before.Streams; n != 0 {
		t.Errorf("reading b after the failed rename sent %d requests, want 0", n)
	}

	out, err := exec.Command("ls", "-l", e.dir).CombinedOutput()
	t.Logf("ls -l offline: %v\n%s", err, out)
	switch {
	case err == nil:
		if !strings.Contains(string(out), " b\n") || !strings.Contains(string(out), " other\n") {
			t.Errorf("ls -l offline lists\n%s", out)
		}
	case !strings.Contains(string(out), "timed out"):
		t.Errorf("ls -l offline: %v\n%s", err, out)
	}

	e.proxy.Resume()
	must(t, e.m.Sync(context.Background()))
	b, c := e.server(t, "b"), e.server(t, "c")
	var name string
	switch {
	case b == "made offline" && strings.HasPrefix(c, "<"):
		name = "b"
	case c == "made offline" && strings.HasPrefix(b, "<"):
		name = "c"
	default:
		t.Fatalf("after the link came back the server has b=%q c=%q", b, c)
	}
	t.Logf("the data reached the server as %s", name)
	waitFor(t, "the mount shows "+name, func() bool {
		bb, err := os.ReadFile(e.p(name))
		return err == nil && string(bb) == "made offline"
	})
}
