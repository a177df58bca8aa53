package mount_test

import (
	"context"
	"crypto/md5"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/memfs"
)

// grepTree makes /t with top directories a0..a(top-1), each holding
// files f00..f19 and subdirectories g0..g2, whose g0 and g1 hold a
// subdirectory h0; every directory has 20 files (f00..f19, size bytes
// each, every seventh with "needle"), so top directories make 6×top
// directories and 120×top files. It returns the files' total size.
func grepTree(t *testing.T, fs *memfs.FS, top, size int) (dirs []string, total int64) {
	t.Helper()
	ctx := context.Background()
	for i := range top {
		a := fmt.Sprintf("/t/a%d", i)
		dirs = append(dirs, a, a+"/g0", a+"/g0/h0", a+"/g1", a+"/g1/h0", a+"/g2")
	}
	if _, err := zx.Mkdir(ctx, fs, "/t", 0755); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if _, err := zx.Mkdir(ctx, fs, d, 0755); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			line := fmt.Sprintf("file %d of %s\n", i, d)
			body := strings.Repeat(line, size/len(line)+1)[:size-len("needle\n")]
			if i%7 == 3 {
				body += "needle\n"
			} else {
				body += "haystk\n"
			}
			if _, err := zx.WriteFile(ctx, fs, fmt.Sprintf("%s/f%02d", d, i), nil, []byte(body)); err != nil {
				t.Fatal(err)
			}
			total += int64(len(body))
		}
	}
	return dirs, total
}

// TestTreeStreamGrep runs grep -r over a cold tree of 30 directories of
// 20 small files (in three levels) through a mount over 20 ms: once grep
// has read files of a directory and moved into a subdirectory, the
// files of the subtree are streamed in grep's order, one findget at a
// time, so the walk costs a few round trips in all, not one or two per
// directory. find and ls -lR run first: they stream no files, and a walk
// of directories already listed escalates on its data misses.
func TestTreeStreamGrep(t *testing.T) {
	fs := memfs.New()
	dirs, total := grepTree(t, fs, 5, 2000)
	e := mnt(t, setup{addr: serve(t, fs), rtt: 20 * time.Millisecond})
	// The mount's prefetch of the tree (its entries) is done first: the
	// count is grep's alone.
	waitFor(t, "the mount's prefetch", func() bool {
		st := e.c.Stats()
		return st.Prefetched >= int64(len(dirs)*21)
	})
	// Programs that only list stream no files.
	run(t, e.p("t"), nil, "find", ".", "-name", "missing")
	run(t, e.p("t"), nil, "ls", "-lR")
	if st := e.c.Stats(); st.SiblingStreams != 0 || st.TreeStreams != 0 {
		t.Errorf("find and ls -lR started %d findgets (%d tree streams), want none", st.SiblingStreams, st.TreeStreams)
	}
	before := e.conn.Stats().RoundTrips
	out := run(t, e.p("t"), nil, "grep", "-r", "-c", "needle", ".")
	got := e.conn.Stats().RoundTrips - before
	st := e.c.Stats()
	t.Logf("grep -r of %d directories, %d files, %d bytes: %d round trips; %d tree streams, %d findgets, %d files streamed",
		len(dirs), 20*len(dirs), total, got, st.TreeStreams, st.SiblingStreams, st.SiblingFiles)
	// grep's statfs; the first file (with the stream of its
	// directory's files); the tree stream of a0's subtree when grep
	// moves into a0/g0 (with the read of its first file); the tree
	// stream of /t when it moves on to a1 (likewise);
	// that is 4. The stream of /t (1 MB from a1 on) fits in its first
	// window (1 MiB ahead of grep), so no resumption is needed; one is
	// allowed. Without the tree streams: one or two per directory (30
	// or more).
	if got > 5 {
		t.Errorf("grep -r of 30 cold directories: %d round trips, want at most 5", got)
	}
	if n, all := strings.Count(out, ":1\n"), strings.Count(out, "\n"); n != 3*len(dirs) || all != 20*len(dirs) {
		t.Errorf("grep found the needles in %d files of %d... want 3 in each of %d directories, %d files:\n%s", n, all, len(dirs), 20*len(dirs), out)
	}
	if st.TreeStreams < 1 || st.TreeStreams > 3 {
		t.Errorf("%d tree streams, want 1 to 3", st.TreeStreams)
	}
	// Every file came with a stream, once, but the first and those
	// whose miss started a tree stream (the listings were used by ls,
	// so the data misses escalate): a0/g0/f00 and a1/f00.
	if st.SiblingFiles != int64(20*len(dirs)-3) {
		t.Errorf("%d files streamed, want %d", st.SiblingFiles, 20*len(dirs)-3)
	}
	waitFor(t, "the streams to end", func() bool { return e.c.Stats().SiblingLive == 0 })

	// Warm: nothing to ask.
	before = e.conn.Stats().RoundTrips
	run(t, e.p("t"), nil, "grep", "-r", "-c", "needle", ".")
	if got := e.conn.Stats().RoundTrips - before; got > 1 {
		t.Errorf("warm grep -r: %d round trips, want at most 1 (statfs)", got)
	}
}

