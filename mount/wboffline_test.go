package mount_test

import (
	"context"
	"os"
	"os/exec"
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
		name    string
		noWatch bool
	}{{"watch", false}, {"nowatch", true}} {
		t.Run(tc.name, func(t *testing.T) { testWriteBackOffline(t, tc.noWatch) })
	}
}

func testWriteBackOffline(t *testing.T, noWatch bool) {
	s := wbSetup{
		reconnect: true,
		copts:     cache.Options{Journal: t.TempDir(), NoWatch: noWatch},
		// The timeout is a hang guard only: a read that went to the
		// server would fail with ETIMEDOUT after it, and be counted.
		opts: mount.Options{WriteBack: true, Timeout: 5 * time.Second},
	}
	if noWatch {
		s.opts.Coherency = time.Nanosecond
	}
	e := wbMount(t, s)
	must(t, os.WriteFile(e.p("whole"), []byte("old"), 0o644))
	must(t, os.WriteFile(e.p("extent"), []byte("0123456789"), 0o644))
	must(t, e.m.Sync(context.Background()))
	if got := readFile(t, e.p("extent")); got != "0123456789" { // cached: what writes in place apply to
		t.Fatalf("read %q", got)
	}

	e.proxy.Stall(-1)
	t.Cleanup(e.proxy.Resume)
	must(t, os.WriteFile(e.p("whole"), []byte("new contents"), 0o644))
	f, err := os.OpenFile(e.p("extent"), os.O_WRONLY, 0)
	must(t, err)
	_, err = f.WriteAt([]byte("abc"), 3)
	must(t, err)
	must(t, f.Close())
	f, err = os.OpenFile(e.p("extent"), os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write([]byte("+tail"))
	must(t, err)
	must(t, f.Close())
	must(t, os.WriteFile(e.p("created"), []byte("made offline"), 0o644))
	if st := e.c.WriteBack().Stats(); st.Pending != 4 {
		t.Fatalf("write-back with the link stalled: %+v, want 4 records pending", st)
	}

	want := map[string]string{"whole": "new contents", "extent": "012abc6789+tail", "created": "made offline"}
	check := func(what string) {
		t.Helper()
		before := e.conn.Stats()
		for name, w := range want {
			fi, err := os.Stat(e.p(name))
			if err != nil {
				t.Fatalf("%s: stat %s: %v", what, name, err)
			}
			if fi.Size() != int64(len(w)) {
				t.Errorf("%s: stat %s: size %d, want %d", what, name, fi.Size(), len(w))
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
		after := e.conn.Stats()
		if n := after.Streams - before.Streams; n != 0 {
			t.Errorf("%s: %d requests sent to the server, want 0", what, n)
		}
		if n := after.RoundTrips - before.RoundTrips; n != 0 {
			t.Errorf("%s: %d round trips, want 0", what, n)
		}
	}
	check("after close")
	e.c.Flush() // the journal's contents answer, not cached data
	check("after the cache was flushed")
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
	// Nothing pending: close-to-open as before (the server is asked).
	must(t, os.WriteFile(e.p("whole"), []byte("changed on the server"), 0o644))
	must(t, e.m.Sync(context.Background()))
	must(t, os.WriteFile(e.srvDir+"/whole", []byte("by another"), 0o644))
	waitFor(t, "the server's change shows", func() bool { return readFile(t, e.p("whole")) == "by another" })
}
