package mount_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/mount"
)

// diskFiles returns the files of a disk cache directory but temporaries.
func diskFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	must(t, err)
	var fs []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "tmp-") {
			fs = append(fs, filepath.Join(dir, e.Name()))
		}
	}
	return fs
}

// TestDiskCache: file data cached on disk by one mount is used by the
// next: after one revalidating find, reading cached files costs no round
// trip; a file changed on the server meanwhile, or whose cache file is
// corrupted or truncated, is read from the server instead.
func TestDiskCache(t *testing.T) {
	srvDir, cdir := t.TempDir(), t.TempDir()
	tr, err := lfs.New(srvDir, lfs.Options{})
	must(t, err)
	addr := serve(t, tr)
	files := map[string]string{
		"a":         "alpha",
		"d/b":       strings.Repeat("bravo ", 1000),
		"d/changed": "before",
		"truncated": strings.Repeat("t", 5000),
		"corrupted": strings.Repeat("c", 5000),
	}
	t.Run("first", func(t *testing.T) {
		e := wbMount(t, wbSetup{srvDir: srvDir, addr: addr, copts: cache.Options{Dir: cdir}, noProxy: true})
		must(t, os.Mkdir(e.p("d"), 0o755))
		for name, data := range files {
			must(t, os.WriteFile(e.p(name), []byte(data), 0o644))
		}
	})
	// The first mount's cache is closed: its disk writes are done.
	cached := diskFiles(t, cdir)
	if len(cached) != len(files) {
		t.Fatalf("disk cache holds %d files, want %d", len(cached), len(files))
	}
	// Damage two cache files, and change a file on the server.
	for _, f := range cached {
		b, err := os.ReadFile(f)
		must(t, err)
		switch {
		case bytes.Contains(b, []byte(`"path":"/truncated"`)):
			must(t, os.WriteFile(f, b[:len(b)-100], 0o600))
		case bytes.Contains(b, []byte(`"path":"/corrupted"`)):
			b[len(b)-1] = 'X'
			must(t, os.WriteFile(f, b, 0o600))
		}
	}
	must(t, os.WriteFile(filepath.Join(srvDir, "d/changed"), []byte("after, on the server"), 0o644))
	files["d/changed"] = "after, on the server"

	e := wbMount(t, wbSetup{srvDir: srvDir, addr: addr, copts: cache.Options{Dir: cdir}})
	rt := e.conn.Stats().RoundTrips
	if rt != 1 {
		t.Errorf("%d round trips to mount with a disk cache, want 1 (the revalidating find)", rt)
	}
	for _, name := range []string{"a", "d/b"} {
		if got := readFile(t, e.p(name)); got != files[name] {
			t.Fatalf("%s: read %q", name, got)
		}
	}
	if n := e.conn.Stats().RoundTrips - rt; n != 0 {
		t.Errorf("reading two files cached on disk took %d round trips, want 0", n)
	}
	if st := e.c.Stats(); st.DiskHits != 2 {
		t.Errorf("disk hits %d, want 2", st.DiskHits)
	}
	for _, name := range []string{"d/changed", "truncated", "corrupted"} {
		if got := readFile(t, e.p(name)); got != files[name] {
			t.Fatalf("%s: read %q, want %q", name, got, files[name])
		}
	}
	if st := e.c.Stats(); st.DiskHits != 2 {
		t.Errorf("disk hits %d after reading changed and damaged files, want still 2", st.DiskHits)
	}
}

// TestDiskCacheBounded: the disk cache stays within its bound, evicting
// the least recently used files.
func TestDiskCacheBounded(t *testing.T) {
	cdir := t.TempDir()
	const size, n, bound = 4000, 6, 10000
	var c *cache.Cache
	t.Run("fill", func(t *testing.T) {
		e := wbMount(t, wbSetup{copts: cache.Options{Dir: cdir, DiskBytes: bound}, noProxy: true})
		c = e.c
		for i := range n {
			must(t, os.WriteFile(e.p(string(rune('a'+i))), bytes.Repeat([]byte{byte('a' + i)}, size), 0o644))
		}
	})
	var total int64
	var names []string
	for _, f := range diskFiles(t, cdir) {
		b, err := os.ReadFile(f)
		must(t, err)
		_, data, _ := bytes.Cut(b[len("zxcache 1\n"):], []byte("\n"))
		total += int64(len(data))
		names = append(names, string(data[:1]))
	}
	if total > bound {
		t.Fatalf("disk cache holds %d bytes of data, bound %d", total, bound)
	}
	if len(names) != bound/size {
		t.Fatalf("disk cache holds %v, want the %d most recent", names, bound/size)
	}
	for _, nm := range names {
		if nm[0] < byte('a'+n-bound/size) {
			t.Fatalf("disk cache kept %q, an older file, and holds %v", nm, names)
		}
	}
	if st := c.Stats(); st.DiskBytes > bound {
		t.Fatalf("stats say %d bytes on disk, bound %d", st.DiskBytes, bound)
	}
}