// TestTreeStreamStops: a reader that walks part of a tree and stops
// leaves the tree stream at most a window ahead of where it stopped; no
// more bytes come after.
func TestTreeStreamStops(t *testing.T) {
	fs := memfs.New()
	_, total := grepTree(t, fs, 10, 4000) // 60 directories, 2.4 MB
	const window = 256 << 10              // SiblingBytes/8 < SiblingFile: the window is SiblingFile
	e := mnt(t, setup{addr: serve(t, fs), rtt: 20 * time.Millisecond,
		copts: cache.Options{SiblingBytes: 1 << 20, SiblingFile: window}})
	waitFor(t, "the mount's prefetch", func() bool { return e.c.Stats().Prefetched >= 60*21 })
	// grep walks a0 and a1 (12 directories, 240 files) and stops.
	in := e.conn.Stats().BytesIn
	run(t, e.p("t"), nil, "grep", "-r", "-c", "needle", "a0", "a1")
	read := int64(240 * 4000)
	waitFor(t, "the streams to stop", func() bool { return e.c.Stats().SiblingLive == 0 })
	st := e.c.Stats()
	// The window grows while used, up to SiblingBytes (1 MiB).
	if st.SiblingBytes > read+1<<20+window {
		t.Errorf("streamed %d bytes for a reader that read %d of %d: more than a window (1 MiB) and a file ahead", st.SiblingBytes, read, total)
	}
	// The link goes quiet (what the server sent before the cut's
	// cancel reached it still arrives): nothing more streams.
	var bytes int64
	waitFor(t, "the link to be quiet", func() bool {
		bytes = e.conn.Stats().BytesIn
		time.Sleep(100 * time.Millisecond)
		return e.conn.Stats().BytesIn-bytes < 1024
	})
	t.Logf("read %d bytes of %d; %d streamed, %d received in all", read, total, st.SiblingBytes, bytes-in)
	// The mount's prefetch listed the tree, so each findget asks for
	// no more than its window (the server stops there): what came in is
	// what was read, at most a window more, and the entries' metadata.
	if got := bytes - in; got > read+1<<20+64<<10 {
		t.Errorf("received %d bytes for a reader that read %d: more than a window (1 MiB) ahead", got, read)
	}
}

// TestTreeStreamTar: tar -c of a cold tree through the mount reads it
// in walk order too: a few round trips, and the archive holds every
// file.
func TestTreeStreamTar(t *testing.T) {
	fs := memfs.New()
	dirs, total := grepTree(t, fs, 5, 2000)
	e := mnt(t, setup{addr: serve(t, fs), rtt: 20 * time.Millisecond})
	waitFor(t, "the mount's prefetch", func() bool { return e.c.Stats().Prefetched >= int64(len(dirs)*21) })
	before := e.conn.Stats().RoundTrips
	out := run(t, e.p("t"), nil, "/bin/sh", "-c", "tar -cf - . | tar -tvf - | grep -c '^-'")
	got := e.conn.Stats().RoundTrips - before
	st := e.c.Stats()
	t.Logf("tar -c of %d directories, %d files, %d bytes: %d round trips; %d tree streams", len(dirs), 20*len(dirs), total, got, st.TreeStreams)
	if strings.TrimSpace(out) != fmt.Sprint(20*len(dirs)) {
		t.Errorf("the archive lists %s files, want %d", out, 20*len(dirs))
	}
	// As for grep -r (TestTreeStreamGrep), less grep's statfs.
	if got > 5 {
		t.Errorf("tar -c of 30 cold directories: %d round trips, want at most 5", got)
	}
}

