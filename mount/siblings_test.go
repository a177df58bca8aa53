package mount_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/memfs"
)

// TestSiblingsRoundTrips reads the files of cold directories through the
// mount: the cache streams each directory's small files with one findget,
// so reading all of them costs one round trip, not one per file.
func TestSiblingsRoundTrips(t *testing.T) {
	ctx := t.Context()
	fs := memfs.New()
	dirs := map[string]int{"/src/a": 30, "/src/b": 25, "/src/b/c": 20, "/src/d": 15}
	for _, d := range []string{"/src", "/src/a", "/src/b", "/src/b/c", "/src/d"} {
		if _, err := zx.Mkdir(ctx, fs, d, 0755); err != nil {
			t.Fatal(err)
		}
	}
	// A file in /src, read first by grep: the listings of the
	// directories below then stream their files.
	if _, err := zx.WriteFile(ctx, fs, "/src/0top", nil, []byte("top\n")); err != nil {
		t.Fatal(err)
	}
	files := 0
	for d, n := range dirs {
		for i := range n {
			body := fmt.Sprintf("file %d of %s\n%s", i, d, strings.Repeat("some text\n", 50*i))
			if i%7 == 3 {
				body += "needle\n"
			}
			if _, err := zx.WriteFile(ctx, fs, fmt.Sprintf("%s/f%02d", d, i), nil, []byte(body)); err != nil {
				t.Fatal(err)
			}
			files++
		}
	}
	e := mnt(t, setup{addr: serve(t, fs), rtt: 20 * time.Millisecond})
	count := func(f func()) int64 {
		// Earlier steps' sibling streams end first: each step's count is
		// its own.
		waitFor(t, "earlier sibling streams to end", func() bool { return e.c.Stats().SiblingLive == 0 })
		before := e.conn.Stats().RoundTrips
		f()
		return e.conn.Stats().RoundTrips - before
	}

	// One directory, read in name order by this process.
	got := count(func() {
		ents, err := os.ReadDir(e.p("src/a"))
		if err != nil || len(ents) != 30 {
			t.Fatalf("readdir: %d entries, %v", len(ents), err)
		}
		for i := range 30 {
			b, err := os.ReadFile(e.p(fmt.Sprintf("src/a/f%02d", i)))
			if err != nil || !strings.HasPrefix(string(b), fmt.Sprintf("file %d of /src/a\n", i)) {
				t.Fatalf("read f%02d: %q %v", i, b, err)
			}
		}
	})
	t.Logf("ls and read 30 files of a cold directory: %d round trips", got)
	// The lookups of src and src/a (with the listings of / and /src),
	// the listing of src/a, and the first file with the stream of the
	// others: without the stream, 30 more.
	if got > 3 {
		t.Errorf("ls and read of 30 files of a cold directory: %d round trips, want at most 3", got)
	}

	// grep -r over the rest: a listing and a stream per directory, and
	// grep's statfs.
	var out string
	if os.Getenv("SIBDEBUG") != "" {
		e.conn.Tree("").Command(ctx, "debug on")
	}
	got = count(func() {
		out = run(t, e.p("src"), nil, "grep", "-r", "-c", "needle", "0top", "b", "d")
	})
	t.Logf("grep -r over 3 cold directories, %d files: %d round trips\n%s", 61, got, out)
	// 0top (1), grep's statfs (1), and one listing per directory, each
	// with its stream (3); without the streams, 60 more.
	if got > 5 {
		t.Errorf("grep -r of 3 cold directories (60 files) and a file: %d round trips, want at most 5", got)
	}
	if n, all := strings.Count(out, ":1\n"), strings.Count(out, "\n"); n != 4+3+2 || all != 61 {
		t.Errorf("grep found the needle in %d files of %d, want 9 of 61:\n%s", n, all, out)
	}
	// All files but the first of src/a came with a stream.
	if st := e.c.Stats(); st.SiblingFiles != int64(files-1) {
		t.Errorf("%d files streamed, want %d", st.SiblingFiles, files-1)
	}
}