// TestIDMap: owners are translated both ways: "user" shows the owner of
// the mounted directory as the local user; a map file maps listed ids.
func TestIDMap(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("!!! SKIPPING: TestIDMap chowns files on the server's disk and must run as root !!!")
	}
	srvDir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(srvDir, "theirs"), []byte("x"), 0o644))
	must(t, os.WriteFile(filepath.Join(srvDir, "other"), []byte("x"), 0o644))
	must(t, os.Chown(srvDir, 1234, 1235))
	must(t, os.Chown(filepath.Join(srvDir, "theirs"), 1234, 1235))
	must(t, os.Chown(filepath.Join(srvDir, "other"), 77, 78))
	tr, err := lfs.New(srvDir, lfs.Options{})
	must(t, err)
	addr := serve(t, tr)
	owner := func(p string) (uint32, uint32) {
		t.Helper()
		fi, err := os.Stat(p)
		must(t, err)
		st := fi.Sys().(*syscall.Stat_t)
		return st.Uid, st.Gid
	}

	t.Run("user", func(t *testing.T) {
		im, err := mount.ParseIDMap("user")
		must(t, err)
		e := wbMount(t, wbSetup{srvDir: srvDir, addr: addr, opts: mount.Options{IDMap: im}, noProxy: true})
		if u, g := owner(e.p("theirs")); u != uint32(os.Getuid()) || g != uint32(os.Getgid()) {
			t.Errorf("the server user's file shows as %d:%d, want %d:%d", u, g, os.Getuid(), os.Getgid())
		}
		if u, g := owner(e.p("other")); u != 77 || g != 78 {
			t.Errorf("another user's file shows as %d:%d, want 77:78 (unmapped)", u, g)
		}
		// chown to the local user gives the file to the server's user.
		must(t, os.Chown(e.p("other"), os.Getuid(), os.Getgid()))
		fi, err := os.Stat(filepath.Join(srvDir, "other"))
		must(t, err)
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 1234 || st.Gid != 1235 {
			t.Errorf("chown to the local user made the server's file %d:%d, want 1234:1235", st.Uid, st.Gid)
		}
	})
	t.Run("file", func(t *testing.T) {
		mf := filepath.Join(t.TempDir(), "map")
		must(t, os.WriteFile(mf, []byte("# team\nuid 77 5000\ngid 78 5001\n\nuid 1234 5002 # me\n"), 0o644))
		im, err := mount.ParseIDMap("file:" + mf)
		must(t, err)
		e := wbMount(t, wbSetup{srvDir: srvDir, addr: addr, opts: mount.Options{IDMap: im}, noProxy: true})
		if u, g := owner(e.p("theirs")); u != 5002 || g != 1235 {
			t.Errorf("theirs shows as %d:%d, want 5002:1235", u, g)
		}
		must(t, os.Chown(e.p("theirs"), 5000, 5001))
		fi, err := os.Stat(filepath.Join(srvDir, "theirs"))
		must(t, err)
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 77 || st.Gid != 78 {
			t.Errorf("chown to 5000:5001 made the server's file %d:%d, want 77:78", st.Uid, st.Gid)
		}
	})
	for _, bad := range []string{"bogus", "file:/nonexistent"} {
		if _, err := mount.ParseIDMap(bad); err == nil {
			t.Errorf("ParseIDMap(%q) succeeded", bad)
		}
	}
	mf := filepath.Join(t.TempDir(), "bad")
	must(t, os.WriteFile(mf, []byte("uid x 1\n"), 0o644))
	if _, err := mount.ParseIDMap("file:" + mf); err == nil || !strings.Contains(err.Error(), ":1:") {
		t.Errorf("a bad map file gave %v, want an error naming the line", err)
	}
}