// TestTreeStreamBig: grep -r of a cold tree holding files too big for a
// sibling stream (256 KiB to 4 MiB, Options.TreeFile): the tree streams
// bring them in walk order as well, so they cost no round trip of their
// own (each cost one before), and grep reads them whole and right.
func TestTreeStreamBig(t *testing.T) {
	fs := memfs.New()
	dirs, _ := grepTree(t, fs, 5, 2000)
	// Big files inside the subtrees the tree streams cover (a0's files
	// come with its sibling stream, before any tree stream starts):
	// each has one needle line at its end.
	big := map[string]int{
		"/t/a0/g0/f05x":    300 << 10,
		"/t/a0/g1/h0/f19x": 1 << 20,
		"/t/a1/f00x":       3 << 20,
		"/t/a1/g2/f10x":    700 << 10,
		"/t/a2/g0/h0/f03x": 4 << 20,
		"/t/a3/f11x":       2 << 20,
		"/t/a4/g1/f00x":    400 << 10,
	}
	sums := map[string]string{}
	ctx := context.Background()
	for p, size := range big {
		line := fmt.Sprintf("a big line of %s\n", p)
		body := strings.Repeat(line, size/len(line)+1)[:size-len("needle\n")] + "needle\n"
		if _, err := zx.WriteFile(ctx, fs, p, nil, []byte(body)); err != nil {
			t.Fatal(err)
		}
		sums[strings.TrimPrefix(p, "/t/")] = fmt.Sprintf("%x", md5.Sum([]byte(body)))
	}
	// The same tree without the big files, for comparison.
	small := memfs.New()
	grepTree(t, small, 5, 2000)
	e0 := mnt(t, setup{addr: serve(t, small), rtt: 20 * time.Millisecond})
	waitFor(t, "the mount's prefetch", func() bool { return e0.c.Stats().Prefetched >= int64(len(dirs)*21) })
	before, miss0 := e0.conn.Stats().RoundTrips, e0.c.Stats().Misses
	run(t, e0.p("t"), nil, "grep", "-r", "-c", "needle", ".")
	want, miss0 := e0.conn.Stats().RoundTrips-before, e0.c.Stats().Misses-miss0
	finds0 := e0.c.Stats().SiblingStreams

	e := mnt(t, setup{addr: serve(t, fs), rtt: 20 * time.Millisecond})
	waitFor(t, "the mount's prefetch", func() bool {
		return e.c.Stats().Prefetched >= int64(len(dirs)*21+len(big))
	})
	before, miss := e.conn.Stats().RoundTrips, e.c.Stats().Misses
	out := run(t, e.p("t"), nil, "grep", "-r", "-c", "needle", ".")
	got := e.conn.Stats().RoundTrips - before
	st := e.c.Stats()
	miss = st.Misses - miss
	// No big file is a miss of its own (each was one before): the
	// reads that asked the server are those of the tree without them.
	if miss != miss0 {
		t.Errorf("grep -r: %d reads missed the cache, %d without the big files: want the same", miss, miss0)
	}
	t.Logf("grep -r of %d directories, %d small and %d big files: %d round trips (%d without the big files, %d findgets); %d tree streams, %d findgets, %d files streamed (%d bytes)",
		len(dirs), 20*len(dirs), len(big), got, want, finds0, st.TreeStreams, st.SiblingStreams, st.SiblingFiles, st.SiblingBytes)
	// As many round trips as without the big files, but for the
	// findgets their bytes add (10 MB more: one resumption of the
	// stream, issued on a hit, which the count includes), and within
	// TestTreeStreamGrep's bound. Without TreeFile: one more per big
	// file.
	if extra := st.SiblingStreams - finds0; got > want+max(extra, 0) || got > 5 {
		t.Errorf("grep -r of 30 cold directories with %d big files: %d round trips, want at most %d (%d without them, %d findgets more), and at most 5", len(big), got, want+max(extra, 0), want, extra)
	}
	for p := range big {
		if !strings.Contains(out, "./"+strings.TrimPrefix(p, "/t/")+":1\n") {
			t.Errorf("grep -r did not find the needle of %s:\n%s", p, out)
		}
	}
	if n, all := strings.Count(out, ":1\n"), strings.Count(out, "\n"); n != 3*len(dirs)+len(big) || all != 20*len(dirs)+len(big) {
		t.Errorf("grep found needles in %d files of %d, want %d of %d", n, all, 3*len(dirs)+len(big), 20*len(dirs)+len(big))
	}
	// Every big file came with a tree stream, whole.
	if st.SiblingBytes < int64(20*len(dirs)*2000-3*2000)+int64(sumSizes(big)) {
		t.Errorf("streamed %d bytes, want the big files' %d and the small ones'", st.SiblingBytes, sumSizes(big))
	}
	waitFor(t, "the streams to end", func() bool { return e.c.Stats().SiblingLive == 0 })
	// What the cache holds is the files' contents: read warm.
	before = e.conn.Stats().RoundTrips
	var args []string
	for p := range sums {
		args = append(args, p)
	}
	out = run(t, e.p("t"), nil, "md5sum", args...)
	if got := e.conn.Stats().RoundTrips - before; got != 0 {
		t.Errorf("md5sum of the big files after grep -r: %d round trips, want 0", got)
	}
	for p, sum := range sums {
		if !strings.Contains(out, sum+"  "+p+"\n") {
			t.Errorf("md5sum of %s: want %s in\n%s", p, sum, out)
		}
	}
}

func sumSizes(m map[string]int) (n int) {
	for _, s := range m {
		n += s
	}
	return n
}
